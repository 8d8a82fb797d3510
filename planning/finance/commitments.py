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

How it is solved (over libraries of any size, anytime): :mod:`planning.finance.sizing`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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
from planning.catalog.availability import cheapest_configs
from planning.catalog.schema import Catalog
from planning.errors import PlanningError
from planning.groups import Group
from planning.offers import reservation_terms
from planning.pools import HOURS_PER_YEAR, Terms, kind_of, pool_region
from planning.resolve import ResolvedScenario
from planning.scenario import Scenario
from planning.templates.sets import TemplateSet


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


# ---------------------------------------------------------------------------------------------- answers
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
    stopped_by: str = ""  # status feasible: "work" (its work budget ran out above the gap: the same on every
    # machine) or "clock" (the wall clock, a safety net, stopped it: another machine may return another plan)

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
