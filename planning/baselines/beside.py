"""The baselines beside each other: one task per baseline on the process pool (issue 41 §3).

A cold coral-extended solve spent ~18 s of its ~26 s in its nine baselines, one after another, most of it in two
single-type ILPs (single:L40S ~13 s, single:A100-80G ~5 s on a quiet core; docs/benchmarks.md, "Cold solves:
where the time goes"). Each baseline is a pure function of the baseline problem: its ILPs stop on work (HiGHS
nodes, ``base.BASELINE_NODES``), not on a clock, so the same task gives the same answer in any process, and
running them on ``workers`` processes (:func:`planning.parallel.run_tasks`, results in the registry's order)
changes their wall time (the longest baseline instead of the sum), never their answers. ``workers`` ≤ 1 runs them
here, one after another (``base.run_all_baselines``).

Deadlines: the solve's deadline cannot travel to another process, so each task gets the seconds left on it when
sent, less its wait in the pool's queue, and makes its own :class:`~planning.context.Deadline`; a baseline it stops
comes back as a ``skipped`` placeholder (as in the serial run, which also skips every baseline after it). The
caller's own cancel still cancels the fan-out (``Cancelled``).

Beside the allocation (:class:`EarlyStart`): the baselines that read only single-GPU-type templates are sent as
soon as those exist, while the allocation runs, and their answers are taken when the solve's baseline problem has
exactly the single-GPU-type part they ran on.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from planning.allocate.problem import AllocationProblem
from planning.baselines.base import BaselineResult, run_baseline, skipped
from planning.context import CancelFlag, Cancelled, CancelToken, Deadline, check_cancel, timed_out

if TYPE_CHECKING:
    from planning.baselines.memo import BaselineMemo


@dataclass(frozen=True)
class BaselineTask:
    """One baseline to run in a worker: its name, the problem, its strategy options, the seconds left on the
    solve's deadline when it was sent (None: no deadline) and when that was (``time.time()``: the wall clock,
    which a worker on another machine shares too)."""

    name: str
    problem: AllocationProblem
    options: Mapping[str, Any]
    seconds: float | None = None
    sent: float | None = None

    def seconds_left(self) -> float | None:
        """The seconds left on the solve's deadline now: those it was sent with less its wait in the queue (a
        task sent beside the allocation may wait for a worker several seconds)."""
        if self.seconds is None:
            return None
        waited = 0.0 if self.sent is None else min(max(0.0, time.time() - self.sent), self.seconds)
        return self.seconds - waited


def run_task(task: BaselineTask) -> BaselineResult:
    """Run one baseline (in a worker process): its result, or the ``skipped`` placeholder when its deadline
    stopped it."""
    seconds = task.seconds_left()
    cancel = Deadline(seconds) if seconds is not None else None
    try:
        return run_baseline(task.name, task.problem, cancel=cancel, **task.options)
    except Cancelled:
        return skipped(task.name, task.problem)


def warm_worker() -> bool:
    """Nothing but the imports a baseline needs (this module's, loaded to unpickle the call): sent to the pool
    when a solve starts, so that its processes spawn while the allocation runs, not after it."""
    import importlib

    from planning.baselines.registry import BASELINES

    for b in BASELINES:  # every strategy's module (Cauchy's, memP's, …) and through them the ILP path and HiGHS
        importlib.import_module(b.function.partition(":")[0])
    return True


def alone_pool_size() -> int:
    """The pool a solve alone on this machine runs its baselines on (``workers_for(0)`` with the job's share all
    the cores: one process per core), when it is worth starting before any solve: on two to eight cores; 0 on
    more, where an idle pool of one process per core would hold memory for nothing."""
    import os

    cores = os.cpu_count() or 1
    return cores if 2 <= cores <= 8 else 0


def warm_first_worker() -> None:
    """A job worker's warm-up hook (``planning.jobs.workers.warm_worker``, the first worker of a server's pool):
    start the pool a first solve alone runs its baselines on, so its spawn does not run beside that solve."""
    prewarm(alone_pool_size())


def run_beside(tasks: Sequence[BaselineTask], workers: int, cancel: CancelToken | None = None) -> list[BaselineResult]:
    """Every task on ``workers`` processes, results in task order (:func:`planning.parallel.run_tasks`).

    Raises
    ------
    Cancelled
        When the caller's token (not the solve's deadline: each task has its own) is set.
    """
    from planning.parallel import run_tasks

    caller = None if cancel is None else _CallerPart(cancel)
    order = longest_first(tasks)
    done = run_tasks(run_task, [tasks[i] for i in order], workers=min(workers, len(tasks)), cancel=caller,
                     what="baselines")
    out: list[BaselineResult | None] = [None] * len(tasks)
    for i, result in zip(order, done, strict=True):
        out[i] = result
    return [r for r in out if r is not None]


@dataclass(frozen=True)
class _CallerPart:
    """``cancel`` minus the solve's own deadline (:func:`planning.context.timed_out`), which every task carries
    itself: what makes the fan-out raise ``Cancelled``, as in the serial run."""

    cancel: CancelToken

    def is_set(self) -> bool:
        return self.cancel.is_set() and not timed_out(self.cancel)


def tasks_for(names: Sequence[str], problem: AllocationProblem, options: Mapping[str, Mapping[str, Any]],
              cancel: CancelToken | None) -> list[BaselineTask]:
    """One task per baseline name, with its options and the seconds left on ``cancel``'s deadline. A
    ``single:<gpu>`` task carries only the templates of that GPU type (the ones ``single_type`` keeps: the same
    answer, less to send)."""
    seconds = cancel.remaining_s() if isinstance(cancel, CancelFlag) else None
    sent = time.time()
    return [BaselineTask(name, own_part(name, problem), dict(options.get(name, {})), seconds, sent)
            for name in names]


def own_part(name: str, problem: AllocationProblem) -> AllocationProblem:
    """``problem`` with only the templates (and running instances) a ``single:<gpu>`` baseline may use."""
    if not name.startswith("single:"):
        return problem
    gpu = name.split(":", 1)[1]
    templates = tuple(t for t in problem.templates if t.gpu_types == (gpu,))
    ids = {t.id for t in templates}
    return replace(problem, templates=templates, current={k: v for k, v in problem.current.items() if k[0] in ids})


def longest_first(tasks: Sequence[BaselineTask]) -> list[int]:
    """The order to start ``tasks`` in: the most templates first (the single-type ILPs take the time: single:L40S
    ~13 s of coral-extended's ~18 s), so the longest does not start last; results keep the registry's order."""
    return sorted(range(len(tasks)), key=lambda i: (-len(tasks[i].problem.templates)
                                                    if tasks[i].name.startswith("single:") else 0, i))


ENV = "PLANNING_BASELINE_WORKERS"
"""An integer that replaces ``options.workers`` for the baselines; ``1`` runs them here, one after another (the
test suite sets it: its tests wrap engine functions and move clocks in this process; the fan-out itself is tested
in ``tests/baselines/test_baselines_beside.py`` and by the recorded presets)."""


def workers_for(option: int) -> int:
    """The processes to run a solve's baselines on: :data:`ENV` if set, else ``options.workers`` (0: one per CPU
    core). In a child process of the engine, at most the job's share of the cores (``spawning.job_share``): a job
    worker gets the cores no other job runs on from its runner (``JobRunner.cores_for``), so a browser's solve
    alone on the server runs its baselines beside its allocation as the CLI does; a pool worker planning a sweep
    point or an epoch gets 1 (here, one after another): it already runs beside others, and a pool of its own
    would multiply the processes."""
    import multiprocessing
    import os

    from planning.spawning import job_share

    cap = job_share() if multiprocessing.parent_process() is not None else None
    if cap is not None and cap <= 1:
        return 1
    told = os.environ.get(ENV, "").strip()
    wanted = max(1, int(told)) if told.isdigit() else max(1, option or os.cpu_count() or 1)
    return wanted if cap is None else min(wanted, cap)


_WARMED: weakref.WeakSet[Any] = weakref.WeakSet()
"""The pools :func:`prewarm` has sent its imports to (a discarded pool drops out; its successor is warmed anew)."""


def prewarm(workers: int) -> None:
    """Start the process pool of ``workers`` processes (``planning.spawning.shared_pool``) and have each import
    what a baseline needs, without waiting: called as a solve with baselines starts, so that the spawn overlaps
    the allocation. Nothing for ``workers`` ≤ 1 or another backend than the process pool."""
    from planning.parallel import resolve_backend

    if workers <= 1 or resolve_backend(None) != "process":
        return
    from planning.spawning import shared_pool

    pool = shared_pool(workers)
    if pool in _WARMED:  # already warming or warm (a second call of the same solve, a later solve)
        return
    _WARMED.add(pool)
    for _ in range(workers):
        pool.submit(warm_worker)


def single_type_part(problem: AllocationProblem) -> AllocationProblem:
    """``problem`` with only its single-GPU-type templates (in their order): all that a baseline marked
    ``single_types`` in the registry reads of it."""
    return replace(problem, templates=tuple(t for t in problem.templates if len(t.gpu_types) == 1))


@dataclass
class EarlyStart:
    """The baselines that read only single-GPU-type templates (``Baseline.single_types``: all but memP), started
    on the process pool while the allocation runs (issue 41 §3).

    :meth:`start` sends them as soon as a problem holding those templates exists (the on-demand engine's
    ``single_type_sets``, before its pricing; the library path's sets after their build). When the solve's own
    baseline problem is made, :meth:`usable` keeps their answers only if its single-GPU-type part is *equal* to
    the problem they ran on (the same templates in the same order, offers, classes, links, limits): then each got
    the very input it would have got after the allocation, and its answer is that one. Otherwise (say an
    uncertified plan whose sets lack those rows) they are run again on the solve's problem. Nothing starts with
    ``workers`` ≤ 1 or another backend than the process pool: the baselines then run after the allocation as
    before.
    """

    workers: int
    cancel: CancelToken | None = None
    problem: AllocationProblem | None = None
    futures: dict[str, Future[BaselineResult]] = field(default_factory=dict)
    tasks: dict[str, BaselineTask] = field(default_factory=dict)
    memo: BaselineMemo | None = None  # a ``single:<gpu>`` answer already in it is not started (it would be unused)

    def start(self, problem: AllocationProblem) -> None:
        """Send every applicable ``single_types`` baseline of ``problem`` (the longest first), each with the
        seconds left on the solve's deadline; a second call (the library path after the on-demand engine gave
        up) drops the first call's tasks that have not begun and sends the new ones."""
        from planning.baselines.base import baseline_names
        from planning.baselines.registry import entry

        pool = self.pool()
        if pool is None or problem.current:
            return
        self.close()
        names = [n for n in baseline_names(problem) if (spec := entry(n)) is not None and spec.single_types
                 and not self._known(n, problem)]
        tasks = tasks_for(names, problem, {}, self.cancel)
        for i in longest_first(tasks):
            self.futures[tasks[i].name] = pool.submit(run_task, tasks[i])
            self.tasks[tasks[i].name] = tasks[i]
        self.problem = problem

    def pool(self) -> Executor | None:
        """The process pool :meth:`start` sends to (prewarmed as the solve starts), or None when nothing starts
        early: the single-GPU-type sets' placements may run on it first (``planning.templates.placing``)."""
        from planning.parallel import resolve_backend
        from planning.spawning import shared_pool

        return shared_pool(self.workers) if self.workers > 1 and resolve_backend(None) == "process" else None

    def _known(self, name: str, problem: AllocationProblem) -> bool:
        """Whether the memo answers ``name`` already: a ``single:<gpu>`` baseline's own part of ``problem`` is
        its own part of the solve's baseline problem whenever the early answers are usable (:meth:`usable`), so
        ``run_all_baselines`` finds the same key; the others read every single-shape template of the solve's
        problem, so they are started (and cost a fraction of a second)."""
        if self.memo is None or not name.startswith("single:"):
            return False
        return self.memo.get(self.memo.key(name, own_part(name, problem), {}), count=False) is not None

    def usable(self, problem: AllocationProblem) -> list[str]:
        """The names started early whose answers stand for ``problem`` (the solve's baseline problem): all of
        them when its single-GPU-type part equals the problem they ran on, else none (and those are dropped)."""
        if self.problem is None or single_type_part(problem) != self.problem:
            self.close()
            return []
        return list(self.futures)

    def collect(self, names: Sequence[str], cancel: CancelToken | None) -> dict[str, BaselineResult]:
        """The results of the early ``names``, waiting for them; a task lost to a dead worker process runs again
        (:func:`planning.parallel.run_tasks`, alone in a fresh process if it dies again).

        Raises
        ------
        Cancelled
            When the caller's token (not the solve's deadline: each task has its own) is set.
        """
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        from planning.parallel import POLL_S, run_tasks

        caller = None if cancel is None else _CallerPart(cancel)
        out: dict[str, BaselineResult] = {}
        lost: list[str] = []
        pending = {self.futures[n]: n for n in names}
        while pending:
            finished, _ = wait(set(pending), timeout=POLL_S, return_when=FIRST_COMPLETED)
            for f in finished:
                name = pending.pop(f)
                try:
                    out[name] = f.result()
                except BrokenProcessPool:
                    lost.append(name)
            if caller is not None and caller.is_set():
                self.close()
                check_cancel(caller, "baselines")
        if lost:
            again = run_tasks(run_task, [self.tasks[n] for n in lost], workers=min(self.workers, len(lost)),
                              cancel=caller, what="baselines")
            out.update(zip(lost, again, strict=True))
        return out

    def close(self) -> None:
        """Drop the tasks that have not begun (a running one finishes on its own: its deadline and work limit
        bound it) and forget every early result."""
        for f in self.futures.values():
            f.cancel()
        self.futures.clear()
        self.tasks.clear()
        self.problem = None
