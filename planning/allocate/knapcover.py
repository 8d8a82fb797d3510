"""The one-row cover ILPs that bound a group (:func:`cover_ilp`, for ``reduce`` and ``pricing``), solved exactly.

    min Σ c_i·x_i  s.t.  Σ t_i·x_i ≥ D,  0 ≤ x_i ≤ u_i,  x_i ∈ ℤ   (c ≥ 0, 0 < t_i ≤ D, u_i finite)

HiGHS takes 15-70 ms for such a row even with five columns (its presolve and set-up dominate), and the
group bounds of a warm what-if solve a few dozen of them. This module solves it by depth-first branch and
bound in pure Python, which takes well under a millisecond on those instances:

1. **Dominance.** A column i with the full count (u_i = ⌈D / t_i⌉, so it alone can cover D) makes every
   column j with c_j ≥ c_i and t_j ≤ t_i useless: a cover using j still covers with i in j's place
   (or with ⌈D / t_i⌉ copies of i alone) and costs no more. Exact ties keep the first column.
2. **Order and bound.** The columns left are taken in order of cost per unit of throughput, c/t. With the
   columns from k on still free, residual R costs at least R · min_{i≥k} c_i / t_i (the LP relaxation without
   the counts' upper bounds), so a branch whose cost plus that bound reaches the incumbent is cut.
3. **Branching.** A node picks the next column it uses (skipping a column means x = 0) and tries its
   counts from the most useful down; a count that covers R closes the branch as a cover.

The search stops after :data:`NODE_LIMIT` nodes (or does not start past :data:`MAX_COLUMNS` columns) and
returns None: the caller then asks HiGHS. It returns
None as well for the inputs outside its assumptions (a negative or non-finite cost, a column of no
throughput) and when no cover exists, so HiGHS keeps answering every case this solver does not prove.
A cover counts as covering when its throughput falls short of D by at most ``COVER_TOL`` · D (float sums of
exact covers such as 3 · D/3); a branch is cut when its bound is within ``PRUNE_TOL`` (relative) of the
incumbent, so the value returned is the optimum up to that tolerance and is returned as its own bound.
"""

from __future__ import annotations

import math

import numpy as np

NODE_LIMIT = 20_000
MAX_COLUMNS = 300  # undominated columns: the search recurses once per column it uses
COVER_TOL = 1e-9
PRUNE_TOL = 1e-12


def _columns(cost: np.ndarray, thr: np.ndarray, demand: float,
             cap: np.ndarray) -> tuple[list[float], list[float], list[int]] | None:
    """The undominated columns by c/t (their costs, throughputs and counts), or None outside the assumptions."""
    if not (np.isfinite(cost).all() and (cost >= 0).all() and (thr > 0).all() and np.isfinite(cap).all()):
        return None
    full = cap >= np.ceil(demand / thr)
    keep = np.zeros(cost.size, dtype=bool)
    best_full = math.inf  # the cheapest full column seen, every one of throughput ≥ the current
    for j in np.lexsort((np.arange(cost.size), cost, -thr)):  # throughput down, cost up, index up
        if cap[j] <= 0 or cost[j] >= best_full:
            continue
        keep[j] = True
        if full[j]:
            best_full = float(cost[j])
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((idx, -thr[idx], cost[idx] / thr[idx]))]
    return [float(x) for x in cost[order]], [float(x) for x in thr[order]], [int(x) for x in cap[order]]


def solve(cost: np.ndarray, thr: np.ndarray, demand: float, cap: np.ndarray) -> float | None:
    """The least cost of a cover of ``demand`` (``thr`` ≤ ``demand``, counts ≤ ``cap``), or None (ask HiGHS)."""
    cols = _columns(np.asarray(cost, dtype=float), np.asarray(thr, dtype=float), float(demand),
                    np.asarray(cap, dtype=float))
    if cols is None or not cols[0] or len(cols[0]) > MAX_COLUMNS:
        return None
    c, t, u = cols
    n, eps = len(c), COVER_TOL * demand
    if sum(ui * ti for ui, ti in zip(u, t, strict=True)) < demand - eps:
        return None  # no cover: HiGHS reports it as it always has
    ratio = [ci / ti for ci, ti in zip(c, t, strict=True)] + [math.inf]
    alone = [math.ceil((demand - eps) / ti) for ti in t]  # copies of one column that cover alone
    best = min((k * ci for k, ci, ui in zip(alone, c, u, strict=True) if k <= ui), default=math.inf)
    nodes = 0

    def search(k: int, left: float, spent: float) -> bool:  # False: out of nodes
        nonlocal best, nodes
        nodes += 1
        if nodes > NODE_LIMIT:
            return False
        for i in range(k, n):
            if spent + left * ratio[i] >= best * (1 - PRUNE_TOL):
                return True  # the columns after i are dearer per unit still
            ti, ci = t[i], c[i]
            most = min(u[i], math.ceil((left - eps) / ti))
            for x in range(most, 0, -1):
                rest, paid = left - x * ti, spent + x * ci
                if rest <= eps:
                    best = min(best, paid)
                    continue
                if paid + rest * ratio[i + 1] >= best * (1 - PRUNE_TOL):
                    break  # fewer copies of i only leave more to the dearer columns
                if not search(i + 1, rest, paid):
                    return False
        return True

    return best if search(0, float(demand), 0.0) and math.isfinite(best) else None


def cover_ilp(cost: np.ndarray, T: np.ndarray, demand: float, time_limit_s: float = 10.0,
              ub: np.ndarray | None = None) -> tuple[float, float]:
    """min Σ cost·x s.t. Σ min(T, D)·x ≥ D, 0 ≤ x ≤ ub, x ∈ ℤ (one group, availability relaxed):
    (value, dual bound).

    ``ub`` None: ⌈D / min(T, D)⌉ (more copies never help). Stopped by the time limit, the dual bound is still
    valid. The exact search (``solve``) answers first (proven: value = bound); HiGHS takes what it gives back.
    """
    n = cost.size
    if n == 0:
        return math.inf, math.inf
    t = np.minimum(T, demand)
    cap = np.ceil(demand / np.maximum(t, 1e-12))
    cap = cap if ub is None else np.minimum(cap, ub)
    exact = solve(cost, t, demand, cap)
    if exact is not None:
        return exact, exact
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(float(time_limit_s), 0.01))
    h.setOptionValue("mip_rel_gap", 1e-9)
    h.addVars(n, np.zeros(n), cap)
    h.changeColsCost(n, np.arange(n, dtype=np.int32), cost.astype(float))
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    h.addRow(float(demand), highspy.kHighsInf, n, np.arange(n, dtype=np.int32), t.astype(float))
    h.run()
    info = h.getInfo()
    value = float(info.objective_function_value) if info.primal_solution_status == 2 else math.inf
    bound = float(info.mip_dual_bound)
    return value, min(bound, value)
