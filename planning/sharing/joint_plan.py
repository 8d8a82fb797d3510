"""The joint sharing plan of a scenario: the scenario's models, single-GPU offers and template libraries as a
:class:`planning.sharing.joint.JointInstance`, the joint optimum and the threshold split on it, and the
:class:`planning.sharing.plan.SharingResult` that reports both (issue 27 §1).

Steps (docs/sharing.md, "One model for the split"):
1. Profile every model on the scenario's single-GPU node types (``shared_profiles``); a model may share when it
   fits alone on one of them and, if the user set ``options.sharing_threshold_rps``, its rate is below it (the
   threshold is a constraint in the joint split, the rule in the threshold split).
2. Build every model's template library (``build_template_sets``, cached): each model may be dedicated.
3. ``solve_joint`` twice: free (the joint answer) and with the split fixed by the threshold (what the threshold
   rule alone would give, solved as exactly), so the JSON can say by how much the joint split is cheaper.
4. The dedicated models of the chosen answer are re-planned with ``planning.api.solve`` on what the shared nodes
   leave (its certified optimum costs what the joint model priced; the PlanResult carries placements, baselines
   and diagnostics).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from planning.context import (
    CancelToken,
    Deadline,
    EngineContext,
    ProgressFn,
    check_cancel,
    time_left,
    timed_out,
)
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario
from planning.sharing.joint import DedicatedGroup, JointInstance, JointPlan, solve_joint
from planning.sharing.packing import NodeType, Packing, TailModel, fits
from planning.sharing.profiles import ModelProfile
from planning.templates.sets import TemplateSet

TOL = 1e-6
RESERVE_SHARE = 0.1  # of options.time_limit_s kept for the dedicated models' re-plan


JOINT_MAX_OFFERS = 128
"""Offers (region × shape, plus explicit ones) above which the joint model is not built: it needs every model's
template library over all of them (platform-100's 610 offers took over 120 s in the library build alone); the
threshold split is then solved part by part, the shared part by column generation with its proven bound."""


def supported(scenario: Scenario) -> str | None:
    """Why the joint model does not apply to ``scenario`` (None when it does): it minimises cost with every
    group single-class; a budget, the served objective, histogram demand or more than ``JOINT_MAX_OFFERS``
    offers keep the sequential threshold split."""
    offers = max(1, len(scenario.regions)) * len(scenario.shapes) + len(scenario.offers)
    if offers > JOINT_MAX_OFFERS:
        return f"{offers} offers (more than {JOINT_MAX_OFFERS}: every model's template library over them)"
    if scenario.objective.kind != "cost":
        return "the served objective"
    if scenario.objective.budget_per_hour is not None:
        return "a budget"
    if any(m.demand.histogram for m in scenario.models):
        return "histogram demand"
    return None


def joint_instance(scenario: Scenario, ctx: EngineContext, progress: ProgressFn | None = None,
                   cancel: CancelToken | None = None
                   ) -> tuple[JointInstance, list[ModelProfile], list[NodeType], list[str], list[TemplateSet]]:
    """The joint instance of ``scenario`` (every model may be dedicated; those that fit alone on a single-GPU
    node type and are below the threshold, when one is set, may share): (instance, the shareable models'
    profiles, the node types, the models that fit on no shared node, every group's template set).

    Raises
    ------
    PlanningError
        A model that can neither share nor be dedicated (no template serves it and it fits on no shared node).
    """
    from planning.resolve import resolve_scenario
    from planning.sharing.parts import tail_models
    from planning.sharing.plan import shared_profiles
    from planning.templates.sets import build_template_sets

    threshold = scenario.options.sharing_threshold_rps
    ids = [m.id for m in scenario.models]
    profiles, types = shared_profiles(scenario, ctx, ids)
    tail = tail_models(profiles, types)
    fit_nowhere = [m.id for m in tail if not any(fits([m], t) for t in types)]
    allowed = {m.id for m in scenario.models if threshold is None or m.demand.rate_rps < threshold}
    shareable = [m for m in tail if m.id not in fit_nowhere and m.id in allowed]
    resolved = resolve_scenario(scenario, ctx.catalog)
    sets = build_template_sets(ctx, resolved, progress, cancel)
    shapes = tuple(resolved.shapes)
    groups = []
    for ts in sets:
        g = ts.group
        if len(g.classes) != 1:
            raise PlanningError("models", f"{g.id} has {len(g.classes)} request classes.",
                                "the joint sharing model plans one class per group; use sharing_split: threshold.")
        usage = np.zeros((len(ts), len(shapes)), dtype=np.int64)
        for k, s in enumerate(ts.shapes):
            usage[:, shapes.index(s)] = ts.usage[:, k]
        groups.append(DedicatedGroup(g.id, g.model, g.phase, float(g.demand), usage,
                                     np.asarray(ts.throughput[:, 0], dtype=float), tuple(ts.key(i) for i in range(len(ts)))))
    keep = {m.id for m in shareable}
    for model in ids:  # a model nothing can serve: say so now, with the fix
        dedicated_ok = all(np.any(g.throughput > 0) for g in groups if g.model == model)
        if model not in keep and not dedicated_ok:
            raise PlanningError(f"models.{model}", "has no template that serves it and fits on no shared node.",
                                "relax its SLO, offer larger GPUs, or lower its demand.")
    inst = JointInstance(tuple(shareable), tuple(types), tuple(groups), tuple(resolved.regions), shapes,
                         resolved.price_matrix(shapes), resolved.availability_matrix(shapes), scenario.options.K)
    by_id = {p.id: p for p in profiles}
    return inst, [by_id[m.id] for m in shareable], list(types), fit_nowhere, list(sets)


def plan_of_counts(sub: Scenario, ctx: EngineContext, sets: Sequence[TemplateSet],
                   counts: Mapping[tuple[str, str], int]) -> PlanResult:
    """The PlanResult of ``sub`` (the dedicated models on what the shared nodes leave) over only the templates
    the joint model chose (``counts``: (template key, region) → instances): the allocation ILP over those rows,
    whose optimum is at most the joint model's dedicated cost (its counts fit what the shared nodes leave)."""
    from planning.allocate.certify import solve_certified
    from planning.assemble import build_plan_result
    from planning.pipeline import perf_provenance
    from planning.resolve import resolve_scenario

    resolved = resolve_scenario(sub, ctx.catalog)
    keys = {key for key, _region in counts}
    by_group = {g.id: g for g in resolved.groups}
    rows = []
    for ts in sets:
        if ts.group.id not in by_group:
            continue
        keep = np.array([i for i in range(len(ts)) if ts.key(i) in keys], dtype=np.int64)
        rows.append(replace(ts, group=by_group[ts.group.id], ids=tuple(ts.ids[i] for i in keep),
                            usage=ts.usage[keep], throughput=ts.throughput[keep],
                            stages_json=tuple(ts.stages_json[i] for i in keep),
                            provenance=tuple(ts.provenance[i] for i in keep)))
    t0 = time.perf_counter()
    alloc = solve_certified(resolved, rows)
    return build_plan_result(resolved, rows, alloc.result, [], timings={"allocation_seconds": time.perf_counter() - t0},
                             provenance=perf_provenance(ctx, rows), stats=dict(alloc.stats))


def packing_instance(models: Sequence[TailModel], types: Sequence[NodeType]) -> JointInstance:
    """The joint instance of a packing alone: no dedicated groups, every model fixed to share, the offers those of
    ``types`` (their prices and availability)."""
    regions = tuple(dict.fromkeys(t.key.split(" ", 1)[0] for t in types))
    shapes = tuple(dict.fromkeys(t.key.split(" ", 1)[1] for t in types))
    prices = np.full((len(regions), len(shapes)), np.nan)
    available = np.zeros((len(regions), len(shapes)))
    for t in types:
        r, k = t.key.split(" ", 1)
        prices[regions.index(r), shapes.index(k)] = t.price_per_hour
        available[regions.index(r), shapes.index(k)] = t.available
    return JointInstance(tuple(models), tuple(types), (), regions, shapes, prices, available,
                         fixed_shared=frozenset(m.id for m in models))


def packing_lp(models: Sequence[TailModel], types: Sequence[NodeType], *, time_limit_s: float,
               cancel: CancelToken | None = None, extra: Mapping[tuple[str, str], float] | None = None,
               lp_only: bool = True) -> tuple[float, Mapping[tuple[str, str], float], Mapping[tuple[str, str], float]]:
    """The packing of ``models`` on ``types`` with the offers in ``extra`` dearer by that much per node-hour, by
    column generation: (a lower bound on every packing, −inf when none was proven; the converged LP's node
    prices, empty when it did not converge; nodes per (region, shape): the LP's, fractional, or with ``lp_only``
    False the best plan's, whose ILP and certificate may lift the bound above the LP)."""
    dearer = []
    for t in types:
        region, shape = t.key.split(" ", 1)
        dearer.append(replace(t, price_per_hour=t.price_per_hour + (extra or {}).get((region, shape), 0.0)))
    plan = solve_joint(packing_instance(models, dearer), time_limit_s=time_limit_s, cancel=cancel, lp_only=lp_only)
    if lp_only:
        return plan.bound, plan.node_prices, plan.lp_nodes
    used: dict[tuple[str, str], float] = {}
    for n in plan.nodes:
        region, shape = n.type.split(" ", 1)
        used[(region, shape)] = used.get((region, shape), 0.0) + 1.0
    return plan.bound, plan.node_prices, used


def column_packing(models: Sequence[TailModel], types: Sequence[NodeType], *, time_limit_s: float,
                   cancel: CancelToken | None = None) -> Packing:
    """The cheapest packing of ``models`` (all shared) on ``types`` by the joint model's column generation, with
    its proven gap: the joint instance with no dedicated groups and every model fixed to share.

    Returns
    -------
    Packing with status ``optimal`` (gap 0), ``feasible`` (its gap), ``infeasible`` or ``time_limit``; with the
    converged LP's value and node prices when it converged.
    """
    t0 = time.perf_counter()
    plan = solve_joint(packing_instance(models, types), time_limit_s=time_limit_s, cancel=cancel)
    status = plan.status if plan.has_plan or plan.status == "infeasible" else "time_limit"
    bound = f"${plan.bound:,.2f}/h" if math.isfinite(plan.bound) else "none"
    converged = plan.stats.get("lp_converged", 0.0) == 1.0
    return Packing(plan.nodes, plan.cost_per_hour, status, "exact", plan.gap, time.perf_counter() - t0,
                   (*plan.notes, f"shared part by column generation: lower bound {bound}, "
                    f"{plan.stats.get('lp_rounds', 0):.0f} LP rounds."), bound_per_hour=plan.bound,
                   lp_bound_per_hour=plan.stats.get("lp_bound_per_hour") if converged else None,
                   node_prices=plan.node_prices, time_limited=plan.time_limited)


def threshold_fixed(inst: JointInstance, scenario: Scenario, shareable: Sequence[TailModel]) -> JointInstance:
    """``inst`` with the split fixed as the threshold rule fixes it: every shareable model below the threshold
    (all of them when it is None) shares, the others are dedicated."""
    threshold = scenario.options.sharing_threshold_rps
    rate = {m.id: m.demand.rate_rps for m in scenario.models}
    below = frozenset(m.id for m in shareable if threshold is None or rate[m.id] < threshold)
    return replace(inst, fixed_shared=below, fixed_dedicated=frozenset(m.id for m in shareable) - below)


def _split_fields(split: str, by_rule: JointPlan, free: JointPlan | None, chosen: JointPlan,
                  notes: list[str]) -> dict[str, Any]:
    """The ``SharingResult`` fields that report the split (the threshold split's cost, status and gap, the chosen
    model's bound, gap and stats); notes how much the joint split saves over the threshold split."""
    rule_cost = by_rule.cost_per_hour if by_rule.has_plan else None
    if split == "joint" and free is not None and free.has_plan and rule_cost is not None:
        saved = rule_cost - free.cost_per_hour
        notes.append(f"joint split ${free.cost_per_hour:,.2f}/h vs the threshold split ${rule_cost:,.2f}/h "
                     f"({100 * saved / rule_cost:.2f} % cheaper; both "
                     + ("certified" if free.status == by_rule.status == "optimal" else "with their proven gaps")
                     + ").")
    return {"split": split, "threshold_split_cost_per_hour": rule_cost, "threshold_split_status": by_rule.status,
            "threshold_split_gap": by_rule.gap, "bound_per_hour": chosen.bound if math.isfinite(chosen.bound) else None,
            "gap": chosen.gap, "stats": dict(chosen.stats)}


def _never_dearer(sub: Scenario, ctx: EngineContext, sets: Sequence[TemplateSet], chosen: JointPlan, dedicated: PlanResult,
                  notes: list[str]) -> PlanResult:
    """The dedicated re-plan, or the joint model's own instance counts planned on what the shared nodes leave when
    the re-plan stopped above what the joint model priced (its own limit): never dearer."""
    if not (not dedicated.has_plan or dedicated.cost_per_hour > chosen.dedicated_cost_per_hour * (1 + 1e-6) + TOL):
        return dedicated
    own = plan_of_counts(sub, ctx, sets, chosen.counts)
    if not (own.has_plan and (not dedicated.has_plan or own.cost_per_hour < dedicated.cost_per_hour - TOL)):
        return dedicated
    was = (f"${dedicated.cost_per_hour:,.2f}/h, status {dedicated.status}" if dedicated.has_plan
           else f"no plan, status {dedicated.status}")
    notes.append(f"the dedicated models are planned with the joint model's own instances "
                 f"(${own.cost_per_hour:,.2f}/h): the allocation engine's re-plan on what the shared "
                 f"nodes leave stopped above it ({was}).")
    # the joint certificate covers shared + dedicated together: the joint status and gap hold
    return replace(own, status="optimal" if chosen.status == "optimal" else "feasible", mip_gap=chosen.gap,
                   baselines=dedicated.baselines)


def solve_joint_sharing(scenario: Scenario, ctx: EngineContext, *, split: str,
                        solve_dedicated: Callable[[Scenario], PlanResult] | None = None,
                        progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                        baselines: bool = True) -> object:
    """The shared plan by the joint model (``split="joint"``) or by the threshold rule solved exactly
    (``"threshold"``); both costs are reported. Returns a ``planning.sharing.plan.SharingResult``.

    Parameters
    ----------
    scenario:
        A cost-objective scenario without a budget or histograms (:func:`supported`).
    ctx:
        Engine context.
    split:
        ``"joint"`` or ``"threshold"``.
    solve_dedicated:
        ``f(scenario) -> PlanResult`` for the dedicated models (default ``planning.pipeline.solve`` under ``ctx``).
    progress, cancel:
        The run contract; ``options.time_limit_s`` bounds the whole call (both solves and the re-plan).
    baselines:
        The dedicated re-plan with its baselines (False: without; a timeline epoch shows none).
    """
    from planning.pipeline import solve as solve_plan
    from planning.sharing.parts import as_asked, remaining, resolve_parts, shared_nodes
    from planning.sharing.plan import MIN_PART_S, SharingResult, models_subset

    t0 = time.perf_counter()
    limit = scenario.options.time_limit_s

    def step(fraction: float, message: str) -> None:
        if cancel is not None and cancel.is_set() and not timed_out(cancel):
            check_cancel(cancel, message)  # the caller's cancel; the deadline stops the solves, not the report
        if progress is not None:
            progress(fraction, message)

    step(0.0, "sharing: profiles and template libraries of every model")
    inst, profiles, types, fit_nowhere, sets = joint_instance(scenario, ctx, None, cancel)
    shareable = inst.shareable
    notes: list[str] = []
    if fit_nowhere:
        notes.append(f"{len(fit_nowhere)} models fit on no single-GPU node (memory, compute, TTFT) and are "
                     f"dedicated: {', '.join(fit_nowhere)}.")
    fixed = threshold_fixed(inst, scenario, shareable)
    t1 = time.perf_counter()
    step(0.2, "sharing: the threshold split, solved exactly")
    reserve = max(MIN_PART_S, RESERVE_SHARE * limit)  # the dedicated re-plan's share of the limit
    # both solves stop on work (joint.JointWork); the time left is only their safety net
    by_rule = solve_joint(fixed, time_limit_s=max(0.1, time_left(cancel, limit) - reserve), cancel=cancel)
    chosen = by_rule
    free: JointPlan | None = None
    if split == "joint":
        step(0.4, "sharing: the joint split (which models share, which are dedicated, how nodes are packed)")
        free = solve_joint(inst, time_limit_s=max(0.1, time_left(cancel, limit) - reserve), cancel=cancel,
                           start=by_rule if by_rule.has_plan else None)
        chosen = free
    seconds = {"profile_seconds": t1 - t0, "joint_seconds": time.perf_counter() - t1}
    notes.extend(chosen.notes)
    threshold = scenario.options.sharing_threshold_rps
    extra = _split_fields(split, by_rule, free, chosen, notes)
    if not chosen.has_plan:
        return SharingResult(sharing="exact", status=chosen.status, threshold_rps=threshold, shared_nodes=(),
                             shared_cost_per_hour=math.inf, shared_status=chosen.status, shared_gap=chosen.gap,
                             dedicated=None, shared_models=tuple(m.id for m in shareable),
                             dedicated_models=tuple(inst.models), timings={**seconds}, notes=tuple(notes),
                             time_limited=chosen.time_limited or by_rule.time_limited, **extra)
    packing = Packing(chosen.nodes, chosen.shared_cost_per_hour, chosen.status, "exact", chosen.gap)
    nodes = shared_nodes(packing, profiles, types)
    dedicated_ids = list(chosen.dedicated)
    dedicated: PlanResult | None = None
    if dedicated_ids:
        step(0.8, f"dedicated templates for {len(dedicated_ids)} models on what the shared nodes leave")
        offers, _ = resolve_parts(scenario, ctx.catalog)
        sub = replace(scenario, models=models_subset(scenario, dedicated_ids),
                      options=replace(scenario.options, sharing="off"))
        sub = remaining(sub, offers, nodes)
        if solve_dedicated is not None:
            dedicated = solve_dedicated(sub)
        else:
            left = time_left(cancel, limit, MIN_PART_S)  # the re-plan's safety net
            part = replace(sub, options=replace(sub.options, time_limit_s=left))
            dedicated = as_asked(solve_plan(part, context=ctx, cancel=cancel.inner if isinstance(cancel, Deadline)
                                            else cancel, with_baselines=baselines), limit, left)
        dedicated = _never_dearer(sub, ctx, sets, chosen, dedicated, notes)
    ok = dedicated is None or dedicated.has_plan
    status = ("optimal" if chosen.status == "optimal" and (dedicated is None or dedicated.status == "optimal")
              else "feasible") if ok else (dedicated.status if dedicated is not None else "infeasible")
    seconds["total_seconds"] = time.perf_counter() - t0
    shared_ids = tuple(m for n in chosen.nodes for m in n.models)
    return SharingResult(sharing="exact", status=status, threshold_rps=threshold, shared_nodes=nodes,
                         shared_cost_per_hour=chosen.shared_cost_per_hour, shared_status=chosen.status,
                         shared_gap=chosen.gap, dedicated=dedicated, shared_models=shared_ids,
                         dedicated_models=tuple(dedicated_ids), timings=seconds, notes=tuple(notes),
                         time_limited=chosen.time_limited or by_rule.time_limited, **extra)
