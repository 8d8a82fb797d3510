"""Exact column reduction for the allocation ILP: LP column generation, then reduced-cost fixing (lossless).

Sets: groups g (one demand class each), templates τ of g (columnar blocks), regions r, shapes k.
Parameters: usage U[τ, k]; throughput T[τ]; price p[r, k]; availability A[r, k]; demand D[g]; penalty K.
Columns: pairs (τ, r) where every shape τ uses is offered in r; LP cost c[τ, r] = (1 + K)·Σ_k U[τ, k]·p[r, k]
(the initialization penalty I = K·p·ν at the optimum when nothing runs yet; for templates that do run,
ν′ > 0, the LP uses the smaller cost p·ν, still a relaxation, and those templates are always kept).

LP (relaxation, ν ≥ 0 continuous, no column upper bounds):
    min Σ c ν + M Σ_g s_g
    availability[r, k]:  Σ_τ U[τ, k] ν[τ, r] ≤ A[r, k]            (dual y_a ≤ 0)
    demand[g]:           Σ_{τ∈g, r} T'[τ] ν[τ, r] + s_g ≥ D[g]    (dual y_d ≥ 0), T' = min(T, D[g])
    cardinality[g]:      Σ_{τ∈g, r} ν[τ, r] + s_g ≥ n_g           (dual y_n ≥ 0)
The demand row uses the strengthened coefficients T' = min(T, D[g]) (valid for integer ν: an instance that
alone covers D[g] needs no more credit than D[g]); without it the LP covers a small demand with 1 % of a huge
instance and its bound sits 10–25 % below the integer optimum. n_g = ⌈D[g] / max_τ T[τ]⌉ is a valid cut (no integer plan covers D[g] with fewer instances); it closes
most of the integrality gap of small demands, which one whole instance over-serves.
Reduced cost rc[τ, r] = c[τ, r] − Σ_k U[τ, k]·y_a[r, k] − T'[τ]·y_d[g] − y_n[g] ≥ 0 for every column at
the LP optimum (column generation prices all columns until none is negative).

Fixing: for any integer-feasible ν, cost(ν) ≥ z_LP + Σ rc·ν (weak duality with y feasible), so a plan
that uses a column j costs at least z_LP + rc_j. Solving the ILP over the columns with rc ≤ δ and finding a
plan of cost z ≤ z_LP + min_{excluded} rc proves it optimal over all columns; otherwise δ is raised to
z − z_LP and the ILP re-solved over the (then sufficient) larger set. The slack s (cost M) keeps the LP
feasible; a positive slack at the LP optimum proves the ILP infeasible (nothing is reduced then).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

BIG_M_FACTOR = 1e4
INITIAL_PER_GROUP_REGION = 48
ADD_PER_ROUND = 400
MAX_ROUNDS = 200


@dataclass(frozen=True, eq=False)
class ColumnBlock:
    """Templates of one single-class group as arrays: ``usage[i, k]`` nodes of ``shapes[k]``, ``throughput[i]``."""

    group: str
    shapes: tuple[str, ...]
    usage: np.ndarray
    throughput: np.ndarray
    keep_always: np.ndarray | None = None  # rows that must stay (running instances)


@dataclass
class Reduction:
    """LP bound, reduced costs per block (n × R, +inf where not sold) and the columns kept so far."""

    z_lp: float
    regions: tuple[str, ...]
    reduced_costs: list[np.ndarray]
    feasible_lp: bool
    rounds: int
    lp_seconds: float
    columns_total: int
    keep: list[np.ndarray] = field(default_factory=list)
    threshold: float = 0.0

    def select(self, threshold: float, blocks: Sequence[ColumnBlock]) -> list[np.ndarray]:
        """Rows (templates) with some pair of reduced cost ≤ threshold, plus rows that must stay."""
        self.threshold = threshold
        self.keep = []
        for b, rc in zip(blocks, self.reduced_costs, strict=True):
            mask = (rc <= threshold + 1e-9).any(axis=1) if rc.size else np.zeros(len(b.throughput), dtype=bool)
            if b.keep_always is not None:
                mask |= b.keep_always
            self.keep.append(np.asarray(mask, dtype=bool))
        return self.keep

    def min_excluded(self) -> float:
        """Smallest reduced cost among pairs whose template was not kept (inf when all kept)."""
        best = np.inf
        for rc, mask in zip(self.reduced_costs, self.keep, strict=True):
            if rc.size and (~mask).any():
                best = min(best, float(rc[~mask].min()))
        return best


def _pair_costs(usage: np.ndarray, prices: np.ndarray, offered: np.ndarray, factor: float) -> np.ndarray:
    """(n, R) cost of each template (float usage rows) in each region (inf where a shape is not offered)."""
    cost = usage @ (np.nan_to_num(prices, nan=0.0).T * factor)
    missing = (usage > 0) @ (~offered).T  # boolean: uses some shape not sold in that region
    cost[missing] = np.inf
    return cost


def lp_reduction(blocks: Sequence[ColumnBlock], shape_index: Mapping[str, int], regions: Sequence[str],
                 prices: np.ndarray, available: np.ndarray, demand: Mapping[str, float], K: float,
                 served: bool = False, budget: float | None = None) -> Reduction:
    """Solve the LP relaxation over all columns by column generation and return every column's reduced cost.

    With ``served=True`` the LP is phase 1 of the served objective: min −α with demand rows
    Σ T' ν − α D ≥ 0, an optional budget row Σ (1 + K) p ν ≤ budget, zero column costs and no slack (α = 0 is
    always feasible); ``z_lp`` is then −α_LP and a plan using column j has α ≤ α_LP − rc_j.

    Parameters
    ----------
    blocks:
        One block per group (single class); block shapes index into ``shape_index``.
    regions, prices, available:
        ``prices[r, k]`` ($/h per node, NaN where not offered) and ``available[r, k]`` over the global shape index.
    demand:
        Group -> demanded rate.
    K:
        Initialization penalty factor.
    """
    import highspy
    import scipy.sparse as sp

    t0 = time.perf_counter()
    blocks = [ColumnBlock(b.group, b.shapes, b.usage, np.minimum(b.throughput, demand.get(b.group, 0.0)), b.keep_always)
              if demand.get(b.group, 0.0) > 0 else b for b in blocks]
    R, K_shapes = prices.shape
    offered = ~np.isnan(prices)
    # per block: map local shapes to global columns of prices
    local = []
    usage_f = [b.usage.astype(np.float64) for b in blocks]  # converted once: the pricing loop reuses it
    for b, uf in zip(blocks, usage_f, strict=True):
        idx = np.array([shape_index[s] for s in b.shapes], dtype=int)
        local.append((idx, _pair_costs(uf, prices[:, idx], offered[:, idx], 1.0 + K)))
    groups = [b.group for b in blocks]
    n_avail = R * K_shapes
    n_groups = len(blocks)
    has_budget = served and budget is not None
    n_rows = n_avail + 2 * n_groups + (1 if has_budget else 0)
    t_max = [float(b.throughput.max()) if b.throughput.size else 0.0 for b in blocks]
    n_min = [float(np.ceil(demand.get(g, 0.0) / t - 1e-9)) if t > 0 else 0.0 for g, t in zip(groups, t_max, strict=True)]
    max_cost = max((float(np.nanmax(np.where(np.isfinite(c), c, np.nan))) for _, c in local
                    if np.isfinite(c).any()), default=1.0)
    big_m = BIG_M_FACTOR * max(max_cost, 1.0)

    # initial columns: per group and region, the best cost per throughput
    chosen: list[set[tuple[int, int]]] = []
    for b, (_, cost) in zip(blocks, local, strict=True):
        picks: set[tuple[int, int]] = set()
        thr = np.maximum(b.throughput, 1e-12)
        for r in range(R):
            ratio = cost[:, r] / thr
            ok = np.flatnonzero(np.isfinite(ratio) & (b.throughput > 0))
            if ok.size:
                top = ok[np.argsort(ratio[ok])[:INITIAL_PER_GROUP_REGION]]
                picks.update((int(i), r) for i in top)
        chosen.append(picks)

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    if served:  # demand rows Σ T'ν − αD ≥ 0; cardinality rows vacuous (α may be small)
        row_lower = np.concatenate([np.full(n_avail, -inf), np.zeros(2 * n_groups), np.full(int(has_budget), -inf)])
        row_upper = np.concatenate([available.reshape(-1).astype(float), np.full(2 * n_groups, inf),
                                    np.full(int(has_budget), float(budget or 0.0))])
    else:
        row_lower = np.concatenate([np.full(n_avail, -inf), np.array([demand.get(g, 0.0) for g in groups]),
                                    np.array(n_min)])
        row_upper = np.concatenate([available.reshape(-1).astype(float), np.full(2 * n_groups, inf)])
    # slack columns first
    h.addRows(n_rows, row_lower, row_upper, 0, np.zeros(n_rows, dtype=np.int32), np.zeros(0, dtype=np.int32),
              np.zeros(0))
    if served:  # the α column: cost −1, bounds [0, 1], −D_g in every demand row
        dem = np.array([demand.get(g, 0.0) for g in groups])
        h.addCol(-1.0, 0.0, 1.0, n_groups, (n_avail + np.arange(n_groups)).astype(np.int32), -dem)
    else:  # slack columns keep the LP feasible; a positive slack at the optimum proves the ILP infeasible
        for gi in range(n_groups):
            h.addCol(big_m, 0.0, inf, 2, np.array([n_avail + gi, n_avail + n_groups + gi], dtype=np.int32),
                     np.array([1.0, max(n_min[gi], 1.0)]))
    in_lp: list[set[tuple[int, int]]] = [set() for _ in blocks]

    def add_columns(gi: int, pairs: Sequence[tuple[int, int]]) -> None:
        if not pairs:
            return
        b = blocks[gi]
        idx, cost = local[gi]
        rows_list, cols_ptr, vals = [], [0], []
        costs = []
        for i, r in pairs:
            nz = np.flatnonzero(b.usage[i] > 0)
            rows_list.extend((r * K_shapes + idx[nz]).tolist())
            vals.extend(b.usage[i, nz].astype(float).tolist())
            rows_list.extend([n_avail + gi, n_avail + n_groups + gi])
            vals.extend([float(b.throughput[i]), 1.0])
            if has_budget:
                rows_list.append(n_rows - 1)
                vals.append(float(cost[i, r]))
            cols_ptr.append(len(rows_list))
            costs.append(0.0 if served else float(cost[i, r]))
            in_lp[gi].add((i, r))
        n = len(pairs)
        mat = sp.csc_matrix((np.array(vals), np.array(rows_list, dtype=np.int32), np.array(cols_ptr, dtype=np.int32)),
                            shape=(n_rows, n))
        h.addCols(n, np.array(costs), np.zeros(n), np.full(n, inf), int(mat.nnz), mat.indptr.astype(np.int32),
                  mat.indices.astype(np.int32), mat.data.astype(float))

    for gi, picks in enumerate(chosen):
        add_columns(gi, sorted(picks))

    rounds = 0
    reduced: list[np.ndarray] = []
    while True:
        rounds += 1
        h.run()
        sol = h.getSolution()
        y = np.asarray(sol.row_dual, dtype=float)
        y_avail = np.minimum(y[:n_avail].reshape(R, K_shapes), 0.0)
        y_dem = np.maximum(y[n_avail:n_avail + n_groups], 0.0)
        y_card = np.maximum(y[n_avail + n_groups:n_avail + 2 * n_groups], 0.0)
        y_budget = min(float(y[n_rows - 1]), 0.0) if has_budget else 0.0
        reduced = []
        added = 0
        for gi, (b, (idx, cost)) in enumerate(zip(blocks, local, strict=True)):
            # served: column cost 0; a binding budget row (dual y_b ≤ 0) charges −y_b per $ of the pair
            lp_cost = np.where(np.isfinite(cost), cost * (-y_budget), np.inf) if served else cost
            rc = lp_cost - usage_f[gi] @ y_avail[:, idx].T - (b.throughput * y_dem[gi])[:, None] - y_card[gi]
            rc[b.throughput <= 0, :] = np.inf
            reduced.append(rc)
            neg = np.argwhere(rc < -1e-7 * max(1.0, max_cost))
            if neg.size:
                order = np.argsort(rc[neg[:, 0], neg[:, 1]])[:ADD_PER_ROUND]
                new = [(int(i), int(r)) for i, r in neg[order] if (int(i), int(r)) not in in_lp[gi]]
                add_columns(gi, new)
                added += len(new)
        if added == 0 or rounds >= MAX_ROUNDS:
            break
    values = np.asarray(sol.col_value, dtype=float)
    if served:
        z = float(h.getInfo().objective_function_value)
        feasible = rounds < MAX_ROUNDS
    else:
        slack = values[:n_groups]
        z = float(h.getInfo().objective_function_value) - big_m * float(slack.sum())
        feasible = bool((slack <= 1e-7 * max(1.0, max(demand.values(), default=1.0))).all()) and rounds < MAX_ROUNDS
    for rc in reduced:
        np.maximum(rc, 0.0, out=rc, where=np.isfinite(rc))
    total = sum(int(np.isfinite(rc).sum()) for rc in reduced)
    return Reduction(z_lp=z, regions=tuple(regions), reduced_costs=reduced, feasible_lp=feasible, rounds=rounds,
                     lp_seconds=time.perf_counter() - t0, columns_total=total)
