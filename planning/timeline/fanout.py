"""Epochs that do not chain, solved once per distinct problem and fanned out on the backend (issue 29 §2).

With K = 0 Coral's initialization penalty is zero, so an epoch's allocation does not depend on the instances of the
epoch before: every epoch is an independent problem given by its class rates and its availability. Epochs with the
same rates and availability (an hourly week repeats its demand levels; a repeated day repeats them all) are one
problem, solved once. An epoch whose solve raises is that epoch's "no plan" with its error
(``engine.solve_epoch_alone``), here and on every backend; the others are kept. The distinct problems run here one after another (``workers`` ≤ 1 on the process backend),
on the embedded process pool, or as Ray tasks (``planning.parallel.run_tasks``), and are merged in epoch order, so
every backend gives the sequential plans and total (``tests/timeline/test_fanout.py``). With K > 0 the epochs chain
through the penalty and stay in the sequential loop (or are planned together by the look-ahead and offline
policies).

A task carries the design scenario and the epoch's scenario as dicts and the epoch's rates; a worker process builds
(or loads from the template cache) the design's libraries once and keeps them for its next tasks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from planning.context import CancelToken, EngineContext, ProgressFn
from planning.errors import PlanningError
from planning.groups import Group
from planning.scenario import Scenario
from planning.timeline import engine

if TYPE_CHECKING:
    from planning.parallel import FanOut

_PREPARED: dict[str, engine.Prepared] = {}  # per worker process: the design's libraries, by its dict's digest
_CONTEXTS: dict[str | None, EngineContext] = {}


def epoch_key(scenario: Scenario, groups: Sequence[Group]) -> tuple[Any, ...]:
    """What makes an epoch's problem (K = 0): its class rates and its availability overrides."""
    rates = tuple((c.id, round(float(c.rate), 12)) for g in groups for c in g.classes)
    return rates, tuple(scenario.availability_overrides)


def distinct_epochs(scns: Sequence[Scenario], groups: Sequence[Sequence[Group]]) -> list[int]:
    """For every epoch, the first epoch with the same problem (itself when it is the first)."""
    first: dict[tuple[Any, ...], int] = {}
    return [first.setdefault(epoch_key(s, g), e) for e, (s, g) in enumerate(zip(scns, groups, strict=True))]


def solve_independent(prep: engine.Prepared, scns: Sequence[Scenario], groups: Sequence[Sequence[Group]], *,
                      goodput_fallback: bool, workers: int = 1, backend: str | None = None,
                      cancel: CancelToken | None = None, progress: ProgressFn | None = None,
                      ) -> tuple[list[engine.EpochSolve], int]:
    """Every epoch's allocation (K = 0: no running instances), each distinct problem solved once; returns the
    solves in epoch order and how many distinct problems there were. An epoch whose worker process died (in the
    pool and again alone: ``parallel.WorkerCrashed``) is that epoch's "no plan" with the error and fix.

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    PlanningError
        Ray missing or unreachable, or work lost on a Ray cluster after its retries.
    """
    from planning.parallel import FanOut

    design = prep.scenario.to_dict()
    cache = str(prep.ctx.cache_dir) if prep.ctx.cache_dir is not None else None
    alone = [replace(s, current=()) for s in scns]
    return run_distinct(distinct_epochs(scns, groups), Distinct(
        here=lambda e: engine.solve_epoch_alone(prep, alone[e], groups[e], goodput_fallback=goodput_fallback,
                                                cancel=cancel),
        task=epoch_task,
        item=lambda e: (design, alone[e].to_dict(), [[float(c.rate) for c in g.classes] for g in groups[e]],
                        goodput_fallback, cache),
        crashed=lambda e, exc: engine.failed_epoch(alone[e], exc, 0.0), label="planning the periods"),
        FanOut(backend, workers, progress, cancel, what="timeline epochs"))


R = TypeVar("R")


@dataclass(frozen=True)
class Distinct(Generic[R]):
    """How :func:`run_distinct` solves problem ``e``: ``here(e)`` in this process, or ``task(item(e))`` on the
    process pool or Ray; ``crashed(e, error)``: its answer when the task's worker process died twice (the error
    names the worker and the fix); ``label`` names a problem in the progress messages."""

    here: Callable[[int], R]
    task: Callable[[Any], R]
    item: Callable[[int], Any]
    crashed: Callable[[int, PlanningError], R]
    label: str


def run_distinct(source: Sequence[int], how: Distinct[R], run: FanOut) -> tuple[list[R], int]:
    """``source[e]``: the first index with problem e's answer (itself when first). Each first index is solved once:
    ``how.here(e)`` one after another (process backend, ``run.workers`` ≤ 1), else ``how.task(how.item(e))`` on
    the process pool or as Ray tasks; returns the answers in index order and how many were solved. A task whose
    worker process died in the pool and again alone (``parallel.WorkerCrashed``) is answered ``how.crashed``; the
    others keep their answers."""
    from planning.parallel import WorkerCrashed, resolve_backend, run_tasks

    todo = sorted(set(source))
    name = resolve_backend(run.backend)
    done = 0

    def landed(_i: int, _r: Any) -> None:
        nonlocal done
        done += 1
        if run.progress:
            run.progress(done / len(todo), f"{how.label}: {done} of {len(todo)} distinct periods ({len(source)} in all; "
                         "equal ones share a plan)")

    if name == "process" and run.workers <= 1:
        solved = []
        for i, e in enumerate(todo):
            solved.append(how.here(e))
            landed(i, solved[-1])
    else:
        try:
            solved = run_tasks(how.task, [how.item(e) for e in todo], backend=name,
                               workers=run.workers or (os.cpu_count() or 1), cancel=run.cancel, on_result=landed,
                               what=run.what)
        except WorkerCrashed as lost:
            solved = [how.crashed(e, _crash_error(lost, i)) if i in lost.crashed else lost.results[i]
                      for i, e in enumerate(todo)]
    by_index = dict(zip(todo, solved, strict=True))
    return [by_index[source[e]] for e in range(len(source))], len(todo)


def _crash_error(lost: PlanningError, i: int) -> PlanningError:
    """The error of the ``i``-th task of a ``WorkerCrashed``: its own process death, and the fix."""
    how = getattr(lost, "crashed", {}).get(i, "its process ended abruptly")
    return PlanningError("workers", f"the worker process solving it died, in the pool and again alone ({how}).",
                         lost.fix)


def epoch_task(item: tuple[dict[str, Any], dict[str, Any], list[list[float]], bool, str | None]
               ) -> engine.EpochSolve:
    """One epoch problem on a worker: (design scenario, epoch scenario, class rates per group, goodput fallback,
    the driver's template cache directory). An epoch whose solve raises comes back as "no plan" with its error
    (``engine.solve_epoch_alone``), as in the sequential loop, so the other epochs' work is kept."""
    import time

    design, data, rates, goodput, cache = item
    scenario = Scenario.from_dict(data)
    t0 = time.perf_counter()
    try:
        prep = _prepared(design, cache)
        groups = [replace(g, classes=tuple(replace(c, rate=r) for c, r in zip(g.classes, row, strict=True)))
                  for g, row in zip(prep.groups, rates, strict=True)]
    except Exception as exc:  # this epoch's libraries failed here: it alone has no plan
        return engine.failed_epoch(scenario, exc, time.perf_counter() - t0)
    return engine.solve_epoch_alone(prep, scenario, groups, goodput_fallback=goodput)


def _prepared(design: dict[str, Any], cache: str | None) -> engine.Prepared:
    """The design's libraries in this worker (built, or loaded from the driver's template cache), kept for the
    worker's next tasks; the catalog and perf model are the shipped ones with the user's overrides, as the
    driver's ``default_context``."""
    key = hashlib.sha256(json.dumps([design, cache], sort_keys=True, default=str).encode()).hexdigest()
    prep = _PREPARED.get(key)
    if prep is None:
        from pathlib import Path

        from planning.context import default_context

        _PREPARED.clear()  # one design at a time per worker: its libraries can be large
        ctx = _CONTEXTS.get(cache)
        if ctx is None:
            ctx = _CONTEXTS[cache] = default_context(cache_dir=Path(cache) if cache else None)
        prep = _PREPARED[key] = engine.prepare(Scenario.from_dict(design), ctx)
    return prep
