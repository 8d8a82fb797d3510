"""Linked Lagrangian cover bounds for the on-demand certificate: a model's prefill and decode covered together,
with their region pairing (R) inside (issue 41).

The on-demand engine's Lagrangian bound (``ondemand.lagrangian_bound``) relaxes the availability rows (A) with the
LP's duals y_a ≤ 0 and splits what is left by group: cost(ν) ≥ Σ_g C_g(ν_g) + Σ_a y_a·A, where C_g is group g's
cost at the prices w = (1 + K)·p − y_a, and min C_g over the covers of D_g is L_g (``pricing.group_bounds``).
The pairing (R) ties a model's prefill group p and decode group d together (their shares per region are equal),
so the relaxation may keep it inside one subproblem per model m instead:

    L_m = min { C_p(ν_p) + C_d(ν_d) + transfer cost : (D), (R) for m's link; no (A) }  ≥  L_p + L_d,

and cost(ν) ≥ Σ_m L_m + Σ_{g unlinked} L_g + Σ_a y_a·A = z_LB + Σ_m (L_m − L_p − L_d): still a lower bound on
every plan (the bound of the third pass's demand ×2 was 2.6 % under the optimum, all of it the pairing).

**Computing L_m without every template.** A cover of m that uses column (M, r) of group g (partner g′) costs at
least rc_g(M, r) + y_d,g·D_g + y_n,g + L_g′ (the LP's dual feasibility prices the rest of g's cover, the partner
costs at least its own bound). So with a current lower bound ℓ_m and a slack δ, only columns with

    rc_g(M, r) ≤ θ_g = ℓ_m + δ − L_g′ − y_d,g·D_g − y_n,g

can be in a cover of cost ≤ ℓ_m + δ; the search (``pricing.fix``) lists all of them. The ILP of m's part over
those columns (the allocation model's own builder, at the offer prices w/(1 + K) and unlimited availability,
without the columns another one beats in their region: :func:`undominated`) has a HiGHS dual bound B, and every
other cover costs more than ℓ_m + δ, so ℓ_m := max(ℓ_m, min(B, ℓ_m + δ)) is again a lower bound on L_m, whatever
gap or time limit stopped that ILP. When the ILP's plan costs at most ℓ_m + δ, B is L_m (within the ILP's gap);
otherwise δ becomes that plan's value − ℓ_m and the step repeats (at most :data:`LINK_ROUNDS` times).

**Stops counted in work.** Each linked cover ILP stops at :data:`LINK_NODES` HiGHS branch-and-bound nodes (or its
gap), so the same scenario gives the same bound, certificate and plan on every machine, busy or quiet (as the
baselines' :data:`~planning.baselines.base.BASELINE_NODES` and the sharing engine's ``JointWork``). A wall clock
stays only as a far safety net (:data:`LINK_SAFETY_S` per ILP, and the solve's own deadline): when it stops an
ILP, :attr:`LinkedBounds.clock_stops` counts it (the plan's ``stats["linked_bound_clock_stops"]``). The bound
holds whatever stopped the ILP: it is the ILP's proven dual bound, capped at ℓ_m + δ.

**Using it in the certificate.** A plan of cost ≤ target that uses (M, r) of a linked group g costs at least
z′ − L_m + L_g′ + rc_g(M, r) + y_d,g·D_g + y_n,g (z′ the linked bound), so the fixing search keeps
rc_g ≤ (L_m − L_g′) − y_d,g·D_g − y_n,g + (target − z′): the formula of ``ondemand._certify`` with L_g replaced
by g's share L_m − L_g′ and z_LB by z′. Every threshold of a model shrinks by the other models' gains, so fewer
templates enter the fixing ILP, and its target (z′ plus a margin) starts nearer the optimum. Tested against the
exact ILP over every template on seeded instances (``tests/engine/test_linked_cover.py``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from planning.allocate.certify import allocation_problem
from planning.allocate.pricers import PriceCall, Pricers
from planning.allocate.pricing import PricedGroup, PricingResult, own_spaces
from planning.allocate.problem import AllocationResult, Offer, start_from
from planning.allocate.solve import solve_allocation
from planning.context import CancelToken, Deadline, check_cancel, time_left
from planning.groups import region_links
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

LINK_ROUNDS = 3
"""Search + ILP rounds per model (the first at a small slack, then at the slack its plan showed)."""
LINK_NODES = 5_000
"""The work limit of a linked cover ILP: HiGHS branch-and-bound nodes (``mip_max_nodes``). Stopped there, its dual
bound still holds. Every linked cover ILP of coral-core, coral-extended and catalog-wide closes at its root node
(one node, at most 0.3 s; docs/benchmarks.md, "Cold solves: where the time goes")."""
LINK_SAFETY_S = 60.0
"""The far wall-clock safety net of each linked cover ILP (HiGHS's MIP interrupt callback checks it, joined with
the solve's deadline): it binds only when the work limit is out of reach on this machine, and is then counted in
:attr:`LinkedBounds.clock_stops`."""
LINK_START = 0.003
"""First slack δ: 0.3 % of ℓ_m (as the certificate's first margin)."""
LINK_GAP = 1e-5
"""Relative gap of a linked cover ILP: its dual bound is what counts."""
UNLIMITED = 1_000_000
"""Availability of every offer in a linked cover ILP ((A) is priced into w, not a constraint)."""
LINK_THREADS = min(2, os.cpu_count() or 1)
"""Models bounded at once (threads: HiGHS frees the GIL in its solves, as in ``finance.epochs``). Each model's bound
reads only its own two groups' spaces, so the bounds, the covers and the plan are the ones of one model after
another (a test asserts it); coral-extended's demand ×2: 3.7 → 2.3 s of wall on two quiet cores."""


@dataclass(frozen=True)
class CoverRun:
    """What the linked bounds share with the on-demand run: the groups, the scenario, where searches run, the
    template builder (``ondemand.template_set`` with the run's provenance), the cancel token and the best plan's
    value so far (a slack beyond it cannot matter)."""

    priced: Sequence[PricedGroup]
    resolved: ResolvedScenario
    pricers: Pricers
    make_set: Callable[[PricedGroup, np.ndarray], TemplateSet]
    cancel: CancelToken | None = None
    per_region: bool = True
    incumbent: float = math.inf


@dataclass(frozen=True)
class LinkedBounds:
    """Per group its share bound (L_m − L_partner for a linked group, L_g otherwise), the linked bound z′, per
    linked model (prefill index, decode index, gain L_m − L_p − L_d, rounds) and how many of its ILPs a wall clock
    stopped (the safety net or the solve's deadline; 0 when every one stopped on its gap or work limit)."""

    shares: np.ndarray
    z_lb: float
    models: tuple[tuple[int, int, float, int], ...]
    seconds: float
    clock_stops: int = 0
    covers: tuple[np.ndarray | None, ...] = ()
    """Per group, the multisets of its model's cheapest linked cover found (None: unlinked, or no cover found)."""

    @property
    def gain(self) -> float:
        """z′ − z_LB: what the pairing adds to the Lagrangian bound."""
        return float(sum(m[2] for m in self.models))


def linked_pairs(priced: Sequence[PricedGroup]) -> list[tuple[int, int]]:
    """(prefill group index, decode group index) of every model planned in both phases (single-class groups)."""
    index = {c.id: gi for gi, pg in enumerate(priced) for c in pg.group.classes}
    out = []
    for sender, receiver in region_links([pg.group for pg in priced]):
        if sender in index and receiver in index:
            out.append((index[sender], index[receiver]))
    return out


def linked_bounds(run: CoverRun, pr: PricingResult, L: np.ndarray, z_lb: float) -> LinkedBounds:
    """The linked bound z′ ≥ ``z_lb`` and the groups' share bounds (module docstring); ``L`` the group bounds."""
    t0 = time.perf_counter()
    shares = np.asarray(L, dtype=float).copy()
    models = []
    clocked = 0
    covers: list[np.ndarray | None] = [None] * len(run.priced)
    pairs = linked_pairs(run.priced)

    def bound(pair: tuple[int, int]) -> ModelBound:
        check_cancel(run.cancel, "on-demand allocation: linked cover bounds")
        return model_bound(run, pr, L, pair, float(L[pair[0]] + L[pair[1]]) + run.incumbent - z_lb)

    if LINK_THREADS > 1 and len(pairs) > 1 and own_spaces([run.priced[g] for pair in pairs for g in pair]):
        with ThreadPoolExecutor(LINK_THREADS, thread_name_prefix="linked-cover") as pool:
            bounds = list(pool.map(bound, pairs))
    else:
        bounds = [bound(pair) for pair in pairs]
    for (p, d), got in zip(pairs, bounds, strict=True):
        gain = max(0.0, got.bound - float(L[p] + L[d]))
        shares[p], shares[d] = L[p] + gain, L[d] + gain  # L_m − L_d and L_m − L_p
        models.append((p, d, gain, got.rounds))
        clocked += got.clock_stops
        if got.cover is not None:
            covers[p], covers[d] = got.cover
    z = z_lb + sum(m[2] for m in models)
    return LinkedBounds(shares, float(z), tuple(models), time.perf_counter() - t0, clocked, tuple(covers))


@dataclass(frozen=True)
class ModelBound:
    """A lower bound ℓ_m ≥ L_p + L_d on one model's linked cover, the rounds run and how many of its ILPs a wall
    clock stopped (their dual bounds hold all the same)."""

    bound: float
    rounds: int
    clock_stops: int = 0
    cover: tuple[np.ndarray, np.ndarray] | None = None
    """The multisets (prefill, decode) of the cheapest cover its ILPs found (None: none found)."""


def model_bound(run: CoverRun, pr: PricingResult, L: np.ndarray, pair: tuple[int, int],
                useful: float = math.inf) -> ModelBound:
    """A lower bound ℓ_m ≥ L_p + L_d on model m's linked cover at the prices w, with its rounds; a bound above
    ``useful`` is not sought (it would not change what the certificate can prove)."""
    p, d = pair
    ell = float(L[p] + L[d])
    delta = max(min(LINK_START * abs(ell), useful - ell), 1e-9)
    rounds = clocked = 0
    best, cover = math.inf, None
    start: Mapping[tuple[str, str], int] = {}  # the last round's plan: a cover of this round's ILP too
    started: tuple[np.ndarray, ...] = ()  # … and its multisets, per group of the pair (never left out of _kept)
    while rounds < LINK_ROUNDS and time_left(run.cancel, math.inf) > 0.1:  # the solve's deadline
        rounds += 1
        cap = ell + delta
        ilp = _cover_ilp(run, pr, pair, _kept(run, pr, L, pair, cap, started), start)
        if ilp.counts:
            start, started = ilp.counts, ilp.cover or ()
        value, bound = ilp.value, ilp.bound
        clocked += ilp.clocked
        if ilp.cover is not None and value < best:
            best, cover = value, ilp.cover
        ell = max(ell, min(bound, cap))  # covers over other columns cost more than cap
        if value <= cap * (1 + 1e-9) + 1e-9:
            break  # the best cover is among the listed columns: ell is L_m (within the ILP's gap)
        cap = min(value if math.isfinite(value) else ell + 4 * delta, useful)
        if cap <= ell * (1 + 1e-9) + 1e-9:
            break
        delta = cap - ell
    return ModelBound(ell, rounds, clocked, cover)


def _kept(run: CoverRun, pr: PricingResult, L: np.ndarray, pair: tuple[int, int], cap: float,
          started: Sequence[np.ndarray] = ()) -> list[np.ndarray]:
    """Per group of ``pair`` the multisets with some pair (M, r) of rc ≤ cap − L_partner − y_d·D − y_n, less those
    another of them beats in every region (never placed: ``planning.allocate.unbeaten``; :func:`undominated` would
    mask them out) but for ``started``'s (the MIP start's, per group) and for a scenario with running instances
    (``current``: they stay in every ILP, all listed as before)."""
    p, d = pair
    calls = []
    unbeaten = not run.resolved.scenario.current
    for i, (gi, partner) in enumerate(((p, d), (d, p))):
        y_d, y_n = float(pr.y_d[gi]), float(pr.y_n[gi])
        theta = cap - float(L[partner]) - y_d * run.priced[gi].demand - y_n
        protect = tuple(run.priced[gi].space.codes(started[i]).tolist()) if len(started) > i else ()
        calls.append(PriceCall(gi, pr.w, y_d, y_n, theta * (1 + 1e-9) + 1e-9, None, run.per_region, unbeaten,
                               protect))
    out = []
    for gi, (P, *_rest) in zip(pair, run.pricers.price_all(calls, run.cancel), strict=True):
        if P.shape[0]:
            _, first = np.unique(run.priced[gi].space.codes(P), return_index=True)
            P = P[np.sort(first)]
        out.append(P)
    return out


@dataclass(frozen=True)
class _CoverIlp:
    """One linked cover ILP: the value of its best cover (inf if none), its proven lower bound (inf when proven
    infeasible, −inf when unknown) and whether a wall clock stopped it."""

    value: float
    bound: float
    clocked: bool = False
    cover: tuple[np.ndarray, np.ndarray] | None = None  # the multisets its plan uses, per group of the pair
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)  # its plan: (template id, region) → n


def _cover_ilp(run: CoverRun, pr: PricingResult, pair: tuple[int, int], kept: Sequence[np.ndarray],
               start: Mapping[tuple[str, str], int]) -> _CoverIlp:
    """The best linked cover over ``kept`` at the prices w, every offer unlimited; stopped at its gap or
    :data:`LINK_NODES` nodes, a wall clock (:data:`LINK_SAFETY_S`, the solve's deadline) only as a safety net.
    ``start``, the previous round's cover (its columns are among ``kept``: the cap only grew), is the ILP's MIP
    start without HiGHS's root heuristics (coral-extended's demand ×2: its three second-round ILPs 1.09, 0.58,
    0.37 s → 0.74, 0.26, 0.09 s)."""
    if any(P.shape[0] == 0 for P in kept):
        return _CoverIlp(math.inf, math.inf)  # a group without a listed column: every cover uses one not listed
    sets = [run.make_set(run.priced[gi], P) for gi, P in zip(pair, kept, strict=True)]
    groups = [run.priced[gi].group for gi in pair]
    keep = {t for t, _r in start} | {c.template_id for c in run.resolved.scenario.current}
    masks = [undominated(ts.usage, ts.throughput[:, 0], pr.w, [ts.key(i) in keep for i in range(len(ts))])
             for ts in sets]
    problem = allocation_problem(run.resolved, sets, groups=groups, objective="cost", masks=masks)
    safety = Deadline(LINK_SAFETY_S, run.cancel)  # set by the safety net or the caller's token (its deadline too)
    problem = replace(problem, offers=_priced_offers(run, pr, problem.offers), budget_per_hour=None,
                      time_limit_s=max(0.1, time_left(run.cancel, LINK_SAFETY_S)), mip_rel_gap=LINK_GAP,
                      node_limit=LINK_NODES, stop=safety, dump_model=None)
    if mapped := start_from(start, problem):
        problem = replace(problem, start=mapped, start_only=True)
    alloc = solve_allocation(problem, diagnose=False)
    used = _used(run, pair, kept, sets, alloc) if alloc.has_plan else None
    return _CoverIlp(_value(alloc), _bound(alloc), _clocked(alloc, safety), used,
                     dict(alloc.counts) if alloc.has_plan else {})


def undominated(usage: np.ndarray, thr: np.ndarray, w: np.ndarray, protected: Sequence[bool]) -> np.ndarray:
    """Which templates of one group a cover ILP without availability rows needs: those no other template beats in
    some region r (costs at most as much there, W_r = usage · w[r], and serves at least as much), and the
    ``protected`` ones (a MIP start's, running instances'). Each dropped column (M, r) has a kept one that covers
    its rows at no more cost (in that region, and every other row is a region's or a group's), so the ILP's optimum
    is the one over all the columns, and its dual bound is a bound on that optimum. coral-extended's demand ×2:
    the costliest linked cover ILP keeps 116 of its 1,388 columns, 0.74 → 0.16 s."""
    usage = np.asarray(usage, dtype=float)
    keep = np.asarray(protected, dtype=bool).copy()
    if usage.shape[0] == 0:
        return keep
    with np.errstate(invalid="ignore"):
        cost = np.where(usage[:, None, :] > 0, usage[:, None, :] * w[None, :, :], 0.0).sum(axis=2)  # (n, R)
    for r in range(cost.shape[1]):
        ok = np.flatnonzero(np.isfinite(cost[:, r]) & (thr > 0))
        order = ok[np.lexsort((-thr[ok], cost[ok, r]))]  # cheapest first, the most throughput first among equals
        t = thr[order]
        best_before = np.maximum.accumulate(np.concatenate([[-np.inf], t[:-1]]))
        keep[order[t > best_before]] = True
    return keep


def _used(run: CoverRun, pair: tuple[int, int], kept: Sequence[np.ndarray], sets: Sequence[TemplateSet],
          alloc: AllocationResult) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``kept`` (per group of ``pair``) whose templates the cover ``alloc`` runs."""
    out = []
    for gi, P, ts in zip(pair, kept, sets, strict=True):
        rows = [ts.row_of[t] for (t, _r), n in alloc.counts.items() if n > 0 and t in ts.row_of]
        space = run.priced[gi].space
        codes = space.usage_codes(np.asarray(ts.usage, dtype=np.int64)[rows]) if rows else np.zeros(0, np.int64)
        out.append(P[np.isin(space.codes(P), codes)])
    return out[0], out[1]


def _clocked(alloc: AllocationResult, stop: Deadline) -> bool:
    """Whether a wall clock stopped the ILP short of its gap: HiGHS's time limit, or the safety net's interrupt."""
    if alloc.status == "optimal" or (alloc.phases and alloc.phases[-1].status in ("optimal", "infeasible")):
        return False
    said = " ".join(ph.solver_status.lower() for ph in alloc.phases)
    return alloc.status == "time_limit" or "time limit" in said or ("interrupt" in said and stop.is_set())


def _priced_offers(run: CoverRun, pr: PricingResult, offers: Sequence[Offer]) -> tuple[Offer, ...]:
    """The offers at the Lagrangian prices: (1 + K)·price = w[r, k] (the builders fold K in), unlimited."""
    K = run.resolved.scenario.options.K
    shapes = {s: k for k, s in enumerate(run.priced[0].space.shapes)}
    regions = {r: i for i, r in enumerate(run.resolved.regions)}
    out = []
    for o in offers:
        k, r = shapes.get(o.shape), regions.get(o.region)
        if k is None or r is None or not math.isfinite(float(pr.w[r, k])):
            continue
        out.append(Offer(region=o.region, shape=o.shape, price_per_hour=float(pr.w[r, k]) / (1.0 + K),
                         available=UNLIMITED))
    return tuple(out)


def _value(alloc: AllocationResult) -> float:
    value = alloc.total_per_hour
    return float(value) if alloc.has_plan and value is not None else math.inf


def _bound(alloc: AllocationResult) -> float:
    last = alloc.phases[-1] if alloc.phases else None
    if last is None:
        return -math.inf
    if last.status == "infeasible":
        return math.inf
    if last.status != "error" and last.bound is not None and math.isfinite(last.bound):
        return float(last.bound)
    return -math.inf
