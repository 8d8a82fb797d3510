"""Template sets → allocation problems, and the certified LP-reduced ILP loop (exact over all templates).

Sets: groups g, templates τ of g (columnar ``TemplateSet`` rows), regions r, shapes k.
The ILP of ``planning.allocate.solve`` over all templates can have ~10⁶ columns. :func:`solve_certified`
solves it over a subset instead and proves the answer optimal over all of them (``planning.allocate.reduce``):
    z_LP   = optimum of the LP relaxation (column generation), rc[τ, r] ≥ 0 its reduced costs;
    select = {τ : min_r rc[τ, r] ≤ δ} ∪ {τ running now};   δ₀ = 0.3 % · |z_LP|;
    ILP over select → plan of value z;  certified when z ≤ z_LP + min_{τ ∉ select} rc[τ, ·];
    otherwise δ ← z − z_LP (then the next select provably contains an optimum) and re-solve.
For the cost objective the thresholds come from the Lagrangian bound instead (``reduce.lagrangian_bound``, as
the on-demand engine does): z_LB = Σ_g L_g + Σ y_a·A ≥ z_LP with L_g the cheapest integer cover of group g at
the availability duals; a target t = z_LB·(1 + 0.3 %) keeps per group only τ with rc ≤ θ_g(t), and a plan of
value z ≤ t is certified (else t ← z and re-solve). On coral-extended's 10⁶ templates this keeps ~10² instead
of ~10⁴ templates in the ILP (54–184 per timeline epoch).
Objective "served" is certified in two phases: max α (served LP/ILP), then the cost problem at demand α*·D,
whose optimum is the cheapest plan serving α*.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from planning.allocate.incumbent import Anytime
from planning.allocate.problem import (
    AllocationProblem,
    AllocationResult,
    Objective,
    Offer,
    SolverName,
    TemplateOption,
    TransferPrice,
    WorkloadClass,
)
from planning.allocate.reduce import (
    ColumnBlock,
    LagrangianBound,
    LpSides,
    Market,
    Reduction,
    lagrangian_bound,
    lp_reduction,
)
from planning.allocate.solve import solve_allocation
from planning.context import Cancelled, CancelToken, ProgressFn, check_cancel, time_left, timed_out
from planning.errors import PlanningError
from planning.groups import Group, region_links
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

REDUCE_MIN_TEMPLATES = 1500  # below this the ILP is solved over all templates directly
REDUCE_START_FRACTION = 0.003  # first reduced-cost threshold: 0.3 % of the LP bound
MAX_ATTEMPTS = 6  # threshold raises before falling back to the full ILP
COVER_LIMIT_S = 2.0  # per group cover ILP of the Lagrangian bound (stopped early, its dual bound is still valid)


@dataclass(frozen=True)
class Allocation:
    """The allocation answer, the problem actually solved and the template rows it saw (None = all)."""

    result: AllocationResult
    problem: AllocationProblem | None  # None when the columns were generated on demand (no single problem)
    masks: list[np.ndarray] | None
    stats: dict[str, float] = field(default_factory=dict)  # model sizes: templates total / in ILP, LP bound …
    timings: dict[str, float] = field(default_factory=dict)
    sets: list[TemplateSet] | None = None  # on-demand: the template sets the search generated
    duals: AvailabilityDuals | None = None  # the reduction's bound as a function of the availabilities (cost)


@dataclass(frozen=True)
class AvailabilityDuals:
    """The certified solve's lower bound as a function of the offers' availabilities (a Benders cut).

    The Lagrangian bound z_LB = Σ_g L_g + Σ_a y_a·A_a + (the other rows' terms) relaxes the availability rows
    with the LP's duals y_a ≤ 0, and A enters it only through Σ y_a·A_a; so with π_a = −y_a ≥ 0, for every
    availability vector A′ (the rest of the problem unchanged) the ILP optimum is ≥ ``bound`` − Σ_a π_a·(A′_a −
    A_a). ``prices``: π_a > 0 per (region, shape); ``available``: A_a of those offers in the solve."""

    bound: float
    prices: dict[tuple[str, str], float]
    available: dict[tuple[str, str], float]


def _template_options(sets: Sequence[TemplateSet], masks: Sequence[np.ndarray] | None = None) -> Iterator[TemplateOption]:
    for si, ts in enumerate(sets):
        useful = np.asarray((ts.throughput > 0).any(axis=1), dtype=bool)
        if masks is not None:
            useful &= masks[si]
        for row in np.flatnonzero(useful):
            i = int(row)
            yield TemplateOption(id=ts.key(i), group=ts.group.id, usage=ts.usage_dict(i),
                                 throughput=ts.throughput_dict(i), single_shape=bool(ts.single_shape[i]),
                                 gpu_types=ts.gpu_types(i))


@dataclass(frozen=True)
class KvLink:
    """One link's KV traffic: its model, sending (prefill) class, bytes per request and requests/s at full rate."""

    model: str
    sender: str
    receiver: str
    bytes_per_request: float
    requests_per_s: float


def kv_links(resolved: ResolvedScenario, groups: Sequence[Group] | None = None) -> tuple[KvLink, ...]:
    """The KV traffic of every region link: bytes of one request's cache after its prefill (all layers and KV
    heads at the class's mean input length, ``perf.model.kv_request_bytes``) and requests/s = the prefill
    class's prompt tok/s / input length."""
    from planning.perf.model import kv_element_bytes, kv_request_bytes
    from planning.perf.roofline import LayerArch

    gs = groups or resolved.groups
    classes = {c.id: (g, c) for g in gs for c in g.classes}
    out: list[KvLink] = []
    for sender, *receivers in region_links(gs):
        g, c = classes[sender]
        spec = resolved.specs[g.model]
        nbytes = kv_request_bytes(LayerArch.from_spec(spec), kv_element_bytes(spec), c.input_len)
        rps = c.rate / c.input_len if c.input_len > 0 else 0.0
        out.append(KvLink(g.model, sender, receivers[0] if receivers else "", nbytes, rps))
    return tuple(out)


def transfer_prices(resolved: ResolvedScenario, groups: Sequence[Group] | None = None) -> tuple[TransferPrice, ...]:
    """Every ordered pair of the scenario's regions for every link, at $/h = $/GB(src→dst) × KV bytes per
    request × requests/s × 3600 / 10⁹ (``planning.transfer``: egress by cloud, data/egress.csv)."""
    from planning.transfer import transfer

    out: list[TransferPrice] = []
    for link in kv_links(resolved, groups):
        for src in resolved.regions:
            for dst in resolved.regions:
                if src != dst:
                    usd = transfer(src, dst).usd_per_gb * link.bytes_per_request * link.requests_per_s * 3600 / 1e9
                    out.append(TransferPrice(link.sender, src, dst, usd))
    return tuple(out)


def site_transfers(resolved: ResolvedScenario, groups: Sequence[Group] | None = None) -> tuple[TransferPrice, ...]:
    """Free flows between the pricing pools of one site (``planning.pools``: on-demand, spot and reserved nodes of
    one region share its network), for every link: a model's prefill on on-demand nodes may hand its KV cache to
    decode on reserved nodes of the same region. Empty when the scenario has no pools."""
    from planning.pools import site_of

    by_site: dict[str, list[str]] = {}
    for r in resolved.regions:
        by_site.setdefault(site_of(r), []).append(r)
    pairs = [(a, b) for members in by_site.values() for a in members for b in members if a != b]
    if not pairs:
        return ()
    return tuple(TransferPrice(sender, a, b, 0.0) for sender, *_rest in region_links(groups or resolved.groups)
                 for a, b in pairs)


def spot_constraint(resolved: ResolvedScenario,
                    groups: Sequence[Group] | None = None) -> tuple[dict[str, float], frozenset[str]]:
    """The spot cap (S) of ``scenario.spot.max_share``: (group -> share, the spot regions); empty without one."""
    scenario = resolved.scenario
    from planning.pools import kind_of

    spot = frozenset(r for r in resolved.regions  # under pricing: spot the catalog regions are spot markets
                     if kind_of(r) == "spot" or (scenario.pricing == "spot" and kind_of(r) == "on_demand"))
    share = scenario.spot.max_share
    if share >= 1 or not spot:
        return {}, spot
    return {g.id: share for g in (groups or resolved.groups)}, spot


def lp_links(resolved: ResolvedScenario, groups: Sequence[Group]) -> tuple[list[tuple[str, ...]],
                                                                          dict[tuple[int, str, str], float]]:
    """The region links (R) for the LP reduction, by group id (one class per group there), and their allowed
    flows: (link index, src, dst) -> $/h at the link's full rate (cross-region prices or the free flows between
    the pools of one site)."""
    group_of = {c.id: g.id for g in groups for c in g.classes}
    links = [tuple(group_of[q] for q in link) for link in region_links(groups)]
    index = {link[0]: li for li, link in enumerate(region_links(groups))}
    flows = (transfer_prices(resolved, groups) if resolved.scenario.options.kv_transfer == "cross-region"
             else site_transfers(resolved, groups))
    return links, {(index[tp.sender], tp.src, tp.dst): tp.usd_per_hour for tp in flows if tp.sender in index}


def allocation_problem(resolved: ResolvedScenario, sets: Sequence[TemplateSet], *,
                       groups: Sequence[Group] | None = None, objective: str | None = None,
                       dump_model: str | None = None, masks: Sequence[np.ndarray] | None = None) -> AllocationProblem:
    """The allocation model's explicit inputs, optionally restricted to the template rows in ``masks`` (one
    boolean array per set) and with other ``groups`` (demand) than the scenario's.

    Raises
    ------
    PlanningError
        A running instance (``current``) of a template the scenario does not have.
    """
    scenario = resolved.scenario
    templates = tuple(_template_options(sets, masks))
    classes = tuple(WorkloadClass(id=c.id, group=g.id, rate=c.rate) for g in (groups or resolved.groups)
                    for c in g.classes)
    links = region_links(groups or resolved.groups)
    transfers = (transfer_prices(resolved, groups) if scenario.options.kv_transfer == "cross-region"
                 else site_transfers(resolved, groups))
    spot_cap, spot_regions = spot_constraint(resolved, groups)
    current = {(c.template_id, c.region): c.count for c in scenario.current}
    known = {t.id for t in templates}
    for i, (tid, _region) in enumerate(current):
        if tid not in known:
            raise PlanningError(f"current[{i}].template_id", f"{tid!r} is not a template of this scenario.",
                                "use ids from `planning templates` (\"model/phase:template\").")
    return AllocationProblem(
        templates=templates,
        offers=tuple(Offer(region=o.region, shape=o.shape, price_per_hour=o.price_per_hour, available=o.available)
                     for o in resolved.offers),
        classes=classes, current=current, K=scenario.options.K,
        objective=cast(Objective, objective or scenario.objective.kind),
        budget_per_hour=scenario.objective.budget_per_hour, solver=cast(SolverName, scenario.options.solver),
        time_limit_s=scenario.options.time_limit_s, mip_rel_gap=scenario.options.mip_rel_gap,
        dump_model=str(dump_model) if dump_model else None, links=links, transfers=transfers, spot_cap=spot_cap,
        spot_regions=spot_regions,
    )


def baseline_problem(resolved: ResolvedScenario, sets: Sequence[TemplateSet],
                     masks: Sequence[np.ndarray] | None) -> AllocationProblem:
    """Templates the baselines may use: every single-GPU-type template (Homo, Homo-ILP, single type) plus the
    plan's candidate set (memP's per-group cheapest plans)."""
    if masks is None:
        return allocation_problem(resolved, sets)
    keep = [ts.single_gpu_type | m for ts, m in zip(sets, masks, strict=True)]
    return allocation_problem(resolved, sets, masks=keep)


def _reducible(resolved: ResolvedScenario, sets: Sequence[TemplateSet]) -> bool:
    return all(len(g.classes) == 1 for g in resolved.groups) and sum(len(ts) for ts in sets) >= REDUCE_MIN_TEMPLATES


def _reduction(resolved: ResolvedScenario, sets: Sequence[TemplateSet], groups: Sequence[Group],
               served: bool, cancel: CancelToken | None = None) -> tuple[Reduction, list[ColumnBlock]]:
    shapes = sorted({o.shape for o in resolved.offers} | {s for ts in sets for s in ts.shapes})  # unsold: NaN
    shape_index = {s: k for k, s in enumerate(shapes)}
    current = [c for c in resolved.scenario.current if c.count > 0]
    blocks = []
    for ts in sets:
        keep = None
        mine: tuple[tuple[int, str, int], ...] = ()
        if current:  # O(running) through the set's row index, not a Python scan over ~10⁶ template ids
            mine = tuple((ts.row_of[c.template_id], c.region, int(c.count)) for c in current
                         if c.template_id in ts.row_of)
            keep = np.zeros(len(ts), dtype=bool)
            keep[[i for i, _r, _n in mine]] = True
        blocks.append(ColumnBlock(ts.group.id, ts.shapes, ts.usage, ts.throughput[:, 0], keep, mine))
    demand = {g.id: g.demand for g in groups}
    objective = resolved.scenario.objective
    spot_cap, spot_regions = spot_constraint(resolved, groups)
    links, transfers = lp_links(resolved, groups)
    market = Market(shape_index, resolved.regions, resolved.price_matrix(shapes), resolved.availability_matrix(shapes))
    sides = LpSides(served=served, budget=objective.budget_per_hour if served else None, spot_cap=spot_cap,
                    spot_regions=spot_regions, links=links, transfers=transfers)
    red = lp_reduction(blocks, market, demand, resolved.scenario.options.K, sides, cancel=cancel)
    return red, blocks


GAP_ZERO_TEMPLATES = 20_000
"""An allocation ILP over at most this many templates is solved to a proven gap of 0 (``mip_rel_gap`` 0), so its
answer can be called ``optimal``; a larger one stops at ``options.mip_rel_gap`` and is ``feasible`` with its gap.
Measured (docs/allocation.md, "Solvers and statuses"): coral-extended's certified ILP (13,623 templates) closes
its last 0.1 % in seconds; catalog-wide's (105) and coral-core's (17) at once."""


def exact_when_small(problem: AllocationProblem) -> AllocationProblem:
    """``problem`` asked for a proven gap of 0 when it has at most :data:`GAP_ZERO_TEMPLATES` templates; a larger
    one whose group-by-group shortcut applies (cost objective, matrix builder, no commitments) asks it of each part
    when every part (a model's prefill and decode) has at most that many (``part_mip_rel_gap`` 0; the joint model,
    solved only when the parts' plans do not fit together, keeps ``mip_rel_gap``). Measured: coral-extended at
    demand ×2 keeps 35,221 templates, parts of at most 7,014, each proven in 0.1-20 s; at the joint 0.1 % the
    answer was ``feasible``."""
    if len(problem.templates) <= GAP_ZERO_TEMPLATES:
        return replace(problem, mip_rel_gap=0.0)
    if problem.objective != "cost" or not problem.decompose or problem.commitments or problem.solver != "highs" \
            or problem.builder == "pulp":
        return problem
    per_group: dict[str, int] = {}
    for t in problem.templates:
        per_group[t.group] = per_group.get(t.group, 0) + 1
    largest = max((sum(per_group.get(g, 0) for g in part) for part in problem.linked_parts()), default=0)
    return replace(problem, part_mip_rel_gap=0.0) if largest <= GAP_ZERO_TEMPLATES else problem


def _solve(problem: AllocationProblem, cancel: CancelToken | None, ilp_gap: float | None = None) -> AllocationResult:
    """One ILP within the time left on ``cancel``'s deadline (and never more than ``options.time_limit_s``),
    to a proven gap of 0 when it is small (:func:`exact_when_small`)."""
    check_cancel(cancel, "allocation ILP")
    timed = replace(problem, time_limit_s=time_left(cancel, problem.time_limit_s))
    return solve_allocation(exact_when_small(timed) if ilp_gap is None else replace(timed, mip_rel_gap=ilp_gap))


def refuted_target(alloc: AllocationResult, target: float) -> float | None:
    """The bound a certificate attempt proves, whether its ILP reached ``target`` or not (a refuted target):
    every plan of value ≤ target uses only columns the ILP had, so the optimum is ≥ min(target, the ILP's own
    dual bound); an ILP without any plan (infeasible) proves ≥ target. None when the ILP stopped without a bound
    (time limit, error)."""
    last = alloc.phases[-1] if alloc.phases else None
    if last is None:
        return None
    if last.status == "infeasible":
        return float(target)
    if last.status != "error" and last.bound is not None and math.isfinite(last.bound):
        return min(float(target), float(last.bound))  # HiGHS's dual bound holds wherever the search stopped
    return None


@dataclass(frozen=True)
class _Attempt:
    """What one certified solve travels with: the scenario, its template sets and the groups (their demand), the
    objective, where to dump the model, the run contract, where plans and bounds go (``anytime``), ``alpha`` (the
    served objective's phase 2: its plans serve α*) and ``ilp_gap`` (every ILP's relative gap)."""

    resolved: ResolvedScenario
    sets: Sequence[TemplateSet]
    groups: Sequence[Group]
    objective: str
    dump_model: str | None
    progress: ProgressFn | None
    cancel: CancelToken | None
    anytime: Anytime
    alpha: float | None = None
    ilp_gap: float | None = None


def _full(job: _Attempt) -> tuple[AllocationResult, AllocationProblem, None]:
    """The ILP over every template (no reduction)."""
    resolved, sets, groups, objective, dump_model = job.resolved, job.sets, job.groups, job.objective, job.dump_model
    progress, cancel, anytime, alpha, ilp_gap = job.progress, job.cancel, job.anytime, job.alpha, job.ilp_gap
    problem = allocation_problem(resolved, sets, groups=groups, dump_model=dump_model, objective=objective)
    if progress:
        progress(0.0, f"ILP: {len(problem.templates):,} templates")
    alloc = _solve(problem, cancel, ilp_gap)
    anytime.offer(alloc if alpha is None else replace(alloc, objective="served", alpha=alpha), sets, None,
                  f"ILP over all {len(problem.templates):,} templates")
    first, last = (alloc.phases[0], alloc.phases[-1]) if alloc.phases else (None, None)
    if objective == "cost" and alpha is None and not anytime.served and last is not None and last.bound is not None \
            and math.isfinite(last.bound):
        anytime.raise_bound(float(last.bound), "the ILP's own bound over all templates")
    if objective == "served" and first is not None and first.bound is not None and math.isfinite(first.bound):
        anytime.raise_bound(-float(first.bound), "the served ILP's own bound on α over all templates")
    if alloc.status == "time_limit":  # stopped by the solve's deadline: the caller returns the incumbent
        check_cancel(cancel, "allocation ILP")
    return alloc, problem, None


def _reduced_loop(job: _Attempt, timings: MutableMapping[str, float], stats: MutableMapping[str, float],
                  duals: list[AvailabilityDuals] | None = None, upper: float | None = None,
                  ) -> tuple[AllocationResult, AllocationProblem, list[np.ndarray] | None]:
    """ILP over the LP-reduced columns until the certificate holds (objective "cost": value = cost;
    "served": value = −α of phase 1). Every plan and bound goes to ``anytime``; a deadline raises
    :class:`Cancelled` (the caller returns the incumbent). ``alpha``: the served objective's phase 2 (the cost
    at α* on demand scaled by α*), whose plans are offered as serving α*. ``duals`` receives the reduction's
    bound as a function of the availabilities (cost objective). ``upper``: the value of a plan known to exist
    (cost objective): a raised target never exceeds it (the ILP at target ``upper`` holds every column such a
    plan uses, so it finds one and is certified), instead of growing blindly ×4 or falling back to every template."""
    resolved, sets, groups, objective, dump_model = job.resolved, job.sets, job.groups, job.objective, job.dump_model
    progress, cancel, anytime, alpha, ilp_gap = job.progress, job.cancel, job.anytime, job.alpha, job.ilp_gap
    served = objective == "served"
    if progress:
        progress(0.0, f"reduction: LP relaxation over {sum(len(ts) for ts in sets):,} templates ({objective})")
    t0 = time.perf_counter()
    red, blocks = _reduction(resolved, sets, groups, served, cancel)
    timings["reduction_lp_seconds"] = timings.get("reduction_lp_seconds", 0.0) + time.perf_counter() - t0
    if not red.feasible_lp:  # the LP relaxation is infeasible (or did not converge): no reduction
        return _full(job)
    phase_two = anytime.served and not served  # the cost phase of the served objective: α is already bounded
    if not phase_two:
        anytime.raise_bound(red.z_lp, "LP relaxation over all templates")
    threshold = max(REDUCE_START_FRACTION * abs(red.z_lp), 1e-9)
    lag: LagrangianBound | None = None
    demand = [next((g.demand for g in groups if g.id == b.group), 0.0) for b in blocks]
    if not served:  # per-group integer cover bounds: a far smaller ILP than plain reduced-cost fixing keeps
        lag = lagrangian_bound(red, demand, min(COVER_LIMIT_S, time_left(cancel, COVER_LIMIT_S)),
                               budget_s=time_left(cancel, math.inf))
        timings["lagrangian_seconds"] = timings.get("lagrangian_seconds", 0.0) + lag.seconds
        stats["lagrangian_bound_per_hour"] = lag.z_lb
        if not phase_two:
            anytime.raise_bound(lag.z_lb, "Lagrangian bound")
            if duals is not None and alpha is None and red.y_avail is not None:
                duals.append(_availability_duals(resolved, sets, red.y_avail, float(lag.z_lb)))
    z_bound = lag.z_lb if lag is not None else red.z_lp
    target = z_bound + max(REDUCE_START_FRACTION * abs(z_bound), 1e-9)
    for attempt in range(MAX_ATTEMPTS):
        check_cancel(cancel, "allocation")
        masks = red.select(lag.thresholds(red, demand, target) if lag is not None else threshold, blocks)
        problem = allocation_problem(resolved, sets, groups=groups, dump_model=dump_model, masks=masks,
                                     objective=objective)
        again = f" (attempt {attempt + 1})" if attempt else ""
        if progress:
            progress(0.1 + 0.15 * attempt, f"ILP: {len(problem.templates):,} templates after the LP reduction{again}")
        alloc = _solve(problem, cancel, ilp_gap)
        anytime.offer(alloc if alpha is None else replace(alloc, objective="served", alpha=alpha), sets, masks,
                      f"ILP{again} over {len(problem.templates):,} templates after the LP reduction")
        # every excluded column's plans cost more than ``bound``: the Lagrangian thresholds were set from the
        # target; plain fixing's from the smallest excluded reduced cost
        bound = target if lag is not None else red.z_lp + red.min_excluded()
        if all(bool(m.all()) for m in masks):
            bound = np.inf
        cost = alloc.total_per_hour
        value = -(alloc.alpha or 0.0) if served else (cost if cost is not None else np.inf)
        stats["templates_in_ilp"] = float(sum(int(m.sum()) for m in masks))
        stats["lp_bound_alpha" if served else "lp_bound_per_hour"] = -red.z_lp if served else red.z_lp
        low = value  # with an ILP gap: its own dual bound ≤ target proves the optimum ≥ it (plans beyond cost more)
        last = alloc.phases[-1] if alloc.phases else None
        if ilp_gap is not None and not served and last is not None and last.bound is not None \
                and math.isfinite(last.bound):
            low = min(value, float(last.bound))
        if alloc.has_plan and low <= bound + 1e-9 * max(1.0, abs(bound)):
            if alloc.status in ("optimal", "feasible"):  # the ILP finished (not stopped by the time limit)
                stats["reduction_certified"] = 1.0
            return alloc, problem, masks
        if not np.isfinite(bound):  # every template was already in the ILP
            if alloc.status == "time_limit":
                check_cancel(cancel, "allocation ILP")
            return alloc, problem, masks
        refuted = refuted_target(alloc, bound)
        if refuted is not None and not phase_two:
            anytime.raise_bound(refuted, f"certificate target refuted by ILP{again}")
        check_cancel(cancel, "allocation")  # the ILP ran out of the solve's time: the caller returns the incumbent
        threshold = (value - red.z_lp) if alloc.has_plan else threshold * 4
        grown = value if alloc.has_plan else z_bound + 4 * (target - z_bound)
        if upper is not None and not served and math.isfinite(upper) and target < upper < grown:
            grown = float(upper)  # a plan of value ≤ upper exists: the next ILP holds its columns
            stats["upper_target"] = stats.get("upper_target", 0.0) + 1.0
        target = grown
    return _full(job)


def _availability_duals(resolved: ResolvedScenario, sets: Sequence[TemplateSet], y_avail: np.ndarray,
                        bound: float) -> AvailabilityDuals:
    """:class:`AvailabilityDuals` from the reduction's (R, K) duals (the shape order of :func:`_reduction`)."""
    shapes = sorted({o.shape for o in resolved.offers} | {s for ts in sets for s in ts.shapes})
    shape_index = {s: k for k, s in enumerate(shapes)}
    region_index = {r: i for i, r in enumerate(resolved.regions)}
    prices: dict[tuple[str, str], float] = {}
    available: dict[tuple[str, str], float] = {}
    for o in resolved.offers:
        r, k = region_index.get(o.region), shape_index.get(o.shape)
        if r is None or k is None:
            continue
        pi = -float(y_avail[r, k])
        if pi > 0:
            prices[(o.region, o.shape)] = pi
            available[(o.region, o.shape)] = float(o.available)
    return AvailabilityDuals(bound, prices, available)


def solve_certified(resolved: ResolvedScenario, sets: Sequence[TemplateSet], *, dump_model: str | None = None,
                    progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                    anytime: Anytime | None = None, upper: float | None = None,
                    ilp_gap: float | None = None) -> Allocation:
    """Solve the allocation ILP, over the LP-reduced template set when that is provably lossless; anytime.

    Parameters
    ----------
    resolved, sets:
        The resolved scenario and its template sets.
    dump_model:
        Write the (last) allocation model solved to this ``.lp``/``.mps`` path.
    progress, cancel:
        The run contract of :mod:`planning.context` (cancel is checked between ILP attempts).
    anytime:
        Receives every plan and bound found (``planning.allocate.incumbent``); when given, a deadline raises
        :class:`Cancelled` and the caller returns its incumbent. Without it, the incumbent at a deadline is
        returned here (status ``feasible`` with its proven gap).
    upper:
        Objective "cost": the value of a plan known to be feasible (e.g. an earlier solve's plan of the same
        demand, priced at these offers). Speed only: when a certificate attempt fails, the next target is at most
        ``upper`` (that ILP holds every column a plan of value ≤ ``upper`` uses, so it is certified); the answer
        is the same.
    ilp_gap:
        Objective "cost": every ILP's relative gap instead of :func:`exact_when_small`'s 0 for small ones (a
        caller that uses the answer's proven bound, value × (1 − gap), like the commitment sizing's epoch
        solves: an ILP over free pools can spend minutes proving its last 0.01 % among symmetric plans).

    Returns
    -------
    Allocation
        The AllocationResult, the AllocationProblem actually solved, the masks used (None = all templates),
        the model-size stats and the LP time.

    Raises
    ------
    Cancelled
        When ``cancel`` is set (by the caller, or by a deadline with ``anytime`` given or before any plan).
    """
    stats: dict[str, float] = {"templates_total": float(sum(len(ts) for ts in sets))}
    timings: dict[str, float] = {}
    objective = resolved.scenario.objective.kind
    own = anytime is None
    tracker = anytime if anytime is not None else Anytime(served=objective == "served")
    groups = resolved.groups
    duals: list[AvailabilityDuals] = []
    try:
        if not _reducible(resolved, sets):
            alloc, problem, masks = _full(_Attempt(resolved, sets, groups, objective, dump_model, progress, cancel,
                                                   tracker, ilp_gap=ilp_gap if objective == "cost" else None))
        elif objective == "cost":
            alloc, problem, masks = _reduced_loop(
                _Attempt(resolved, sets, groups, "cost", dump_model, progress, cancel, tracker, ilp_gap=ilp_gap),
                timings, stats, duals=duals, upper=upper)
        else:
            phase1 = _reduced_loop(_Attempt(resolved, sets, groups, "served", None, progress, cancel, tracker),
                                   timings, stats)
            alloc, problem, masks = phase1
            alpha = float(alloc.alpha or 0.0)
            if alloc.has_plan and alpha > 1e-9 and stats.get("reduction_certified"):
                stats["phase1_alpha"] = alpha
                tracker.raise_bound(-alpha, "served fraction certified over all templates")
                keep = alpha * (1 - 1e-7)  # the same tolerance as the allocation's own phase 2
                scaled = [replace(g, classes=tuple(replace(c, rate=c.rate * keep) for c in g.classes)) for g in groups]
                stats.pop("reduction_certified", None)
                alloc, problem, masks = _reduced_loop(
                    _Attempt(resolved, sets, scaled, "cost", dump_model, progress, cancel, tracker, alpha=alpha),
                    timings, stats)
                alloc = replace(alloc, objective="served", alpha=alpha)
    except Cancelled:
        if not own or tracker.best is None or not timed_out(cancel):
            raise
        return tracker.allocation("allocation", stats, timings)
    return Allocation(result=alloc, problem=problem, masks=masks, stats=stats, timings=timings,
                      duals=duals[0] if duals else None)
