"""The timeline's one adapter to the engine: build template sets once, then solve many epochs on them.

Each epoch goes through the same allocation path as :func:`planning.api.solve` (``allocate.certify``: the LP
reduction with its optimality certificate, then the allocation ILP with Coral's initialization penalty
``I ≥ (ν − ν′)·p·K`` against ``scenario.current``), but on template sets built once: only the classes' rates
(demand) and the offers' availability change between epochs, and neither enters a library's cache key, so no
library is rebuilt or re-read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from planning.allocate.certify import Allocation, allocation_problem, solve_certified
from planning.assemble import _locate, build_plan_result, time_limit_result
from planning.context import Cancelled, CancelToken, Deadline, EngineContext, ProgressFn
from planning.groups import Group
from planning.resolve import ResolvedScenario, resolve_scenario
from planning.result import PlanResult
from planning.scenario import CurrentInstance, Objective, Scenario
from planning.templates.sets import TemplateSet, build_template_sets

if TYPE_CHECKING:
    from planning.baselines.base import BaselineResult
    from planning.offers import ResolvedOffer


@dataclass(frozen=True, eq=False)
class Prepared:
    """A scenario resolved once: groups (class ids fixed), offered shapes, template sets, homogeneous masks."""

    scenario: Scenario
    ctx: EngineContext
    groups: tuple[Group, ...]
    sets: tuple[TemplateSet, ...]
    homo_masks: tuple[np.ndarray, ...]

    def nodes_of(self, key: str) -> dict[str, int]:
        """Node counts per shape of one template (allocation id ``"model/phase:template"``)."""
        ts, row = _locate(self.sets, key)
        return ts.usage_dict(row)


@dataclass(frozen=True)
class EpochSolve:
    """One epoch's allocation: the PlanResult plus instance counts keyed like ``scenario.current``."""

    result: PlanResult
    counts: Mapping[tuple[str, str], int]
    objective: str
    alpha: float
    seconds: float
    has_plan: bool = True
    error: str = ""  # the solve raised: what it raised and the fix (``has_plan`` False, status ``error``)


def prepare(scenario: Scenario, ctx: EngineContext, progress: ProgressFn | None = None,
            cancel: CancelToken | None = None, *, sets: Sequence[TemplateSet] | None = None) -> Prepared:
    """Resolve ``scenario`` and build (or load from the cache) its template libraries once; ``sets`` given (one per
    resolved group, in order: the on-demand pool of ``planning.timeline.columns``): those instead."""
    resolved = resolve_scenario(scenario, ctx.catalog)
    if sets is None:
        sets = build_template_sets(ctx, resolved, progress, cancel)
    elif [ts.group.id for ts in sets] != [g.id for g in resolved.groups]:
        raise ValueError("prepare: the given template sets are not the scenario's groups")
    masks = tuple(np.asarray(ts.single_shape, dtype=bool) for ts in sets)
    return Prepared(scenario, ctx, tuple(resolved.groups), tuple(sets), masks)


def resolved_for(prep: Prepared, scenario: Scenario, groups: Sequence[Group]) -> ResolvedScenario:
    """The epoch's resolved scenario: its offers (availability overrides applied) and ``groups``' rates."""
    return replace(resolve_scenario(scenario, prep.ctx.catalog), groups=tuple(groups))


def offers_for(prep: Prepared, scenario: Scenario) -> list[ResolvedOffer]:
    """The epoch's purchasable offers (availability overrides applied)."""
    from planning.offers import resolve_offers

    return resolve_offers(scenario, prep.ctx.catalog)


def solve_epoch(prep: Prepared, scenario: Scenario, groups: Sequence[Group], *, goodput_fallback: bool = True,
                cancel: CancelToken | None = None) -> EpochSolve:
    """Allocate one epoch: cheapest plan for ``groups``' rates; when none exists and ``goodput_fallback``, the
    largest uniform served fraction α (Coral Sec. 6.4) and the cheapest plan serving it.

    ``scenario`` carries the epoch's availability (overrides/offers), ``current`` (previous allocation) and K.
    ``options.time_limit_s`` bounds the epoch (fallback included): at the limit the best plan found so far is the
    epoch's plan (status ``feasible``, its proven gap); with none, the epoch has no plan (``has_plan`` False).

    Raises
    ------
    Cancelled
        When ``cancel`` (the caller's) is set.
    """
    t0 = time.perf_counter()
    limit = scenario.options.time_limit_s
    deadline = Deadline(limit, cancel)
    resolved = resolved_for(prep, scenario, groups)

    def certified(res: ResolvedScenario) -> Allocation | None:
        try:
            return solve_certified(res, list(prep.sets), cancel=deadline)  # the incumbent at the deadline
        except Cancelled:
            if not deadline.timed_out():
                raise
            return None  # the deadline came before any plan

    allocation = certified(resolved)
    objective = scenario.objective.kind
    if (allocation is None or not allocation.result.has_plan) and goodput_fallback and objective == "cost" \
            and not deadline.is_set():
        scenario = replace(scenario, objective=Objective(kind="served"))
        objective = "served"
        resolved = replace(resolved, scenario=scenario)
        allocation = certified(resolved)
    if allocation is None:
        result = time_limit_result(scenario, limit, f"epoch allocation ({objective})", time.perf_counter() - t0)
        return EpochSolve(result, {}, objective, 0.0, time.perf_counter() - t0, False)
    alloc = allocation.result
    result = build_plan_result(resolved, prep.sets, alloc, [], timings=allocation.timings, provenance={},
                               stats=allocation.stats)
    counts = {(str(t), str(r)): int(n) for (t, r), n in alloc.counts.items() if n > 0}
    alpha = float(alloc.alpha) if alloc.alpha is not None else (1.0 if alloc.has_plan else 0.0)
    return EpochSolve(result, counts, objective, alpha, time.perf_counter() - t0, bool(alloc.has_plan))


def solve_epoch_alone(prep: Prepared, scenario: Scenario, groups: Sequence[Group], *, goodput_fallback: bool = True,
                      cancel: CancelToken | None = None) -> EpochSolve:
    """:func:`solve_epoch`, except that an epoch whose solve raises (anything but ``Cancelled``) comes back as
    "no plan" (status ``error``) with what it raised and the fix, so one failing epoch does not fail the horizon.

    Raises
    ------
    Cancelled
        When ``cancel`` (the caller's) is set.
    """
    t0 = time.perf_counter()
    try:
        return solve_epoch(prep, scenario, groups, goodput_fallback=goodput_fallback, cancel=cancel)
    except Cancelled:
        raise
    except Exception as exc:  # one epoch's failure is reported on that epoch, the horizon goes on
        return failed_epoch(scenario, exc, time.perf_counter() - t0)


def failed_epoch(scenario: Scenario, exc: BaseException, seconds: float) -> EpochSolve:
    """The :class:`EpochSolve` of an epoch whose solve raised ``exc``: no plan, status ``error``, the error and
    its fix (a ``PlanningError``'s own; otherwise where it was raised and what to do)."""
    message = describe_failure(exc)
    result = PlanResult(status="error", objective=scenario.objective.kind, cost_per_hour=0.0,
                        provisioning_per_hour=0.0, penalty_per_hour=0.0, served_fraction=0.0, mip_gap=None,
                        timings={"total_seconds": seconds}, scenario=scenario.to_dict(), message=message,
                        diagnostics=(message,))
    return EpochSolve(result, {}, scenario.objective.kind, 0.0, seconds, False, error=message)


def describe_failure(exc: BaseException) -> str:
    """One line for a failed epoch: what was raised (where, for a bug) and the fix."""
    from planning.errors import PlanningError

    if isinstance(exc, PlanningError):
        return f"the epoch's solve failed: {exc.field}: {exc.problem}" + (f" Fix: {exc.fix}" if exc.fix else "")
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" in {frames[-1].name} ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    text = str(exc).strip()[:200]
    return (f"the epoch's solve failed: {type(exc).__name__}{': ' + text if text else ''}{where}. Fix: this is a "
            "bug in the planner (please report it with this message); the other epochs are planned, and a solve "
            "of this epoch's demand alone (planning solve) or other options.time_limit_s / options.templates may "
            "avoid it.")


def homogeneous_epoch(prep: Prepared, scenario: Scenario, groups: Sequence[Group], name: str) -> BaselineResult:
    """A homogeneous baseline (``"homo"``: Coral's greedy; ``"homo-ilp"``) on the single-shape templates only;
    ``scenario.current`` holds that baseline's own previous instances."""
    from planning.baselines import run_baseline

    resolved = resolved_for(prep, scenario, groups)
    problem = allocation_problem(resolved, list(prep.sets), groups=groups, masks=list(prep.homo_masks))
    return run_baseline(name, problem)


def current_of(counts: Mapping[tuple[str, str], int]) -> tuple[CurrentInstance, ...]:
    """Allocation counts as the scenario's ``current`` (running instances for the next epoch's penalty)."""
    return tuple(CurrentInstance(template_id=t, region=r, count=int(n)) for (t, r), n in sorted(counts.items()) if n > 0)


def capacity(prep: Prepared, counts: Mapping[tuple[str, str], int], groups: Sequence[Group]) -> dict[str, float]:
    """Rate each group's instances serve when carrying the group's class mix (Σ count / Σ_q share_q / T_q)."""
    out = {g.id: 0.0 for g in groups}
    by_id = {g.id: g for g in groups}
    for (key, _region), n in counts.items():
        ts, row = _locate(prep.sets, key)
        g = by_id.get(ts.group.id)
        if g is None or g.demand <= 0:
            continue
        thr = ts.throughput[row]
        inv = sum((c.rate / g.demand) / thr[j] if thr[j] > 0 else (np.inf if c.rate > 0 else 0.0)
                  for j, c in enumerate(g.classes))
        if np.isfinite(inv) and inv > 0:
            out[g.id] += n / inv
    return out
