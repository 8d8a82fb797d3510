"""Why a plan falls short, in the scenario's terms: SLO, memory and budget causes with the value that would work.

The allocation layer (``planning.allocate.diagnostics``) knows templates, offers and capacities; it cannot say
*why* a group has no template. This step can, because it sees the perf model and the scenario:

- memory: no node multiset within Nmax nodes and ρ × weights can hold the model's layers (checked on the
  stage tables at an unbounded SLO: a pipeline of S nodes of shape k exists iff T̂_k[S, ⌈L/S⌉] > 0, S ≤ Nmax,
  S · mem_k ≤ ρ · W — the balanced split is the easiest to hold and to meet, and S copies of the best shape
  dominate any mix);
- SLO: templates exist at an unbounded SLO but none at the scenario's: the tightest SLO any template could meet
  is found by bisection on the same predicate (≈ 1 % precision) and given as the value to relax to;
- budget: the served objective under ``budget_per_hour`` reaches α < 1: the cost optimum without the budget is
  the budget that would serve 100 % (certified like every cost solve); α = 0 is reported as ``infeasible``;
- capacity: a served plan without a budget below 100 % gets the allocation diagnostics of the cost problem
  (nodes short per region/shape), up to EXPLAIN_MAX_TEMPLATES templates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from planning.catalog.schema import ModelSpec, parse_shape
from planning.context import CancelToken, check_cancel, time_left
from planning.groups import DEFAULT_PREFILL_BUDGET_MS, Group
from planning.result import PlanResult
from planning.scenario import Objective, Scenario
from planning.scenario_fields import BOUNDS

if TYPE_CHECKING:
    from planning.context import EngineContext
    from planning.resolve import ResolvedScenario
    from planning.templates.sets import TemplateSet

UNBOUNDED_SLO_MS = 1e7
EXPLAIN_SECONDS = 10.0  # time limit of the extra cost solve that prices 100 % under a binding budget
EXPLAIN_MAX_TEMPLATES = 20_000  # a served plan below 100 % is diagnosed on the full problem up to this size
_BISECTION_STEPS = 30


def _sig3(x: float) -> str:
    """Three significant digits without exponent notation (2840, 22.5, 0.731)."""
    return f"{float(format(x, '.3g')):g}"


def _holdable(ctx: EngineContext, spec: ModelSpec, shapes: Sequence[str], phase: str, slo_ms: float,
              sizes: tuple[float, float],
              scenario: Scenario, ttft_ms: float | None = None) -> tuple[str, int] | None:
    """(shape, stages) of the first pipeline of identical nodes that holds the model and meets ``slo_ms``
    within Nmax and ρ, or None. ``phase`` "aggregated": ``slo_ms`` is the TPOT and ``ttft_ms`` the TTFT."""
    from planning.perf import Workload

    opts = scenario.options
    tables = np.asarray(ctx.perf.stage_tables(spec, list(shapes), phase, slo_ms,
                                              Workload(input_len=sizes[0], output_len=sizes[1]), opts.max_stages,
                                              ttft_ms=ttft_ms))
    cap = opts.rho * spec.weight_bytes() / 1e9 * (1 + 1e-12)
    layers = spec.layers
    for s in range(1, min(opts.nmax, opts.max_stages) + 1):
        j = math.ceil(layers / s)
        for k, shape in enumerate(shapes):
            mem = ctx.catalog.gpus[parse_shape(shape)[1]].memory_gb * parse_shape(shape)[0]
            if tables[k, s - 1, j - 1] > 0 and s * mem <= cap:
                return shape, s
    return None


holdable = _holdable  # public for planning.precheck, which checks that the SLO its fix suggests is met


def _memory_sentence(ctx: EngineContext, spec: ModelSpec, group: Group, shapes: Sequence[str], scenario: Scenario,
                     sizes: tuple[float, float], phase: str) -> str:
    opts = scenario.options
    weights = spec.weight_bytes() / 1e9
    mems = {s: ctx.catalog.gpus[parse_shape(s)[1]].memory_gb * parse_shape(s)[0] for s in shapes}
    widest = max(shapes, key=lambda s: mems[s])
    # the loosest search the validator admits: every node may join, memory cap at its bound (1000 × weights)
    loose = replace(scenario, options=replace(opts, nmax=min(max(opts.max_stages, opts.nmax), int(BOUNDS["nmax"][0])),
                                              rho=BOUNDS["rho"][0]))
    fit = _holdable(ctx, spec, shapes, phase, UNBOUNDED_SLO_MS, sizes, loose)
    if fit is None:
        fix = (f"add shapes with more memory than {widest} ({mems[widest]:.0f} GB) or raise options.max_stages "
               f"above {opts.max_stages}")
    elif fit[1] > opts.nmax:
        fix = f"raise options.nmax to ≥ {fit[1]} ({fit[1]} × {fit[0]}), or add shapes with more memory per node"
    else:
        need_rho = fit[1] * mems[fit[0]] / weights
        fix = f"raise options.rho to ≥ {math.ceil(need_rho * 10) / 10:g} ({fit[1]} × {fit[0]} holds the model)"
    return (f"{group.id}: memory binds — no template can hold {spec.id} ({weights:.0f} GB of weights, "
            f"{spec.layers} layers) within nmax = {opts.nmax} nodes and ρ = {opts.rho:g} × weights; the largest "
            f"node offered is {widest} ({mems[widest]:.0f} GB). Fix: {fix}.")


def _tightest_slo(ctx: EngineContext, spec: ModelSpec, shapes: Sequence[str], phase: str, slo_ms: float,
                  sizes: tuple[float, float], scenario: Scenario,
                  aggregated_tpot_ms: float | None = None) -> tuple[float, str, int] | None:
    """Smallest SLO (ms, ≈ 1 %) at which some template exists, with its shape and stage count.
    ``aggregated_tpot_ms``: search the TTFT of the aggregated tables at this TPOT instead of ``phase``'s SLO."""

    def holdable(slo: float) -> tuple[str, int] | None:
        if aggregated_tpot_ms is not None:
            return _holdable(ctx, spec, shapes, "aggregated", aggregated_tpot_ms, sizes, scenario, ttft_ms=slo)
        return _holdable(ctx, spec, shapes, phase, slo, sizes, scenario)

    lo, hi = slo_ms, UNBOUNDED_SLO_MS
    best = holdable(hi)
    if best is None:
        return None
    for _ in range(_BISECTION_STEPS):
        if hi <= lo * 1.01:
            break
        mid = math.sqrt(lo * hi)
        found = holdable(mid)
        if found is None:
            lo = mid
        else:
            hi, best = mid, found
    return hi, best[0], best[1]


def slo_or_memory(ctx: EngineContext, scenario: Scenario, spec: ModelSpec, group: Group, shapes: Sequence[str],
                  sizes: tuple[float, float] | None = None) -> str | None:
    """The sentence for a group without any template: the SLO that binds with the tightest one a template meets,
    or the memory that binds with its fix (None when neither explains it); used by ``planning.precheck``."""
    return _slo_or_memory(ctx, scenario, spec, group, shapes, sizes)


def _slo_or_memory(ctx: EngineContext, scenario: Scenario, spec: ModelSpec, group: Group, shapes: Sequence[str],
                   sizes: tuple[float, float] | None = None) -> str | None:
    """The sentence for a generated group without any template (None when neither SLO nor memory explains it);
    ``sizes`` checks one request size (a histogram bucket) instead of the group's mean."""
    total = group.demand
    if sizes is not None:
        pass
    elif total > 0:
        sizes = (sum(c.rate * c.input_len for c in group.classes) / total,
                 sum(c.rate * c.output_len for c in group.classes) / total)
    else:
        sizes = (group.classes[0].input_len, group.classes[0].output_len)
    req = scenario.model(group.model)
    index = next(i for i, m in enumerate(scenario.models) if m.id == group.model)
    if group.phase == "aggregated":
        phases = [("prefill", float(req.slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS), "prefill_ms"),
                  ("decode", group.slo_ms, "decode_ms")]
    else:
        phases = [(group.phase, group.slo_ms, "prefill_ms" if group.phase == "prefill" else "decode_ms")]
    for phase, slo, field in phases:
        if not slo > 0:
            continue
        if _holdable(ctx, spec, shapes, phase, slo, sizes, scenario) is not None:
            continue
        tight = _tightest_slo(ctx, spec, shapes, phase, slo, sizes, scenario)
        if group.phase == "aggregated" and phase == "prefill" and tight is not None:
            # The aggregated tables step with SLO-sized chunks and hold TTFT to SLO / prefill_headroom: the TTFT
            # that makes a template exist there at the given TPOT, not the separate prefill table's.
            agg = _tightest_slo(ctx, spec, shapes, phase, slo, sizes, scenario, aggregated_tpot_ms=group.slo_ms)
            tight = agg if agg is not None else tight
        if tight is None:
            return _memory_sentence(ctx, spec, group, shapes, scenario, sizes, phase)
        ms, shape, stages = tight
        what = "TTFT (prefill)" if phase == "prefill" else "TPOT (decode)"
        given = "the default prefill budget of" if field == "prefill_ms" and req.slo.prefill_ms is None else "the"
        return (f"{group.id}: SLO binds — no template meets {given} {what} SLO of {slo:g} ms; the tightest any "
                f"template can meet is ≈ {_sig3(ms)} ms ({stages} × {shape}). Fix: relax "
                f"models[{index}].slo.{field} to ≥ {math.ceil(ms * 1.02 * 10) / 10:g} ms, or add faster shapes.")
    return None


def _budget_explanation(resolved: ResolvedScenario, sets: Sequence[TemplateSet], served: float,
                        cancel: CancelToken | None = None) -> list[str]:
    """What serving 100 % would take when a budget keeps α < 1: the cost optimum without the budget (certified
    like every cost solve, within EXPLAIN_SECONDS), or — when even that is infeasible — the cost problem's own
    diagnostics (capacity short per region/shape, unservable groups)."""
    from planning.allocate.certify import solve_certified

    scenario = resolved.scenario
    budget = scenario.objective.budget_per_hour
    if budget is None:
        return []
    check_cancel(cancel, "diagnostics: budget")
    limit = time_left(cancel, min(scenario.options.time_limit_s, EXPLAIN_SECONDS))
    free = replace(scenario, objective=Objective(kind="cost", budget_per_hour=None),
                   options=replace(scenario.options, time_limit_s=limit))
    alloc = solve_certified(replace(resolved, scenario=free), sets, cancel=cancel).result
    what = "nothing" if served <= 1e-9 else f"{served:.1%} of every group's demand"
    if not alloc.has_plan:
        if alloc.status == "infeasible":
            return [f"Even without the budget not all demand can be served (${budget:,.2f}/h serves {what}):",
                    *alloc.messages]
        return [f"Budget ${budget:,.2f}/h serves {what}; the cost of serving 100 % was not found within "
                f"{limit:g} s ({alloc.status})."]
    need = float(alloc.total_per_hour or 0.0)
    if need <= budget + 1e-9:
        return []
    exact = alloc.status == "optimal"
    return [f"Budget binds: ${budget:,.2f}/h serves {what}; serving 100 % needs {'' if exact else 'at most '}"
            f"${need:,.2f}/h. Fix: raise objective.budget_per_hour to ≥ {math.ceil(need * 100) / 100:,.2f}."]


def _capacity_explanation(resolved: ResolvedScenario, sets: Sequence[TemplateSet],
                          cancel: CancelToken | None = None) -> list[str]:
    """Why a served plan (no budget) stays below 100 %: the allocation diagnostics of the cost problem
    (capacity short per region/shape, unservable groups); skipped above EXPLAIN_MAX_TEMPLATES templates."""
    from planning.allocate.certify import allocation_problem
    from planning.allocate.diagnostics import diagnose_infeasible

    if sum(len(ts) for ts in sets) > EXPLAIN_MAX_TEMPLATES:
        return []
    check_cancel(cancel, "diagnostics: capacity")
    problem = allocation_problem(resolved, sets, objective="cost")
    problem = replace(problem, time_limit_s=time_left(cancel, problem.time_limit_s))
    return diagnose_infeasible(problem)[1]


def explain_result(result: PlanResult, ctx: EngineContext, resolved: ResolvedScenario, sets: Sequence[TemplateSet],
                   cancel: CancelToken | None = None) -> PlanResult:
    """``result`` with SLO/memory causes for groups no template serves and the budget that would serve 100 %.

    Parameters
    ----------
    result:
        The plan as assembled from the allocation.
    ctx, resolved, sets:
        What the solve used: the engine context, the resolved scenario (specs, groups, offers, shapes) and the
        template sets.
    cancel:
        Checked per group and before each extra solve, which gets the time left on its deadline.

    Returns
    -------
    A PlanResult whose diagnostics name the binding family and its fix; a served plan that serves nothing
    within its budget gets status ``infeasible``.

    Raises
    ------
    Cancelled
        When ``cancel`` is set (the pipeline then keeps ``result`` without these explanations).
    """
    scenario, specs, groups, shapes = resolved.scenario, resolved.specs, resolved.groups, resolved.shapes
    diagnostics = list(result.diagnostics)
    explained: dict[str, str] = {}
    for group in groups:
        check_cancel(cancel, "diagnostics")
        demanded = [j for j, c in enumerate(group.classes) if c.rate > 0]
        if not demanded:
            continue
        mine = [ts for ts in sets if ts.group.id == group.id]
        if any(ts.explicit for ts in mine) or not scenario.generate_templates:
            continue
        served = np.zeros(len(group.classes), dtype=bool)
        for ts in mine:
            if len(ts):
                served |= (ts.throughput > 0).any(axis=0)
        if served[demanded].all():
            continue
        if served[demanded].any():  # some buckets only: say what the largest unserved bucket needs
            orphans = [j for j in demanded if not served[j]]
            big = max(orphans, key=lambda j: (group.classes[j].input_len + group.classes[j].output_len, j))
            c = group.classes[big]
            text = _slo_or_memory(ctx, scenario, specs[group.model], group, shapes, (c.input_len, c.output_len))
            if text is None:
                text = (f"{group.id}: the templates, placed for the mean request, miss the SLO on {len(orphans)} "
                        f"bucket(s), e.g. {c.id} ({c.input_len:g}/{c.output_len:g} tokens), though a placement for "
                        "that size alone would meet it. Fix: give those request sizes their own model entry, or "
                        "explicit templates.")
            else:
                text = text.replace(f"{group.id}: ", f"{group.id}: for {len(orphans)} bucket(s), e.g. {c.id} "
                                    f"({c.input_len:g}/{c.output_len:g} tokens): ", 1)
            explained[group.id] = text
            continue
        text = _slo_or_memory(ctx, scenario, specs[group.model], group, shapes)
        if text is not None:
            explained[group.id] = text
    if explained:
        diagnostics = [d for d in diagnostics if not any(d.startswith(f"{g}: ") for g in explained)]
        diagnostics = list(explained.values()) + diagnostics
    status, message, baselines = result.status, result.message, result.baselines
    if scenario.objective.kind == "served" and scenario.objective.budget_per_hour is not None \
            and result.served_fraction < 1 - 1e-6 and not explained:
        texts = _budget_explanation(resolved, sets, result.served_fraction, cancel)
        diagnostics[:0] = texts
        if texts and result.served_fraction <= 1e-9:
            status = "infeasible"
            message = "No plan within the budget: " + texts[0]
            baselines = tuple(replace(b, savings_pct=None) for b in baselines)
    if scenario.objective.kind == "served" and scenario.objective.budget_per_hour is None \
            and result.served_fraction < 1 - 1e-6 and not explained:
        diagnostics.extend(_capacity_explanation(resolved, sets, cancel))
    if scenario.objective.kind == "served" and result.served_fraction <= 1e-9 and status != "infeasible" \
            and any(g.demand > 0 for g in groups):
        status = "infeasible"  # α = 0: nothing is served, whatever the optimality of that α
        message = "No plan serves any demand: see diagnostics."
        baselines = tuple(replace(b, savings_pct=None) for b in baselines)
    if explained and not message:
        message = "Part of the demand cannot be served: see diagnostics."
    return replace(result, status=status, message=message, diagnostics=tuple(diagnostics), baselines=baselines)
