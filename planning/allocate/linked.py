"""A linked Lagrangian bound for the group-by-group shortcut when parts compete for an offer (issue 41).

The shortcut (``planning.allocate.solve._decomposed``) solves each part alone — a model's linked groups (its
prefill and decode, with their region pairing (R)) — and stops when the parts' plans fit the shared availability.
When they over-use some offers together, this module tries to settle the conflict *without* the merged ILP:

* **Bound.** Relax only the shared availability rows a of the over-used offers with multipliers λ_a ≥ 0:
  L(λ) = Σ_p min_{x_p ∈ X_p} (c_p + λ·U_p)·x_p − λ·A, where X_p is part p's own feasible set (its demand, links,
  spot cap and its own availability U_p·x_p ≤ A, all implied by the joint problem). For every λ ≥ 0, L(λ) ≤ the
  joint optimum; each part's term is replaced by its ILP's proven dual bound (≤ its minimum), so the bound holds
  whatever gap HiGHS stops at. A part whose plan at λ = 0 uses none of the over-used offers keeps its λ = 0
  bound (pricing only raises its costs). λ = 0 gives Σ of the parts' bounds, the shortcut's own bound; the
  pairing stays inside every part, which is what the per-group Lagrangian of ``reduce`` lacks.
* **Plans.** A repair keeps the other parts' plans and re-solves one competing part on what they leave
  (A − their nodes): a plan of the joint problem. Every competing part is tried as the one that gives way, with
  the plans of λ = 0 and of every later λ.
* **Multipliers.** Subgradient steps (Polyak: t = (UB − L(λ)) / ‖g‖², g = Σ_p U_p·x_p(λ) − A on the priced
  rows, rows over-used at a later λ are priced too), at most :data:`LAGRANGE_ROUNDS` rounds; with
  ``problem.settle_stall`` (the baselines' and the on-demand engine's) no more after a round that raised neither
  the bound nor found a cheaper repaired plan (:func:`stalled`). ``problem.settle`` off (the engine's fixing
  ILPs) skips the settle: the caller merges the competing parts at once.

It is *optimal* only when the best repaired plan's cost is within the shortcut's gap of the best L(λ)
(``reached_gap``, the same rule as every other solve). Otherwise it returns None and the caller merges the
competing parts as before, with the best L(λ) as an extra valid bound. Tested against the joint model on seeded
scarce instances (``tests/allocate/test_linked_bound.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planning.allocate.instance import Instance
from planning.allocate.solve import _Part, model_digest
from planning.allocate.solvers import proven_zero, reached_gap, read_highs, rel_gap

LAGRANGE_ROUNDS = 6
"""Subgradient rounds after λ = 0 (each re-solves every competing part once at the new prices)."""
NEAR_GAP = 1e-5
"""With ``problem.settle_stall``, a settle whose repaired plan is within this of its bound, but not within its own
gap (an exact solve's: ``ZERO_GAP``), gives way to the merged ILP at once (:func:`near`)."""


@dataclass(frozen=True)
class Settled:
    """Plans that fit the shared availability together and the best proven lower bound on the joint optimum.

    ``parts`` are the plans (their ``bound`` fields are their own solves' bounds, not used); ``bound`` is the
    linked Lagrangian bound; ``closed`` says whether Σ primal is within the gap of ``bound`` (then optimal)."""

    parts: tuple[_Part, ...]
    bound: float
    closed: bool
    rounds: int
    repairs: int


@dataclass
class _Clock:
    """Seconds left of the shortcut's budget, and the part ILPs solved so far in this settle by their model's
    digest (:func:`_part_solve`)."""

    left: float
    answers: dict[bytes, tuple[np.ndarray | None, float | None, float]] = field(default_factory=dict)

    def spend(self, seconds: float) -> None:
        self.left -= seconds


def _part_solve(inst: Instance, groups: Sequence[int], avail: np.ndarray, prices: np.ndarray | None,
                clock: _Clock, gap_tol: float) -> tuple[_Part | None, float | None]:
    """Part ``groups`` on availability ``avail`` (per offer row) with ``prices`` (per offer row, $/h per node)
    added to its pairs' costs: (its plan with the true cost as ``primal`` — None when not solved to ``gap_tol`` —,
    the proven bound of the priced objective, or None).

    A model solved before in this settle (the same digest: a part whose prices did not move, a repair on the same
    leftover availability) gets that answer, which HiGHS would give again (deterministic on the same model), when
    it was solved to its gap, or proven infeasible, in less time than is left now: catalog-wide's single:A100-40G
    solved 14 of its 57 part ILPs twice or more (0.6 of its 2.5 s of HiGHS)."""
    from planning.allocate.matrix_model import build_matrix, cost_vector

    sub, pairs, trip = inst.restrict(list(groups))
    sub = replace(sub, offer_avail=np.floor(avail + 1e-9).astype(np.int64))
    if sub.n_pairs == 0 or clock.left <= 0.05:
        return None, None
    m = build_matrix(sub, False, None)
    true_cost = cost_vector(sub, m.col)
    cost = true_cost.copy()
    if prices is not None:
        np.add.at(cost, sub.use_pair, prices[sub.use_row] * sub.use_val)
    key = model_digest(m, cost, true_cost, gap_tol=gap_tol)
    earlier = clock.answers.get(key)
    if earlier is not None and earlier[2] < clock.left:
        clock.spend(m.build_seconds)
        values, bound, _seconds = earlier
    else:
        values, bound, seconds, final = _highs_part(m, cost, clock, gap_tol)
        if final:  # solved to its gap, or infeasible: HiGHS would say it again
            clock.answers[key] = (values, bound, seconds)
    if values is None or bound is None:
        return None, bound
    nu = np.rint(values[: sub.n_pairs])
    used = np.zeros(len(inst.offer_keys))
    np.add.at(used, sub.use_row, nu[sub.use_pair] * sub.use_val)
    return _Part(tuple(groups), pairs, trip, sub, values, float(true_cost @ values), float(bound), used), bound


def _highs_part(m: Any, cost: np.ndarray, clock: _Clock,
                gap_tol: float) -> tuple[np.ndarray | None, float | None, float, bool]:
    """HiGHS on a part's model at ``cost``: (its plan's columns when solved to ``gap_tol``, else None; its proven
    bound, None when infeasible or without one; seconds; whether it is final: solved to its gap or infeasible)."""
    from planning.allocate.matrix_model import _new_highs, stop_rules

    h = _new_highs(m, cost, False)
    h.setOptionValue("time_limit", float(max(0.1, clock.left)))
    h.setOptionValue("mip_rel_gap", float(gap_tol))
    stop_rules(h, m.inst.problem)
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    clock.spend(seconds + m.build_seconds)
    raw = read_highs(h, "cost (linked part)", seconds, gap_tol)
    bound = raw.phase.bound if raw.phase.bound is not None and np.isfinite(raw.phase.bound) else None
    if raw.phase.status == "infeasible":
        return None, None, seconds, True
    if raw.values is None or bound is None or not reached_gap(raw.phase.gap, gap_tol):
        return None, bound, seconds, False
    return raw.values, float(bound), seconds, True


def _repairs(inst: Instance, keep: Sequence[_Part], plans: Sequence[_Part], clock: _Clock,
             gap_tol: float, lower: float) -> list[tuple[_Part, ...]]:
    """Joint plans from the competing parts' ``plans``: every part in turn gives way (re-solved on what the
    ``keep`` parts and the other plans leave) when the others fit together; the smallest part first (its re-solve
    is the cheapest), stopping at the first plan proven by ``lower``."""
    avail = inst.offer_avail.astype(float)
    base = np.sum([p.used for p in keep], axis=0) if keep else np.zeros(len(avail))
    out: list[tuple[_Part, ...]] = []
    order = sorted(range(len(plans)), key=lambda i: plans[i].sub.n_pairs)
    for j in order:
        if out and _closed(sum(p.primal for p in out[-1]), lower, gap_tol):
            break
        giving = plans[j]
        others = [p for i, p in enumerate(plans) if i != j]
        left = avail - base - (np.sum([p.used for p in others], axis=0) if others else 0.0)
        if np.any(left < -1e-9):
            continue
        if np.all(giving.used <= left + 1e-9):
            out.append((*keep, *others, giving))
            continue
        resolved, _bound = _part_solve(inst, giving.groups, left, None, clock, gap_tol)
        if resolved is not None:
            out.append((*keep, *others, resolved))
    return out


def _closed(cost: float, lower: float, gap_tol: float) -> bool:
    """Whether a plan of value ``cost`` is proven within ``gap_tol`` by ``lower`` (or at a zero gap,
    :data:`~planning.allocate.solvers.ZERO_GAP`: HiGHS asked for gap 0 stops at an absolute 10⁻⁶ per part)."""
    gap = rel_gap(cost, lower)
    return reached_gap(gap, gap_tol) or proven_zero(gap, cost, lower)


def stalled(seen: tuple[float, float] | None, lower: float, best_cost: float) -> bool:
    """Whether the last priced round was in vain (``problem.settle_stall``): with a repaired plan in hand before
    and after it (``seen``: the bound and the best repaired cost before it), it raised neither the bound nor found
    a cheaper plan. A settle that will close usually closes by a repair found when the first plan fits, or by a
    bound still rising; one stalled with a plan on both sides is waiting on a duality gap that its subgradient
    steps cannot close (coral-extended's single:L40S: the bound stays 1.2 % below the joint optimum whatever
    λ; docs/benchmarks.md, "The baselines' settle"), so the merged ILP that follows is what answers."""
    if seen is None or not (np.isfinite(seen[1]) and np.isfinite(best_cost)):
        return False
    return lower <= seen[0] + 1e-9 and best_cost >= seen[1] - 1e-9


def near(lower: float, best_cost: float, gap_tol: float) -> bool:
    """Whether a repaired plan is within :data:`NEAR_GAP` of the bound while its solve asks less (``gap_tol``).
    More rounds cannot be expected to prove it: Polyak's step is the gap over ‖g‖², so λ moves by 10⁻⁵ of the cost,
    and closing needs L(λ) within 10⁻⁶ of the plan. Measured in the certificate's fixing ILPs at coral-extended's
    demand ×2.5 and ×3.5 (before they dropped the settle, ``AllocationProblem.settle``): every such settle's bound
    stayed at its λ = 0 value through all its rounds, 1.2-1.7·10⁻⁶ under the plan, and the merged ILP proved the
    optimum. It now serves the exact solves that still settle: the covers' plan ILP and an exact baseline
    (docs/allocation.md, "The on-demand engine's settles stall too")."""
    gap = rel_gap(best_cost, lower)  # None without a plan (best_cost inf)
    return gap_tol < NEAR_GAP and gap is not None and gap <= NEAR_GAP


def settle(inst: Instance, parts: Sequence[_Part], time_left_s: float, gap_tol: float) -> tuple[Settled | None, float]:
    """Settle the parts' competition for over-used offers by the linked Lagrangian bound and repaired plans.

    Returns (the best fitting plans with the bound — ``closed`` when optimal within ``gap_tol`` —, or None when no
    fitting plan was found; seconds spent)."""
    t0 = time.perf_counter()
    clock = _Clock(time_left_s)
    avail = inst.offer_avail.astype(float)
    total = np.sum([p.used for p in parts], axis=0)
    priced = total > avail + 1e-9
    competing = [p for p in parts if np.any(p.used[priced] > 0)]
    keep = [p for p in parts if not np.any(p.used[priced] > 0)]
    keep_bound = sum(p.bound for p in keep)
    lower = sum(p.bound for p in parts)  # L(0): the parts' own bounds
    lam = np.zeros(len(avail))
    plans: list[_Part] = list(competing)
    best: tuple[_Part, ...] | None = None
    best_cost = np.inf
    rounds = repairs = 0
    seen: tuple[float, float] | None = None  # (bound, best repaired cost) when the last round was priced
    while True:
        for joint in _repairs(inst, keep, plans, clock, gap_tol, lower):
            repairs += 1
            cost = sum(p.primal for p in joint)
            if cost < best_cost:
                best, best_cost = joint, cost
        if best is not None and _closed(best_cost, lower, gap_tol):
            break
        if rounds >= LAGRANGE_ROUNDS or clock.left <= 0.1:
            break
        if inst.problem.settle_stall and (stalled(seen, lower, best_cost) or near(lower, best_cost, gap_tol)):
            break
        seen = (lower, best_cost)
        rounds += 1
        kept = np.sum([p.used for p in keep], axis=0) if keep else np.zeros(len(avail))
        g = np.sum([p.used for p in plans], axis=0) + kept - avail
        priced |= g > 1e-9
        g = np.where(priced, g, 0.0)
        g = np.where((lam <= 0) & (g < 0), 0.0, g)  # a multiplier at 0 cannot go lower
        norm = float(g @ g)
        if norm <= 0:
            break
        gap_now = (best_cost if np.isfinite(best_cost) else lower * 1.01 + 1.0) - lower
        lam = np.maximum(0.0, lam + max(gap_now, 1e-9) / norm * g)
        new_plans: list[_Part] = []
        value = keep_bound - float(lam @ avail)
        for p in competing:
            solved, bound = _part_solve(inst, p.groups, avail, lam, clock, gap_tol)
            if solved is None or bound is None:
                value = -np.inf
                break
            new_plans.append(solved)
            value += bound
        if not new_plans or len(new_plans) < len(competing):
            break
        lower = max(lower, value)
        plans = new_plans
    seconds = time.perf_counter() - t0
    if best is None:
        return None, seconds
    closed = _closed(best_cost, lower, gap_tol)
    return Settled(best, float(lower), closed, rounds, repairs), seconds
