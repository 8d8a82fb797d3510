"""Allocation with templates generated on demand: LP column generation priced by a multiset search
(``planning.allocate.pricing``), then reduced-cost fixing and the ILP over the generated columns — certified
optimal over the whole template space.

Fixing (as ``reduce.py``): for integer-feasible ν, cost(ν) ≥ z_LP + Σ rc·ν. The ILP runs over the multisets with
some pair of rc ≤ δ (the search with θ = δ lists all of them); every other column has rc > δ, so a plan of
cost ≤ z_LP + δ is optimal over all templates. Otherwise δ := cost − z_LP and the ILP is re-solved.
With the Lagrangian group bounds L_g (``pricing.group_bounds``) the thresholds are per group:
θ_g = L_g − y_d·D_g − y_n + (target − z_LB).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planning.allocate.certify import Allocation, allocation_problem, uncertified
from planning.allocate.pricers import LocalPricers, Pricers, make_pricers
from planning.allocate.pricing import (
    PricedGroup,
    PricingResult,
    _max_throughput_bound,
    build_space,
    fix,
    group_bounds,
    solve_lp,
    supported,
)
from planning.allocate.problem import AllocationProblem, AllocationResult
from planning.allocate.solve import solve_allocation
from planning.catalog.schema import shape_gpu
from planning.context import (
    CancelToken,
    EngineContext,
    ProgressFn,
    check_cancel,
    sub_progress,
    time_left,
    timed_out,
)
from planning.groups import Group
from planning.resolve import ResolvedScenario
from planning.templates.search import MultisetSpace
from planning.templates.sets import TemplateSet

START_FRACTION = 0.003  # first reduced-cost threshold δ: 0.3 % of the LP bound
MAX_ATTEMPTS = 6  # fixing + ILP rounds (δ raised each time) before the best plan is returned uncertified

def template_set(pg: PricedGroup, P: np.ndarray, provenance: Callable[[str], str] | None = None) -> TemplateSet:
    """A ``TemplateSet`` of the given multisets (library rows, sorted by id); ``provenance(gpu)`` labels rows."""
    from planning.templates.sets import usage_matrix

    sp = pg.space
    frame = sp.frame(P)
    shapes = list(sp.shapes)
    usage = usage_matrix(frame, shapes)
    rank = {"measured": 0, "calibrated": 1, "given": 0, "roofline": 2}
    names = ["measured", "calibrated", "roofline"]
    shape_rank = np.array([rank.get(provenance(shape_gpu(s)) if provenance else "roofline", 2) for s in shapes])
    worst = np.where(usage > 0, shape_rank[None, :], -1).max(axis=1) if usage.size else np.zeros(0, dtype=int)
    return TemplateSet(pg.group, tuple(shapes), tuple(frame["template_id"].to_list()), usage,
                       frame["throughput"].to_numpy().reshape(-1, 1), tuple(frame["stages_json"].to_list()),
                       tuple(names[int(r)] for r in worst), stage_tables=sp.tables)


def ilp_problem(resolved: ResolvedScenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                masks: Sequence[np.ndarray], cancel: CancelToken | None = None) -> AllocationProblem:
    """The cost ILP over the fixed columns: :func:`planning.allocate.certify.allocation_problem` (the one builder
    of allocation problems), with two deliberate differences.

    - No budget cap: the engine certifies the *cost* optimum; :func:`solve_on_demand` compares it with
      ``objective.budget_per_hour`` afterwards (within the budget the cost optimum is the capped optimum; above
      it no plan within the budget serves all demand, and the library path reports that with its diagnostics).
      With the cap inside, an over-budget scenario would spend every fixing attempt on infeasible ILPs.
    - The time limit is what is left of the solve's deadline (``options.time_limit_s`` at most).
    """
    problem = allocation_problem(resolved, sets, groups=groups, masks=masks, objective="cost")
    return replace(problem, budget_per_hour=None, time_limit_s=time_left(cancel, problem.time_limit_s))


@dataclass
class OnDemandPlan:
    """What ``allocate_on_demand`` returns: the ILP result, the sets it used and the certificate."""

    alloc: AllocationResult
    sets: list[TemplateSet]
    masks: list[np.ndarray]
    pricing: PricingResult
    certified: bool
    delta: float


def _check(cancel: CancelToken | None) -> None:
    check_cancel(cancel, "on-demand allocation")


def _report(progress: ProgressFn | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(fraction, message)


def allocate_on_demand(priced: Sequence[PricedGroup], resolved: ResolvedScenario, *, per_region: bool = True,
                       provenance: Callable[[str], str] | None = None, progress: ProgressFn | None = None,
                       cancel: CancelToken | None = None, timings: dict[str, float] | None = None,
                       pricers: Pricers | None = None) -> OnDemandPlan | None:
    """LP over all templates by column generation, then reduced-cost fixing + ILP until certified.

    Parameters
    ----------
    priced:
        One ``PricedGroup`` per (model, phase) group (single class), all over the same shapes.
    resolved:
        The resolved scenario: its price/availability matrices, offers and ``options`` (K, solver,
        time_limit_s, mip_rel_gap) define the LP and the ILP.
    per_region:
        Search with one price vector per region (False: their componentwise minimum).
    provenance:
        ``provenance(gpu)`` labels the generated templates (default: roofline).
    progress, cancel:
        The run contract of :mod:`planning.context`; progress covers 0..1 of this call and names each step:
        ``pricing:`` (column generation rounds with the LP bound, the Lagrangian group bounds), ``fixing:``
        and ``ILP:`` per attempt.
    timings:
        Filled with the seconds of each step.
    pricers:
        Where the pricing searches run (default: here, one group after another; see ``planning.allocate.pricers``).

    Returns
    -------
    OnDemandPlan or None
        None when the LP relaxation is infeasible (no plan meets the demand).

    Raises
    ------
    Cancelled
        When ``cancel`` is set (a deadline that passes after a plan was found returns that plan, uncertified).
    """
    timings = timings if timings is not None else {}
    shapes = priced[0].space.shapes
    prices, available = resolved.price_matrix(shapes), resolved.availability_matrix(shapes)
    t1 = time.perf_counter()
    pricers = pricers if pricers is not None else LocalPricers(priced)
    pr, _lp = solve_lp(priced, prices, available, resolved.scenario.options.K, per_region=per_region,
                       cancel=cancel, pricers=pricers, progress=sub_progress(progress, 0.0, 0.6))
    timings["pricing_lp_seconds"] = time.perf_counter() - t1
    if not pr.feasible:
        return None
    gpus = [np.array([shape_gpu(s) for s in pg.space.shapes]) for pg in priced]
    single = [np.concatenate([pg.space.all_multisets(gp == g) for g in sorted(set(gp.tolist()))])
              for pg, gp in zip(priced, gpus, strict=True)]
    # Lagrangian bound: cost(ν) ≥ Σ_g (group cost at prices w) + Σ y_a·A ≥ Σ_g L_g + Σ y_a·A =: z_LB ≥ z_LP
    _report(progress, 0.6, f"pricing: Lagrangian cover bounds of {len(priced)} groups (LP bound {pr.z_lp:,.2f} $/h)")
    t_lb = time.perf_counter()
    seeds = []
    for pg in priced:
        codes = np.array(sorted({c for (g2, c, _r) in _lp.columns if g2 == priced.index(pg)}), dtype=np.int64)
        P0 = np.stack([pg.pool_row(int(c)) for c in codes]) if codes.size else np.zeros((0, pg.space.nmax), np.int64)
        seeds.append((P0, pg.space.throughput(P0)))
    L = group_bounds(priced, pr, seeds, per_region, cancel, pricers)
    finite = np.isfinite(_lp.node_cost)
    y_a_value = float(((_lp.node_cost[finite] - pr.w[finite]) * available[finite]).sum())  # Σ y_a·A (y_a ≤ 0)
    z_lb = max(float(L.sum()) + y_a_value, pr.z_lp)
    timings["group_bounds_seconds"] = time.perf_counter() - t_lb
    pr.z_lb = z_lb
    target = z_lb + max(START_FRACTION * abs(z_lb), 1e-9)
    delta = target - z_lb
    groups = [pg.group for pg in priced]
    alloc: AllocationResult | None = None
    certified = False
    sets: list[TemplateSet] = []
    masks: list[np.ndarray] = []
    best: tuple[AllocationResult, list[TemplateSet], list[np.ndarray]] | None = None  # the cheapest plan so far
    for attempt in range(MAX_ATTEMPTS):
        if best is not None and timed_out(cancel):
            break  # the deadline passed after a plan was found: return it, uncertified
        step = 0.7 + 0.3 * attempt / MAX_ATTEMPTS
        again = f" (attempt {attempt + 1})" if attempt else ""
        _report(progress, step, f"fixing: templates within {delta:,.4g} $/h of the bound {z_lb:,.2f} $/h{again}")
        t2 = time.perf_counter()
        # a plan using (M, r) of group g costs ≥ z_LB − L_g + W_r(M) + [T < D](y_d(D − T) + y_n) ≥ z_LB − L_g
        # + rc(M, r) + y_d·D + y_n, so only rc ≤ θ_g = L_g − y_d·D − y_n + (target − z_LB) can be in a plan ≤ target
        thetas = [float(L[gi] - pr.y_d[gi] * pg.demand - pr.y_n[gi] + delta) for gi, pg in enumerate(priced)]
        thetas = [max(t, delta) for t in thetas]  # and never below plain reduced-cost fixing's δ
        kept = fix(priced, pr, thetas, per_region, cancel, pricers)
        sets, masks = [], []
        for pg, P, S1 in zip(priced, kept, single, strict=True):
            ts = template_set(pg, np.concatenate([P, S1]) if P.size else S1, provenance)
            keys = set(pg.space.codes(P).tolist())
            masks.append(np.array([c in keys for c in _row_codes(pg.space, ts)], dtype=bool))
            sets.append(ts)
        timings["fixing_seconds"] = timings.get("fixing_seconds", 0.0) + time.perf_counter() - t2
        _check(cancel)
        _report(progress, step + 0.15 / MAX_ATTEMPTS,
                f"ILP: {sum(int(m.sum()) for m in masks):,} generated templates{again}")
        t3 = time.perf_counter()
        alloc = solve_allocation(ilp_problem(resolved, groups, sets, masks, cancel))
        timings["ilp_seconds"] = timings.get("ilp_seconds", 0.0) + time.perf_counter() - t3
        value = alloc.total_per_hour
        if alloc.has_plan and value is not None and value <= target + 1e-9 * max(1.0, abs(target)):
            certified = True
            break
        if alloc.has_plan and value is not None and (best is None or value < float(best[0].total_per_hour or 0.0)):
            best = (alloc, sets, masks)
        target = float(value) if alloc.has_plan and value is not None else z_lb + 4 * (target - z_lb)
        delta = target - z_lb
    if not certified and best is not None and timed_out(cancel):
        alloc, sets, masks = uncertified(best[0], z_lb, served=False), best[1], best[2]
    assert alloc is not None  # MAX_ATTEMPTS ≥ 1 and ``best`` is only set after an ILP
    return OnDemandPlan(alloc, sets, masks, pr, certified, delta)


def solve_on_demand(ctx: EngineContext, resolved: ResolvedScenario, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None) -> Allocation | None:
    """Plan a cost scenario with templates generated on demand (the step ``planning.pipeline.on_demand_allocation``
    runs before the library path).

    Parameters
    ----------
    ctx:
        The perf model (T̂ tables, provenance) and catalog (node memory).
    resolved:
        The resolved scenario, as the library path gets it: groups, specs, shapes, offers and their matrices.
    progress, cancel:
        The run contract of :mod:`planning.context`; progress covers 0..1 of this call.

    Returns
    -------
    Allocation or None
        The certified allocation with ``sets`` (each set holds the ILP's templates plus every single-GPU-type
        template, for the baselines) and ``masks`` (the ILP's rows), or None when the scenario is not supported
        (:func:`supported`), the LP relaxation is infeasible or the cost optimum is over the budget (then the
        library path runs and reports diagnostics).

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    """
    if not supported(resolved):
        return None
    opts = resolved.scenario.options
    timings: dict[str, float] = {}
    stats: dict[str, float] = {}
    _report(progress, 0.0, f"pricing: T̂ tables of {len(resolved.groups)} groups")
    t0 = time.perf_counter()
    priced = []
    for g in resolved.groups:
        sp = build_space(ctx.perf, ctx.catalog, resolved.specs[g.model], g, resolved.shapes, opts.nmax, opts.rho,
                         opts.max_stages)
        priced.append(PricedGroup(g, sp, float(g.demand), _max_throughput_bound(sp), {}))
    timings["tables_seconds"] = time.perf_counter() - t0
    pricers = make_pricers(priced)  # the process default backend: here, or Ray actors (--backend ray)
    try:
        plan = allocate_on_demand(priced, resolved,
                                  provenance=lambda gpu: str(ctx.perf.gpu_calibration(gpu).provenance),
                                  progress=sub_progress(progress, 0.05, 1.0), cancel=cancel, timings=timings,
                                  pricers=pricers)
    finally:
        pricers.close()
    if plan is None:
        return None
    budget = resolved.scenario.objective.budget_per_hour
    total = plan.alloc.total_per_hour  # provisioning + penalty + KV transfer: what the budget bounds (AllocationProblem)
    if budget is not None and total is not None and total > budget * (1 + 1e-9):
        # The cheapest plan that serves all demand is over the budget, so no plan within it serves all demand:
        # the library path reports the infeasibility with its diagnostics (the budget that would serve 100 %).
        # Within the budget, the cost optimum is also the budget-capped optimum.
        return None
    _report(progress, 1.0, "ILP: certified allocation found" if plan.certified else "ILP: best allocation found")
    stats["pricing_rounds"] = float(plan.pricing.rounds)
    stats["lp_columns"] = float(plan.pricing.columns)
    stats["templates_in_ilp"] = float(sum(int(m.sum()) for m in plan.masks))
    stats["lp_bound_per_hour"] = plan.pricing.z_lp
    stats["lagrangian_bound_per_hour"] = plan.pricing.z_lb
    if plan.certified:
        stats["reduction_certified"] = 1.0
    stats["templates_total"] = float(sum(len(pg.space.cache) for pg in priced))  # placed exactly (incl. reused)
    stats["templates_placed_now"] = float(sum(pg.space.stats.evaluated for pg in priced))  # placed by this solve
    stats["search_prefixes"] = float(sum(pg.space.stats.prefixes for pg in priced))
    stats["search_candidates"] = float(sum(pg.space.stats.candidates for pg in priced))
    timings["search_seconds"] = sum(pg.space.stats.seconds_search for pg in priced)
    timings["exact_placement_seconds"] = sum(pg.space.stats.seconds_exact for pg in priced)
    return Allocation(result=plan.alloc, problem=None, masks=plan.masks, stats=stats, timings=timings,
                      sets=plan.sets)


def _row_codes(space: MultisetSpace, ts: TemplateSet) -> list[int]:
    """Multiset code of each row of a TemplateSet built from ``space``."""
    K = space.K
    out = []
    for i in range(len(ts)):
        row = np.repeat(np.arange(K), ts.usage[i])
        pad = np.full(space.nmax, K, dtype=np.int64)
        pad[: row.size] = row
        out.append(int(pad @ space.pow))
    return out
