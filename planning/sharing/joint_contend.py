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


@dataclass(frozen=True)
class Contest:
    """What the contention is settled over: the whole scenario and the popular models' (with the budget left, if
    any), the whole scenario's resolved offers, the three solves it may call and the whole call's deadline.

    ``pack_on``: ``f(usage) -> (packing, nodes)`` (None when no packing) on what ``usage`` leaves of the
    availability. ``solve_part``: ``f(scenario, progress from, with baselines) -> PlanResult`` for the popular
    models. ``shared_lp``: ``f(extra) -> (z_LP, node prices, LP nodes per offer)`` of the packing with every node,
    the offers in ``extra`` dearer by that much (−inf when no bound; prices empty when the LP did not converge).
    ``baselines``: the answer's dedicated plan with its baselines (False: none is solved for them)."""

    scenario: Scenario
    sub: Scenario
    offers: Sequence[ResolvedOffer]
    pack_on: PackOn
    solve_part: SolvePart
    shared_lp: SharedLP
    deadline: Deadline
    baselines: bool = True


Candidate = tuple[float, str, Packing, "tuple[SharedNode, ...]", PlanResult, Scenario, bool]
"""A pair found: (total $/h, how, packing, its nodes, dedicated plan, the scenario it was solved on, whether it was
solved with its baselines)."""


def settle(contest: Contest, packing: Packing, nodes: tuple[SharedNode, ...], free: PlanResult,
           bound: float | None) -> Settled:
    """Resolve the competition between the packing (``packing``, ``nodes``: optimal or best with every node) and
    the popular models' free plan ``free`` (module docstring).

    Parameters
    ----------
    contest:
        The scenarios, offers, solves and deadline (:class:`Contest`).
    packing, nodes:
        The shared part with every node available.
    free:
        The popular models' plan with every node available.
    bound:
        Each part's bound with every node, added (None when not a cost objective).

    Returns
    -------
    Settled: the cheapest pair found, the best bound, and whether it is proven optimal.
    """
    search = _Search(contest, packing, nodes, free, bound)
    try:
        search.explore()
    except Cancelled:
        if not contest.deadline.timed_out():
            raise
        search.notes.append("the time limit stopped the search for a cheaper split of the contended nodes.")
    if "note" in search.found:
        search.notes.append(search.found["note"])
    return search.settled()


class _Search:
    """The candidate pairs of one contention and the bound as the multipliers and the orders find them."""

    def __init__(self, contest: Contest, packing: Packing, nodes: tuple[SharedNode, ...], free: PlanResult,
                 bound: float | None) -> None:
        from planning.sharing.parts import node_usage, plan_usage

        scenario = contest.scenario
        self.contest, self.packing, self.nodes, self.free, self.bound = contest, packing, nodes, free, bound
        self.cost_objective = scenario.objective.kind == "cost" and scenario.objective.budget_per_hour is None
        self.used_s, self.used_f = node_usage(nodes), plan_usage(free)
        self.rows = contended(contest.offers, self.used_s, self.used_f)
        self.notes: list[str] = []
        self.stats: dict[str, float] = {
            "contended_offers": float(len(self.rows)), "contended_nodes": float(sum(self.rows.values())),
            "contended_in_packing": float(sum(self.used_s.get(key, 0) for key in self.rows)),
            "contended_in_free_plan": float(sum(self.used_f.get(key, 0) for key in self.rows))}
        self.best: list[Candidate] = []
        self.free_ok = free.status in ("optimal", "feasible")
        self.popular_first_tried = False
        self.found: dict[str, str] = {}  # the Lagrangian bound's note, when it raised the bound

    def total(self) -> float:
        return min((c[0] for c in self.best), default=math.inf)

    def close(self) -> bool:
        b = self.bound if self.bound is not None else -math.inf
        return math.isfinite(b) and self.total() <= b + STOP_GAP * abs(self.total())

    def timed(self, key: str, t0: float) -> None:
        self.stats[key] = self.stats.get(key, 0.0) + time.perf_counter() - t0

    def add(self, label: str, pk: Packing, nd: tuple[SharedNode, ...], ded: PlanResult, on: Scenario,
            baselines: bool) -> None:
        if pk.feasible and ded.status in ("optimal", "feasible"):
            self.best.append((pk.cost_per_hour + ded.cost_per_hour, label, pk, nd, ded, on, baselines))

    def packed_first(self, pk: Packing, nd: tuple[SharedNode, ...], label: str, lo: float) -> None:
        """The popular models planned on what the packing leaves (the first such plan with its baselines)."""
        from planning.sharing.parts import node_usage, remaining

        c = self.contest
        if c.deadline.expired():
            return
        t0 = time.perf_counter()
        on = remaining(c.sub, c.offers, node_usage(nd))
        with_baselines = c.baselines and not any(x[6] for x in self.best)
        self.add(label, pk, nd, c.solve_part(on, lo, with_baselines), on, with_baselines)
        self.timed("replan_seconds", t0)

    def packed_on(self, taken: Usage) -> tuple[Packing, tuple[SharedNode, ...]] | None:
        if self.contest.deadline.expired():
            return None
        t0 = time.perf_counter()
        got = self.contest.pack_on(taken)
        self.timed("repack_seconds", t0)
        return got

    def popular_first(self) -> None:
        """The popular models' free optimum first, the packing on what it leaves (a packing only)."""
        self.popular_first_tried = True
        got = self.packed_on(self.used_f)
        if got is not None:
            self.add("popular first", got[0], got[1], self.free, self.contest.sub, False)

    def explore(self) -> None:
        """The multipliers and the orders (a time limit inside a solve raises ``Cancelled``: the caller keeps the
        pairs found)."""
        # 1. Lagrangian multipliers on the contended offers: the bound, and the split each dedicated plan suggests
        if self.cost_objective and self.free_ok and lagrangian_applies(self.contest.scenario, self.contest.offers,
                                                                       self.rows):
            self.lagrangian()
        # 2. the popular models' free optimum first, the packing on what it leaves (cost objective: a packing only)
        if self.cost_objective and self.free_ok and not self.popular_first_tried and not self.close():
            self.popular_first()
        # 3. the packing first, the popular models on what it leaves
        if not self.close() or not self.best:
            self.packed_first(self.packing, self.nodes, "shared first", 0.7)

    def lagrangian(self) -> None:
        """Multiplier rounds (module docstring): the bound each raises, and the split each dedicated plan
        suggests tried as a pair."""
        c, rows = self.contest, self.rows
        t_start = time.perf_counter()
        z0, prices, _ = c.shared_lp({})
        delta = {key: prices.get(key, 0.0) for key in rows}
        splits: set[tuple[int, ...]] = set()
        theta = 1.0
        for it in range(MAX_ROUNDS):
            if c.deadline.expired():
                break
            t_round = time.perf_counter()
            step = self.lagrangian_round(it, z0, delta, splits)
            if step is None:
                break
            lagrange, taken, x_s, raised = step
            if not raised:
                theta /= 2
            self.timed("lagrangian_seconds", t_round)
            g = {key: float(x_s.get(key, 0.0)) + taken.get(key, 0) - rows[key] for key in rows}
            norm = sum(v * v for v in g.values())
            left = c.deadline.remaining_s()
            if self.close() or norm < 1e-12 or (left is not None and left < 3 * (time.perf_counter() - t_round)):
                break
            target = self.total() if math.isfinite(self.total()) else lagrange + 0.05 * abs(lagrange) + 1e-6
            step_len = theta * max(target - lagrange, 1e-6 * abs(target)) / norm
            delta = {key: max(0.0, delta[key] + step_len * g[key]) for key in rows}
        self.stats["lagrangian_seconds"] = time.perf_counter() - t_start

    def lagrangian_round(self, it: int, z0: float, delta: dict[tuple[str, str], float],
                         splits: set[tuple[int, ...]]) -> tuple[float, Usage, Prices, bool] | None:
        """One multiplier round at ``delta``: the bound L(δ) (raising ``self.bound`` when higher) and the pair its
        dedicated plan suggests; (L, that plan's nodes, the packing's nodes, whether L rose), or None to stop."""
        from planning.sharing.parts import part_bound, plan_usage

        c, rows, packing = self.contest, self.rows, self.packing
        if it == 0:  # the LP's duals with σ_c raised to 0 stay feasible at the dearer prices (docstring)
            lb_s = z0 + sum(delta[key] * rows[key] for key in rows)
            if not any(d > 0 for d in delta.values()) and packing.bound_per_hour is not None:
                lb_s = max(lb_s, packing.bound_per_hour)  # no price: the packing's own bound (ILP-lifted)
            elif not any(d > 0 for d in delta.values()) and packing.status == "optimal":
                lb_s = max(lb_s, packing.cost_per_hour)
            x_s: Prices = {k: float(v) for k, v in self.used_s.items()}
        else:
            lb_s, _p, x_s = c.shared_lp({key: d for key, d in delta.items() if d > 0})
        if not math.isfinite(lb_s):
            return None
        dearer = {key: d / (1.0 + c.scenario.options.K) for key, d in delta.items() if d > 1e-9}
        at = c.solve_part(priced(c.sub, c.offers, dearer), 0.7, False) if dearer else self.free
        if at.status not in ("optimal", "feasible"):
            return None
        lagrange = lb_s + part_bound(at.cost_per_hour, at.mip_gap, None) - sum(delta[key] * rows[key] for key in rows)
        self.stats["multiplier_rounds"] = float(it + 1)
        raised = math.isfinite(lagrange) and (self.bound is None or lagrange > self.bound + 1e-9)
        if raised:
            self.bound = lagrange
            self.stats["lagrangian_bound_per_hour"] = lagrange
            self.stats["node_price_total"] = float(sum(delta.values()))
            priced_at = ", ".join(f"{r} {s} +${d:,.4f}/h" for (r, s), d in sorted(delta.items()) if d > 1e-9)
            self.found["note"] = (f"lower bound ${lagrange:,.2f}/h: a Lagrangian bound over the {len(rows)} "
                                  "contended offers, the packing LP plus the popular models' optimum with those "
                                  f"nodes priced at their value to the packing ({priced_at or 'no extra price'}).")
        taken = plan_usage(at)
        split = tuple(taken.get(key, 0) for key in rows)
        if split not in splits:  # a split not tried: the packing on what this plan leaves, then re-planned
            splits.add(split)
            if at is self.free:
                self.popular_first()
            else:
                got = self.packed_on(taken)
                if got is not None:
                    self.packed_first(got[0], got[1], "lagrangian", 0.8)
        return lagrange, taken, x_s, raised

    def settled(self) -> Settled:
        """The cheapest pair found (solved again with its baselines when it is the answer and had none)."""
        c, free, bound, notes = self.contest, self.free, self.bound, self.notes
        if not self.best:  # no pair in time: the packing with no dedicated plan (the caller reports the time limit)
            empty = replace(free, status="time_limit", instances=(), cost_lines=(), cost_per_hour=0.0,
                            provisioning_per_hour=0.0, penalty_per_hour=0.0, served_fraction=0.0,
                            message="time limit reached before the re-plan on what the shared nodes leave")
            notes.append("time limit reached before the popular models could be re-planned on what the shared "
                         "nodes leave.")
            return Settled(self.packing, self.nodes, empty, c.sub, bound, False, notes, self.stats)
        value, label, pk, nd, ded, on, has_baselines = min(self.best, key=lambda x: x[0])
        if c.baselines and label != "popular first" and not has_baselines and not c.deadline.expired():
            again = c.solve_part(on, 0.9, True)  # the answer with its baselines
            if again.status in ("optimal", "feasible") and \
                    again.cost_per_hour <= ded.cost_per_hour * (1 + 1e-9) + 1e-9:
                ded, value = again, pk.cost_per_hour + again.cost_per_hour
        self.stats["candidates"] = float(len(self.best))
        tried = f" (the cheapest of {len(self.best)} orders)." if len(self.best) > 1 else "."
        notes.append({"lagrangian": "the parts compete for nodes: the popular models were planned with the "
                                    "contended nodes priced at their value to the packing, the shared nodes packed on "
                                    "what they leave and the popular models re-planned on what the packing leaves"
                                    + tried,
                      "popular first": "the parts compete for nodes: the popular models were planned first and the "
                                       "shared nodes packed on what they leave" + tried,
                      "shared first": "the parts compete for nodes: the shared nodes were packed first and the "
                                      "popular models planned on what they leave" + tried}[label])
        optimal = (bound is not None and math.isfinite(bound) and pk.status == "optimal" and ded.status == "optimal"
                   and value <= bound * (1 + 1e-9) + 1e-9)
        return Settled(pk, nd, ded, on, bound, optimal, notes, self.stats)


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
