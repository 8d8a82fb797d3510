"""Fair share of the job runner's workers: a per-user cap, round-robin across users, queue places.

The runner keeps its queued jobs here instead of in its thread pool's FIFO queue, so one user's queue of twenty
heavy jobs never blocks another user's first job.

Rules
-----
* A user (the job's ``owner`` string: a session or workspace id; ``None`` is one anonymous user) runs at most
  ``per_user`` jobs at once (env ``PLANNING_MAX_JOBS_PER_USER``, default 2); the server runs at most ``slots``
  (the runner's ``max_workers``).
* When a slot frees, the next job is the oldest queued job of the user who, among users under their cap, runs the
  fewest jobs now; ties go to the user served longest ago (never served first), then to the oldest job. With equal
  running counts this is round-robin across users.
* Identical requests are still one job (the store's reuse). Whose cancel counts is not decided here but by the
  store, which records every holder of a job (``job_access``, :meth:`~planning.jobs.store.JobStore.withdraw`).
* Background jobs (``push(..., background=True)``: the What-if page's prefetch of neighbouring slider positions)
  are a lane of their own below every user's jobs: one starts only when no user's job could take the slot, at most
  ``slots - 1`` of them run at once (at least 1), so a user's next job finds a slot free, they never count
  towards a user's cap, and when a user's job waits for a slot a running one is named to stop (:meth:`preempt`).
  Counted in the machine's ``cores`` too (when given): they run only on cores no user's job takes, one kept free,
  so while a user's job runs on a two-core server none runs beside it (with one beside it, a slider's far move
  to SLOs ×2 on coral-extended took 24.0-26.6 s in the browser; without, 18.5-19.7 s; round 20); a running one
  over that room is named to stop.
  A user's identical request joining a background job promotes it to that user's lane (:meth:`promote`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from planning.errors import PlanningError

__all__ = [
    "DEFAULT_MAX_JOBS_PER_USER",
    "FairQueue",
    "Place",
    "Waiting",
    "max_jobs_per_user",
    "pick_next",
]

DEFAULT_MAX_JOBS_PER_USER = 2
ENV_MAX_JOBS = "PLANNING_MAX_JOBS_PER_USER"


def max_jobs_per_user(environ: dict[str, str] | None = None) -> int:
    """The per-user cap on running jobs: ``PLANNING_MAX_JOBS_PER_USER`` (a whole number ≥ 1), default 2.

    Raises
    ------
    PlanningError
        If the variable is set to something other than a whole number ≥ 1.
    """
    env = os.environ if environ is None else environ
    text = str(env.get(ENV_MAX_JOBS, "")).strip()
    if not text:
        return DEFAULT_MAX_JOBS_PER_USER
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise PlanningError(ENV_MAX_JOBS, f"must be a whole number of at least 1, got {text!r}.",
                            f"Set it to e.g. 2, or unset it for the default ({DEFAULT_MAX_JOBS_PER_USER}).")
    return value


@dataclass(frozen=True)
class Waiting:
    """A queued job: its id, its owner and its arrival number (smaller arrived earlier)."""

    job_id: str
    owner: str | None
    seq: int


@dataclass(frozen=True)
class Place:
    """Where a queued job stands: ``mine`` (1 = next of its owner's), ``ahead`` (jobs that start before it)."""

    mine: int
    ahead: int

    def text(self) -> str:
        """'2nd in your queue, 5 ahead overall'."""
        return f"{ordinal(self.mine)} in your queue, {self.ahead} ahead overall"


def ordinal(n: int) -> str:
    """1 → '1st', 2 → '2nd', 11 → '11th', 23 → '23rd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def pick_next(
    waiting: list[Waiting], running: Counter[str | None], per_user: int, served: dict[str | None, int]
) -> Waiting | None:
    """The queued job to start next, or ``None`` if every waiting user is at their cap.

    Parameters
    ----------
    waiting:
        Queued jobs, in any order.
    running:
        Running jobs per owner.
    per_user:
        The per-user cap on running jobs.
    served:
        Owner → the turn number when one of their jobs last started (absent: never served).
    """
    first: dict[str | None, Waiting] = {}
    for job in waiting:
        if running[job.owner] < per_user and (job.owner not in first or job.seq < first[job.owner].seq):
            first[job.owner] = job
    if not first:
        return None
    return min(first.values(), key=lambda j: (running[j.owner], served.get(j.owner, -1), j.seq))


@dataclass
class FairQueue:
    """The runner's queued and running jobs by owner; not thread-safe (the runner holds its lock around calls).

    Parameters
    ----------
    slots:
        Jobs that run at the same time on this server.
    per_user:
        Jobs one user runs at the same time.
    """

    slots: int
    per_user: int
    cores: int = 0  # the machine's cores the jobs share; 0: not counted (the background lane is bounded by slots)
    _waiting: dict[str, Waiting] = field(default_factory=dict)
    _running: dict[str, str | None] = field(default_factory=dict)
    _served: dict[str | None, int] = field(default_factory=dict)
    _background: set[str] = field(default_factory=set)
    _stopping: set[str] = field(default_factory=set)
    _seq: int = 0
    _turn: int = 0

    def push(self, job_id: str, owner: str | None, *, background: bool = False) -> None:
        """Queue a new job of ``owner``; ``background``: in the lane below every user's jobs (module docstring)."""
        self._seq += 1
        self._waiting[job_id] = Waiting(job_id, owner, self._seq)
        if background:
            self._background.add(job_id)

    def promote(self, job_id: str) -> None:
        """A user now waits for a background job (their identical request joined it): it becomes a user's job,
        started before other background jobs and never stopped to free its slot."""
        self._background.discard(job_id)
        self._stopping.discard(job_id)

    def is_background(self, job_id: str) -> bool:
        """Whether a queued or running job is in the background lane."""
        return job_id in self._background

    def start_next(self) -> str | None:
        """Move the next job (see :func:`pick_next`) from queued to running, if a slot is free; its id. A user's
        job first; a background job only when no user's job can start and the background lane has room."""
        if len(self._running) >= self.slots:
            return None
        job = pick_next(self._lane(False), self._lane_running(False), self.per_user, self._served)
        if job is None and len(self._lane_running(True)) < self.background_slots:
            job = pick_next(self._lane(True), self._lane_running(True), 1, self._served)
        if job is None:
            return None
        del self._waiting[job.job_id]
        self._running[job.job_id] = job.owner
        self._served[job.owner] = self._turn
        self._turn += 1
        return job.job_id

    @property
    def background_slots(self) -> int:
        """Background jobs that run at once: all slots but one (at least one), so a user's job finds one free;
        with ``cores`` counted, also at most the cores that no running user's job takes, less one (at least one
        while no user's job runs, none while one takes the last spare core)."""
        room = max(1, self.slots - 1)
        if self.cores <= 0:
            return room
        users = sum(self._lane_running(False).values())
        return max(0, min(room, self.cores - 1 - users)) if users else min(room, max(1, self.cores - 1))

    def preempt(self) -> str | None:
        """The running background job to stop (the latest started; one named at a time), or ``None``: when a
        user's job could start but every slot is taken, or when more run than :attr:`background_slots` allows
        (a user's job took the cores they ran on)."""
        victims = [j for j in self._running if j in self._background]
        if not victims or self._stopping:
            return None
        over = len(victims) > self.background_slots
        wanted = len(self._running) >= self.slots and pick_next(
            self._lane(False), self._lane_running(False), self.per_user, self._served) is not None
        if not (over or wanted):
            return None
        self._stopping.add(victims[-1])
        return victims[-1]

    def _lane(self, background: bool) -> list[Waiting]:
        return [w for w in self._waiting.values() if (w.job_id in self._background) == background]

    def _lane_running(self, background: bool) -> Counter[str | None]:
        return Counter(o for j, o in self._running.items() if (j in self._background) == background)

    def remove(self, job_id: str) -> bool:
        """Forget a job that finished, or was cancelled while queued; True if it was queued or running."""
        self._background.discard(job_id)
        self._stopping.discard(job_id)
        return self._waiting.pop(job_id, None) is not None or self._running.pop(job_id, "-") != "-"

    def running_by_owner(self) -> Counter[str | None]:
        """Running jobs per owner."""
        return Counter(self._running.values())

    def queued(self) -> list[Waiting]:
        """Queued jobs in the order they will start (if nobody else submits meanwhile)."""
        return self._order()

    def running(self) -> dict[str, str | None]:
        """Running job id → owner."""
        return dict(self._running)

    def place(self, job_id: str) -> Place | None:
        """Where a queued job stands (``None`` if it is not queued here)."""
        order = self._order()
        for index, job in enumerate(order):
            if job.job_id == job_id:
                mine = sum(1 for j in order[: index + 1] if j.owner == job.owner)
                return Place(mine=mine, ahead=index)
        return None

    def _order(self) -> list[Waiting]:
        """The start order of the queued jobs: users' jobs, then background ones."""
        return self._lane_order(False) + self._lane_order(True)

    def _lane_order(self, background: bool) -> list[Waiting]:
        """One lane's start order: :func:`pick_next` replayed, each started job counted as running until all its
        owner's earlier jobs have started (slots free over time, so the cap delays, never blocks)."""
        waiting = self._lane(background)
        running = self._lane_running(background)
        served = dict(self._served)
        order: list[Waiting] = []
        turn = self._turn
        while waiting:
            job = pick_next(waiting, running, max(self.per_user, max(running.values(), default=0) + 1), served)
            assert job is not None  # the cap is raised above every running count, so someone is always eligible
            waiting.remove(job)
            order.append(job)
            running[job.owner] += 1
            served[job.owner] = turn
            turn += 1
        return order
