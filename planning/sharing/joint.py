"""One model for sharing: which models share GPUs, which get dedicated templates and how the shared GPUs are
packed, decided together over one availability (issue 27 §1), solved by a Dantzig–Wolfe decomposition whose
bound is proven and whose answer is certified over every packing.

The compact MILP (the model)
----------------------------
Sets: models m; shareable models S ⊆ M (fit alone on some single-GPU node type and allowed to share: the
threshold, when the user sets one, is a constraint that dedicates every model at or above it); dedicated groups
g of model m(g) (its (model, phase) groups, one class each); templates τ of g; regions r; shapes k; single-GPU
node types t = (r(t), k(t)); candidate nodes b of type t.
Parameters: p_t node price; C_t, usage rows of packing (memory W + KV, compute u, ttft δ/h; see
``planning.sharing.packing``); λ_g demand; T_τ throughput; U_{τk} nodes; p_r(τ) = Σ_k p_{rk} U_{τk}; A_{rk}
availability; K the initialization penalty factor (dedicated instances are new: cost (1 + K)·p, as the
allocation ILP without running instances; shared nodes cost p_t, as the packing always counted them).
Variables: d_m ∈ {0,1} (m dedicated; fixed 1 for m ∉ S), x_{mtb}, y_{tb} ∈ {0,1} (packing), ν_{τr} ∈ ℤ≥0,
s_{mr} ≥ 0 (the share of a disaggregated model's requests served in region r: prefill and decode pair per region).
    min  Σ_{t,b} p_t y_{tb} + Σ_{τ,r} (1 + K) p_r(τ) ν_{τr}
    (assign)    Σ_{t,b} x_{mtb} + d_m = 1                                   m ∈ S
    (pack)      memory, compute, ttft and x ≤ y rows of every candidate node (``packing``)
    (demand)    Σ_{τ∈g, r} T_τ ν_{τr} ≥ λ_g d_m(g)                          every dedicated group g
    (pair)      Σ_{τ∈g} T_τ ν_{τr} ≥ λ_g s_{m(g) r};  Σ_r s_{mr} ≥ d_m        disaggregated models, ≥ 2 regions
    (avail)     Σ_b y_{tb} [t = (r, k)] + Σ_τ U_{τk} ν_{τr} ≤ A_{rk}           every (r, k)
The threshold split of before (shared = rate below the threshold) is this model with d fixed.

Decomposition (what runs)
-------------------------
A node's packing is a **pattern** P = (t, M_P): a set of models that fit together on one node of type t
(memory, compute, ttft rows). The master over patterns: min Σ_P p_t z_P + Σ (1 + K) p ν with
(cover) Σ_{P ∋ m} z_P + d_m = 1 for m ∈ S and (avail) Σ_{P on (r,k)} z_P + Σ U ν ≤ A, the rest as above; the
compact MILP's integer solutions and the master's are the same plans (a bought node with its models is a
pattern), and the master's LP bound is at least the compact LP's (Dantzig–Wolfe).
1. **LP by column generation.** A dedicated group not paired across regions is covered by **group plans** q
   (ν ∈ ℤ≥0 over (τ, r) with Σ T ν ≥ λ_g; (convexity) Σ_q w_q = d_m, or 1 for a must-dedicate model), priced by
   an exact covering knapsack (``joint_groups``): rc = Σ (c − σU) ν − μ_g; so the LP sees the integer rounding
   of instance counts. Paired groups keep per-template columns, priced by numpy over every column, with the
   strengthened rows of the allocation LP (T' = min(T, λ) in demand and pairing rows, a cardinality cut
   Σ ν ≥ ⌈λ/max T⌉ d). Patterns: a greedy, then a depth-first listing of negative patterns, then (when that runs
   out of nodes) an exact binary knapsack per node type (HiGHS, gap 0, run to its end before it answers none):
   max Σ π_m x_m over models that fit together, so a pattern's reduced cost rc = p_t − σ_t − Σ_{m∈P} π_m
   (π cover duals, σ ≤ 0 availability duals). At convergence no column has rc < 0: z_LP is a lower bound on
   every plan.
2. **Reduced-cost enumeration.** For any integer plan, cost ≥ z_LP + Σ rc·x (weak duality; every column has
   rc ≥ 0), so a plan of cost ≤ a target θ uses only columns with rc ≤ θ − z_LP. Every pattern with rc ≤ Δ is
   listed by a depth-first search per node type (models by π, pruned with a fractional-knapsack bound; fitting
   is monotone: dropping a model keeps a pattern feasible), every template column by numpy (a planned group's
   template τ lies in some plan of rc ≤ Δ only if c'_τ − μ_g ≤ Δ, since the plan's other items cost c' ≥ 0).
3. **ILP and certificate.** The set-partitioning ILP over those patterns and integer template counts (HiGHS,
   gap 0). A plan of cost ≤ θ is
   optimal over all packings and templates; an ILP optimum above θ proves the bound θ and the target rises to
   that optimum (then the listed columns provably contain an optimum). θ starts at the restricted master ILP's
   plan (over the columns generated in step 1). When the listing exceeds ``MAX_PATTERNS`` (or
   ``PATTERNS_PER_SECOND`` × the seconds left) or the deadline passes, the best plan is returned with its proven
   gap (status ``feasible``).

Tests: ``tests/sharing/test_joint.py`` (brute force over every split, packing and dedicated plan on 30 tiny seeded
instances, one and two regions, aggregated and disaggregated, K = 0 and 0.5; a designed instance computed by hand;
the threshold split never cheaper; the CLI on long-tail; ``test_joint_columns.py``: both pricing oracles and the
column packing against brute force or the compact MILP). Modules: ``joint_model`` (the instance and its
indexing), ``joint_columns`` (the master LP, pricing, the enumeration), ``joint_ilp`` (the ILP over listed columns),
this one (the driver).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from planning.context import CallClock, CancelToken
from planning.errors import PlanningError
from planning.sharing.joint_columns import (
    ADD_PER_ROUND,
    BIG_M,
    EXACT_PER_ROUND,
    ColumnMaster,
    Duals,
    best_pattern,
    column_duals,
    enumerate_patterns,
    farley_bound,
    greedy_patterns,
    pattern_base,
    pattern_listing,
    plan_costs,
    plan_rc_lower,
    price_plan,
    start_plans,
    template_rc,
)
from planning.sharing.joint_ilp import columns_ilp
from planning.sharing.joint_model import DedicatedGroup, JointArrays, JointInstance, JointPlan

__all__ = ["DedicatedGroup", "JointInstance", "JointPlan", "solve_joint"]

MAX_PATTERNS = 400_000  # enumerated patterns beyond which the certificate is abandoned (best plan, proven gap)
PATTERNS_PER_SECOND = 2_000  # and beyond this many per second left (building and solving the ILP takes time)
MAX_ROUNDS = 500
TARGET_START = 0.002  # first certificate target: z_LP · (1 + 0.2 %), unless the incumbent is already lower
LP_SHARE = 0.6  # of the time limit column generation may use before the incumbent ILP and the bound
LIST_PER_ROUND = 60  # negative patterns listed per node type and round when the greedy finds none
LIST_NODES = 50_000  # search nodes of that listing before the exact knapsack decides instead
MAX_ATTEMPTS = 8  # certificate targets tried (each widens the listed columns fourfold)


# ---------------------------------------------------------------------------------------------- driver
@dataclass(frozen=True)
class _LP:
    """Where the column generation stopped: the last LP's value, primal values and duals, the columns the last
    pricing round added (0: converged), its rounds and seconds."""

    z: float
    values: np.ndarray
    duals: Duals
    added: int
    rounds: int
    seconds: float


@dataclass
class _Incumbent:
    """The certificate's state: the best plan and its cost, the proven bound, and how the proof ended."""

    best: JointPlan | None
    value: float
    bound: float
    certified: bool = False
    proved_infeasible: bool = False
    notes: list[str] = field(default_factory=list)


def solve_joint(inst: JointInstance, *, time_limit_s: float = 60.0, cancel: CancelToken | None = None,
                start: JointPlan | None = None, lp_only: bool = False) -> JointPlan:
    """The joint sharing optimum (module docstring): certified over every packing and template, or the best
    plan found with its proven gap when the deadline or the enumeration cap stops the proof.

    Parameters
    ----------
    inst:
        The instance (``fixed_shared`` / ``fixed_dedicated`` fix the split, e.g. to a threshold's).
    time_limit_s:
        Seconds for the whole call (also bounded by ``cancel``'s deadline).
    cancel:
        Checked between steps.
    start:
        A known plan (e.g. the heuristic's): its patterns seed the LP and it is the ILP's MIP start.
    lp_only:
        Stop after the column generation: status ``lp``, no plan, the LP bound (Farley's when it did not
        converge), the converged LP's node prices (``JointPlan.node_prices``) and its shared nodes per
        offer (``JointPlan.lp_nodes``, fractional).

    Returns
    -------
    JointPlan with status ``optimal`` (certified, gap 0), ``feasible`` (a plan with its proven gap),
    ``infeasible`` (the LP proves no plan exists), ``time_limit`` (no plan by the deadline) or ``lp``
    (``lp_only``).
    """
    clock = CallClock(time_limit_s, cancel, floor_s=0.05)
    a = JointArrays.build(inst)
    allowed = _allowed(inst, a)
    master = _seed_master(inst, a, allowed, start)
    lp = _column_generation(inst, a, master, allowed, clock)
    slack = master.slack_value(lp.values)
    converged = lp.added == 0
    z_lp = lp.z - BIG_M * a.max_cost * slack
    stats: dict[str, float] = {"lp_rounds": float(lp.rounds), "lp_bound_per_hour": z_lp, "lp_seconds": lp.seconds,
                               "patterns_generated": float(len(master.patterns)),
                               "templates_generated": float(len(master.templates))}
    if converged and slack > 1e-6:
        return JointPlan("infeasible", math.inf, math.inf, math.inf, (), {}, (), inst.models, math.inf, None, stats,
                         ("the LP relaxation has no solution: availability cannot hold every model, shared or "
                          "dedicated.",))
    bound = z_lp if converged else farley_bound(a, lp.duals, lp.z, allowed, min(clock.left(), 5.0))
    stats["farley_bound_per_hour"] = bound if not converged else z_lp
    stats["lp_converged"] = 1.0 if converged else 0.0
    prices = _node_prices(inst, lp.duals) if converged else {}
    if lp_only:
        return JointPlan("lp", math.inf, math.inf, math.inf, (), {}, (), inst.models, bound, None, stats, (),
                         prices, _lp_nodes(inst, a, master, lp.values))
    # the incumbent: the ILP over the generated columns
    t_ilp = time.perf_counter()
    _status, value, _b, best = columns_ilp(a, sorted(master.patterns), sorted(master.templates),
                                           min(clock.left(), 10.0), start)
    if start is not None and start.has_plan and (best is None or start.cost_per_hour < value - 1e-9):
        best, value = start, start.cost_per_hour
    inc = _Incumbent(best, value, bound)
    if converged and math.isfinite(bound):
        _certify(a, master, allowed, lp.duals, z_lp, inc, clock, stats)
    stats["ilp_seconds"] = time.perf_counter() - t_ilp
    stats["total_seconds"] = clock.elapsed()
    return _answer(inst, inc, stats, prices)


def _allowed(inst: JointInstance, a: JointArrays) -> list[list[int]]:
    """Per node type, the shareable models that fit on it alone and are not fixed dedicated (raises when a model
    forced to share fits on none)."""
    allowed = [[i for i in a.fit_on[t] if inst.shareable[i].id not in inst.fixed_dedicated] for t in range(len(inst.types))]
    for m in inst.fixed_shared:
        i = a.shareable_index[m]
        if not any(i in al for al in allowed):
            raise PlanningError(f"sharing.{m}", "is forced to share but fits on no shared node type alone.",
                                "dedicate it (raise the threshold above its rate) or offer a larger GPU.")
    return allowed


def _seed_master(inst: JointInstance, a: JointArrays, allowed: list[list[int]], start: JointPlan | None
                 ) -> ColumnMaster:
    """The master LP with the split fixed where the instance fixes it, and its first columns: singletons, the
    start plan's patterns and group plans, and per group the cheapest templates per throughput per region."""
    master = ColumnMaster(a)
    for m in inst.fixed_shared:  # d fixed to 0: its column gets an upper bound of 0
        j = next(j for j, (kind, key) in enumerate(master.columns) if kind == "d" and key == a.shareable_index[m])
        master.h.changeColBounds(j, 0.0, 0.0)
    for m in inst.fixed_dedicated:
        if m in a.shareable_index:
            j = next(j for j, (kind, key) in enumerate(master.columns) if kind == "d" and key == a.shareable_index[m])
            master.h.changeColBounds(j, 1.0, 1.0)
    for t, al in enumerate(allowed):  # singletons: every model alone on every type it fits
        for i in al:
            master.add_pattern(t, (i,))
    if start is not None:
        for n_ in start.nodes:
            t = next(t for t, nt in enumerate(inst.types) if nt.key == n_.type)
            master.add_pattern(t, tuple(sorted(a.shareable_index[m] for m in n_.models)))
        for gi, q in start_plans(a, start):
            master.add_plan(gi, q)
    for gi, g in enumerate(inst.groups):  # seeds: the best cost per throughput per region
        c = a.cost[gi] / np.maximum(g.throughput, 1e-12)[:, None]
        for r in range(len(inst.regions)):
            ok = np.flatnonzero(np.isfinite(c[:, r]))
            for i in ok[np.argsort(c[ok, r])[:24]]:
                if a.planned[gi]:  # as whole-group plans: enough instances of one template
                    master.add_plan(gi, ((int(i), r, math.ceil(g.demand / float(g.throughput[i]) - 1e-9)),))
                else:
                    master.add_template(gi, int(i), r)
        if a.planned[gi]:
            master.add_plan(gi, price_plan(a, Duals.zero(a), gi)[1])
    return master


def _column_generation(inst: JointInstance, a: JointArrays, master: ColumnMaster, allowed: list[list[int]],
                       clock: CallClock) -> _LP:
    """Step 1: solve the master LP and price new columns until none has a negative reduced cost, or the LP's
    share of the time is spent (the bound is then Farley's)."""
    rounds = 0
    t_lp = time.perf_counter()
    while True:
        rounds += 1
        clock.check_caller("sharing: column generation")
        z, y, values = master.solve()
        du = column_duals(master, y)
        added = _price_groups(inst, a, master, du) + _price_patterns(inst, a, master, du, allowed)
        if added == 0 or rounds >= MAX_ROUNDS or clock.elapsed() > LP_SHARE * clock.limit_s or clock.left() <= 0.1:
            break
    return _LP(z, values, du, added, rounds, time.perf_counter() - t_lp)


def _price_groups(inst: JointInstance, a: JointArrays, master: ColumnMaster, du: Duals) -> int:
    """New group plans (exact covering knapsack) and template columns of negative reduced cost; how many."""
    added = 0
    for gi in range(len(inst.groups)):
        if a.planned[gi]:
            if plan_rc_lower(a, du, gi) < -1e-7 * a.max_cost:  # the knapsack's LP bound says it may pay
                rc_q, q_plan = price_plan(a, du, gi)
                if rc_q < -1e-7 * a.max_cost:
                    added += master.add_plan(gi, q_plan)
            continue
        rc = template_rc(a, du, gi)
        neg = np.argwhere(rc < -1e-7 * a.max_cost)
        if neg.size:
            order = np.argsort(rc[neg[:, 0], neg[:, 1]])[:ADD_PER_ROUND]
            added += sum(master.add_template(gi, int(i), int(r)) for i, r in neg[order])
    return added


def _price_patterns(inst: JointInstance, a: JointArrays, master: ColumnMaster, du: Duals,
                    allowed: list[list[int]]) -> int:
    """New patterns of negative reduced cost: the greedy; when it finds none, a listing per node type, and when
    that runs out of nodes, the exact knapsack; how many were added."""
    tol = 1e-7 * a.max_cost
    greedy = sum(master.add_pattern(t, ms) for t in range(len(inst.types))
                 for ms in greedy_patterns(a, du, t, allowed[t], tol))
    added = greedy
    if greedy:
        return added
    for t in range(len(inst.types)):  # the heuristic found nothing: list negative patterns, or the knapsack decides
        found, state = pattern_listing(a, du, t, allowed[t], -tol, LIST_PER_ROUND, LIST_NODES)
        added += sum(master.add_pattern(t, ms) for ms, _rc in found)
        if found or state == "complete":  # columns, or the listing proved there are none
            continue
        pool = list(allowed[t])
        for _ in range(EXACT_PER_ROUND):  # disjoint sets: several columns per (costly) exact search
            gain, ms = best_pattern(a, du, t, pool, need=pattern_base(a, du, t) + tol)
            if not ms or pattern_base(a, du, t) - gain >= -tol:
                break
            added += master.add_pattern(t, ms)
            pool = [i for i in pool if i not in ms]
    return added


def _node_prices(inst: JointInstance, du: Duals) -> dict[tuple[str, str], float]:
    """The converged LP's node price per offer (−σ, where the availability row binds)."""
    R, Ks = inst.prices.shape
    return {(inst.regions[r], inst.shapes[k]): -float(du.sigma[r, k]) for r in range(R) for k in range(Ks)
            if du.sigma[r, k] < -1e-12}


def _lp_nodes(inst: JointInstance, a: JointArrays, master: ColumnMaster, values: np.ndarray
              ) -> dict[tuple[str, str], float]:
    """The LP's shared nodes per offer (fractional), from the columns of the last LP solved."""
    used: dict[tuple[str, str], float] = {}
    for j, (kind, key) in enumerate(master.columns[: len(values)]):
        if kind == "z" and values[j] > 1e-9:
            r, k = a.type_rk[key[0]]  # type: ignore[index]
            used[(inst.regions[r], inst.shapes[k])] = used.get((inst.regions[r], inst.shapes[k]), 0.0) + values[j]
    return used


def _certify(a: JointArrays, master: ColumnMaster, allowed: list[list[int]], du: Duals, z_lp: float,
             inc: _Incumbent, clock: CallClock, stats: dict[str, float]) -> None:
    """Steps 2–3: list the columns within the target's reduced-cost gap, solve their ILP, and raise the target
    until a plan is certified, no plan is proven, or the time, the attempts or the listing cap run out
    (updates ``inc`` and ``stats``)."""
    target = max(inc.bound * (1 + TARGET_START), inc.bound + 1e-6)
    target = min(target, inc.value) if math.isfinite(inc.value) else target
    inst = a.inst
    attempts = 0
    while clock.left() > 0.1 and attempts < MAX_ATTEMPTS:
        attempts += 1
        # without any plan after two targets, list every column: the ILP then decides feasibility outright
        delta = target - z_lp if math.isfinite(inc.value) or attempts <= 2 else math.inf
        pats, cap = _listed_patterns(inst, a, master, allowed, du, delta, clock)
        if pats is None:
            inc.notes.append(f"more than {cap:,} packings lie within the gap (at most {PATTERNS_PER_SECOND:,} per "
                             "second left): the certificate was stopped, the best plan is given with its proven gap.")
            break
        temps: set[tuple[int, int, int]] = set(master.templates)
        for gi in range(len(inst.groups)):
            # a planned group's template is in some plan of rc ≤ Δ only if c' − μ ≤ Δ (the plan's other items
            # have c' ≥ 0); a paired group's ν columns by their own reduced cost
            rc = plan_costs(a, du, gi) - du.y_dem[gi] if a.planned[gi] else template_rc(a, du, gi)
            temps.update((gi, int(i), int(r)) for i, r in np.argwhere(rc <= delta + 1e-9))
        stats["patterns_in_ilp"] = float(len(pats))
        stats["templates_in_ilp"] = float(len(temps))
        clock.check_caller("sharing: certificate ILP")
        status, v, ilp_bound, plan = columns_ilp(a, sorted(pats), sorted(temps), clock.left(), inc.best)
        if plan is not None and v < inc.value - 1e-9:
            inc.best, inc.value = plan, v
        if status == "optimal" and v <= target + 1e-9 * max(1.0, target):
            inc.certified = True
            inc.bound = max(inc.bound, v)
            break
        if status == "infeasible" and not math.isfinite(delta):
            inc.proved_infeasible = True  # every column was in the ILP and it has no plan
            break
        if status in ("optimal", "infeasible"):  # no plan of cost ≤ target exists: the bound rises to it
            inc.bound = max(inc.bound, min(target, ilp_bound if math.isfinite(ilp_bound) else target))
            wider = z_lp + 4 * (target - z_lp)  # the listing grows fast with the gap: widen it step by step
            target = min(inc.value, wider) if math.isfinite(inc.value) else wider
            continue
        if math.isfinite(ilp_bound):  # stopped by the deadline: every plan ≤ target lies in its columns
            inc.bound = max(inc.bound, min(target, ilp_bound))
        break


def _listed_patterns(inst: JointInstance, a: JointArrays, master: ColumnMaster, allowed: list[list[int]],
                     du: Duals, delta: float, clock: CallClock) -> tuple[set[tuple[int, tuple[int, ...]]] | None, int]:
    """Every pattern of reduced cost ≤ ``delta`` with the generated ones, and the listing's cap (None instead of
    the patterns when the listing passes it)."""
    pats: set[tuple[int, tuple[int, ...]]] = set(master.patterns)
    cap = MAX_PATTERNS
    for t in range(len(inst.types)):
        cap = min(MAX_PATTERNS, int(PATTERNS_PER_SECOND * clock.left()))  # the ILP must be built and solved in time
        listed = enumerate_patterns(a, du, t, allowed[t], delta, cap - len(pats))
        if listed is None:
            return None, cap
        pats.update((t, ms) for ms, _rc in listed)
    return pats, cap


def _answer(inst: JointInstance, inc: _Incumbent, stats: dict[str, float], prices: dict[tuple[str, str], float]
            ) -> JointPlan:
    """The JointPlan of the certificate's end: the best plan with its gap, or why there is none."""
    notes = inc.notes
    if inc.best is None or not inc.best.has_plan:
        if inc.proved_infeasible:
            return JointPlan("infeasible", math.inf, math.inf, math.inf, (), {}, (), inst.models, math.inf, None,
                             stats, (*notes, "no plan exists: every packing and template was tried."))
        return JointPlan("time_limit", math.inf, math.inf, math.inf, (), {}, (), inst.models, inc.bound, None, stats,
                         (*notes, "no plan was found before the time limit."))
    value, bound, best, certified = inc.value, inc.bound, inc.best, inc.certified
    gap = 0.0 if certified else ((value - bound) / value if math.isfinite(bound) and value > 0 else None)
    if gap is not None and gap <= 1e-6:
        gap, certified = 0.0, True
    if not certified:
        notes.append("the joint plan is not proven optimal: " + (f"within {gap:.2%} of the bound" if gap is not None
                                                                  else "no bound proven") + ".")
    stats["certified"] = 1.0 if certified else 0.0
    return JointPlan("optimal" if certified else "feasible", value, best.shared_cost_per_hour,
                     best.dedicated_cost_per_hour, best.nodes, best.counts, best.shared, best.dedicated,
                     bound, gap, stats, tuple(notes), prices)
