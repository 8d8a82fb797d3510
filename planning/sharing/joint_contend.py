"""Nodes both parts of a shared plan want, when the plan is solved part by part (above ``JOINT_MAX_OFFERS``
offers, or under a budget or the served objective): which part gets them, and a lower bound that counts the
competition (issue 29).

The problem
-----------
The shared part S (the packing, single-GPU nodes) and the dedicated part D (the popular models' templates) are
each solved alone with every node available. When their free optima overflow some offers together, the plan is

    min  c_S(x_S) + c_D(x_D)   s.t.   u_S(x_S) + u_D(x_D) ≤ A   (every offer (r, k)), each part's own rows,

and "each part's optimum with every node, added" is only a lower bound that ignores the competition (on
platform-100: 36 spot A100s in eastus, all wanted by the packing and 9 of them by the popular models; that
bound was 4.92 % below the plan).

The bound (Lagrangian over the contended rows)
----------------------------------------------
Keep each part's own rows u ≤ A (every joint plan satisfies them), drop the coupling on the offers that do not
overflow (a relaxation) and price the contended set C with multipliers δ ≥ 0:

    L(δ) = LB_S(p + δ) + LB_D(p + δ/(1 + K)) − Σ_{c∈C} δ_c A_c  ≤  every joint plan's cost,

LB_S, LB_D being proven lower bounds of each part with the offers of C dearer by δ (the dedicated objective
charges (1 + K)·p per node, hence δ/(1 + K); no running instances). δ = 0 is the old bound.
The multiplier used is the packing LP's own: δ_c = −σ_c, its converged dual on row c (the value of one more such
node to the packing). Then no packing has to be solved again: the LP's duals with σ_c raised to 0 stay feasible
at the dearer prices, so LB_S(p + δ) ≥ z_LP + Σ δ_c A_c and

    L(δ) ≥ z_LP + LB_D(p + δ/(1 + K)),

one dedicated solve (its certified optimum, or cost × (1 − gap)). The dedicated part then pays for a contended
node what it is worth to the packing, and takes y_c of them only where they save it more. When the LP's duals
are 0 there (degenerate) or the gap stays above ``STOP_GAP``: subgradient steps (Polyak) δ ← max(0, δ + θ(U − L)
/‖g‖² · g), g_c = x_S,c + y_D,c − A_c (x_S the packing's nodes at those prices, whose bound is then the packing's
proven one, ILP-lifted), U the best plan, θ halved when L does not rise; at most ``MAX_ROUNDS``, and only while
more than three rounds' time is left.

The plans
---------
The Lagrangian's dedicated plan says how many contended nodes the popular models should take: the shared part
is packed on what that plan leaves and the popular models are re-planned on what the packing leaves (never
dearer than that plan). Beside it, the two orders of before: the popular models' free optimum first and the
packing on the rest, or the packing first and the popular models on the rest; each is tried only while the best
plan is more than ``STOP_GAP`` above the bound. The cheapest pair is kept.

Tests: ``tests/sharing/test_joint_contend.py`` (brute force over every split of the availability on small seeded
instances with contended offers: bound ≤ optimum ≤ plan; the priced scenario; platform-100 in the benchmark).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from planning.context import Cancelled, Deadline, time_left
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import AvailabilityOverride, Scenario
from planning.scenario_supply import OfferSpec
from planning.sharing.packing import NodeType, Packing, fits

if TYPE_CHECKING:
    from planning.offers import ResolvedOffer
    from planning.sharing.profiles import ModelProfile
    from planning.sharing.result import SharedNode

MAX_ROUNDS = 8
"""Multiplier rounds (each a packing LP and a dedicated solve) at most."""
STOP_GAP = 0.005
"""Once the best plan is within this of the bound, the other candidate orders are not tried (each costs a
packing and possibly a dedicated solve)."""

Usage = Mapping[tuple[str, str], int]
PackOn = Callable[[Usage], "tuple[Packing, tuple[SharedNode, ...]] | None"]
SolvePart = Callable[[Scenario, float, bool], PlanResult]
Prices = Mapping[tuple[str, str], float]
SharedLP = Callable[[Prices], tuple[float, Prices, Prices]]


@dataclass
class Settled:
    """The chosen pair: the packing and its nodes, the dedicated plan and the scenario it was solved on (for
    the baselines), the lower bound, whether the pair is proven optimal, and what the report should say."""

    packing: Packing
    nodes: tuple[SharedNode, ...]
    dedicated: PlanResult
    dedicated_scenario: Scenario
    bound: float | None
    optimal: bool
    notes: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)


def contended(offers: Sequence[ResolvedOffer], *usages: Usage) -> dict[tuple[str, str], int]:
    """The offers the usages overflow together: (region, shape) → nodes available."""
    avail = {(o.region, o.shape): int(o.available) for o in offers}
    total: dict[tuple[str, str], int] = {}
    for used in usages:
        for key, k in used.items():
            total[key] = total.get(key, 0) + k
    return {key: avail.get(key, 0) for key, k in total.items() if k > avail.get(key, 0)}


def priced(scenario: Scenario, offers: Sequence[ResolvedOffer], extra: Mapping[tuple[str, str], float]) -> Scenario:
    """``scenario`` with the offers in ``extra`` dearer by that much per node-hour (after ``price_scale``), as
    explicit offers with the same availability (an override keeps the count exact under ``availability_scale``)."""
    by_key = {(o.region, o.shape): o for o in offers}
    scale = scenario.price_scale if scenario.price_scale > 0 else 1.0
    kept = tuple(o for o in scenario.offers if (o.region, o.shape) not in extra)
    added = tuple(OfferSpec(r, s, (by_key[(r, s)].price_per_hour + d) / scale, by_key[(r, s)].available,
                            source="lagrangian node price (joint_contend)") for (r, s), d in sorted(extra.items()))
    overrides = tuple(a for a in scenario.availability_overrides if (a.region, a.shape) not in extra)
    overrides += tuple(AvailabilityOverride(r, s, by_key[(r, s)].available) for (r, s) in sorted(extra))
    return replace(scenario, offers=kept + added, availability_overrides=overrides)


def lagrangian_applies(scenario: Scenario, offers: Sequence[ResolvedOffer], rows: Mapping[tuple[str, str], int]
                       ) -> bool:
    """The bound's premises: cost objective without a budget, no running instances (the (1 + K) charge is then
    uniform), no pricing pools, and every contended offer a plain cloud offer."""
    by_key = {(o.region, o.shape): o for o in offers}
    return (scenario.objective.kind == "cost" and scenario.objective.budget_per_hour is None
            and not scenario.current and not scenario.has_finance
            and all(key in by_key and by_key[key].kind in ("on_demand", "spot")
                    and by_key[key].fixed_per_node_hour == 0.0 for key in rows))


def settle(scenario: Scenario, sub: Scenario, offers: Sequence[ResolvedOffer], packing: Packing,
           nodes: tuple[SharedNode, ...], free: PlanResult, bound: float | None, *, pack_on: PackOn,
           solve_part: SolvePart, shared_lp: SharedLP,
           deadline: Deadline, baselines: bool = True) -> Settled:
    """Resolve the competition between the packing (``packing``, ``nodes``: optimal or best with every node) and
    the popular models' free plan ``free`` (module docstring).

    Parameters
    ----------
    scenario, sub:
        The whole scenario and the popular models' (with the budget left, if any).
    offers:
        The whole scenario's resolved offers.
    bound:
        Each part's bound with every node, added (None when not a cost objective).
    pack_on:
        ``f(usage) -> (packing, nodes)`` (None when no packing) on what ``usage`` leaves of the availability.
    solve_part:
        ``f(scenario, progress from, with baselines) -> PlanResult`` for the popular models.
    shared_lp:
        ``f(extra) -> (z_LP, node prices, LP nodes per offer)`` of the packing with every node, the offers in
        ``extra`` dearer by that much (−inf when no bound; prices empty when the LP did not converge).
    deadline:
        The whole call's.
    baselines:
        The answer's dedicated plan with its baselines (False: none is solved for them).

    Returns
    -------
    Settled: the cheapest pair found, the best bound, and whether it is proven optimal.
    """
    from planning.sharing.parts import node_usage, part_bound, plan_usage, remaining

    cost_objective = scenario.objective.kind == "cost" and scenario.objective.budget_per_hour is None
    used_s, used_f = node_usage(nodes), plan_usage(free)
    rows = contended(offers, used_s, used_f)
    notes: list[str] = []
    stats: dict[str, float] = {"contended_offers": float(len(rows)),
                               "contended_nodes": float(sum(rows.values())),
                               "contended_in_packing": float(sum(used_s.get(key, 0) for key in rows)),
                               "contended_in_free_plan": float(sum(used_f.get(key, 0) for key in rows))}
    best: list[tuple[float, str, Packing, tuple[SharedNode, ...], PlanResult, Scenario, bool]] = []
    free_ok = free.status in ("optimal", "feasible")

    def total() -> float:
        return min((c[0] for c in best), default=math.inf)

    def close() -> bool:
        b = bound if bound is not None else -math.inf
        return math.isfinite(b) and total() <= b + STOP_GAP * abs(total())

    def timed(key: str, t0: float) -> None:
        stats[key] = stats.get(key, 0.0) + time.perf_counter() - t0

    def add(label: str, pk: Packing, nd: tuple[SharedNode, ...], ded: PlanResult, on: Scenario,
            baselines: bool) -> None:
        if pk.feasible and ded.status in ("optimal", "feasible"):
            best.append((pk.cost_per_hour + ded.cost_per_hour, label, pk, nd, ded, on, baselines))

    def packed_first(pk: Packing, nd: tuple[SharedNode, ...], label: str, lo: float) -> None:
        """The popular models planned on what the packing leaves (the first such plan with its baselines)."""
        if deadline.expired():
            return
        t0 = time.perf_counter()
        on = remaining(sub, offers, node_usage(nd))
        with_baselines = baselines and not any(c[6] for c in best)
        add(label, pk, nd, solve_part(on, lo, with_baselines), on, with_baselines)
        timed("replan_seconds", t0)

    def packed_on(taken: Usage) -> tuple[Packing, tuple[SharedNode, ...]] | None:
        if deadline.expired():
            return None
        t0 = time.perf_counter()
        got = pack_on(taken)
        timed("repack_seconds", t0)
        return got

    popular_first_tried = False

    def popular_first() -> None:
        """The popular models' free optimum first, the packing on what it leaves (a packing only)."""
        nonlocal popular_first_tried
        popular_first_tried = True
        got = packed_on(used_f)
        if got is not None:
            add("popular first", got[0], got[1], free, sub, False)

    found: dict[str, str] = {}  # the Lagrangian bound's note, when it raised the bound

    def explore() -> None:
        """The multipliers and the orders (a time limit inside a solve raises ``Cancelled``: the caller keeps the
        pairs found)."""
        nonlocal bound

        # 1. Lagrangian multipliers on the contended offers: the bound, and the split each dedicated plan suggests
        if cost_objective and free_ok and lagrangian_applies(scenario, offers, rows):
            t_start = time.perf_counter()
            z0, prices, _ = shared_lp({})
            factor = 1.0 + scenario.options.K
            delta = {key: prices.get(key, 0.0) for key in rows}
            splits: set[tuple[int, ...]] = set()
            theta = 1.0
            for it in range(MAX_ROUNDS):
                if deadline.expired():
                    break
                t_round = time.perf_counter()
                if it == 0:  # the LP's duals with σ_c raised to 0 stay feasible at the dearer prices (docstring)
                    lb_s = z0 + sum(delta[key] * rows[key] for key in rows)
                    if not any(d > 0 for d in delta.values()) and packing.bound_per_hour is not None:
                        lb_s = max(lb_s, packing.bound_per_hour)  # no price: the packing's own bound (ILP-lifted)
                    elif not any(d > 0 for d in delta.values()) and packing.status == "optimal":
                        lb_s = max(lb_s, packing.cost_per_hour)
                    x_s: Mapping[tuple[str, str], float] = used_s
                else:
                    lb_s, _p, x_s = shared_lp({key: d for key, d in delta.items() if d > 0})
                if not math.isfinite(lb_s):
                    break
                dearer = {key: d / factor for key, d in delta.items() if d > 1e-9}
                at = solve_part(priced(sub, offers, dearer), 0.7, False) if dearer else free
                if at.status not in ("optimal", "feasible"):
                    break
                lagrange = lb_s + part_bound(at.cost_per_hour, at.mip_gap, None) - sum(
                    delta[key] * rows[key] for key in rows)
                stats["multiplier_rounds"] = float(it + 1)
                if math.isfinite(lagrange) and (bound is None or lagrange > bound + 1e-9):
                    bound = lagrange
                    stats["lagrangian_bound_per_hour"] = lagrange
                    stats["node_price_total"] = float(sum(delta.values()))
                    priced_at = ", ".join(f"{r} {s} +${d:,.4f}/h" for (r, s), d in sorted(delta.items()) if d > 1e-9)
                    found["note"] = (f"lower bound ${lagrange:,.2f}/h: a Lagrangian bound over the {len(rows)} "
                                     "contended offers, the packing LP plus the popular models' optimum with those "
                                     f"nodes priced at their value to the packing ({priced_at or 'no extra price'}).")
                else:
                    theta /= 2
                taken = plan_usage(at)
                split = tuple(taken.get(key, 0) for key in rows)
                if split not in splits:  # a split not tried: the packing on what this plan leaves, then re-planned
                    splits.add(split)
                    if at is free:
                        popular_first()
                    else:
                        got = packed_on(taken)
                        if got is not None:
                            packed_first(got[0], got[1], "lagrangian", 0.8)
                timed("lagrangian_seconds", t_round)
                g = {key: float(x_s.get(key, 0.0)) + taken.get(key, 0) - rows[key] for key in rows}
                norm = sum(v * v for v in g.values())
                left = deadline.remaining_s()
                if close() or norm < 1e-12 or (left is not None and left < 3 * (time.perf_counter() - t_round)):
                    break
                target = total() if math.isfinite(total()) else lagrange + 0.05 * abs(lagrange) + 1e-6
                step = theta * max(target - lagrange, 1e-6 * abs(target)) / norm
                delta = {key: max(0.0, delta[key] + step * g[key]) for key in rows}
            stats["lagrangian_seconds"] = time.perf_counter() - t_start
        # 2. the popular models' free optimum first, the packing on what it leaves (cost objective: a packing only)
        if cost_objective and free_ok and not popular_first_tried and not close():
            popular_first()
        # 3. the packing first, the popular models on what it leaves
        if not close() or not best:
            packed_first(packing, nodes, "shared first", 0.7)
    try:
        explore()
    except Cancelled:
        if not deadline.timed_out():
            raise
        notes.append("the time limit stopped the search for a cheaper split of the contended nodes.")
    if "note" in found:
        notes.append(found["note"])

    if not best:  # no pair in time: the packing with no dedicated plan (the caller reports the time limit)
        empty = replace(free, status="time_limit", instances=(), cost_lines=(), cost_per_hour=0.0,
                        provisioning_per_hour=0.0, penalty_per_hour=0.0, served_fraction=0.0,
                        message="time limit reached before the re-plan on what the shared nodes leave")
        notes.append("time limit reached before the popular models could be re-planned on what the shared nodes "
                     "leave.")
        return Settled(packing, nodes, empty, sub, bound, False, notes, stats)
    value, label, pk, nd, ded, on, has_baselines = min(best, key=lambda c: c[0])
    if baselines and label != "popular first" and not has_baselines and not deadline.expired():
        again = solve_part(on, 0.9, True)  # the answer with its baselines
        if again.status in ("optimal", "feasible") and again.cost_per_hour <= ded.cost_per_hour * (1 + 1e-9) + 1e-9:
            ded, value = again, pk.cost_per_hour + again.cost_per_hour
    stats["candidates"] = float(len(best))
    tried = f" (the cheapest of {len(best)} orders)." if len(best) > 1 else "."
    notes.append({"lagrangian": "the parts compete for nodes: the popular models were planned with the contended "
                                "nodes priced at their value to the packing, the shared nodes packed on what they "
                                "leave and the popular models re-planned on what the packing leaves" + tried,
                  "popular first": "the parts compete for nodes: the popular models were planned first and the "
                                   "shared nodes packed on what they leave" + tried,
                  "shared first": "the parts compete for nodes: the shared nodes were packed first and the popular "
                                  "models planned on what they leave" + tried}[label])
    optimal = (bound is not None and math.isfinite(bound) and pk.status == "optimal" and ded.status == "optimal"
               and value <= bound * (1 + 1e-9) + 1e-9)
    return Settled(pk, nd, ded, on, bound, optimal, notes, stats)


def pack_on(taken: Usage, scenario: Scenario, profiles: Sequence[ModelProfile], types: Sequence[NodeType],
            method: str, deadline: Deadline) -> tuple[Packing, tuple[SharedNode, ...]] | None:
    """The shared models (``profiles``, profiled on ``types`` once) packed on what ``taken`` leaves of ``types``
    (None when they cannot be)."""
    from planning.sharing.parts import shared_nodes, tail_models
    from planning.sharing.plan import pack_tail

    rest = []
    for t in types:
        region, shape = t.key.split(" ", 1)
        left = t.available - taken.get((region, shape), 0)
        if left > 0:
            rest.append(replace(t, available=left))
    try:
        packing = pack_tail(scenario, tail_models(profiles, rest), rest, method, deadline)
    except PlanningError:
        return None
    return (packing, shared_nodes(packing, profiles, rest)) if packing.feasible else None


def shared_lp(packing: Packing, profiles: Sequence[ModelProfile], types: Sequence[NodeType], method: str,
              deadline: Deadline, extra: Prices) -> tuple[float, Prices, Prices]:
    """The packing's bound with the offers in ``extra`` dearer (``joint_plan.packing_lp``: with none, its LP, the
    column packing's own when it has one); none for the heuristic, whose gap the plan does not claim."""
    if not extra and packing.lp_bound_per_hour is not None:
        return packing.lp_bound_per_hour, packing.node_prices, {}
    if method != "exact":
        return -math.inf, {}, {}
    from planning.sharing.joint_plan import packing_lp
    from planning.sharing.parts import tail_models

    tail = [m for m in tail_models(profiles, types) if any(fits([m], t) for t in types)]
    return packing_lp(tail, types, time_limit_s=time_left(deadline, 15.0, 0.2), cancel=deadline, extra=extra,
                      lp_only=not extra)
