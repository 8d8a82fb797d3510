"""Fair share of the job runner's workers: a per-user cap, round-robin across users, places, whose cancel counts.

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
* Identical requests are still one job (the store's reuse): a user who submits a request another user's job
  already answers becomes *interested* in that job. A user's cancel withdraws only their own interest; the job
  stops only when its last interested user cancels it (:func:`cancel_effect`). An admin's cancel stops it.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from planning.errors import PlanningError

__all__ = [
    "DEFAULT_MAX_JOBS_PER_USER",
    "CancelEffect",
    "FairQueue",
    "Place",
    "Waiting",
    "cancel_effect",
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


class CancelEffect(Enum):
    """What a cancel does: stop the job, only withdraw the user's interest, or nothing (not theirs)."""

    STOP = "stop"
    WITHDRAW = "withdraw"
    REFUSE = "refuse"


def cancel_effect(interested: frozenset[str | None], by: str | None, *, admin: bool = False) -> CancelEffect:
    """What a cancel of a job by user ``by`` does, given the users interested in the job (its owner, and those
    whose identical request joined it).

    Parameters
    ----------
    interested:
        Users interested in the job now.
    by:
        The user who pressed Cancel.
    admin:
        An admin's cancel stops any job.
    """
    if admin:
        return CancelEffect.STOP
    if by not in interested:
        return CancelEffect.REFUSE
    return CancelEffect.STOP if interested == frozenset({by}) else CancelEffect.WITHDRAW


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
    _waiting: dict[str, Waiting] = field(default_factory=dict)
    _running: dict[str, str | None] = field(default_factory=dict)
    _served: dict[str | None, int] = field(default_factory=dict)
    _interested: dict[str, set[str | None]] = field(default_factory=dict)
    _seq: int = 0
    _turn: int = 0

    def push(self, job_id: str, owner: str | None) -> None:
        """Queue a new job of ``owner``."""
        self._seq += 1
        self._waiting[job_id] = Waiting(job_id, owner, self._seq)
        self._interested[job_id] = {owner}

    def join(self, job_id: str, owner: str | None) -> None:
        """``owner`` submitted a request that job ``job_id`` (queued or running here) already answers."""
        if job_id in self._interested:
            self._interested[job_id].add(owner)

    def interested(self, job_id: str, fallback: str | None = None) -> frozenset[str | None]:
        """Users interested in a job; ``{fallback}`` (its stored owner) for a job this queue never held."""
        return frozenset(self._interested.get(job_id, {fallback}))

    def withdraw(self, job_id: str, owner: str | None) -> None:
        """Forget ``owner``'s interest in a job (their cancel of a job others still want)."""
        self._interested.get(job_id, set()).discard(owner)

    def start_next(self) -> str | None:
        """Move the next job (see :func:`pick_next`) from queued to running, if a slot is free; its id."""
        if len(self._running) >= self.slots:
            return None
        job = pick_next(list(self._waiting.values()), self.running_by_owner(), self.per_user, self._served)
        if job is None:
            return None
        del self._waiting[job.job_id]
        self._running[job.job_id] = job.owner
        self._served[job.owner] = self._turn
        self._turn += 1
        return job.job_id

    def remove(self, job_id: str) -> bool:
        """Forget a job that finished, or was cancelled while queued; True if it was queued or running."""
        self._interested.pop(job_id, None)
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
        """The start order of the queued jobs: :func:`pick_next` replayed, each started job counted as running
        until all its owner's earlier jobs have started (slots free over time, so the cap delays, never blocks)."""
        waiting = list(self._waiting.values())
        running = self.running_by_owner()
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
