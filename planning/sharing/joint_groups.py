"""Whole-group columns of the joint sharing master: a dedicated group's complete integer plan (how many
instances of which templates in which regions) priced by an exact covering knapsack, so the LP sees the integer
rounding of each group's instance counts (:mod:`planning.sharing.joint` has the formulation and the proof).

A group plan q of group g is ν ∈ ℤ≥0 over (template τ, region r) with Σ T_τ ν_τr ≥ λ_g; its reduced cost under
availability duals σ ≤ 0 and the group's convexity dual μ_g is Σ (c_τr − Σ_k σ_rk U_τk) ν_τr − μ_g. The cheapest
plan is the covering knapsack min Σ c'ν s.t. Σ Tν ≥ λ, ν integer, solved here by depth-first branch and bound over
the Pareto-efficient items (no other item has at least the throughput for at most the cost), with the LP bound
λ'·min c'/min(T, λ') on the demand λ' still to cover (valid: an integer plan covers λ' with T capped at λ' too).
"""

from __future__ import annotations

import math

import numpy as np

MAX_NODES = 200_000  # branch-and-bound nodes before HiGHS decides the knapsack instead
EPS = 1e-9


def cheapest_cover(cost: np.ndarray, thr: np.ndarray, demand: float) -> tuple[float, tuple[tuple[int, int], ...]]:
    """min Σ cost·n s.t. Σ thr·n ≥ demand over n ∈ ℤ≥0 (items with finite cost and positive throughput).

    Parameters
    ----------
    cost, thr:
        One entry per item (flattened (template, region) pairs).
    demand:
        The rate to cover; ≤ 0 needs nothing.

    Returns
    -------
    (optimal cost, ((item, count), ...)); (inf, ()) when no item serves.
    """
    if demand <= 0:
        return 0.0, ()
    ok = np.flatnonzero(np.isfinite(cost) & (thr > 0))
    if not ok.size:
        return math.inf, ()
    order = ok[np.lexsort((cost[ok], -thr[ok]))]  # throughput descending, then cost ascending
    keep: list[int] = []
    lowest = math.inf
    for j in order:  # Pareto: keep an item only when it is cheaper than every item of at least its throughput
        if cost[j] < lowest - EPS:
            keep.append(int(j))
            lowest = float(cost[j])
    big = [j for j in keep if thr[j] >= demand - EPS]
    items = [j for j in keep if thr[j] < demand - EPS]
    if big:  # one instance of the cheapest item that covers alone is the only way an item ≥ demand helps
        items.append(big[-1])
    items.sort(key=lambda j: cost[j] / min(thr[j], demand))
    c = np.array([cost[j] for j in items])
    t = np.array([thr[j] for j in items])
    best = [math.inf]
    best_counts: list[tuple[int, int]] = []
    counts: list[tuple[int, int]] = []
    nodes = [0]

    def lower(k: int, rem: float) -> float:
        return rem * float((c[k:] / np.minimum(t[k:], rem)).min()) if k < len(items) else math.inf

    def dfs(k: int, rem: float, spent: float) -> bool:
        nodes[0] += 1
        if nodes[0] > MAX_NODES:
            return False
        if rem <= EPS:
            if spent < best[0] - EPS:
                best[0] = spent
                best_counts[:] = counts
            return True
        if k >= len(items) or spent + lower(k, rem) >= best[0] - EPS:
            return True
        for n in range(math.ceil(rem / t[k] - EPS), -1, -1):
            if n:
                counts.append((items[k], n))
            ok_ = dfs(k + 1, rem - n * t[k], spent + n * c[k])
            if n:
                counts.pop()
            if not ok_:
                return False
        return True

    if dfs(0, demand, 0.0):
        return best[0], tuple(sorted(best_counts))
    return _cover_highs(cost, thr, demand, keep)


def _cover_highs(cost: np.ndarray, thr: np.ndarray, demand: float, keep: list[int]
                 ) -> tuple[float, tuple[tuple[int, int], ...]]:
    """The same knapsack by HiGHS (gap 0), for the rare case the depth-first search is too long."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    n = len(keep)
    ub = np.array([math.ceil(demand / thr[j]) for j in keep], dtype=float)
    h.addVars(n, np.zeros(n), ub)
    idx = np.arange(n, dtype=np.int32)
    h.changeColsCost(n, idx, np.array([cost[j] for j in keep]))
    h.changeColsIntegrality(n, idx, np.full(n, highspy.HighsVarType.kInteger))
    h.addRow(demand, highspy.kHighsInf, n, idx, np.array([thr[j] for j in keep]))
    h.run()
    if int(h.getInfo().primal_solution_status) != 2:
        return math.inf, ()
    x = np.asarray(h.getSolution().col_value)
    out = tuple(sorted((keep[j], round(x[j])) for j in range(n) if x[j] > 0.5))
    return float(sum(cost[j] * m for j, m in out)), out
