"""Where independent pieces of work run: the embedded process pool (default) or Ray (optional, beyond one machine).

Two kinds of fan-out use it: a template-library build (batches of multiset chunks, ``templates/library.py``) and
scenario fan-out (sweep points and what-if variants, ``api_fanout``). Both are lists of independent tasks whose results are merged in
task order, so every backend gives the same answer as the serial run.

Backends:

``process``
    One long-lived ``spawn`` process pool per worker count (``templates/pool.py``) for library batches; sweep
    points and what-if variants run one after another in this process, where the engine's warm caches (T̂
    tables, multiset spaces) make a point after the first cheap, or on the pool with ``workers`` ≥ 2.
``ray``
    Ray tasks (``pip install 'planning[ray]'``). ``PLANNING_RAY_ADDRESS`` names an existing cluster
    (``ray://host:10001`` or ``auto``), whose nodes must have the same ``planning`` version installed; without it a
    local Ray instance starts with one CPU per core (or ``workers``). Reach for it when one machine is not enough:
    many-point sweeps, what-if fan-out, library builds of the whole catalog. A task whose node dies is re-run
    elsewhere (:data:`RAY_RETRIES`); past that the fan-out raises a ``PlanningError`` (:func:`ray_failure`).

The backend is chosen per call (``backend=``), else by ``PLANNING_BACKEND``, else ``process``; the CLI's
``--backend`` sets it for the command.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

from planning.context import CancelToken, ProgressFn, check_cancel
from planning.errors import PlanningError

BACKENDS: tuple[str, ...] = ("process", "ray")
POLL_S = 0.2  # how often a waiting fan-out looks at its cancel token
RAY_RETRIES = 3
"""Times Ray re-runs a task (or restarts a pricing actor) whose worker or node died: the work is pure, so a
re-run gives the same answer; past that the fan-out fails with :func:`ray_failure`'s message, never a hole."""

T = TypeVar("T")
R = TypeVar("R")

_DEFAULT: list[str] = []  # set by set_default_backend (the CLI's --backend); else PLANNING_BACKEND
_RAY_LOCK = threading.Lock()


def set_default_backend(name: str | None) -> None:
    """The backend for calls that do not name one (``None`` goes back to ``PLANNING_BACKEND`` / ``process``)."""
    _DEFAULT.clear()
    if name is not None:
        _DEFAULT.append(resolve_backend(name))


def resolve_backend(name: str | None = None) -> str:
    """``name``, else the default set by the CLI, else ``PLANNING_BACKEND``, else ``"process"``; validated.

    Raises
    ------
    PlanningError
        An unknown backend name.
    """
    chosen = name or (_DEFAULT[0] if _DEFAULT else None) or os.environ.get("PLANNING_BACKEND") or "process"
    chosen = chosen.strip().lower()
    if chosen not in BACKENDS:
        raise PlanningError("backend", f"unknown backend {chosen[:40]!r}.", f"use one of {', '.join(BACKENDS)}.")
    return chosen


def ray_module(num_cpus: int | None = None) -> Any:
    """The ``ray`` module, initialised once per process: the cluster at ``PLANNING_RAY_ADDRESS`` if set, else a
    local instance with ``num_cpus`` CPUs (default: one per core).

    Raises
    ------
    PlanningError
        Ray is not installed, or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError:
        raise PlanningError("backend", "ray is not installed.",
                            "pip install 'planning[ray]', or use --backend process.") from None
    with _RAY_LOCK:
        if not ray.is_initialized():
            address = os.environ.get("PLANNING_RAY_ADDRESS", "").strip()
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)
                else:
                    ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
            except Exception as exc:  # ray.init raises a bare Exception when a node times out starting
                where = f"the cluster at PLANNING_RAY_ADDRESS={address[:80]!r}" if address else "a local Ray instance"
                raise PlanningError("backend", f"could not start or reach {where}: {str(exc)[:200].rstrip('.')}.",
                                    "check the address and that the cluster runs, or use --backend process.") from None
    return ray


def ray_failure(exc: BaseException, what: str) -> PlanningError | None:
    """A clear error for a Ray *system* failure (a worker, node or object lost after the retries), else None.

    An exception the task itself raised (``RayTaskError``, e.g. a ``PlanningError`` from a bad point) is not
    a system failure: Ray re-raises it as the task's own exception type, and it propagates unchanged.
    """
    try:
        from ray import exceptions as rex
    except ImportError:  # pragma: no cover - only called once Ray is running
        return None
    if not isinstance(exc, rex.RayError) or isinstance(exc, rex.RayTaskError):
        return None
    kind = type(exc).__name__
    detail = " ".join(str(exc).split())[:200]
    return PlanningError("backend", f"{what} lost work on the Ray cluster ({kind}, after {RAY_RETRIES} retries): "
                         f"{detail}.", "check that the cluster's nodes are up (`ray status`) and run it again, "
                         "or use --backend process.")


def run_tasks(fn: Callable[[T], R], items: Sequence[T], *, backend: str | None = None, workers: int = 1,
              cancel: CancelToken | None = None, on_result: Callable[[int, R], None] | None = None,
              what: str = "parallel work", pool: Executor | None = None) -> list[R]:
    """``[fn(item) for item in items]`` on a backend, results in item order.

    Parameters
    ----------
    fn:
        A module-level function (it travels to other processes by reference).
    items:
        Its arguments, one task each.
    backend:
        ``"process"`` or ``"ray"`` (see :func:`resolve_backend`).
    workers:
        Processes for the process backend (1 runs the tasks here, one after another); local Ray CPUs.
    cancel:
        Checked between tasks and every :data:`POLL_S` while waiting; pending tasks are cancelled.
    on_result:
        ``on_result(i, result)`` as each task finishes (progress), in completion order.
    what:
        Names the work in a ``Cancelled`` message.
    pool:
        An executor for the process backend (default: ``spawning.shared_pool(workers)``).

    A worker process that dies (killed, ``os._exit``, out of memory) breaks the pool: the pool is discarded (the
    next call gets a fresh one) and every task it lost runs again, each alone in a fresh process; the others'
    results are kept.

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    PlanningError
        Ray missing or unreachable.
    WorkerCrashed
        A task whose process died again when run alone, after every other task finished (a ``PlanningError``
        carrying the others' results).
    """
    name = resolve_backend(backend)
    results: list[Any] = [None] * len(items)
    if name == "ray":
        return _run_ray(fn, items, workers, cancel, on_result, what, results)
    if workers <= 1 or len(items) <= 1:
        for i, item in enumerate(items):
            check_cancel(cancel, what)
            results[i] = fn(item)
            if on_result:
                on_result(i, results[i])
        return results
    if pool is None:
        from planning.spawning import shared_pool

        pool = shared_pool(workers)
    batch = _Batch(fn, items, results, on_result, cancel, what)
    lost = _run_pool(batch, pool)
    if lost:  # a worker process died: the pool is broken for good; the lost tasks run again, each in a fresh one
        from planning.spawning import discard_pool

        discard_pool(pool)
        crashed = _run_isolated(batch, lost, workers)
        if crashed:
            raise WorkerCrashed(what, crashed, results)
    return results


class WorkerCrashed(PlanningError):
    """Tasks whose worker process died (killed, ``os._exit``, out of memory: not an exception the task raised) in
    the pool and again alone in a fresh process. ``crashed`` maps each such task's index to how its process
    ended; ``results`` holds every other task's result (they all finished), None at the crashed indices."""

    def __init__(self, what: str, crashed: Mapping[int, str], results: list[Any]) -> None:
        first = min(crashed)
        super().__init__(
            "workers", f"{what}: {len(crashed)} of {len(results)} task(s) ended their worker process, in the pool "
            f"and again alone in a fresh process (task {first}: {crashed[first]}); the other tasks finished.",
            "a task that kills its process usually runs out of memory: use fewer workers or a smaller problem; run "
            "it with --workers 1 to see its error, and report it if it is a crash of the planner.")
        self.crashed = dict(crashed)
        self.results = results


@dataclass(frozen=True)
class _Batch:
    """One ``run_tasks`` call's tasks, where their results go, and its cancel token."""

    fn: Callable[[Any], Any]
    items: Sequence[Any]
    results: list[Any]
    on_result: Callable[[int, Any], None] | None
    cancel: CancelToken | None
    what: str

    def land(self, i: int, value: Any) -> None:
        self.results[i] = value
        if self.on_result:
            self.on_result(i, value)

    def cancelled(self, pending: set[Future[Any]]) -> None:
        """Raise ``Cancelled`` (pending tasks cancelled) when the token is set."""
        if self.cancel is not None and self.cancel.is_set():
            for f in pending:
                f.cancel()
            check_cancel(self.cancel, self.what)


def _run_pool(batch: _Batch, pool: Executor) -> list[int]:
    """Every task on ``pool``; returns the indices of tasks lost to a dead worker process (``BrokenProcessPool``:
    the dead one's and every other task not finished when it died). A task's own exception propagates."""
    futs: dict[Future[Any], int] = {}
    lost: list[int] = []
    for i, item in enumerate(batch.items):
        try:
            futs[pool.submit(batch.fn, item)] = i
        except BrokenProcessPool:  # broken before this call's tasks were all queued
            lost.append(i)
    pending = set(futs)
    while pending:
        finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
        for f in sorted(finished, key=futs.__getitem__):
            try:
                value = f.result()
            except BrokenProcessPool:
                lost.append(futs[f])
                continue
            batch.land(futs[f], value)
        batch.cancelled(pending)
    return sorted(lost)


def _run_isolated(batch: _Batch, lost: Sequence[int], workers: int) -> dict[int, str]:
    """The lost tasks again, each alone in a fresh one-process pool (at most ``workers`` at a time), so a task
    that kills its process is told from those it took down with it; returns the tasks whose process died again
    and how it ended."""
    from planning.spawning import spawn_context

    crashed: dict[int, str] = {}
    queue = list(lost)
    running: dict[Future[Any], tuple[int, ProcessPoolExecutor]] = {}
    try:
        while queue or running:
            while queue and len(running) < max(1, workers):
                i = queue.pop(0)
                alone = ProcessPoolExecutor(max_workers=1, mp_context=spawn_context(die_with_parent=True))
                running[alone.submit(batch.fn, batch.items[i])] = (i, alone)
            finished, _ = wait(set(running), timeout=POLL_S, return_when=FIRST_COMPLETED)
            for f in sorted(finished, key=lambda g: running[g][0]):
                i, alone = running.pop(f)
                alone.shutdown(wait=False)
                try:
                    value = f.result()
                except BrokenProcessPool as exc:
                    crashed[i] = " ".join(str(exc).split())[:200] or "its process ended abruptly"
                    continue
                batch.land(i, value)
            batch.cancelled(set(running))
    finally:
        for f, (_i, alone) in running.items():
            f.cancel()
            alone.shutdown(wait=False, cancel_futures=True)
    return crashed


def _run_ray(fn: Callable[[Any], Any], items: Sequence[Any], workers: int, cancel: CancelToken | None,
             on_result: Callable[[int, Any], None] | None, what: str, results: list[Any]) -> list[Any]:
    ray = ray_module(workers if workers > 1 else None)
    check_cancel(cancel, what)
    # a task whose node dies is re-run elsewhere (pure work: same answer); its own exceptions are not retried
    remote = ray.remote(max_retries=RAY_RETRIES, retry_exceptions=False)(fn)
    refs = [remote.remote(item) for item in items]
    index = {ref: i for i, ref in enumerate(refs)}
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
            for ref in ready:
                try:
                    results[index[ref]] = ray.get(ref)
                except Exception as exc:
                    lost = ray_failure(exc, what)
                    if lost is None:
                        raise
                    raise lost from None
                if on_result:
                    on_result(index[ref], results[index[ref]])
            if cancel is not None and cancel.is_set():
                break
    finally:
        for ref in pending:
            ray.cancel(ref, force=False)
    check_cancel(cancel, what)
    return results


@dataclass(frozen=True)
class FanOut:
    """How :func:`fan_out` runs: the backend and worker count (``workers`` ≤ 1 on the process backend: here; 0 on
    Ray: one per core), progress and cancel, what the work is called (in a ``Cancelled`` message), and ``here``:
    the function used instead of ``fn`` when the tasks run here, called ``here(item, cancel=…)`` (e.g. to reuse
    the caller's engine context)."""

    backend: str | None = None
    workers: int = 1
    progress: ProgressFn | None = None
    cancel: CancelToken | None = None
    what: str = "parallel work"
    here: Any = None


def fan_out(fn: Any, items: Sequence[Any], labels: Sequence[str], how: FanOut) -> list[Any]:
    """``[fn(item) for item in items]``: here (``how.workers`` ≤ 1 on the process backend, each task sees the
    cancel token), on the process pool (``workers`` ≥ 2) or on Ray; ``progress(fraction, labels[i])`` as each
    lands."""
    name = resolve_backend(how.backend)
    finished = 0

    def landed(i: int, _r: Any) -> None:
        nonlocal finished
        finished += 1
        if how.progress:
            how.progress(finished / len(items), labels[i])

    if name == "ray" or how.workers >= 2:
        return run_tasks(fn, items, backend=name, workers=how.workers or (os.cpu_count() or 1), cancel=how.cancel,
                         on_result=landed, what=how.what)
    local = how.here if how.here is not None else fn
    out = []
    for i, item in enumerate(items):
        check_cancel(how.cancel, how.what)
        out.append(local(item, cancel=how.cancel))
        landed(i, out[-1])
    return out
