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
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
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
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the cluster at PLANNING_RAY_ADDRESS={address[:80]!r}" if address else "a local Ray instance"
                raise PlanningError("backend", f"could not start or reach {where}: {str(exc)[:200]}.",
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

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    PlanningError
        Ray missing or unreachable.
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
    futs: dict[Future[Any], int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
    pending = set(futs)
    while pending:
        finished, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
        for f in finished:
            results[futs[f]] = f.result()
            if on_result:
                on_result(futs[f], results[futs[f]])
        if cancel is not None and cancel.is_set():
            for f in pending:
                f.cancel()
            check_cancel(cancel, what)
    return results


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


def fan_out(fn: Any, items: Sequence[Any], labels: Sequence[str], *, backend: str | None, workers: int,
            progress: ProgressFn | None, cancel: CancelToken | None, what: str, here: Any = None) -> list[Any]:
    """``[fn(item) for item in items]``: here (``workers`` ≤ 1 on the process backend, each task sees
    ``cancel``; ``here(item, cancel=…)`` instead of ``fn`` when given, e.g. to reuse the caller's engine context),
    on the process pool (``workers`` ≥ 2) or on Ray (``workers`` local CPUs, 0: one per core)."""
    name = resolve_backend(backend)
    finished = 0

    def landed(i: int, _r: Any) -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(finished / len(items), labels[i])

    if name == "ray" or workers >= 2:
        return run_tasks(fn, items, backend=name, workers=workers or (os.cpu_count() or 1), cancel=cancel,
                         on_result=landed, what=what)
    local = here if here is not None else fn
    out = []
    for i, item in enumerate(items):
        check_cancel(cancel, what)
        out.append(local(item, cancel=cancel))
        landed(i, out[-1])
    return out
