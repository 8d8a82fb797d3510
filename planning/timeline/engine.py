"""The timeline's one adapter to the engine: build template sets once, then solve many epochs on them.

This is the only module of ``planning.timeline`` that touches the orchestration internals (``planning.solve``:
``resolve_scenario``, ``build_template_sets``, ``solve_reduced``, ``allocation_problem``, ``_plan_result``).
Each epoch goes through the same allocation path as :func:`planning.api.solve` (LP reduction with its
optimality certificate, then the allocation ILP with Coral's initialization penalty ``I ≥ (ν − ν′)·p·K`` against
``scenario.current``), but on template sets built once: only the classes' rates (demand) and the offers'
availability change between epochs, and neither enters a library's cache key, so no library is rebuilt or
re-read. When ``solve.py`` is reorganised, only the imports here move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planning.groups import Group
from planning.result import PlanResult
from planning.scenario import CurrentInstance, Objective, Scenario
from planning.solve import (
    CancelToken,
    EngineContext,
    ProgressFn,
    TemplateSet,
    allocation_problem,
    build_template_sets,
    resolve_scenario,
)


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
        from planning.solve import _locate

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


def prepare(scenario: Scenario, ctx: EngineContext, progress: ProgressFn | None = None,
            cancel: CancelToken | None = None) -> Prepared:
    """Resolve ``scenario`` and build (or load from the cache) its template libraries once."""
    resolved = resolve_scenario(scenario, ctx.catalog)
    sets = build_template_sets(ctx, scenario, resolved.specs, resolved.groups, resolved.shapes, progress, cancel)
    masks = tuple(np.asarray(ts.homogeneous, dtype=bool) for ts in sets)
    return Prepared(scenario, ctx, tuple(resolved.groups), tuple(sets), masks)


def offers_for(prep: Prepared, scenario: Scenario) -> list[Any]:
    """The epoch's purchasable offers (availability overrides applied)."""
    from planning.offers import resolve_offers

    return resolve_offers(scenario, prep.ctx.catalog)


def solve_epoch(prep: Prepared, scenario: Scenario, groups: Sequence[Group], *, goodput_fallback: bool = True) -> EpochSolve:
    """Allocate one epoch: cheapest plan for ``groups``' rates; when none exists and ``goodput_fallback``, the
    largest uniform served fraction α (Coral Sec. 6.4) and the cheapest plan serving it.

    ``scenario`` carries the epoch's availability (overrides/offers), ``current`` (previous allocation) and K.
    """
    import time

    from planning.solve import _plan_result

    t0 = time.perf_counter()
    offers = offers_for(prep, scenario)
    timings: dict[str, float] = {}
    stats: dict[str, float] = {}
    alloc, _problem, _masks = solve_reduced(scenario, groups, prep.sets, offers, None, timings, stats)
    objective = scenario.objective.kind
    if not alloc.has_plan and goodput_fallback and objective == "cost":
        scenario = replace(scenario, objective=Objective(kind="served"))
        objective = "served"
        alloc, _problem, _masks = solve_reduced(scenario, groups, prep.sets, offers, None, timings, stats)
    result = _plan_result(scenario, groups, prep.sets, offers, alloc, [], timings, {})
    counts = {(str(t), str(r)): int(n) for (t, r), n in alloc.counts.items() if n > 0}
    alpha = float(alloc.alpha) if alloc.alpha is not None else (1.0 if alloc.has_plan else 0.0)
    return EpochSolve(result, counts, objective, alpha, time.perf_counter() - t0, bool(alloc.has_plan))


def homogeneous_epoch(prep: Prepared, scenario: Scenario, groups: Sequence[Group], name: str) -> Any:
    """A homogeneous baseline (``"homo"``: Coral's greedy; ``"homo-ilp"``) on the homogeneous templates only;
    ``scenario.current`` holds that baseline's own previous instances."""
    from planning.baselines import run_baseline

    offers = offers_for(prep, scenario)
    problem = allocation_problem(scenario, groups, prep.sets, offers, masks=list(prep.homo_masks))
    return run_baseline(name, problem)


def current_of(counts: Mapping[tuple[str, str], int]) -> tuple[CurrentInstance, ...]:
    """Allocation counts as the scenario's ``current`` (running instances for the next epoch's penalty)."""
    return tuple(CurrentInstance(template_id=t, region=r, count=int(n)) for (t, r), n in sorted(counts.items()) if n > 0)


def capacity(prep: Prepared, counts: Mapping[tuple[str, str], int], groups: Sequence[Group]) -> dict[str, float]:
    """Rate each group's instances serve when carrying the group's class mix (Σ count / Σ_q share_q / T_q)."""
    from planning.solve import _locate

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


# ------------------------------------------------------------------------------------------------------------
# The LP-reduced allocation solve of ``planning.solve.solve_reduced``, with one difference: the columns of the
# running instances (which the reduction must keep) are found through each set's row index, O(running), instead
# of a scan over every template id, O(templates) in Python — seconds per epoch on coral-extended's ~10⁶
# templates. Same certificate, same results (tests/timeline/test_engine.py compares the two).


def _reduction(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet], offers: Sequence[Any],
               served: bool = False) -> Any:
    from planning.allocate.reduce import ColumnBlock, lp_reduction

    regions = sorted({o.region for o in offers})
    shapes = sorted({o.shape for o in offers})
    shape_index = {s: k for k, s in enumerate(shapes)}
    prices = np.full((len(regions), len(shapes)), np.nan)
    available = np.zeros((len(regions), len(shapes)))
    for o in offers:
        prices[regions.index(o.region), shape_index[o.shape]] = o.price_per_hour
        available[regions.index(o.region), shape_index[o.shape]] = o.available
    running = {c.template_id for c in scenario.current if c.count > 0}
    blocks = []
    for ts in sets:
        keep = None
        if running:
            keep = np.zeros(len(ts), dtype=bool)
            rows = [ts.row_of[k] for k in running if k in ts.row_of]
            keep[rows] = True
        blocks.append(ColumnBlock(ts.group.id, ts.shapes, ts.usage, ts.throughput[:, 0], keep))
    demand = {g.id: g.demand for g in groups}
    return lp_reduction(blocks, shape_index, regions, prices, available, demand, scenario.options.K,
                        served=served, budget=scenario.objective.budget_per_hour if served else None), blocks


def _reduced_loop(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet], offers: Sequence[Any],
                  timings: dict[str, float], stats: dict[str, float], objective: str) -> tuple[Any, Any, Any]:
    import time

    from planning.allocate import solve_allocation
    from planning.solve import REDUCE_START_FRACTION, _full

    served = objective == "served"
    t0 = time.perf_counter()
    red, blocks = _reduction(scenario, groups, sets, offers, served=served)
    timings["reduction_lp_seconds"] = timings.get("reduction_lp_seconds", 0.0) + time.perf_counter() - t0
    if not red.feasible_lp:
        return _full(scenario, groups, sets, offers, None, objective)
    threshold = max(REDUCE_START_FRACTION * abs(red.z_lp), 1e-9)
    for _attempt in range(6):
        masks = red.select(threshold, blocks)
        problem = allocation_problem(scenario, groups, sets, offers, masks=masks, objective=objective)
        alloc = solve_allocation(problem)
        bound = red.z_lp + red.min_excluded()
        value = -(alloc.alpha or 0.0) if served else alloc.total_per_hour
        stats["templates_in_ilp"] = float(sum(int(m.sum()) for m in masks))
        if alloc.has_plan and value <= bound + 1e-9 * max(1.0, abs(bound)):
            stats["reduction_certified"] = 1.0
            return alloc, problem, masks
        if not np.isfinite(bound):
            return alloc, problem, masks
        threshold = (value - red.z_lp) if alloc.has_plan else threshold * 4
    return _full(scenario, groups, sets, offers, None, objective)


def solve_reduced(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet], offers: Sequence[Any],
                  _dump: None, timings: dict[str, float], stats: dict[str, float]) -> tuple[Any, Any, Any]:
    """As :func:`planning.solve.solve_reduced` (cost, or served in two certified phases)."""
    from planning.solve import _full, _reducible

    stats["templates_total"] = float(sum(len(ts) for ts in sets))
    objective = scenario.objective.kind
    if not _reducible(scenario, groups, sets):
        return _full(scenario, groups, sets, offers, None, objective)
    if objective == "cost":
        return _reduced_loop(scenario, groups, sets, offers, timings, stats, "cost")
    phase1, problem1, masks1 = _reduced_loop(scenario, groups, sets, offers, timings, stats, "served")
    alpha = float(phase1.alpha or 0.0)
    if not phase1.has_plan or alpha <= 1e-9 or not stats.get("reduction_certified"):
        return phase1, problem1, masks1
    keep = alpha * (1 - 1e-7)
    scaled = [replace(g, classes=tuple(replace(c, rate=c.rate * keep) for c in g.classes)) for g in groups]
    stats.pop("reduction_certified", None)
    alloc, problem, masks = _reduced_loop(scenario, scaled, sets, offers, timings, stats, "cost")
    return replace(alloc, objective="served", alpha=alpha), problem, masks
