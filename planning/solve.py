"""Plan a scenario end to end: offers → perf tables → template libraries → allocation ILP → baselines → PlanResult.

Groups and units
----------------
Disaggregated mode (Coral) plans two groups per model: ``{model}/prefill`` (rate in prompt tokens/s, SLO =
prefill latency) and ``{model}/decode`` (rate in output tokens/s, SLO = per-token latency). Aggregated mode
(Mélange) plans one group ``{model}/aggregated`` in requests/s: an instance that reaches T_p prompt tokens/s and
T_d output tokens/s on the same nodes serves ``1 / (I/T_p + O/T_d)`` requests/s of mean size (I, O), i.e. it
time-shares its nodes between the two phases (both under their SLOs).

Workload classes
----------------
A plain demand is one class per group. A request-size histogram gives one class per bucket; a template's
placement is optimised for the group's mean request, and its throughput for bucket q is that same placement
evaluated on the perf tables of bucket q's sizes (min over stages of the stage's summed T̂).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from planning.catalog.schema import Catalog, ModelSpec, shape_gpu, shape_order
from planning.errors import PlanningError
from planning.groups import Group, WorkClass, plan_groups, resolve_models
from planning.offers import ResolvedOffer, resolve_offers
from planning.result import BaselineSummary, CapacityUse, CostLine, GroupService, InstancePlan, PlanResult
from planning.scenario import Scenario
from planning.template_sets import (
    Cancelled,
    CancelToken,
    EngineContext,
    ProgressFn,
    TemplateSet,
    build_template_sets,
    check_cancel,
    evaluate_stages,
    gpu_provenance,
    stages_from_placement,
)

__all__ = [
    "CancelToken",
    "Cancelled",
    "EngineContext",
    "Group",
    "ProgressFn",
    "TemplateSet",
    "WorkClass",
    "allocation_problem",
    "build_template_sets",
    "default_context",
    "evaluate_stages",
    "plan_groups",
    "resolve_models",
    "resolve_scenario",
    "solve",
    "stages_from_placement",
]

REDUCE_MIN_TEMPLATES = 1500  # below this the ILP is solved over all templates directly
REDUCE_START_FRACTION = 0.003  # first reduced-cost threshold: 0.3 % of the LP bound


def _template_options(sets: Sequence[TemplateSet], masks: Sequence[np.ndarray] | None = None) -> Iterator[Any]:
    from planning.allocate import TemplateOption

    for si, ts in enumerate(sets):
        useful = np.asarray((ts.throughput > 0).any(axis=1), dtype=bool)
        if masks is not None:
            useful &= masks[si]
        for row in np.flatnonzero(useful):
            i = int(row)
            yield TemplateOption(id=ts.key(i), group=ts.group.id, usage=ts.usage_dict(i),
                                 throughput=ts.throughput_dict(i), homogeneous=bool(ts.homogeneous[i]),
                                 gpu_types=ts.gpu_types(i))


def allocation_problem(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                       offers: Sequence[ResolvedOffer], *, objective: str | None = None,
                       dump_model: str | None = None, masks: Sequence[np.ndarray] | None = None) -> Any:
    """The allocation model's explicit inputs (``planning.allocate.AllocationProblem``), optionally restricted
    to the template rows in ``masks`` (one boolean array per set)."""
    from planning.allocate import AllocationProblem, Offer, WorkloadClass

    templates = tuple(_template_options(sets, masks))
    classes = tuple(WorkloadClass(id=c.id, group=g.id, rate=c.rate) for g in groups for c in g.classes)
    current = {(c.template_id, c.region): c.count for c in scenario.current}
    known = {t.id for t in templates}
    for i, (tid, _region) in enumerate(current):
        if tid not in known:
            raise PlanningError(f"current[{i}].template_id", f"{tid!r} is not a template of this scenario.",
                                "use ids from `planning templates` (\"model/phase:template\").")
    return AllocationProblem(
        templates=templates,
        offers=tuple(Offer(region=o.region, shape=o.shape, price_per_hour=o.price_per_hour, available=o.available)
                     for o in offers),
        classes=classes, current=current, K=scenario.options.K,
        objective=cast(Any, objective or scenario.objective.kind),
        budget_per_hour=scenario.objective.budget_per_hour, solver=cast(Any, scenario.options.solver),
        time_limit_s=scenario.options.time_limit_s, mip_rel_gap=scenario.options.mip_rel_gap,
        dump_model=str(dump_model) if dump_model else None,
    )


def _reducible(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet]) -> bool:
    return all(len(g.classes) == 1 for g in groups) and sum(len(ts) for ts in sets) >= REDUCE_MIN_TEMPLATES


def _reduction(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
               offers: Sequence[ResolvedOffer], served: bool = False) -> Any:
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
        keep = np.array([ts.key(i) in running for i in range(len(ts))], dtype=bool) if running else None
        blocks.append(ColumnBlock(ts.group.id, ts.shapes, ts.usage, ts.throughput[:, 0], keep))
    demand = {g.id: g.demand for g in groups}
    return lp_reduction(blocks, shape_index, regions, prices, available, demand, scenario.options.K,
                        served=served, budget=scenario.objective.budget_per_hour if served else None), blocks


def _full(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet], offers: Sequence[ResolvedOffer],
          dump_model: str | None, objective: str) -> tuple[Any, Any, None]:
    from planning.allocate import solve_allocation

    problem = allocation_problem(scenario, groups, sets, offers, dump_model=dump_model, objective=objective)
    return solve_allocation(problem), problem, None


def _reduced_loop(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                  offers: Sequence[ResolvedOffer], dump_model: str | None, timings: dict[str, float],
                  stats: dict[str, float], objective: str) -> tuple[Any, Any, list[np.ndarray] | None]:
    """ILP over the LP-reduced columns until the certificate holds (objective "cost": value = cost;
    "served": value = −α of phase 1)."""
    from planning.allocate import solve_allocation

    served = objective == "served"
    t0 = time.perf_counter()
    red, blocks = _reduction(scenario, groups, sets, offers, served=served)
    timings["reduction_lp_seconds"] = timings.get("reduction_lp_seconds", 0.0) + time.perf_counter() - t0
    if not red.feasible_lp:  # the LP relaxation is infeasible (or did not converge): no reduction
        return _full(scenario, groups, sets, offers, dump_model, objective)
    threshold = max(REDUCE_START_FRACTION * abs(red.z_lp), 1e-9)
    for _attempt in range(6):
        masks = red.select(threshold, blocks)
        problem = allocation_problem(scenario, groups, sets, offers, dump_model=dump_model, masks=masks,
                                     objective=objective)
        alloc = solve_allocation(problem)
        bound = red.z_lp + red.min_excluded()
        value = -(alloc.alpha or 0.0) if served else alloc.total_per_hour
        stats["templates_in_ilp"] = float(sum(int(m.sum()) for m in masks))
        stats["lp_bound_alpha" if served else "lp_bound_per_hour"] = -red.z_lp if served else red.z_lp
        if alloc.has_plan and value <= bound + 1e-9 * max(1.0, abs(bound)):
            stats["reduction_certified"] = 1.0
            return alloc, problem, masks
        if not np.isfinite(bound):  # every template was already in the ILP
            return alloc, problem, masks
        threshold = (value - red.z_lp) if alloc.has_plan else threshold * 4
    return _full(scenario, groups, sets, offers, dump_model, objective)


def solve_reduced(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                  offers: Sequence[ResolvedOffer], dump_model: str | None,
                  timings: dict[str, float], stats: dict[str, float] | None = None) -> tuple[Any, Any, list[np.ndarray] | None]:
    """Solve the allocation ILP, over the LP-reduced template set when that is provably lossless.

    Returns the AllocationResult, the AllocationProblem actually solved and the masks used (None = all).
    See ``planning.allocate.reduce`` for the certificate: a plan of cost ≤ z_LP + (smallest reduced cost of
    an excluded column) is optimal over all templates; otherwise the threshold grows and the ILP is re-solved.
    The served objective is certified the same way in two phases: max α (served LP), then the cost problem
    at demand α*·D (the cost LP), whose optimum is the cheapest plan serving α*.
    """
    stats = stats if stats is not None else {}
    stats["templates_total"] = float(sum(len(ts) for ts in sets))
    objective = scenario.objective.kind
    if not _reducible(scenario, groups, sets):
        return _full(scenario, groups, sets, offers, dump_model, objective)
    if objective == "cost":
        return _reduced_loop(scenario, groups, sets, offers, dump_model, timings, stats, "cost")
    phase1, problem1, masks1 = _reduced_loop(scenario, groups, sets, offers, None, timings, stats, "served")
    alpha = float(phase1.alpha or 0.0)
    if not phase1.has_plan or alpha <= 1e-9 or not stats.get("reduction_certified"):
        return phase1, problem1, masks1
    stats["phase1_alpha"] = alpha
    keep = alpha * (1 - 1e-7)  # the same tolerance as the allocation's own phase 2
    scaled = [replace(g, classes=tuple(replace(c, rate=c.rate * keep) for c in g.classes)) for g in groups]
    stats.pop("reduction_certified", None)
    alloc, problem, masks = _reduced_loop(scenario, scaled, sets, offers, dump_model, timings, stats, "cost")
    return replace(alloc, objective="served", alpha=alpha), problem, masks


def _baseline_problem(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                      offers: Sequence[ResolvedOffer], masks: Sequence[np.ndarray] | None) -> Any:
    """Templates the baselines may use: every single-GPU-type template (Homo, Homo-ILP, single type) plus the
    plan's candidate set (memP's per-group cheapest plans)."""
    if masks is None:
        return allocation_problem(scenario, groups, sets, offers)
    keep = []
    for ts, m in zip(sets, masks, strict=True):
        gpu_of = np.array(ts.shape_gpus)
        single = np.array([len(set(gpu_of[ts.usage[i] > 0])) == 1 for i in range(len(ts))], dtype=bool)
        keep.append(single | m)
    return allocation_problem(scenario, groups, sets, offers, masks=keep)


def _locate(sets: Sequence[TemplateSet], key: str) -> tuple[TemplateSet, int]:
    """The set and row of an allocation template id (explicit ids as given, generated "group:id")."""
    for ts in sets:
        row = ts.row_of.get(key) if ts.explicit or key.startswith(ts.group.id + ":") else None
        if row is not None:
            return ts, row
    raise KeyError(key)


def _plan_result(scenario: Scenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                 offers: Sequence[ResolvedOffer], alloc: Any, baselines: Sequence[BaselineSummary],
                 timings: Mapping[str, float], perf_provenance: Mapping[str, str]) -> PlanResult:
    offer_by_key = {(o.region, o.shape): o for o in offers}
    group_by_id = {g.id: g for g in groups}
    instances: list[InstancePlan] = []
    lines: list[CostLine] = []
    load: dict[tuple[str, str], float] = {}
    class_col = {c.id: j for g in groups for j, c in enumerate(g.classes)}
    for (cid, tid, region), rate in alloc.assignment.items():
        ts, row = _locate(sets, tid)
        t = float(ts.throughput[row, class_col[cid]])
        if t > 0:
            load[(tid, region)] = load.get((tid, region), 0.0) + rate / t
    for (tid, region), n in sorted(alloc.counts.items()):
        if n <= 0:
            continue
        ts, row = _locate(sets, tid)
        group = group_by_id[ts.group.id]
        usage = ts.usage_dict(row)
        price = sum(offer_by_key[(region, s)].price_per_hour * c for s, c in usage.items())
        instances.append(InstancePlan(
            model=group.model, phase=group.phase, template_id=ts.ids[row], region=region, count=int(n), usage=usage,
            gpus=ts.gpus(row), throughput=float(ts.throughput[row].max()), throughput_unit=group.unit,
            load=min(float(n), load.get((tid, region), 0.0)), cost_per_hour=price * n,
            homogeneous=bool(ts.homogeneous[row]), stages=ts.stages(row), provenance=ts.provenance[row]))
        for s, c in usage.items():
            lines.append(CostLine(group.model, group.phase, region, s, c * int(n),
                                  offer_by_key[(region, s)].price_per_hour * c * int(n)))
    penalty = float(alloc.penalty_per_hour or 0.0)
    if penalty > 0:
        lines.append(CostLine("(all)", "(init penalty)", "(all)", "(all)", 0, penalty, kind="penalty"))
    used: dict[tuple[str, str], int] = {k: int(v) for k, v in alloc.nodes_used.items()}
    capacity = tuple(CapacityUse(o.region, o.shape, o.gpu, used.get((o.region, o.shape), 0), o.available, o.price_per_hour)
                     for o in offers)
    served_rate: dict[str, float] = {}
    for (cid, _tid, _r), rate in alloc.assignment.items():
        served_rate[cid] = served_rate.get(cid, 0.0) + rate
    service = tuple(GroupService(g.model, g.phase, g.demand, sum(min(served_rate.get(c.id, 0.0), c.rate) for c in g.classes), g.unit)
                    for g in groups)
    provisioning = float(alloc.cost_per_hour or 0.0)
    total = provisioning + penalty
    adjusted = tuple(
        BaselineSummary(**{**b.__dict__, "savings_pct": (100.0 * (1 - total / b.cost_per_hour)
                                                          if b.feasible and b.cost_per_hour > 0 and alloc.has_plan else None)})
        for b in baselines)
    diagnostics = [*alloc.messages]
    for d in alloc.diagnostics:
        diagnostics.append(f"{d.group}: at most {d.alone_fraction:.1%} of demand alone, {d.joint_fraction:.1%} jointly"
                           + (f"; binding: {', '.join(d.binding)}" if d.binding else ""))
    counts: dict[str, int] = {}
    for ts in sets:
        counts[ts.group.id] = counts.get(ts.group.id, 0) + len(ts)
    served_fraction = min((s.fraction for s in service), default=1.0) if alloc.has_plan else 0.0
    return PlanResult(
        status=alloc.status, objective=alloc.objective, cost_per_hour=total, provisioning_per_hour=provisioning,
        penalty_per_hour=penalty, served_fraction=served_fraction, mip_gap=alloc.gap, instances=tuple(instances),
        cost_lines=tuple(lines), capacity=capacity, service=service, baselines=adjusted, timings=dict(timings),
        provenance=dict(perf_provenance), diagnostics=tuple(diagnostics), template_counts=counts,
        scenario=scenario.to_dict(),
        message="" if alloc.has_plan else "No plan: see diagnostics for the best achievable fraction per model.",
    )


def _baselines(problem: Any, scenario: Scenario, groups: Sequence[Group], specs: Mapping[str, ModelSpec],
               catalog: Catalog, cancel: CancelToken | None) -> list[BaselineSummary]:
    from planning.baselines import run_all_baselines

    out = []
    model_size = {g.id: specs[g.model].weight_bytes() for g in groups}
    request_rate = {g.id: scenario.model(g.model).demand.rate_rps for g in groups}
    gpu_memory = {gid: gpu.memory_gb for gid, gpu in catalog.gpus.items()}
    for b in run_all_baselines(problem, model_size=model_size, gpu_memory_gb=gpu_memory, request_rate=request_rate):
        check_cancel(cancel)
        out.append(BaselineSummary(name=b.name, cost_per_hour=float(b.cost_per_hour) + float(b.penalty_per_hour),
                                   served_fraction=float(b.served_fraction_min), feasible=bool(b.feasible),
                                   served_by_group=dict(b.served_fraction), gpus=dict(b.gpus_used), note=str(b.note)))
    return out


@dataclass(frozen=True)
class ResolvedScenario:
    """A scenario resolved against the catalog: what can be bought, which models, which groups."""

    offers: list[ResolvedOffer]
    specs: dict[str, ModelSpec]
    groups: list[Group]
    shapes: list[str]  # every offered shape, ordered by GPU then count


def resolve_scenario(scenario: Scenario, catalog: Catalog) -> ResolvedScenario:
    """Offers, model specs and (model, phase) groups of a scenario — the first step of every use case.

    Raises
    ------
    PlanningError
        Unknown ids or nothing purchasable, naming the field and the fix.
    """
    offers = resolve_offers(scenario, catalog)
    return ResolvedScenario(offers=offers, specs=resolve_models(scenario, catalog), groups=plan_groups(scenario),
                            shapes=sorted({o.shape for o in offers}, key=shape_order))


def default_context(cache_dir: Path | None = None) -> EngineContext:
    """Catalog + perf model loaded from the shipped data (and user overrides under PLANNING_HOME)."""
    from planning.catalog import load_catalog
    from planning.perf import PerfModel

    catalog = load_catalog()
    return EngineContext(catalog=catalog, perf=PerfModel(catalog=catalog), cache_dir=cache_dir)


def solve(scenario: Scenario, *, context: EngineContext | None = None, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None, dump_model: str | Path | None = None,
          with_baselines: bool = True) -> PlanResult:
    """Plan ``scenario``: cheapest cluster (or most demand served) with placements and baselines.

    Parameters
    ----------
    scenario:
        A validated Scenario.
    context:
        Loaded catalog/perf model/cache (default: shipped data, cache under PLANNING_HOME).
    progress:
        ``progress(fraction, message)`` called while templates are built and the ILP runs.
    cancel:
        Anything with ``is_set()``; checked between steps → :class:`Cancelled`.
    dump_model:
        Write the allocation model to this ``.lp``/``.mps`` path.

    Returns
    -------
    PlanResult
        Never None: infeasible plans carry a status and diagnostics.

    Raises
    ------
    PlanningError
        Inputs that cannot be planned (unknown ids, nothing purchasable), with the fix.
    Cancelled
        When ``cancel`` is set.
    """
    t0 = time.perf_counter()
    ctx = context or default_context()
    timings: dict[str, float] = {}
    resolved = resolve_scenario(scenario, ctx.catalog)
    offers, specs, groups, shapes = resolved.offers, resolved.specs, resolved.groups, resolved.shapes
    timings["resolve_seconds"] = time.perf_counter() - t0
    if progress:
        progress(0.02, "building serving templates")
    t1 = time.perf_counter()
    stats: dict[str, float] = {}
    on_demand = None
    if scenario.options.templates == "on-demand":  # templates generated by the LP's pricing search
        from planning.allocate.pricing import solve_on_demand

        on_demand = solve_on_demand(ctx, scenario, specs, groups, shapes, offers, timings, stats, progress, cancel)
        timings["allocation_seconds"] = time.perf_counter() - t1
    if on_demand is not None:
        sets, alloc, masks = on_demand
    else:
        sets = build_template_sets(ctx, scenario, specs, groups, shapes,
                                   (lambda f, m: progress(0.02 + 0.78 * f, m)) if progress else None, cancel)
        timings["templates_seconds"] = time.perf_counter() - t1
        check_cancel(cancel)
        if progress:
            progress(0.8, "solving the allocation ILP")
        t2 = time.perf_counter()
        alloc, _problem, masks = solve_reduced(scenario, groups, sets, offers, str(dump_model) if dump_model else None,
                                               timings, stats)
        timings["allocation_seconds"] = time.perf_counter() - t2
    check_cancel(cancel)
    t3 = time.perf_counter()
    baselines = (_baselines(_baseline_problem(scenario, groups, sets, offers, masks), scenario, groups, specs,
                            ctx.catalog, cancel) if with_baselines else [])
    timings["baselines_seconds"] = time.perf_counter() - t3
    timings["total_seconds"] = time.perf_counter() - t0
    if progress:
        progress(1.0, "done")
    provenance = {}
    for gpu in sorted({shape_gpu(s) for ts in sets if not ts.explicit for s in ts.shapes}):
        prov, band_p, band_d = gpu_provenance(ctx, gpu)
        provenance[gpu] = f"{prov} (±{band_p:.0%} prefill, ±{band_d:.0%} decode)"
    if any(ts.explicit for ts in sets):
        provenance["explicit templates"] = "given in the scenario"
    result = _plan_result(scenario, groups, sets, offers, alloc, baselines, timings, provenance)
    return replace(result, stats=stats)
