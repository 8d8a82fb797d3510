"""Allocation with templates generated on demand: LP column generation priced by a multiset search
(``planning.allocate.pricing``), then reduced-cost fixing and the ILP over the generated columns — certified
optimal over the whole template space.

Fixing (``pricing``'s docstring): the ILP over the columns of rc ≤ δ; a plan of cost ≤ z_LP + δ is optimal.
With the Lagrangian group bounds L_g (``pricing.group_bounds``) the thresholds are per group:
θ_g = L_g − y_d·D_g − y_n + (target − z_LB); the linked cover bounds (``linked_cover``) raise z_LB by each
model's region pairing and shrink every θ_g by the other models' gains.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from planning.allocate.certify import Allocation, allocation_problem, exact_when_small, refuted_target
from planning.allocate.incumbent import Anytime, proven_gap
from planning.allocate.linked_cover import CoverRun, linked_bounds
from planning.allocate.ondemand_record import record
from planning.allocate.ondemand_sets import (
    SingleRows,
    frame_set,
    single_type_multisets,
    single_type_sets,
    template_set,
)
from planning.allocate.ondemand_short import last_line, short_plan
from planning.allocate.pricers import LocalPricers, Pricers, make_pricers
from planning.allocate.pricing import (
    ColumnLP,
    LpRun,
    PricedGroup,
    PricingResult,
    RoundState,
    _max_throughput_bound,
    build_space,
    fix,
    group_bounds,
    solve_lp,
    supported,
)
from planning.allocate.problem import AllocationProblem, AllocationResult, start_from
from planning.allocate.solve import solve_allocation
from planning.allocate.solvers import proven_zero
from planning.allocate.warm import WarmStart
from planning.context import (
    CancelToken,
    Deadline,
    EngineContext,
    ProgressFn,
    check_cancel,
    sub_progress,
    time_left,
)
from planning.groups import Group
from planning.resolve import ResolvedScenario
from planning.templates.frame import merge_rows
from planning.templates.search import MultisetSpace
from planning.templates.sets import TemplateSet

START_FRACTION = 0.003  # first reduced-cost threshold δ: 0.3 % of the LP bound
MAX_ATTEMPTS = 6  # fixing + ILP rounds (δ raised each time) before the best plan is returned uncertified
INCUMBENT_SHARE = 0.25  # an incumbent ILP (restricted master) gets at most this share of the time left …
INCUMBENT_SHARE_PRESSED = 0.5  # … half of it near the deadline (the first plans matter more than the proof)
INCUMBENT_MIN_S = 0.5  # … but at least this (HiGHS returns its best plan when stopped) …
INCUMBENT_MAX_S = 10.0  # … and at most this: the proof of optimality needs the rest
FULL_MASTER_COLUMNS = 2000  # a restricted master up to this many columns is solved whole (coral-extended: 864)
INCUMBENT_COLUMNS = 8  # an incumbent ILP keeps the master LP's support and the 8 best columns (reduced cost) per group
NEAR_DEADLINE_RATIO = 4.0  # "near the deadline" at the first master LP: less than 4× the time spent is left
INCUMBENT_GAP = 0.01  # an incumbent ILP stops within 1 % of its own optimum (the certificate comes later)

def ilp_problem(resolved: ResolvedScenario, groups: Sequence[Group], sets: Sequence[TemplateSet],
                masks: Sequence[np.ndarray], cancel: CancelToken | None = None) -> AllocationProblem:
    """The cost ILP over the fixed columns: :func:`planning.allocate.certify.allocation_problem` (the one builder
    of allocation problems), with three deliberate differences.

    - No budget cap: the engine certifies the *cost* optimum; :func:`solve_on_demand` compares it with
      ``objective.budget_per_hour`` afterwards (within the budget the cost optimum is the capped optimum; above
      it no plan within the budget serves all demand, and the library path reports that with its diagnostics).
      With the cap inside, an over-budget scenario would spend every fixing attempt on infeasible ILPs.
    - The time limit is what is left of the solve's deadline (``options.time_limit_s`` at most).
    - ``settle_stall``: the group-by-group shortcut's settle of competing parts gives way to the merged ILP at its
      first priced round in vain, as the baselines' does (a sweep's ×2.5: every fixing ILP's settle sat at its
      λ = 0 bound, 10⁻⁶ under its repaired plan, for all six rounds, 50 of the point's 78 s; docs/allocation.md).
      The fixing ILPs (:func:`_certify`) skip the settle (``settle=False``): over their few columns the merged ILP
      proves the optimum sooner (a sweep's ×4: 144 → 95 s).
    """
    problem = allocation_problem(resolved, sets, groups=groups, masks=masks, objective="cost")
    return replace(problem, budget_per_hour=None, time_limit_s=time_left(cancel, problem.time_limit_s),
                   settle_stall=True)


@dataclass
class OnDemandPlan:
    """What ``allocate_on_demand`` returns: the ILP result, the sets it used and the certificate."""

    alloc: AllocationResult
    sets: list[TemplateSet]
    masks: list[np.ndarray]
    pricing: PricingResult
    certified: bool
    delta: float
    timings: dict[str, float] = field(default_factory=dict)  # seconds of each step (pricing, bounds, fixing, ILP)
    by_covers: bool = False  # proven by the linked covers' plan meeting the bound (no fixing round: _cover_plan)


def _check(cancel: CancelToken | None) -> None:
    check_cancel(cancel, "on-demand allocation")


def _report(progress: ProgressFn | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(fraction, message)


def _rmp_sets(priced: Sequence[PricedGroup], keys: Iterable[tuple[int, int, int]],
              provenance: Callable[[str], str] | None) -> tuple[list[TemplateSet], list[np.ndarray]]:
    """Template sets of the restricted master's columns ``keys`` ((group, code, region); every row in the ILP)."""
    codes: list[set[int]] = [set() for _ in priced]
    for gi, code, _r in keys:
        codes[gi].add(code)
    sets, masks = [], []
    for pg, mine in zip(priced, codes, strict=True):
        P = np.stack([pg.pool_row(c) for c in sorted(mine)]) if mine else np.zeros((0, pg.space.nmax), np.int64)
        ts = template_set(pg, P, provenance)
        sets.append(ts)
        masks.append(np.ones(len(ts), dtype=bool))
    return sets, masks


def additive_bound(priced: Sequence[PricedGroup], prices: np.ndarray, K: float) -> float:
    """A lower bound on every plan's cost available before any LP: T(M) ≤ Σ_{k∈M} v_k (the search's additive
    throughput bound) and cost(M) = Σ_{k∈M} (1 + K)·p_k, so covering D_g costs at least D_g · min_k (1 + K)·p_k / v_k
    (each shape at its cheapest region; availability relaxed), and a demanded group runs at least one instance, so
    at least the cheapest node. Weak (coral-core: 37 % below the optimum) but valid from the start, so a plan
    returned at a time limit before the first pricing round has a proven gap (``templates.sets.additive_cost_bound``
    is the same bound on the library path)."""
    with np.errstate(invalid="ignore"):
        cheapest = np.where(np.isnan(prices), np.inf, (1.0 + K) * np.nan_to_num(prices)).min(axis=0)  # (K,)
    total = 0.0
    one_node = float(cheapest.min()) if cheapest.size else math.inf
    for pg in priced:
        v = pg.space.v
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(v > 0, cheapest / np.where(v > 0, v, 1.0), np.inf)
        best = float(ratio.min()) if ratio.size else math.inf
        if not math.isfinite(best):
            return -math.inf  # a group no shape serves: no plan, no bound needed
        total += max(pg.demand * best, one_node if pg.demand > 0 else 0.0)  # ≥ one instance of its own
    return total


def near_deadline(cancel: CancelToken | None) -> bool:
    """True when the solve's deadline is near: less than ``NEAR_DEADLINE_RATIO`` times the time spent so far is
    left (a busy machine or a short limit), so the first plans matter more than the proof."""
    if not isinstance(cancel, Deadline):
        return False
    left = cancel.remaining_s()
    if left is None:
        return False
    return left < NEAR_DEADLINE_RATIO * max(cancel.limit_s - left, 0.0)


def lagrangian_bound(priced: Sequence[PricedGroup], pr: PricingResult, lp: ColumnLP, available: np.ndarray,
                     per_region: bool, cancel: CancelToken | None, pricers: Pricers) -> tuple[np.ndarray, float]:
    """(L_g per group, Σ_g L_g + Σ y_a·A) at the LP optimum's duals ``pr``: cost(ν) ≥ Σ_g (group cost at prices w)
    + Σ y_a·A ≥ Σ_g L_g + Σ y_a·A. The integer covers from the master's columns give each group's U_g.

    Only at the LP optimum: ``group_bounds`` lists the columns a cover below U_g may use by rc ≤ U_g − y_d·D − y_n,
    which needs every reduced cost ≥ 0 (a restricted master's duals leave negative ones, and a cover could then
    use a column above that threshold)."""
    by_group: list[set[int]] = [set() for _ in priced]
    for gi, code, _r in lp.columns:
        by_group[gi].add(code)
    seeds = []
    for pg, mine in zip(priced, by_group, strict=True):
        codes = np.array(sorted(mine), dtype=np.int64)
        P0 = np.stack([pg.pool_row(int(c)) for c in codes]) if codes.size else np.zeros((0, pg.space.nmax), np.int64)
        seeds.append((P0, pg.space.throughput(P0)))
    L = group_bounds(priced, pr, seeds, per_region, cancel, pricers)
    finite = np.isfinite(lp.node_cost)
    y_a_value = float(((lp.node_cost[finite] - pr.w[finite]) * available[finite]).sum())  # Σ y_a·A (y_a ≤ 0)
    return L, float(L.sum()) + y_a_value


def incumbent_limit(cancel: CancelToken | None, limit_s: float, share: float = INCUMBENT_SHARE) -> float:
    """Seconds an incumbent ILP may take: a share of the time left (the search for better plans and their proof
    needs the rest), at least ``INCUMBENT_MIN_S``."""
    return max(INCUMBENT_MIN_S, min(INCUMBENT_MAX_S, share * time_left(cancel, limit_s)))


@dataclass(frozen=True)
class OnDemandOptions:
    """How :func:`allocate_on_demand` searches and labels its columns, and which shortcut its certificate may try.

    ``per_region``: one price vector per region (False: their minimum); ``provenance(gpu)`` labels the templates.
    ``cover_plan``: try the plan over the linked covers' multisets before the fixing rounds (:func:`_cover_plan`),
    proven optimal at once when it meets the bound, and solve no master ILP after the first plan
    (:meth:`_Masters.wanted`). A what-if from a base plan asks for it; a cold solve keeps the fixing rounds alone
    and every master, so each preset's recorded plan (``benchmarks.check_plans``) stays what it is.
    ``single_rows``: the sets carry every single-GPU-type multiset (masked out of the ILPs) for the baselines; False
    for a plan nobody compares with baselines (a slider's position): never placed, the same ILPs and plan.
    ``answer_short``: a proven shortfall of the LP is answered ``infeasible`` (``ondemand_short``), not None.
    """

    per_region: bool = True
    provenance: Callable[[str], str] | None = None
    cover_plan: bool = False
    single_rows: bool = True
    answer_short: bool = False


def allocate_on_demand(priced: Sequence[PricedGroup], resolved: ResolvedScenario, *,
                       options: OnDemandOptions = OnDemandOptions(), progress: ProgressFn | None = None,
                       cancel: CancelToken | None = None, pricers: Pricers | None = None,
                       anytime: Anytime | None = None) -> OnDemandPlan | None:
    """LP over all templates by column generation, then reduced-cost fixing + ILP until certified; anytime.

    Plans found on the way go to ``anytime`` as soon as they exist (``planning.allocate.incumbent``): the
    restricted master ILP over the seed columns before the first pricing round and over the columns of rounds
    1, 2, 4, … and of the LP optimum, then every fixing ILP. Bounds go there too: each round's Farley bound, z_LP,
    the Lagrangian z_LB, and min(t, the ILP's dual bound) for a certificate target t that an ILP refuted.

    Parameters
    ----------
    priced:
        One ``PricedGroup`` per (model, phase) group (single class), all over the same shapes.
    resolved:
        The resolved scenario: its price/availability matrices, offers and ``options`` (K, solver,
        time_limit_s, mip_rel_gap) define the LP and the ILP.
    options:
        Per-region search, the templates' provenance labels, the covers' plan (:class:`OnDemandOptions`).
    progress, cancel:
        The run contract of :mod:`planning.context`; progress covers 0..1 of this call and names each step:
        ``pricing:`` (column generation rounds with the LP bound, the Lagrangian group bounds), ``fixing:``
        and ``ILP:`` per attempt.
    pricers:
        Where the pricing searches run (default: here, one group after another; see ``planning.allocate.pricers``).
    anytime:
        Receives the incumbents and bounds (default: one of its own, for callers that only want the answer).

    Returns
    -------
    OnDemandPlan or None
        None when the LP relaxation is infeasible (no plan meets the demand). ``certified`` False: the best plan
        found after ``MAX_ATTEMPTS`` fixing rounds, status ``feasible`` with its proven gap.

    Raises
    ------
    Cancelled
        When ``cancel`` is set; the incumbent so far is in ``anytime`` (the pipeline returns it at a time limit).
    """
    per_region, provenance = options.per_region, options.provenance
    run = _Run(priced, resolved, [pg.group for pg in priced], per_region, provenance, progress, cancel, {},
               pricers if pricers is not None else LocalPricers(priced),
               anytime if anytime is not None else Anytime(), options.cover_plan, options.single_rows)
    shapes = priced[0].space.shapes
    prices, available = resolved.price_matrix(shapes), resolved.availability_matrix(shapes)
    t1 = time.perf_counter()
    masters = _Masters(run)
    run.anytime.raise_bound(additive_bound(priced, prices, resolved.scenario.options.K),
                            "additive throughput bound (availability relaxed)")
    pr, _lp = solve_lp(priced, prices, available, resolved.scenario.options.K, per_region=per_region,
                       run=LpRun(cancel, run.pricers, sub_progress(progress, 0.0, 0.6), masters.on_round))
    run.timings["pricing_lp_seconds"] = time.perf_counter() - t1
    if not pr.feasible:
        proven = options.answer_short and pr.shortfall is not None and pr.shortfall.proven
        return short_plan(run, pr, _lp.order) if proven else None
    run.anytime.raise_bound(pr.z_lp, "LP optimum over all templates")
    if masters.wanted():
        masters.solve(_lp, "restricted master ILP at the LP optimum")
    _report(progress, 0.6, f"pricing: Lagrangian cover bounds of {len(priced)} groups (LP bound {pr.z_lp:,.2f} $/h)")
    t_lb = time.perf_counter()
    L, z_lb = lagrangian_bound(priced, pr, _lp, available, per_region, cancel, run.pricers)
    run.timings["group_bounds_seconds"] = run.timings.get("group_bounds_seconds", 0.0) + time.perf_counter() - t_lb
    run.anytime.raise_bound(max(z_lb, pr.z_lp), "Lagrangian bound")
    _report(progress, 0.65, f"pricing: linked cover bounds (region pairing; Lagrangian bound {z_lb:,.2f} $/h)")
    linked = linked_bounds(CoverRun(priced, resolved, run.pricers, lambda pg, P: template_set(pg, P, provenance),
                                    cancel, per_region, run.anytime.value), pr, L, z_lb)
    run.timings["linked_bounds_seconds"] = linked.seconds
    L, pr.z_lb = linked.shares, max(linked.z_lb, pr.z_lp)
    pr.linked_gain = linked.gain
    pr.linked_clock_stops = linked.clock_stops
    run.anytime.raise_bound(pr.z_lb, "linked Lagrangian bound (region pairing inside)")
    return _certify(run, pr, L, linked.covers if options.cover_plan else ())


@dataclass(frozen=True)
class _Run:
    """What every step of one :func:`allocate_on_demand` call shares."""

    priced: Sequence[PricedGroup]
    resolved: ResolvedScenario
    groups: list[Group]
    per_region: bool
    provenance: Callable[[str], str] | None
    progress: ProgressFn | None
    cancel: CancelToken | None
    timings: dict[str, float]
    pricers: Pricers
    anytime: Anytime
    cover_plan: bool = False  # OnDemandOptions.cover_plan: a what-if from a base plan
    single_rows: bool = True  # OnDemandOptions.single_rows: the sets carry the baselines' rows


class _Masters:
    """The incumbent ILPs over the restricted master's columns (``on_round``: after the seed LP and pricing rounds
    1, 2, 4, …; ``solve``: at the LP optimum), each offered to the run's ``anytime``."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.tried: set[int] = set()  # master sizes (column counts) already solved as an ILP

    def on_round(self, state: RoundState) -> None:
        anytime = self.run.anytime
        if state.stage == "lp" and state.rounds == 1 and state.feasible:
            self.solve(state.lp, "restricted master ILP over the seed columns", near_deadline(self.run.cancel))
        elif state.stage == "priced":
            anytime.raise_bound(state.farley_bound(anytime.value), f"Farley bound of pricing round {state.rounds}")
            if state.added and state.rounds & (state.rounds - 1) == 0 and self.wanted():  # rounds 1, 2, 4, 8, …
                self.solve(state.lp, f"restricted master ILP after pricing round {state.rounds}")

    def wanted(self) -> bool:
        """Whether a master ILP after the seed columns' is worth its time: in a cold solve always; in a what-if from
        a base plan (``cover_plan``) only while there is no plan, as its certificate (the covers' plan, the fixing
        ILPs) finds the optimum (catalog-wide's demand ×2: the round-1 master took 2.3 s for $143.20/h, the seed's
        plan was $144.64/h and the optimum $136.36/h; 14.0 → 11.9 s)."""
        return not (self.run.cover_plan and self.run.anytime.best is not None)

    def solve(self, lp: ColumnLP, label: str, pressed: bool = False) -> None:
        """Incumbent ILPs over a short list of the master's columns, then (when cheap) the whole master. Near the
        deadline (``pressed``) the LP's support alone comes first (a plan in milliseconds of HiGHS, in case the
        short list's ILP is cut off) and each ILP gets half the time left instead of a quarter. A what-if's merge
        competing parts at once (no settle: catalog-wide's demand ×2 seed master 2.3 → 0.8 s, the same plan); a
        cold solve's keep the settle (coral-extended's masters 0.78 s, 1.04 s without)."""
        run = self.run
        if len(lp.order) in self.tried:
            return  # the same columns (no round added any): nothing new to find
        self.tried.add(len(lp.order))
        t = time.perf_counter()
        _check(run.cancel)
        short = lp.best_columns(INCUMBENT_COLUMNS)
        # the short list first (a plan fast), then the whole master when the short list found none or the master is
        # small enough to be cheap (coral-core: 48 then 288 columns, 31.81 then 29.77 $/h); a what-if from a base plan
        # (cover_plan) stops at the short list's plan: the covers' plan proves it later without the master's
        # (coral-extended at demand ×2: two whole masters of ~500 columns, 1.8 of its 10.6 CPU-s, issue 41)
        lists = [short, lp.order] if len(short) < len(lp.order) else [lp.order]
        if pressed:
            support = lp.best_columns(0)
            if len(support) < len(lists[0]):
                lists.insert(0, support)
        share = INCUMBENT_SHARE_PRESSED if pressed else INCUMBENT_SHARE
        base_limit = run.resolved.scenario.options.time_limit_s
        for i, keys in enumerate(lists):
            if i and run.anytime.best is not None and (len(keys) > FULL_MASTER_COLUMNS or run.cover_plan):
                break
            sets, masks = _rmp_sets(run.priced, keys, run.provenance)
            problem = ilp_problem(run.resolved, run.groups, sets, masks, run.cancel)
            alloc = solve_allocation(replace(problem, time_limit_s=incumbent_limit(run.cancel, base_limit, share),
                                             mip_rel_gap=max(problem.mip_rel_gap, INCUMBENT_GAP),
                                             settle=not run.cover_plan), diagnose=False)
            run.anytime.offer(alloc, sets, masks, f"{label} ({len(keys):,} of its {len(lp.columns):,} columns)")
            _check(run.cancel)
        run.timings["incumbent_seconds"] = run.timings.get("incumbent_seconds", 0.0) + time.perf_counter() - t


def _fixed_sets(run: _Run, kept: Sequence[np.ndarray], single: Sequence[np.ndarray],
                single_frames: dict[int, pl.DataFrame]) -> tuple[list[TemplateSet], list[np.ndarray]]:
    """The fixing ILP's template sets: per group the kept multisets (masked in) plus every single-GPU-type
    multiset (for the baselines; masked out unless kept). The single-GPU-type rows are the same in every fixing
    attempt: ``single_frames`` keeps them by group, and each attempt adds the kept rows not among them (the rows
    of ``frame(kept ∪ single)``: one row per multiset, sorted by id)."""
    sets, masks = [], []
    for gi, (pg, P, S1) in enumerate(zip(run.priced, kept, single, strict=True)):
        _check(run.cancel)  # a group's exact placements take up to ~0.1 CPU-s (coral-extended): the limit holds
        if gi not in single_frames:
            single_frames[gi] = pg.space.frame(S1)
        frame = single_frames[gi]
        if P.size:
            mine = pg.space.frame(P)
            frame = merge_rows(mine, frame)
        ts = frame_set(pg, frame, run.provenance)
        masks.append(np.isin(row_codes(pg.space, ts), pg.space.codes(P)))
        sets.append(ts)
    return sets, masks


def _certify(run: _Run, pr: PricingResult, L: np.ndarray,
             covers: Sequence[np.ndarray | None] = ()) -> OnDemandPlan:
    """Reduced-cost fixing + ILP rounds from the bound ``pr.z_lb`` until a plan within the target is found (then
    optimal over every template), else the best plan found after ``MAX_ATTEMPTS`` rounds with its proven gap.
    First, the plan over the linked covers' multisets (``covers``, :func:`_cover_plan`): when it meets the bound
    it is proven optimal over every template without a fixing round."""
    priced, anytime, timings, z_lb = run.priced, run.anytime, run.timings, pr.z_lb
    single = [single_type_multisets(pg) if run.single_rows else np.zeros((0, pg.space.nmax), dtype=np.int64)
              for pg in priced]
    single_frames: dict[int, pl.DataFrame] = {}
    met = _cover_plan(run, covers, single, single_frames, z_lb)
    if met is not None:
        return OnDemandPlan(met[0], met[1], met[2], pr, True, 0.0, timings, by_covers=True)
    target = z_lb + max(START_FRACTION * abs(z_lb), 1e-9)
    if anytime.best is not None and z_lb <= anytime.value < target:
        # a plan is known within the first margin (a warm start's, often): certify at its value, over fewer columns
        target = anytime.value * (1 + 1e-9) + 1e-9
    delta = target - z_lb
    certified = False
    alloc: AllocationResult | None = None
    sets: list[TemplateSet] = []
    masks: list[np.ndarray] = []
    for attempt in range(MAX_ATTEMPTS):
        step = 0.7 + 0.3 * attempt / MAX_ATTEMPTS
        again = f" (attempt {attempt + 1})" if attempt else ""
        _report(run.progress, step, f"fixing: templates within {delta:,.4g} $/h of the bound {z_lb:,.2f} $/h{again}")
        t2 = time.perf_counter()
        # a plan using (M, r) of group g costs ≥ z_LB − L_g + W_r(M) + [T < D](y_d(D − T) + y_n) ≥ z_LB − L_g
        # + rc(M, r) + y_d·D + y_n, so only rc ≤ θ_g = L_g − y_d·D − y_n + (target − z_LB) can be in a plan ≤ target
        # (with the linked cover bounds, L_g is a linked group's share L_m − L_partner and z_LB is z′: linked_cover)
        thetas = [float(L[gi] - pr.y_d[gi] * pg.demand - pr.y_n[gi] + delta) for gi, pg in enumerate(priced)]
        thetas = [max(t, delta) for t in thetas]  # and never below plain reduced-cost fixing's δ
        kept = fix(priced, pr, thetas, run.per_region, run.cancel, run.pricers)
        sets, masks = _fixed_sets(run, kept, single, single_frames)
        timings["fixing_seconds"] = timings.get("fixing_seconds", 0.0) + time.perf_counter() - t2
        _check(run.cancel)
        _report(run.progress, step + 0.15 / MAX_ATTEMPTS,
                f"ILP: {sum(int(m.sum()) for m in masks):,} generated templates{again}")
        t3 = time.perf_counter()
        problem = exact_when_small(ilp_problem(run.resolved, run.groups, sets, masks, run.cancel))
        alloc = solve_allocation(replace(problem, start=_incumbent_start(anytime, problem), settle=False))
        timings["ilp_seconds"] = timings.get("ilp_seconds", 0.0) + time.perf_counter() - t3
        anytime.offer(alloc, sets, masks, f"fixing ILP{again} over {sum(int(m.sum()) for m in masks):,} templates")
        value = alloc.total_per_hour
        certified = alloc.has_plan and value is not None and value <= target + 1e-9 * max(1.0, abs(target))
        proven = refuted_target(alloc, target)  # a plan of value ≤ target uses only its columns: ≥ min(target, bound)
        if proven is not None:
            anytime.raise_bound(proven, f"fixing ILP{again}'s own bound" if certified else
                                f"certificate target refuted by fixing ILP{again}")
        if certified:
            break
        _check(run.cancel)
        target = _next_target(alloc, target, z_lb, anytime)
        delta = target - z_lb
    if not certified and anytime.best is not None:  # out of attempts: the best plan found, with its proven gap
        best = anytime.best
        alloc = replace(best.alloc, status="feasible", gap=anytime.gap())
        sets, masks = list(best.sets), list(best.masks or [np.ones(len(ts), dtype=bool) for ts in best.sets])
    assert alloc is not None  # MAX_ATTEMPTS ≥ 1
    return OnDemandPlan(alloc, sets, masks, pr, certified, delta, timings)


def _cover_plan(run: _Run, covers: Sequence[np.ndarray | None], single: Sequence[np.ndarray],
                single_frames: dict[int, pl.DataFrame], z_lb: float,
                ) -> tuple[AllocationResult, list[TemplateSet], list[np.ndarray]] | None:
    """The allocation ILP over the multisets of the linked covers (every group's model's cheapest cover at the
    Lagrangian prices, ``linked_cover``), offered to the run's incumbent; returned with its sets and masks when its
    plan meets the bound ``z_lb`` (proven gap 0 within ``solvers.ZERO_GAP``): a plan of the whole problem whose cost equals a lower
    bound over every template is optimal over every template, so no fixing round is needed.

    Why it often meets it: at the Lagrangian prices each model's cover is its cheapest, and when those covers fit the
    availability together and use every priced offer up to its count, their cost at the true prices is z_LB itself.
    The ILP (its own templates, every region, the true availability and prices) finds a plan at least that cheap.
    None when some group has no cover (an unlinked group) or the plan stays above the bound."""
    if not covers or any(c is None or c.shape[0] == 0 for c in covers):
        return None
    t = time.perf_counter()
    kept = [np.asarray(c) for c in covers if c is not None]
    sets, masks = _fixed_sets(run, kept, single, single_frames)
    problem = exact_when_small(ilp_problem(run.resolved, run.groups, sets, masks, run.cancel))
    alloc = solve_allocation(problem)
    run.timings["cover_plan_seconds"] = time.perf_counter() - t
    templates = sum(int(m.sum()) for m in masks)
    run.anytime.offer(alloc, sets, masks, f"ILP over the linked covers' {templates:,} templates")
    value = alloc.total_per_hour
    if alloc.status != "optimal" or value is None:
        return None
    gap = proven_gap(float(value), z_lb)
    if not proven_zero(gap, float(value), z_lb):
        return None
    return replace(alloc, gap=max(gap or 0.0, alloc.gap or 0.0)), sets, masks


def _incumbent_start(anytime: Anytime, problem: AllocationProblem) -> dict[tuple[str, str], int]:
    """The best plan so far as a MIP start of a fixing ILP (HiGHS then never returns a worse plan, so a target at
    its value is met), or nothing when one of its templates is not among the ILP's (a plan above the target)."""
    return {} if anytime.best is None else start_from(anytime.best.alloc.counts, problem)


def _next_target(alloc: AllocationResult, target: float, z_lb: float, anytime: Anytime) -> float:
    """The next certificate target after a fixing ILP missed ``target``: its plan's value (or 4× the margin)."""
    value = alloc.total_per_hour
    raised = float(value) if alloc.has_plan and value is not None else z_lb + 4 * (target - z_lb)
    # the next target need not exceed the best plan found so far (an incumbent ILP's, often far below this
    # fixing ILP's over its few templates): a plan of that value exists, so the certificate at it succeeds
    # once the ILP holds every template that can be in a plan at least as cheap
    if anytime.value < raised and anytime.value > target * (1 + 1e-9) + 1e-9:
        raised = anytime.value
    return raised


def solve_on_demand(ctx: EngineContext, resolved: ResolvedScenario, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, anytime: Anytime | None = None,
                    warm: Mapping[str, np.ndarray] | WarmStart | None = None,
                    on_single: SingleRows | Callable[[list[TemplateSet]], None] | None = None,
                    with_baselines: bool = True) -> Allocation | None:
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
    anytime:
        Receives every plan and bound found on the way (``planning.allocate.incumbent``).
    warm:
        Per group id, padded multisets (``MultisetSpace`` rows) to start column generation with beside the seed
        columns, e.g. the columns the previous timeline epoch used (``planning.timeline.columns``); the result is
        the cold start's, certified over all templates.
    on_single:
        Called once the groups' spaces exist, before pricing, with :func:`single_type_sets` (the baselines'
        single-GPU-type templates; the pipeline starts those baselines on them); a
        :class:`~planning.allocate.ondemand_sets.SingleRows` also names the pool their placements may use.
    with_baselines:
        False for a plan without baselines: no single-GPU-type rows (``on_single`` not called), and an LP that
        proves no plan meets the demand is answered ``infeasible`` here (:class:`OnDemandOptions`).

    Returns
    -------
    Allocation or None
        The certified allocation with ``sets`` (each set holds the ILP's templates plus, with baselines, every
        single-GPU-type template) and ``masks`` (the ILP's rows), or None when the scenario is not supported
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
        check_cancel(cancel, f"pricing: T̂ tables of {g.id}")
        sp = build_space(ctx.perf, ctx.catalog, resolved.specs[g.model], g, resolved.shapes, opts.nmax, opts.rho,
                         opts.max_stages)
        rows = warm.rows(g.id, sp.shapes, sp.nmax) if isinstance(warm, WarmStart) else \
            None if warm is None else warm.get(g.id)
        priced.append(PricedGroup(g, sp, float(g.demand), _max_throughput_bound(sp), {}, rows))
    timings["tables_seconds"] = time.perf_counter() - t0

    def provenance(gpu: str) -> str:
        return str(ctx.perf.gpu_calibration(gpu).provenance)

    if on_single is not None and with_baselines:
        t1 = time.perf_counter()
        single = on_single if isinstance(on_single, SingleRows) else SingleRows(on_single)
        single.start(single_type_sets(priced, provenance, single.pool, cancel))
        timings["single_type_seconds"] = time.perf_counter() - t1
    pricers = make_pricers(priced)  # the process default backend: here, or Ray actors (--backend ray)
    try:
        # a what-if or sweep point from a neighbouring plan tries the linked covers' plan first (OnDemandOptions)
        options = OnDemandOptions(provenance=provenance, cover_plan=isinstance(warm, WarmStart),
                                  single_rows=with_baselines, answer_short=not with_baselines)
        plan = allocate_on_demand(priced, resolved, options=options,
                                  progress=sub_progress(progress, 0.05, 1.0), cancel=cancel, pricers=pricers,
                                  anytime=anytime)
    finally:
        pricers.close()
    if plan is None:
        return None
    timings.update(plan.timings)
    budget = resolved.scenario.objective.budget_per_hour
    total = plan.alloc.total_per_hour  # provisioning + penalty + KV transfer: what the budget bounds (AllocationProblem)
    if budget is not None and total is not None and total > budget * (1 + 1e-9):
        # The cheapest plan that serves all demand is over the budget, so no plan within it serves all demand:
        # the library path reports the infeasibility with its diagnostics (the budget that would serve 100 %).
        # Within the budget, the cost optimum is also the budget-capped optimum.
        return None
    _report(progress, 1.0, last_line(plan))
    record(plan, priced, stats, timings)
    return Allocation(result=plan.alloc, problem=None, masks=plan.masks, stats=stats, timings=timings,
                      sets=plan.sets)


def row_codes(space: MultisetSpace, ts: TemplateSet) -> np.ndarray:
    """Multiset code of each row of a TemplateSet built from ``space`` (its padded sorted multiset · ``pow``)."""
    return space.usage_codes(np.asarray(ts.usage, dtype=np.int64).reshape(len(ts), space.K))
