"""A proof for the commitment sizing: the cut master over R (Benders with Lagrangian and monotone cuts).

Sets: epochs e (weight w_e hours), candidates j of pool k(j), pools k (region, shape) with held nodes H_k and
at most A_k = H_k + Σ_{j∈k} cap_j nodes. K_k(R) = H_k + Σ_{j∈k} R_j. z_e(K) = epoch e's optimal $/h (the
second stage, every template of the libraries) with pool k holding K_k nodes at no marginal price.

Every certified epoch solve of the sizing is a cut on z_e:

- **Lagrangian** (pools priced π_k $/node-hour, availability A): low ≤ min{c(x) + π·u(x) : u(x) ≤ A}, so for
  every K ≤ A, z_e(K) = c(x*) ≥ c(x*) + π·(u(x*) − K) ≥ low − π·K.
- **Monotone** (pools free, availability K̄): low ≤ z_e(K̄), and z_e is non-increasing, so z_e(K) ≥ low for
  every K ≤ K̄; for any other K only z_e(K) ≥ f_e, a floor valid for every K (0, or the best Lagrangian cut at A).

The master
    min  Σ_j a_j R_j + Σ_e w_e θ_e
    s.t. θ_e + Σ_k π_k K_k(R) ≥ low                                       (each Lagrangian cut of epoch e)
         θ_e + (low − f_e) Σ_k y_{P,k} ≥ low                              (each monotone cut at point P)
         K_k(R) − K̄_k ≤ (A_k − K̄_k) y_{P,k},  K_k(R) − H_k ≥ (K̄_k + 1 − H_k) y_{P,k}   (y_{P,k} = [K_k > K̄_k])
         R_j ∈ {0, …, cap_j},  y ∈ {0, 1},  θ_e ≥ f_e
is a relaxation of the two-stage model over every template: its optimum (HiGHS's dual bound, valid wherever
the search stops) is a lower bound. With R integer and one θ per epoch it is at least every Lagrangian bound
Σ_e w_e·low_e(μ) − C(μ) of the cuts' prices, and it is exact at every evaluated point, so iterating (master →
R̂ → every epoch solved at K(R̂) → monotone cuts) converges to the optimum in finitely many steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

PoolKey = tuple[str, str]  # (pool region, shape)


@dataclass(frozen=True)
class Cut:
    """A proven lower bound on epoch ``epoch``'s optimal $/h: ``low`` − Σ_k ``prices[k]``·K_k, valid for every
    K ≤ ``point`` (``point`` None: for every K ≤ A)."""

    epoch: int
    low: float
    prices: Mapping[PoolKey, float]
    point: Mapping[PoolKey, int] | None = None


MASTER_NODES = 20_000  # the master MILP's branch-and-bound nodes at most (HiGHS mip_max_nodes: a stop counted in
# work; a few dozen integers, it finishes far below it; its dual bound holds wherever it stops)


@dataclass(frozen=True)
class MasterAnswer:
    """The master's proven lower bound (USD over the horizon), its R, whether the search finished, and whether
    the wall clock (a safety net, not the node budget) stopped it."""

    bound: float
    counts: dict[str, int]
    finished: bool
    clocked: bool = False


def solve_master(cuts: Sequence[Cut], hours: Sequence[float], candidates: Sequence[tuple[str, PoolKey, int, float]],
                 held: Mapping[PoolKey, int], time_limit_s: float = 600.0) -> MasterAnswer | None:
    """The cut master (module docstring). ``candidates``: (id, pool, cap_j, a_j over the horizon); it stops at
    ``MASTER_NODES`` nodes (work) or ``time_limit_s`` (the wall clock, a safety net: ``MasterAnswer.clocked``).

    Returns None when there is no cut at all (no bound to prove)."""
    import highspy

    if not cuts:
        return None
    pools = sorted({k for _id, k, _c, _a in candidates})
    top = {k: held.get(k, 0) + sum(c for _id, kk, c, _a in candidates if kk == k) for k in pools}
    n_e = len(hours)
    floor = np.zeros(n_e)
    for cut in cuts:
        if cut.point is None:
            floor[cut.epoch] = max(floor[cut.epoch], cut.low - sum(p * top.get(k, held.get(k, 0))
                                                                    for k, p in cut.prices.items()))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(0.05, float(time_limit_s)))
    h.setOptionValue("mip_max_nodes", MASTER_NODES)
    h.setOptionValue("mip_rel_gap", 1e-9)
    inf = highspy.kHighsInf
    # columns: R_j, then θ_e, then the y's as they come
    n_r = len(candidates)
    h.addVars(n_r, np.zeros(n_r), np.array([float(c) for _i, _k, c, _a in candidates]))
    h.changeColsCost(n_r, np.arange(n_r, dtype=np.int32), np.array([a for _i, _k, _c, a in candidates]))
    h.changeColsIntegrality(n_r, np.arange(n_r, dtype=np.int32), np.full(n_r, highspy.HighsVarType.kInteger))
    h.addVars(n_e, floor, np.full(n_e, inf))
    h.changeColsCost(n_e, np.arange(n_r, n_r + n_e, dtype=np.int32), np.asarray(hours, dtype=float))
    members = {k: [i for i, (_id, kk, _c, _a) in enumerate(candidates) if kk == k] for k in pools}
    n_cols = n_r + n_e
    y_of: dict[tuple[tuple[tuple[PoolKey, int], ...], PoolKey], int] = {}

    def y(point: Mapping[PoolKey, int], k: PoolKey) -> int:
        """y_{P,k}: 1 when K_k exceeds the point's K̄_k (one binary per point and pool, shared by the epochs)."""
        nonlocal n_cols
        key = (tuple(sorted(point.items())), k)
        if key not in y_of:
            y_of[key] = n_cols
            h.addVar(0.0, 1.0)
            h.changeColIntegrality(n_cols, highspy.HighsVarType.kInteger)
            slack = top[k] - point.get(k, held.get(k, 0))
            idx = [*members[k], n_cols]
            bar = float(point.get(k, held.get(k, 0)) - held.get(k, 0))  # K̄_k − H_k in R
            h.addRow(-inf, bar, len(idx), np.array(idx, dtype=np.int32),
                     np.array([1.0] * len(members[k]) + [-float(slack)]))
            h.addRow(0.0, inf, len(idx), np.array(idx, dtype=np.int32),  # and y = 1 only when K_k ≥ K̄_k + 1
                     np.array([1.0] * len(members[k]) + [-(bar + 1.0)]))
            n_cols += 1
        return y_of[key]

    for cut in cuts:
        theta = n_r + cut.epoch
        idx, val = [theta], [1.0]
        rhs = cut.low - sum(p * held.get(k, 0) for k, p in cut.prices.items())
        for k, p in cut.prices.items():
            for i in members.get(k, []):
                idx.append(i)
                val.append(float(p))
        if cut.point is not None:
            big = cut.low - floor[cut.epoch] + sum(p * top.get(k, 0) for k, p in cut.prices.items())
            if big <= 0:
                continue  # no stronger than the floor
            for k in pools:
                if cut.point.get(k, held.get(k, 0)) < top[k]:
                    idx.append(y(cut.point, k))
                    val.append(float(big))
        h.addRow(float(rhs), inf, len(idx), np.array(idx, dtype=np.int32), np.array(val, dtype=float))
    h.run()
    info = h.getInfo()
    status = h.getModelStatus()
    bound = float(info.mip_dual_bound)
    if not math.isfinite(bound):
        return None
    counts: dict[str, int] = {}
    if info.primal_solution_status == 2:
        x = h.getSolution().col_value
        counts = {cid: round(x[i]) for i, (cid, _k, _c, _a) in enumerate(candidates)}
    return MasterAnswer(bound, counts, status == highspy.HighsModelStatus.kOptimal,
                        status == highspy.HighsModelStatus.kTimeLimit)


@dataclass(frozen=True)
class PlanPoint:
    """One epoch plan a certified solve returned: its $/h without pool prices and its pool nodes."""

    epoch: int
    cost: float
    use: Mapping[PoolKey, int]


def next_prices(points: Sequence[PlanPoint], hours: Sequence[float],
                candidates: Sequence[tuple[str, PoolKey, int, float]], held: Mapping[PoolKey, int],
                centre: Sequence[Mapping[PoolKey, float]] | None = None,
                radius: float | Mapping[PoolKey, float] = math.inf,
                ) -> tuple[list[dict[PoolKey, float]], float] | None:
    """Kelley's step on the Lagrangian dual of the pool rows (Dantzig–Wolfe pricing): the prices π_ek ≥ 0
    maximising the dual's model over the plans seen,

        max Σ_e w_e η_e − Σ_ek w_e H_k π_ek + Σ_j cap_j s_j
        s.t. η_e ≤ c_x + Σ_k u_xk π_ek   (every plan x seen in epoch e: φ_e(π) ≤ its priced cost)
             s_j ≤ a_j − Σ_e w_e π_e,k(j),  s_j ≤ 0,

    within ``radius`` of ``centre`` (a box; ``radius`` in $/node-hour, one for every pool or one per pool). Returns the prices per epoch and the
    model's value (an upper bound on the Lagrangian dual inside the box), or None when the LP fails."""
    import highspy

    pools = sorted({k for _id, k, _c, _a in candidates})
    n_e, n_k = len(hours), len(pools)
    if not pools or not points:
        return None
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    pi = lambda e, k: e * n_k + k  # noqa: E731 - column index of π_ek
    lo = np.zeros(n_e * n_k)
    hi = np.full(n_e * n_k, inf)
    if centre is not None:
        for e in range(n_e):
            for k, key in enumerate(pools):
                c = float(centre[e].get(key, 0.0))
                r = float(radius.get(key, math.inf) if isinstance(radius, Mapping) else radius)
                if math.isfinite(r):
                    lo[pi(e, k)], hi[pi(e, k)] = max(0.0, c - r), c + r
    cost_pi = np.array([-hours[e] * held.get(pools[k], 0) for e in range(n_e) for k in range(n_k)], dtype=float)
    h.addVars(n_e * n_k, lo, hi)
    h.changeColsCost(n_e * n_k, np.arange(n_e * n_k, dtype=np.int32), cost_pi)
    eta0 = n_e * n_k
    h.addVars(n_e, np.full(n_e, -inf), np.full(n_e, inf))
    h.changeColsCost(n_e, np.arange(eta0, eta0 + n_e, dtype=np.int32), np.asarray(hours, dtype=float))
    s0 = eta0 + n_e
    n_j = len(candidates)
    h.addVars(n_j, np.full(n_j, -inf), np.zeros(n_j))
    h.changeColsCost(n_j, np.arange(s0, s0 + n_j, dtype=np.int32), np.array([float(c) for _i, _k, c, _a in candidates]))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    seen = [False] * n_e
    for p in points:
        seen[p.epoch] = True
        idx = [eta0 + p.epoch] + [pi(p.epoch, k) for k, key in enumerate(pools) if p.use.get(key, 0)]
        val = [1.0] + [-float(p.use[key]) for key in pools if p.use.get(key, 0)]
        h.addRow(-inf, float(p.cost), len(idx), np.array(idx, dtype=np.int32), np.array(val))
    if not all(seen):
        return None
    for j, (_id, key, _c, a) in enumerate(candidates):
        k = pools.index(key)
        idx = [s0 + j] + [pi(e, k) for e in range(n_e)]
        val = [1.0] + [float(hours[e]) for e in range(n_e)]
        h.addRow(-inf, float(a), len(idx), np.array(idx, dtype=np.int32), np.array(val))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    x = h.getSolution().col_value
    prices = [{key: max(0.0, float(x[pi(e, k)])) for k, key in enumerate(pools)} for e in range(n_e)]
    return prices, float(h.getInfo().objective_function_value)
