"""Commitment sizing: how many nodes to reserve for the term and what to rent on top each epoch (two-stage MILP).

Sets: epochs e (the demand profile's epochs × the horizon's growth periods), each standing for w_e hours of the
horizon (Σ_e w_e = horizon hours); candidates j (the scenario's ``status: decide`` reservations) of pool p(j) =
(``{region}/reserved``, shape); groups g, templates τ, regions r (pricing pools included), shapes k.
Parameters: w_e; λ_g(e) = the design demand × the profile factor × the period's growth; p_r(k) the marginal
price (planning.offers: owned = power, held reserved = 0, spot = expected cost); A_r(k); a_j = the candidate's
effective hourly price (upfront / term hours + hourly) × Σ_e w_e; H_p the held nodes of pool p; cap_j.

    min  Σ_j a_j R_j + Σ_e w_e Σ_{τ,r} p_r(τ) ν_{τre}
    s.t. per epoch e: every constraint of the single-hour allocation model (planning.allocate.formulation:
         availability, demand, region links, spot cap (S)) with λ(e), and for each pool p
         Σ_τ U_k(τ) ν_{τ,r_p,e} ≤ H_p + Σ_{j ∈ p} R_j        (the committed nodes serve every epoch)
         R_j ∈ {0, …, cap_j},  ν ∈ ℤ≥0.

It is one :class:`planning.allocate.AllocationProblem` (``horizon_problem``): epoch e's shapes are copies
``"{shape}@{e}"`` (so regions keep their names, their pools and their KV-transfer prices), prices are
w_e·p, and each R_j is a :class:`planning.allocate.Commitment` covering its pool in every epoch. The start-up
penalty K is left out (a year's bill; the timeline counts churn). Owned pools' fixed costs and held
reservations' fees are constants, added by the accounting.

Certificate over every template of the libraries (``size``): for multipliers μ_pe ≥ 0 on the pool rows, pricing
pool p's nodes at μ_pe in epoch e (availability H_p + Σ cap) and dropping R gives a single-period relaxation
(the expanded problem above without commitments) whose value minus C(μ) = Σ_pe μ_pe H_p
− Σ_j min(0, a_j − Σ_e μ_{p(j)e})·cap_j is a lower bound on the two-stage optimum (Lagrangian relaxation of the
pool rows). ``planning.allocate.reduce`` solves that relaxation's LP over all columns by column generation and
its per-group integer cover bounds (``lagrangian_bound``); a two-stage plan of cost ≤ T has relaxed cost
≤ T + C(μ), so only columns under the thresholds for T + C(μ) can appear in it. The MILP over those columns
(with the R columns) is solved; a plan of value ≤ T is optimal over all templates (to the MILP's gap), otherwise
T is raised to its value and again — the loop of ``planning.allocate.certify``. μ starts at each pool's cheapest
effective hourly price and is then taken from the duals of the pool rows of the restricted two-stage LP.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from planning.allocate.problem import (
    AllocationProblem,
    AllocationResult,
    Commitment,
    Objective,
    Offer,
    TemplateOption,
    TransferPrice,
    WorkloadClass,
)
from planning.allocate.reduce import ColumnBlock, LagrangianBound, Reduction, lagrangian_bound, lp_reduction
from planning.allocate.solve import solve_allocation
from planning.catalog.availability import cheapest_configs
from planning.catalog.schema import Catalog
from planning.context import CancelToken, ProgressFn, check_cancel, time_left
from planning.errors import PlanningError
from planning.groups import Group
from planning.offers import reservation_terms
from planning.pools import HOURS_PER_YEAR, Terms, kind_of, pool_region
from planning.resolve import ResolvedScenario
from planning.scenario import Scenario
from planning.templates.sets import TemplateSet

START_FRACTION = 0.003  # first target: the bound + 0.3 %
MAX_ATTEMPTS = 6
COVER_LIMIT_S = 2.0
REDUCE_MIN_TEMPLATES = 1500  # below this many templates per epoch the MILP sees all of them


def epoch_shape(shape: str, e: int) -> str:
    """Epoch e's copy of a shape in the horizon problem."""
    return f"{shape}@{e}"


def epoch_id(key: str, e: int) -> str:
    """Epoch e's copy of a template, class or group id."""
    return f"{key}@{e}"


def split_epoch(key: str) -> tuple[str, int]:
    """Inverse of :func:`epoch_id` / :func:`epoch_shape`."""
    base, _sep, e = key.rpartition("@")
    return base, int(e)


@dataclass(frozen=True)
class Epoch:
    """One epoch of the horizon: it stands for ``hours`` of it, its demand is the design demand × ``factor``."""

    index: int
    period: int
    slot: int
    hours: float
    factor: Mapping[str, float]


def epochs_of(scenario: Scenario) -> tuple[Epoch, ...]:
    """The horizon's epochs: every epoch of the profile (one design hour without a profile) in each growth period,
    weighted by the hours of the horizon it stands for (Σ weights = horizon_years × 8,760)."""
    fin = scenario.finance
    profile = fin.profile
    slots = len(profile.factors) if profile else 1
    span = profile.hours if profile else 1.0
    total = fin.horizon_years * HOURS_PER_YEAR
    out: list[Epoch] = []
    for p in range(fin.periods):
        growth = (1.0 + fin.demand_growth_per_year) ** ((p + 0.5) / fin.periods * fin.horizon_years)
        for s in range(slots):
            hours = (profile.epoch_hours if profile else 1.0) * total / fin.periods / span
            factor = {m.id: growth * (profile.factor(m.id, s) if profile else 1.0) for m in scenario.models}
            out.append(Epoch(len(out), p, s, hours, factor))
    return tuple(out)


@dataclass(frozen=True)
class Candidate:
    """A reservation to size: up to ``max_count`` nodes of ``shape`` in ``pool`` at ``terms``."""

    id: str
    index: int
    region: str
    shape: str
    max_count: int
    terms: Terms
    on_demand_price: float

    @property
    def pool(self) -> str:
        return pool_region(self.region, "reserved")

    @property
    def effective_hourly(self) -> float:
        return self.terms.effective_hourly

    @property
    def break_even(self) -> float:
        """Share of the term's hours a reserved node must serve to cost less than the same hours on demand."""
        return self.effective_hourly / self.on_demand_price if self.on_demand_price > 0 else math.inf


def candidates_of(scenario: Scenario, catalog: Catalog) -> tuple[Candidate, ...]:
    """The scenario's ``status: decide`` reservations with their price per node (given or published) and cap
    (``count``, or the on-demand availability of that region and shape when not given)."""
    rows = cheapest_configs(catalog, "on_demand")
    out = []
    for i, res in enumerate(scenario.reservations):
        if res.status != "decide":
            continue
        row = rows.get((res.region, res.shape))
        if row is None:  # resolve_offers refuses these first; kept for direct callers
            raise PlanningError(f"reservations[{i}].shape", f"no catalog node config sells {res.shape} in {res.region}.",
                                "reserve a shape sold in that region.")
        od = row.price_on_demand * scenario.price_scale
        terms = reservation_terms(res, od, f"reservations[{i}]", scenario.price_scale)
        avail = catalog.availability.get(row.id)
        cap = res.count if res.count is not None else math.floor((avail.nodes if avail else 0) * scenario.availability_scale)
        out.append(Candidate(f"reservations[{i}]", i, res.region, res.shape, int(cap), terms, od))
    return tuple(out)


def epoch_groups(groups: Sequence[Group], epoch: Epoch) -> list[Group]:
    """The design groups with epoch ``epoch``'s rates (class ids unchanged)."""
    return [replace(g, classes=tuple(replace(c, rate=c.rate * epoch.factor.get(g.model, 1.0)) for c in g.classes))
            for g in groups]


def epoch_problem(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epoch: Epoch,
                  masks: Sequence[np.ndarray] | None = None) -> AllocationProblem:
    """One epoch's single-hour allocation problem: the scenario's (links, KV transfers, spot cap) at the epoch's
    demand, without the start-up penalty (K = 0)."""
    from planning.allocate.certify import allocation_problem

    scenario = replace(resolved.scenario, options=replace(resolved.scenario.options, K=0.0), current=())
    groups = epoch_groups(resolved.groups, epoch)
    return allocation_problem(replace(resolved, scenario=scenario, groups=tuple(groups)), sets, groups=groups,
                              masks=masks, objective="cost")


def stack(problems: Sequence[AllocationProblem], hours: Sequence[float], candidates: Sequence[Candidate], *,
          drop_kinds: Sequence[str] = (), pool_prices: Mapping[tuple[str, str, int], float] | None = None,
          time_limit_s: float | None = None) -> AllocationProblem:
    """The two-stage model from one allocation problem per epoch (module docstring): epoch e's shapes, templates,
    classes, links, transfers and spot caps get the suffix ``@e``, its prices (offers and transfers) × ``hours[e]``;
    one commitment per candidate covers its pool's shape in every epoch at its effective hourly price × Σ hours.

    ``drop_kinds``: pricing kinds whose offers are left out ("all reserved" drops on_demand and spot).
    ``pool_prices``: the Lagrangian relaxation instead — no commitments; candidate pool (region, shape) in epoch
    e priced ``pool_prices[(pool, shape, e)]`` per node (already × hours) with availability held + Σ caps.
    """
    pools = sorted({(c.pool, c.shape) for c in candidates})
    caps = {key: sum(c.max_count for c in candidates if (c.pool, c.shape) == key) for key in pools}
    offers: list[Offer] = []
    templates: list[TemplateOption] = []
    classes: list[WorkloadClass] = []
    links: list[tuple[str, ...]] = []
    transfers: list[TransferPrice] = []
    spot_cap: dict[str, float] = {}
    spot_regions: set[str] = set()
    for e, (p, w) in enumerate(zip(problems, hours, strict=True)):
        held = {(o.region, o.shape): o.available for o in p.offers}
        for o in p.offers:
            if kind_of(o.region) in drop_kinds or (pool_prices is not None and (o.region, o.shape) in caps):
                continue
            offers.append(Offer(o.region, epoch_shape(o.shape, e), o.price_per_hour * w, o.available))
        for pool, shape in pools:
            if pool_prices is not None:
                offers.append(Offer(pool, epoch_shape(shape, e), pool_prices[(pool, shape, e)],
                                    held.get((pool, shape), 0) + caps[(pool, shape)]))
            elif (pool, shape) not in held:
                offers.append(Offer(pool, epoch_shape(shape, e), 0.0, 0))
        templates.extend(TemplateOption(
            id=epoch_id(t.id, e), group=epoch_id(t.group, e), usage={epoch_shape(s, e): n for s, n in t.usage.items()},
            throughput={epoch_id(q, e): v for q, v in t.throughput.items()}, single_shape=t.single_shape,
            gpu_types=t.gpu_types) for t in p.templates)
        classes.extend(WorkloadClass(epoch_id(q.id, e), epoch_id(q.group, e), q.rate) for q in p.classes)
        links.extend(tuple(epoch_id(q, e) for q in link) for link in p.links)
        transfers.extend(TransferPrice(epoch_id(tp.sender, e), tp.src, tp.dst, tp.usd_per_hour * w) for tp in p.transfers)
        spot_cap.update({epoch_id(g, e): s for g, s in p.spot_cap.items()})
        spot_regions |= p.spot_regions
    sold = {(o.region, o.shape) for o in offers}
    total = float(sum(hours))
    commitments = () if pool_prices is not None else tuple(
        Commitment(c.id, c.effective_hourly * total, c.max_count,
                   tuple((c.pool, epoch_shape(c.shape, e)) for e in range(len(problems))
                         if (c.pool, epoch_shape(c.shape, e)) in sold))
        for c in candidates)
    first = problems[0]
    return AllocationProblem(
        templates=tuple(templates), offers=tuple(offers), classes=tuple(classes), K=0.0,
        objective=cast(Objective, "cost"), solver=first.solver, builder=first.builder,
        time_limit_s=float(time_limit_s if time_limit_s is not None else first.time_limit_s),
        mip_rel_gap=first.mip_rel_gap, links=tuple(links), transfers=tuple(transfers), spot_cap=spot_cap,
        spot_regions=frozenset(spot_regions), commitments=commitments)


def horizon_problem(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
                    candidates: Sequence[Candidate], *, masks: Mapping[tuple[int, int], np.ndarray] | None = None,
                    drop_kinds: Sequence[str] = (), pool_prices: Mapping[tuple[str, str, int], float] | None = None,
                    time_limit_s: float | None = None) -> AllocationProblem:
    """:func:`stack` of every epoch's :func:`epoch_problem`; ``masks[(set index, epoch)]`` selects the template
    rows of that set in that epoch (default: all; a missing key: none)."""
    problems = []
    for e, ep in enumerate(epochs):
        rows = None if masks is None else [masks.get((si, e), np.zeros(len(ts), dtype=bool))
                                           for si, ts in enumerate(sets)]
        problems.append(epoch_problem(resolved, sets, ep, rows))
    return stack(problems, [ep.hours for ep in epochs], candidates, drop_kinds=drop_kinds, pool_prices=pool_prices,
                 time_limit_s=time_limit_s)


# ---------------------------------------------------------------------------------------------- solving
@dataclass(frozen=True)
class EpochPlan:
    """One epoch's second stage: instances by (template id, region), nodes by (region, shape) and by model, and the
    marginal $/h (nodes) and KV egress $/h by (model, src, dst)."""

    counts: Mapping[tuple[str, str], int]
    nodes: Mapping[tuple[str, str], int]
    model_nodes: Mapping[tuple[str, str, str], int]  # (model, region, shape) -> nodes
    cost_per_hour: float
    egress: Mapping[tuple[str, str, str], float] = field(default_factory=dict)


@dataclass
class Sizing:
    """The two-stage answer: committed counts, the per-epoch plans, the value over the horizon and its proof.

    ``value`` = Σ_j a_j R_j + Σ_e w_e·(marginal $/h of epoch e) in USD over the horizon (owned fixed costs and
    held fees excluded: they are constants); ``bound`` a proven lower bound on it over every template of the
    libraries; ``certified_over`` says what the optimality (``gap`` ≤ the MILP gap) covers.
    """

    status: str  # optimal | feasible (stopped with a plan, its gap) | infeasible | time_limit (no plan)
    value: float
    bound: float
    counts: dict[str, int]
    epochs: tuple[Epoch, ...]
    candidates: tuple[Candidate, ...]
    plans: tuple[EpochPlan, ...] = ()
    certified_over: str = "all templates"
    message: str = ""
    stats: dict[str, float] = field(default_factory=dict)
    no_reservation: Sizing | None = None  # the same horizon with R = 0 (every epoch certified alone), when computed

    @property
    def gap(self) -> float | None:
        if not (math.isfinite(self.value) and math.isfinite(self.bound)) or self.value <= 0:
            return None
        return max(0.0, (self.value - self.bound) / self.value)

    @property
    def has_plan(self) -> bool:
        return bool(self.plans) and math.isfinite(self.value)


def _model_of(key: str) -> str:
    return key.split("/", 1)[0]


def plans_from_stacked(alloc: AllocationResult, problem: AllocationProblem, epochs: Sequence[Epoch]) -> list[EpochPlan]:
    """Split a two-stage MILP answer into its epochs' plans (prices back per hour)."""
    counts: list[dict[tuple[str, str], int]] = [{} for _ in epochs]
    nodes: list[dict[tuple[str, str], int]] = [{} for _ in epochs]
    model_nodes: list[dict[tuple[str, str, str], int]] = [{} for _ in epochs]
    cost = [0.0] * len(epochs)
    egress: list[dict[tuple[str, str, str], float]] = [{} for _ in epochs]
    templates = {tpl.id: tpl for tpl in problem.templates}
    price = {(o.region, o.shape): o.price_per_hour for o in problem.offers}
    for (tid, region), n in alloc.counts.items():
        base, e = split_epoch(tid)
        counts[e][(base, region)] = counts[e].get((base, region), 0) + n
        for eshape, u in templates[tid].usage.items():
            shape, _e = split_epoch(eshape)
            nodes[e][(region, shape)] = nodes[e].get((region, shape), 0) + u * n
            key = (_model_of(base), region, shape)
            model_nodes[e][key] = model_nodes[e].get(key, 0) + u * n
            cost[e] += price[(region, eshape)] * u * n / epochs[e].hours
    tprice = {(tp.sender, tp.src, tp.dst): tp.usd_per_hour for tp in problem.transfers}
    for (sender, src, dst), f in alloc.flows.items():
        usd = tprice.get((sender, src, dst), 0.0) * f
        if src != dst and usd > 0:
            base, e = split_epoch(sender)
            key = (_model_of(base), src, dst)
            egress[e][key] = egress[e].get(key, 0.0) + usd / epochs[e].hours
    return [EpochPlan(c, n, m, x, g) for c, n, m, x, g in zip(counts, nodes, model_nodes, cost, egress, strict=True)]


def plan_from_allocation(alloc: AllocationResult, sets: Sequence[TemplateSet],
                         transfers: Mapping[tuple[str, str, str], float]) -> EpochPlan:
    """One epoch's plan from a single-hour allocation over the library's template ids."""
    from planning.assemble import _locate

    model_nodes: dict[tuple[str, str, str], int] = {}
    for (tid, region), n in alloc.counts.items():
        ts, row = _locate(sets, tid)
        for shape, u in ts.usage_dict(row).items():
            key = (_model_of(tid), region, shape)
            model_nodes[key] = model_nodes.get(key, 0) + u * n
    egress: dict[tuple[str, str, str], float] = {}
    for (sender, src, dst), f in alloc.flows.items():
        usd = transfers.get((sender, src, dst), 0.0) * f
        if src != dst and usd > 0:
            key = (_model_of(sender), src, dst)
            egress[key] = egress.get(key, 0.0) + usd
    return EpochPlan(dict(alloc.counts), dict(alloc.nodes_used), model_nodes, float(alloc.cost_per_hour or 0.0), egress)


def _blocks(sets: Sequence[TemplateSet], epochs: Sequence[Epoch]) -> tuple[list[ColumnBlock], list[tuple[int, int]]]:
    blocks, where = [], []
    for e in range(len(epochs)):
        for si, ts in enumerate(sets):
            blocks.append(ColumnBlock(epoch_id(ts.group.id, e), tuple(epoch_shape(s, e) for s in ts.shapes),
                                      ts.usage, ts.throughput[:, 0]))
            where.append((si, e))
    return blocks, where


def _constant(mu: Mapping[tuple[str, str, int], float], held: Mapping[tuple[str, str], int],
              candidates: Sequence[Candidate], hours: float) -> float:
    """C(μ) = Σ μ·H − Σ_j min(0, a_j − Σ_e μ_{p(j)e})·cap_j (the relaxation's value minus C is a lower bound)."""
    c = sum(v * held.get((pool, shape), 0) for (pool, shape, _e), v in mu.items())
    for cand in candidates:
        paid = sum(v for (pool, shape, _e), v in mu.items() if (pool, shape) == (cand.pool, cand.shape))
        c -= min(0.0, cand.effective_hourly * hours - paid) * cand.max_count
    return c


@dataclass
class _Relaxation:
    red: Reduction
    lag: LagrangianBound
    blocks: list[ColumnBlock]
    where: list[tuple[int, int]]
    demand: list[float]
    constant: float

    @property
    def bound(self) -> float:
        return float(self.lag.z_lb) - self.constant

    def masks(self, target: float) -> dict[tuple[int, int], np.ndarray]:
        keep = self.red.select(self.lag.thresholds(self.red, self.demand, target + self.constant), self.blocks)
        return {w: m for w, m in zip(self.where, keep, strict=True)}


def _relaxation(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
                candidates: Sequence[Candidate], mu: Mapping[tuple[str, str, int], float],
                drop_kinds: Sequence[str], cancel: CancelToken | None) -> _Relaxation | None:
    """The pool-priced single-period relaxation over every template (module docstring), with its LP and
    Lagrangian cover bounds (``planning.allocate.reduce``: links, pool flows and the spot cap included)."""
    relaxed = horizon_problem(resolved, sets, epochs, candidates, masks={}, drop_kinds=drop_kinds, pool_prices=mu)
    shapes = sorted({o.shape for o in relaxed.offers})
    regions = sorted({o.region for o in relaxed.offers})
    index = {s: k for k, s in enumerate(shapes)}
    r_index = {r: i for i, r in enumerate(regions)}
    prices = np.full((len(regions), len(shapes)), np.nan)
    available = np.zeros((len(regions), len(shapes)))
    for o in relaxed.offers:
        prices[r_index[o.region], index[o.shape]] = o.price_per_hour
        available[r_index[o.region], index[o.shape]] = o.available
    pairs = [(b, w) for b, w in zip(*_blocks(sets, epochs), strict=True) if all(s in index for s in b.shapes)]
    blocks, where = [b for b, _w in pairs], [w for _b, w in pairs]
    demand = {q.group: q.rate for q in relaxed.classes}
    group_of = {q.id: q.group for q in relaxed.classes}
    links = [tuple(group_of[q] for q in link) for link in relaxed.links]
    first = {link[0]: li for li, link in enumerate(relaxed.links)}
    flows = {(first[tp.sender], tp.src, tp.dst): tp.usd_per_hour for tp in relaxed.transfers if tp.sender in first}
    red = lp_reduction(blocks, index, regions, prices, available, demand, 0.0, spot_cap=relaxed.spot_cap,
                       spot_regions=relaxed.spot_regions, links=links, transfers=flows)
    if not red.feasible_lp:
        return None
    d = [demand.get(b.group, 0.0) for b in blocks]
    lag = lagrangian_bound(red, d, min(COVER_LIMIT_S, time_left(cancel, COVER_LIMIT_S)))
    held = {(o.region, o.shape): o.available for o in resolved.offers}
    hours = sum(ep.hours for ep in epochs)
    return _Relaxation(red, lag, blocks, where, d, _constant(mu, held, candidates, hours))


def _uniform_prices(epochs: Sequence[Epoch], candidates: Sequence[Candidate]) -> dict[tuple[str, str, int], float]:
    """μ: each pool's cheapest candidate's effective hourly price in every epoch (× w_e): Σ_e μ = min_j a_j."""
    out: dict[tuple[str, str, int], float] = {}
    for c in candidates:
        for e, ep in enumerate(epochs):
            key = (c.pool, c.shape, e)
            out[key] = min(out.get(key, math.inf), c.effective_hourly * ep.hours)
    return out


def epoch_resolved(resolved: ResolvedScenario, epoch: Epoch, candidates: Sequence[Candidate],
                   pools: Mapping[tuple[str, str], tuple[float, int]], drop_kinds: Sequence[str] = ()) -> ResolvedScenario:
    """Epoch ``epoch``'s single-hour scenario: its demand, K = 0, ``drop_kinds`` left out, and each candidate pool
    (pool region, shape) offered at ``pools[key] = ($/node-hour, nodes)`` (held nodes included; absent = the
    held nodes only, at 0 $/h)."""
    scenario = replace(resolved.scenario, options=replace(resolved.scenario.options, K=0.0), current=())
    offers = [o for o in resolved.offers if kind_of(o.region) not in drop_kinds and (o.region, o.shape) not in pools]
    proto = {(o.region, o.shape): o for o in resolved.offers if kind_of(o.region) == "on_demand"}
    for c in candidates:
        key = (c.pool, c.shape)
        if key not in pools or any((o.region, o.shape) == key for o in offers):
            continue
        price, nodes = pools[key]
        base = next((o for o in resolved.offers if (o.region, o.shape) == key), None) or proto.get((c.region, c.shape))
        if base is None or nodes <= 0:
            continue
        offers.append(replace(base, region=c.pool, price_per_hour=price, available=int(nodes), kind="reserved"))
    return ResolvedScenario.from_offers(scenario, offers, resolved.specs, epoch_groups(resolved.groups, epoch))


def _held(resolved: ResolvedScenario) -> dict[tuple[str, str], int]:
    return {(o.region, o.shape): o.available for o in resolved.offers if kind_of(o.region) == "reserved"}


def _epoch_solves(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
                  candidates: Sequence[Candidate], pools: Mapping[tuple[str, str], tuple[float, int]],
                  drop_kinds: Sequence[str], cancel: CancelToken | None,
                  report: Callable[[str], None]) -> tuple[list[EpochPlan], list[AllocationResult], list[list[np.ndarray]]]:
    """Every epoch solved alone, certified over all templates (``allocate.certify.solve_certified``), with the
    candidate pools as given: the plans, the allocations, and per epoch the template rows each plan uses."""
    from planning.allocate.certify import site_transfers, solve_certified, transfer_prices

    plans, allocs, used = [], [], []
    for e, ep in enumerate(epochs):
        check_cancel(cancel, "sizing: epoch plans")
        res_e = epoch_resolved(resolved, ep, candidates, pools, drop_kinds)
        alloc = solve_certified(res_e, sets, cancel=cancel).result
        flows = (transfer_prices(res_e) if res_e.scenario.options.kv_transfer == "cross-region"
                 else site_transfers(res_e))
        plans.append(plan_from_allocation(alloc, sets, {(tp.sender, tp.src, tp.dst): tp.usd_per_hour for tp in flows}))
        allocs.append(alloc)
        rows = [np.zeros(len(ts), dtype=bool) for ts in sets]
        for (tid, _r) in alloc.counts:
            for si, ts in enumerate(sets):
                row = ts.row_of.get(tid)
                if row is not None:
                    rows[si][row] = True
        used.append(rows)
        report(f"epoch {e + 1}/{len(epochs)}")
    return plans, allocs, used


def size(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
         candidates: Sequence[Candidate], *, drop_kinds: Sequence[str] = (), cancel: CancelToken | None = None,
         progress: ProgressFn | None = None, label: str = "sizing") -> Sizing:
    """Solve the two-stage model over the templates of ``sets``; anytime: at the deadline of ``cancel`` the best
    plan found is returned with status ``feasible`` and its proven gap.

    Small libraries (below ``REDUCE_MIN_TEMPLATES`` per epoch, or several classes per group): the MILP over every
    template (exact to its gap). Large ones: (1) the pool-priced relaxation over every template gives a lower
    bound (LP with links and spot cap, Lagrangian covers); (2) every epoch is solved alone, certified over all
    templates, with the reservations priced at their effective hourly rate (a Lagrangian relaxation of the pool
    rows: Σ_e w_e·z_e − C(μ) is a second lower bound) and with none (R = 0, an exact plan); (3) the MILP over the
    templates those plans use, per epoch, chooses R; (4) each epoch is re-solved alone at that R, certified over
    all templates (the second stage is exact for the chosen commitments). The better of R and R = 0 is returned
    with the better of the two bounds.

    Raises
    ------
    Cancelled
        When ``cancel`` is set by the caller (not by its deadline).
    """
    from planning.context import Cancelled, timed_out

    t0 = time.perf_counter()
    stats: dict[str, float] = {"epochs": float(len(epochs)), "candidates": float(len(candidates))}
    report: Callable[[float, str], None] = progress or (lambda _f, _m: None)
    hours = [ep.hours for ep in epochs]
    state: dict[str, object] = {"value": math.inf, "counts": {}, "plans": (), "bound": -math.inf,
                                "over": "all templates", "message": ""}

    def offer(value: float, counts: Mapping[str, int], plans: Sequence[EpochPlan]) -> None:
        if value < float(state["value"]) - 1e-9 * max(1.0, abs(value)):  # type: ignore[arg-type]
            state.update(value=value, counts=dict(counts), plans=tuple(plans))

    def answer(status: str | None = None, message: str = "") -> Sizing:
        value, bound = float(state["value"]), float(state["bound"])  # type: ignore[arg-type]
        stats["seconds"] = time.perf_counter() - t0
        plans: tuple[EpochPlan, ...] = state["plans"]  # type: ignore[assignment]
        if status is None:
            gap = (value - bound) / value if math.isfinite(bound) and value > 0 else math.inf
            status = "optimal" if gap <= resolved.scenario.options.mip_rel_gap + 1e-12 else "feasible"
        counts = {c.id: int(state["counts"].get(c.id, 0)) for c in candidates}  # type: ignore[attr-defined]
        zero: Sizing | None = state.get("no_reservation")  # type: ignore[assignment]
        return Sizing(status, value, min(bound, value), counts, tuple(epochs), tuple(candidates), plans,
                      str(state["over"]), message or str(state["message"]), stats, zero)

    def committed_cost(counts: Mapping[str, int]) -> float:
        return sum(c.effective_hourly * sum(hours) * counts.get(c.id, 0) for c in candidates)

    def milp(problem: AllocationProblem, share: float = 1.0) -> AllocationResult:
        check_cancel(cancel, f"{label}: two-stage MILP")
        limit = time_left(cancel, problem.time_limit_s)
        alloc = solve_allocation(replace(problem, time_limit_s=max(0.05, limit * share)), diagnose=False)
        if alloc.has_plan and alloc.total_per_hour is not None:
            offer(float(alloc.total_per_hour), alloc.commitments, plans_from_stacked(alloc, problem, epochs))
        return alloc

    try:
        per_epoch = sum(len(ts) for ts in sets)
        reducible = per_epoch >= REDUCE_MIN_TEMPLATES and all(len(g.classes) == 1 for g in resolved.groups)
        if not reducible:
            state["over"] = "all templates (every one in the MILP)"
            report(0.1, f"{label}: two-stage MILP over {per_epoch * len(epochs):,} epoch templates")
            alloc = milp(horizon_problem(resolved, sets, epochs, candidates, drop_kinds=drop_kinds))
            last = alloc.phases[-1] if alloc.phases else None
            if alloc.status == "infeasible":
                return answer("infeasible", "no plan serves every epoch's demand")
            if last is not None and last.bound is not None and math.isfinite(last.bound):
                state["bound"] = float(last.bound)
            if not alloc.has_plan:
                return answer("time_limit", f"time limit reached in {label} before any plan")
            return answer("optimal" if alloc.status == "optimal" else "feasible")
        # (1) the relaxation over every template
        report(0.05, f"{label}: LP relaxation over {per_epoch * len(epochs):,} epoch templates")
        mu = _uniform_prices(epochs, candidates)
        relax = _relaxation(resolved, sets, epochs, candidates, mu, drop_kinds, cancel)
        if relax is None:  # the relaxation's LP is infeasible: so is the two-stage model
            return answer("infeasible", "no plan serves every epoch's demand (the LP relaxation is infeasible)")
        state["bound"] = relax.bound
        stats["lp_bound"] = float(relax.red.z_lp) - relax.constant
        stats["lagrangian_cover_bound"] = relax.bound
        # (2) each epoch alone at R = 0 (exact) and with the reservations priced at their effective rate (bound)
        masks = relax.masks(relax.bound + START_FRACTION * abs(relax.bound))
        levels: list[float | None] = [None, 1.0] if candidates else [None]
        held = _held(resolved)
        caps = {(c.pool, c.shape): sum(x.max_count for x in candidates if (x.pool, x.shape) == (c.pool, c.shape))
                for c in candidates}
        cheapest = {key: min(c.effective_hourly for c in candidates if (c.pool, c.shape) == key) for key in caps}
        for lam in levels:
            pools = ({} if lam is None else {k: (lam * cheapest[k], held.get(k, 0) + caps[k]) for k in caps})
            what = "no reservation" if lam is None else "reservations at their rate"

            def say(m: str, what: str = what) -> None:
                report(0.3, f"{label}: epochs alone ({what}): {m}")

            plans, allocs, used = _epoch_solves(resolved, sets, epochs, candidates, pools, drop_kinds, cancel, say)
            for si in range(len(sets)):  # every epoch may use what any epoch's plan used (R is shared)
                anywhere = np.logical_or.reduce([used[e][si] for e in range(len(epochs))])
                for e in range(len(epochs)):
                    masks[(si, e)] = masks.get((si, e), np.zeros(len(sets[si]), dtype=bool)) | anywhere
            if any(not a.has_plan for a in allocs):
                if lam is None:
                    continue
                return answer("infeasible", "an epoch has no plan even with every reservation")
            z = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(hours, allocs, strict=True))
            # each epoch's optimum is proven within its certified gap over all templates: its value × (1 − gap)
            z_low = sum(w * float(a.total_per_hour or 0.0) * (1.0 - float(a.gap or 0.0))
                        for w, a in zip(hours, allocs, strict=True))
            if lam is None:  # R = 0: an exact plan
                offer(float(z), {}, plans)
                stats["no_reservation_value"] = float(z)
                gap_0 = (z - z_low) / z if z > 0 else 0.0
                state["no_reservation"] = Sizing(
                    "optimal" if gap_0 <= resolved.scenario.options.mip_rel_gap + 1e-12 else "feasible", float(z),
                    float(z_low), {}, tuple(epochs), (), tuple(plans), "all templates (each epoch certified alone)",
                    stats={"seconds": time.perf_counter() - t0})
                if not candidates:  # nothing to commit: the epochs are independent, each certified alone
                    state["bound"] = max(float(state["bound"]), z_low)  # type: ignore[arg-type]
            else:  # a Lagrangian bound over all templates (integer epochs, pool rows priced)
                bound = float(z_low) - _constant(mu, held, candidates, sum(hours))
                stats["lagrangian_epoch_bound"] = bound
                state["bound"] = max(float(state["bound"]), bound)  # type: ignore[arg-type]
        if not candidates:
            state["over"] = "all templates (each epoch certified alone)"
            return answer()
        # (3) the two-stage MILP over the templates of those plans (and the relaxation's cheapest), to choose R
        stats["templates_in_milp"] = float(sum(int(m.sum()) for m in masks.values()))
        report(0.6, f"{label}: two-stage MILP over {int(stats['templates_in_milp']):,} epoch templates")
        problem = horizon_problem(resolved, sets, epochs, candidates, masks=masks, drop_kinds=drop_kinds)
        alloc = milp(problem, share=0.7)
        if alloc.has_plan:
            stats["milp_value"] = float(alloc.total_per_hour or math.inf)
            stats["milp_gap"] = float(alloc.gap) if alloc.gap is not None else math.nan
            # (4) the second stage at the chosen R, each epoch certified over all templates
            chosen = dict(alloc.commitments)
            pools = {(c.pool, c.shape): (0.0, held.get((c.pool, c.shape), 0)
                                         + sum(chosen.get(x.id, 0) for x in candidates
                                               if (x.pool, x.shape) == (c.pool, c.shape))) for c in candidates}
            plans, allocs, _used = _epoch_solves(resolved, sets, epochs, candidates, pools, drop_kinds, cancel,
                                                 lambda m: report(0.9, f"{label}: epochs at the chosen commitments: {m}"))
            if all(a.has_plan for a in allocs):
                second = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(hours, allocs, strict=True))
                offer(second + committed_cost(chosen), chosen, plans)
        state["over"] = ("all templates" if answer().status == "optimal" else
                         "the commitments: the MILP over the epochs' candidate templates; each epoch's plan for them: "
                         "all templates")
        return answer()
    except Cancelled:
        if not timed_out(cancel):
            raise
        if not math.isfinite(float(state["value"])):  # type: ignore[arg-type]
            return answer("time_limit", f"time limit reached in {label} before any plan")
        return answer("feasible", f"time limit reached in {label}: the best plan found, with its proven gap")
