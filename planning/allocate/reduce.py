"""Exact column reduction for the allocation ILP: LP column generation, then reduced-cost fixing (lossless).

Sets: groups g (one demand class each), templates τ of g (columnar blocks), regions r, shapes k.
Parameters: usage U[τ, k]; throughput T[τ]; price p[r, k]; availability A[r, k]; demand D[g]; penalty K.
Columns: pairs (τ, r) where every shape τ uses is offered in r; LP cost c[τ, r] = (1 + K)·Σ_k U[τ, k]·p[r, k]
(the initialization penalty I = K·p·ν at the optimum when nothing runs yet). A pair that runs now (ν′ > 0) has
a second column at cost Σ_k U[τ, k]·p[r, k] with upper bound ν′ (keeping a running instance pays no start-up):
the ILP's ν·p + K·p·max(0, ν − ν′) is the cheapest split of ν between the two, so the LP stays a relaxation,
and running templates are always kept in the ILP. (Charging running pairs (1 + K)·p, as before 2026-11, made the
LP bound exceed the true optimum — tests/engine/test_reduction.py has the seeded cases.)

LP (relaxation, ν ≥ 0 continuous, no upper bounds but the running columns' ν′):
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

Fixing: for any integer-feasible ν, cost(ν) ≥ z_LP + Σ rc·ν over the unbounded columns (weak duality with y
feasible; a bounded running column at its bound ν′ has rc ≤ 0 and rc·(ν − ν′) ≥ 0), so a plan
that uses a column j costs at least z_LP + rc_j. Solving the ILP over the columns with rc ≤ δ and finding a
plan of cost z ≤ z_LP + min_{excluded} rc proves it optimal over all columns; otherwise δ is raised to
z − z_LP and the ILP re-solved over the (then sufficient) larger set. The slack s (cost M) keeps the LP
feasible; a positive slack at the LP optimum proves the ILP infeasible (nothing is reduced then).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from planning.allocate.knapcover import cover_ilp
from planning.context import CancelToken, check_cancel

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
    running: tuple[tuple[int, str, int], ...] = ()  # (row, region, count) of the instances running now (ν′ > 0)


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
    # for the Lagrangian bound (cost objective only): per group min_r rc, min_r W = c − U·y_a (the column's cost at
    # the availability duals), T' = min(T, D); the duals; Σ y_a·A; running columns (row, ν′, W, rc)
    rc_min: list[np.ndarray] = field(default_factory=list)
    w_min: list[np.ndarray] = field(default_factory=list)
    t_eff: list[np.ndarray] = field(default_factory=list)
    y_dem: np.ndarray | None = None
    y_card: np.ndarray | None = None
    y_avail_value: float = 0.0
    running: list[list[tuple[int, float, float, float]]] = field(default_factory=list)
    y_avail: np.ndarray | None = None  # (R, K) availability duals (≤ 0) at the LP optimum; None when served

    def select(self, threshold: float | Sequence[float], blocks: Sequence[ColumnBlock]) -> list[np.ndarray]:
        """Rows (templates) with some pair of reduced cost ≤ threshold (one for all groups, or one per group),
        plus rows that must stay."""
        per_group = [float(threshold)] * len(blocks) if isinstance(threshold, (int, float)) else list(threshold)
        self.threshold = max(per_group, default=0.0)
        self.keep = []
        for b, rc, th in zip(blocks, self.reduced_costs, per_group, strict=True):
            mask = (rc <= th + 1e-9).any(axis=1) if rc.size else np.zeros(len(b.throughput), dtype=bool)
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


@dataclass(frozen=True)
class Market:
    """Where columns are bought: ``shape_index`` (shape name → column of ``prices``), the ``regions``,
    ``prices[r, k]`` ($/h per node, NaN where not offered) and ``available[r, k]`` over the global shape index."""

    shape_index: Mapping[str, int]
    regions: Sequence[str]
    prices: np.ndarray
    available: np.ndarray


@dataclass(frozen=True)
class LpSides:
    """The LP's objective and side rows (:func:`lp_reduction`): ``served`` (phase 1 of the served objective) with
    its optional ``budget`` row; the spot cap (S) ``spot_cap``/``spot_regions``; the region links (R)
    ``links``/``transfers``."""

    served: bool = False
    budget: float | None = None
    spot_cap: Mapping[str, float] | None = None
    spot_regions: frozenset[str] = frozenset()
    links: Sequence[tuple[str, ...]] = ()
    transfers: Mapping[tuple[int, str, str], float] | None = None


def lp_reduction(blocks: Sequence[ColumnBlock], market: Market, demand: Mapping[str, float], K: float,
                 sides: LpSides = LpSides(), cancel: CancelToken | None = None) -> Reduction:
    """Solve the LP relaxation over all columns by column generation and return every column's reduced cost.

    ``cancel`` is checked between pricing rounds (a deadline raises :class:`planning.context.Cancelled`).

    With ``sides.served`` the LP is phase 1 of the served objective: min −α with demand rows
    Σ T' ν − α D ≥ 0, an optional budget row Σ (1 + K) p ν ≤ budget, zero column costs and no slack (α = 0 is
    always feasible); ``z_lp`` is then −α_LP and a plan using column j has α ≤ α_LP − rc_j.

    Parameters
    ----------
    blocks:
        One block per group (single class); block shapes index into ``market.shape_index``.
    market, demand, K:
        :class:`Market` (the regions, prices and availability over the global shape index); group -> demanded
        rate; the initialization penalty factor.
    sides.spot_cap, sides.spot_regions:
        The allocation's constraint (S) (cost objective): a group g with a cap s_g gets the row
        Σ_{τ, r ∉ spot} min(T, (1 − s_g) D_g) ν ≥ (1 − s_g) D_g (valid for integer ν like the demand row); its dual
        y_s lowers the reduced cost of non-spot columns by min(T, (1 − s) D)·y_s and adds y_s·(1 − s)·D to the
        Lagrangian constant.
    sides.links, sides.transfers:
        The allocation's region links (R) (cost objective): ``links`` are tuples of group ids, the sender (a model's
        prefill) first; flows f_{ℓab} ≥ 0 on the diagonal (a = a) and on every (ℓ, a, b) of ``transfers`` ($ at the
        link's full rate) enter the LP as fixed columns with the rows Σ_{τ∈q} T' ν_{τr} − D_q Σ f(r) ≥ 0 per
        linked group q and region r (f(r): the flows out of r for the sender, into r for a receiver; T' = min(T, D)
        is valid as in the demand row) and Σ_ab f_{ℓab} ≥ 1. Their duals lower the reduced costs of the groups'
        columns region by region and add Σ_ℓ y_ℓ (the split rows' duals) to the Lagrangian constant.
    """
    t0 = time.perf_counter()
    blocks = [ColumnBlock(b.group, b.shapes, b.usage, np.minimum(b.throughput, demand.get(b.group, 0.0)), b.keep_always,
                          b.running) if demand.get(b.group, 0.0) > 0 else b for b in blocks]
    lp = _ReductionLp(blocks, market, demand, K, sides)
    rounds = 0
    while True:
        check_cancel(cancel, "LP reduction")
        rounds += 1
        reduced, added = lp.price_round()
        if added == 0 or rounds >= MAX_ROUNDS:
            break
    return lp.reduction(reduced, rounds, t0)


class _ReductionLp:
    """The LP of :func:`lp_reduction` in HiGHS: its row layout (availability, demand, cardinality, budget, (S),
    (R) rows), the columns so far, and the last round's solution and duals."""

    def __init__(self, blocks: Sequence[ColumnBlock], market: Market, demand: Mapping[str, float], K: float,
                 sides: LpSides) -> None:
        self.blocks, self.demand, self.K, self.sides = blocks, demand, K, sides
        self.regions, self.available = market.regions, market.available
        prices = market.prices
        self.R, self.K_shapes = prices.shape
        offered = ~np.isnan(prices)
        # per block: map local shapes to global columns of prices
        self.local: list[tuple[np.ndarray, np.ndarray]] = []
        self.usage_f = [b.usage.astype(np.float64) for b in blocks]  # converted once: the pricing loop reuses it
        for b, uf in zip(blocks, self.usage_f, strict=True):
            idx = np.array([market.shape_index[s] for s in b.shapes], dtype=int)
            self.local.append((idx, _pair_costs(uf, prices[:, idx], offered[:, idx], 1.0 + K)))
        self.groups = [b.group for b in blocks]
        self._layout()
        self.in_lp: list[set[tuple[int, int]]] = [set() for _ in blocks]
        self.kept_cols: list[tuple[int, int, int, float]] = []  # (group, row, region, ν′)
        self._model()

    def _layout(self) -> None:
        """The row layout: availability (R·K), demand and cardinality (per group), budget, (S) rows, (R) rows."""
        blocks, groups, demand, sides = self.blocks, self.groups, self.demand, self.sides
        served, R = sides.served, self.R
        self.n_avail = R * self.K_shapes
        self.n_groups = n_groups = len(blocks)
        self.has_budget = served and sides.budget is not None
        spot_cap = sides.spot_cap
        self.caps = caps = {} if served else {gi: float((spot_cap or {})[g]) for gi, g in enumerate(groups)
                                              if float((spot_cap or {}).get(g, 1.0)) < 1 and demand.get(g, 0.0) > 0}
        self.cap_rows = {gi: k for k, gi in enumerate(sorted(caps))}  # group index -> its (S) row after the budget row
        self.non_spot = np.array([r not in sides.spot_regions for r in self.regions], dtype=bool)
        self.t_cap = {gi: np.minimum(blocks[gi].throughput, (1.0 - s) * demand[groups[gi]]) for gi, s in caps.items()}
        self.s0 = self.n_avail + 2 * n_groups + (1 if self.has_budget else 0)
        # region links (R), cost objective only: per demanded group of a link one row per region, plus its split row
        g_index = {g: gi for gi, g in enumerate(groups)}
        self.link_members: list[list[int]] = []  # per link: its demanded group indices, sender first when demanded
        if not served:
            for link in sides.links:
                members = [g_index[g] for g in link if g in g_index and demand.get(g, 0.0) > 0]
                if members:
                    self.link_members.append(members)
        self.l0 = self.s0 + len(caps)
        self.link_row: dict[tuple[int, int], int] = {}  # (group index, link index) -> first of its R rows
        row = self.l0
        for li, members in enumerate(self.link_members):
            for gi in members:
                self.link_row[(gi, li)] = row
                row += R
        self.split0 = row
        self.n_rows = self.split0 + len(self.link_members)
        self.link_of = {gi: li for li, members in enumerate(self.link_members) for gi in members}
        t_max = [float(b.throughput.max()) if b.throughput.size else 0.0 for b in blocks]
        self.n_min = [float(np.ceil(demand.get(g, 0.0) / t - 1e-9)) if t > 0 else 0.0
                      for g, t in zip(groups, t_max, strict=True)]
        self.max_cost = max((float(np.nanmax(np.where(np.isfinite(c), c, np.nan))) for _, c in self.local
                             if np.isfinite(c).any()), default=1.0)
        self.big_m = BIG_M_FACTOR * max(self.max_cost, 1.0)

    def _model(self) -> None:
        """HiGHS with the rows, the α or slack columns, the flow columns, the initial columns (per group and
        region the best cost per throughput) and the running instances' columns."""
        import highspy

        chosen: list[set[tuple[int, int]]] = []
        for b, (_, cost) in zip(self.blocks, self.local, strict=True):
            picks: set[tuple[int, int]] = set()
            thr = np.maximum(b.throughput, 1e-12)
            for r in range(self.R):
                ratio = cost[:, r] / thr
                ok = np.flatnonzero(np.isfinite(ratio) & (b.throughput > 0))
                if ok.size:
                    top = ok[np.argsort(ratio[ok])[:INITIAL_PER_GROUP_REGION]]
                    picks.update((int(i), r) for i in top)
            chosen.append(picks)
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self._rows_and_fixed_columns()
        for gi, picks in enumerate(chosen):
            self.add_columns(gi, sorted(picks))
        self._running_columns()

    def _rows_and_fixed_columns(self) -> None:
        """The rows, then the α column (served) or the slack and flow columns (cost)."""
        import highspy

        h, groups, demand, n_avail, n_groups = self.h, self.groups, self.demand, self.n_avail, self.n_groups
        caps, n_rows, l0, split0 = self.caps, self.n_rows, self.l0, self.split0
        inf = highspy.kHighsInf
        if self.sides.served:  # demand rows Σ T'ν − αD ≥ 0; cardinality rows vacuous (α may be small)
            has_budget = int(self.has_budget)
            row_lower = np.concatenate([np.full(n_avail, -inf), np.zeros(2 * n_groups), np.full(has_budget, -inf)])
            row_upper = np.concatenate([self.available.reshape(-1).astype(float), np.full(2 * n_groups, inf),
                                        np.full(has_budget, float(self.sides.budget or 0.0))])
        else:
            row_lower = np.concatenate([np.full(n_avail, -inf), np.array([demand.get(g, 0.0) for g in groups]),
                                        np.array(self.n_min),
                                        [(1.0 - caps[gi]) * demand[groups[gi]] for gi in sorted(caps)],
                                        np.zeros(split0 - l0), np.ones(len(self.link_members))])
            row_upper = np.concatenate([self.available.reshape(-1).astype(float),
                                        np.full(2 * n_groups + len(caps) + n_rows - l0, inf)])
        # slack columns first
        h.addRows(n_rows, row_lower, row_upper, 0, np.zeros(n_rows, dtype=np.int32), np.zeros(0, dtype=np.int32),
                  np.zeros(0))
        if self.sides.served:  # the α column: cost −1, bounds [0, 1], −D_g in every demand row
            dem = np.array([demand.get(g, 0.0) for g in groups])
            h.addCol(-1.0, 0.0, 1.0, n_groups, (n_avail + np.arange(n_groups)).astype(np.int32), -dem)
            return
        # slack columns keep the LP feasible; a positive slack at the optimum proves the ILP infeasible
        for gi in range(n_groups):
            rows = [n_avail + gi, n_avail + n_groups + gi] + ([self.s0 + self.cap_rows[gi]] if gi in caps else [])
            vals = [1.0, max(self.n_min[gi], 1.0)] + ([1.0] if gi in caps else [])
            h.addCol(self.big_m, 0.0, inf, len(rows), np.array(rows, dtype=np.int32), np.array(vals))
        for li in range(len(self.link_members)):  # a link that no region can pair: its slack (infeasible ILP)
            h.addCol(self.big_m, 0.0, inf, 1, np.array([split0 + li], dtype=np.int32), np.array([1.0]))
        self._flow_columns()

    def _flow_columns(self) -> None:
        """The links' flow columns: the diagonal, then the listed transfers."""
        import highspy

        groups, links, R = self.groups, self.sides.links, self.R
        region_of_name = {r: i for i, r in enumerate(self.regions)}
        for li, members in enumerate(self.link_members):
            sender = members[0] if groups[members[0]] == _sender(links, groups[members[0]]) else -1
            arcs = [(r, r, 0.0) for r in range(R)]
            if sender >= 0:
                arcs += [(region_of_name[src], region_of_name[dst], float(usd))
                         for (lj, src, dst), usd in (self.sides.transfers or {}).items()
                         if lj == _link_index(links, groups[sender]) and src in region_of_name and dst in region_of_name]
            for r_src, r_dst, usd in arcs:
                rows_f = [self.split0 + li]
                vals_f = [1.0]
                for gi in members:
                    rows_f.append(self.link_row[(gi, li)] + (r_src if gi == sender else r_dst))
                    vals_f.append(-float(self.demand[groups[gi]]))
                self.h.addCol(usd, 0.0, highspy.kHighsInf, len(rows_f), np.array(rows_f, dtype=np.int32),
                              np.array(vals_f))

    def side_rows(self, gi: int, i: int, r: int) -> tuple[list[int], list[float]]:
        """The (S) and (R) entries of column (row i of block gi, region r): its capped group's non-spot row and its
        link's supply row in r."""
        rows_s: list[int] = []
        vals_s: list[float] = []
        if gi in self.caps and self.non_spot[r]:
            rows_s.append(self.s0 + self.cap_rows[gi])
            vals_s.append(float(self.t_cap[gi][i]))
        if gi in self.link_of:
            rows_s.append(self.link_row[(gi, self.link_of[gi])] + r)
            vals_s.append(float(self.blocks[gi].throughput[i]))
        return rows_s, vals_s

    def add_columns(self, gi: int, pairs: Sequence[tuple[int, int]]) -> None:
        """Columns (row i of block gi, region r) into the LP."""
        import highspy
        import scipy.sparse as sp

        if not pairs:
            return
        b = self.blocks[gi]
        idx, cost = self.local[gi]
        n_avail, n_groups, n_rows, K_shapes = self.n_avail, self.n_groups, self.n_rows, self.K_shapes
        rows_list, cols_ptr, vals = [], [0], []
        costs = []
        for i, r in pairs:
            nz = np.flatnonzero(b.usage[i] > 0)
            rows_list.extend((r * K_shapes + idx[nz]).tolist())
            vals.extend(b.usage[i, nz].astype(float).tolist())
            rows_list.extend([n_avail + gi, n_avail + n_groups + gi])
            vals.extend([float(b.throughput[i]), 1.0])
            if self.has_budget:
                rows_list.append(n_rows - 1)
                vals.append(float(cost[i, r]))
            extra_rows, extra_vals = self.side_rows(gi, i, r)
            rows_list.extend(extra_rows)
            vals.extend(extra_vals)
            cols_ptr.append(len(rows_list))
            costs.append(0.0 if self.sides.served else float(cost[i, r]))
            self.in_lp[gi].add((i, r))
        n = len(pairs)
        mat = sp.csc_matrix((np.array(vals), np.array(rows_list, dtype=np.int32), np.array(cols_ptr, dtype=np.int32)),
                            shape=(n_rows, n))
        self.h.addCols(n, np.array(costs), np.zeros(n), np.full(n, highspy.kHighsInf), int(mat.nnz),
                       mat.indptr.astype(np.int32), mat.indices.astype(np.int32), mat.data.astype(float))

    def _running_columns(self) -> None:
        """Running instances: a column at cost p·U (no start-up) bounded by the running count ν′; beyond ν′ the
        ordinary column at (1 + K)·p·U applies (the ILP's ν·p + K·p·max(0, ν − ν′), split at its optimum)."""
        K, K_shapes, n_avail, n_groups = self.K, self.K_shapes, self.n_avail, self.n_groups
        region_of = {r: i for i, r in enumerate(self.regions)}
        for gi, (b, (idx, cost)) in enumerate(zip(self.blocks, self.local, strict=True)):
            for i, region, nu in b.running:
                ri = region_of.get(region)
                if ri is None or nu <= 0 or not np.isfinite(cost[i, ri]) or b.throughput[i] <= 0:
                    continue
                nz = np.flatnonzero(b.usage[i] > 0)
                rows_k = [*(ri * K_shapes + idx[nz]).tolist(), n_avail + gi, n_avail + n_groups + gi]
                vals_k = [*b.usage[i, nz].astype(float).tolist(), float(b.throughput[i]), 1.0]
                extra_rows, extra_vals = self.side_rows(gi, i, ri)
                rows_k += extra_rows
                vals_k += extra_vals
                if self.has_budget:
                    rows_k.append(self.n_rows - 1)
                    vals_k.append(float(cost[i, ri]) / (1.0 + K))
                self.h.addCol(0.0 if self.sides.served else float(cost[i, ri]) / (1.0 + K), 0.0, float(nu),
                              len(rows_k), np.array(rows_k, dtype=np.int32), np.array(vals_k))
                self.kept_cols.append((gi, int(i), ri, float(nu)))

    def price_round(self) -> tuple[list[np.ndarray], int]:
        """Solve the LP, keep its duals, price every column: the reduced costs per block and how many columns
        (the most negative, at most ``ADD_PER_ROUND`` per group) were added."""
        R, K_shapes, n_avail, n_groups, served = self.R, self.K_shapes, self.n_avail, self.n_groups, self.sides.served
        self.h.run()
        self.sol = self.h.getSolution()
        y = np.asarray(self.sol.row_dual, dtype=float)
        self.y_avail = y_avail = np.minimum(y[:n_avail].reshape(R, K_shapes), 0.0)
        self.y_dem = y_dem = np.maximum(y[n_avail:n_avail + n_groups], 0.0)
        self.y_card = y_card = np.maximum(y[n_avail + n_groups:n_avail + 2 * n_groups], 0.0)
        y_budget = min(float(y[n_avail + 2 * n_groups]), 0.0) if self.has_budget else 0.0
        self.y_spot = y_spot = {gi: max(float(y[self.s0 + k]), 0.0) for gi, k in self.cap_rows.items()}
        self.y_link = y_link = {gi: np.maximum(y[self.link_row[(gi, li)]: self.link_row[(gi, li)] + R], 0.0)
                                for gi, li in self.link_of.items()}
        self.y_split = np.maximum(y[self.split0:self.n_rows], 0.0)
        reduced = []
        added = 0
        for gi, (b, (idx, cost)) in enumerate(zip(self.blocks, self.local, strict=True)):
            # served: column cost 0; a binding budget row (dual y_b ≤ 0) charges −y_b per $ of the pair
            lp_cost = (np.where(np.isfinite(cost), np.nan_to_num(cost, posinf=0.0) * (-y_budget), np.inf) if served
                       else cost)
            rc = lp_cost - self.usage_f[gi] @ y_avail[:, idx].T - (b.throughput * y_dem[gi])[:, None] - y_card[gi]
            if gi in self.caps:  # (S): non-spot columns earn the cap row's dual
                rc -= np.outer(self.t_cap[gi] * y_spot[gi], self.non_spot)
            if gi in self.link_of:  # (R): each region's supply row of the link
                rc -= np.outer(b.throughput, y_link[gi])
            rc[b.throughput <= 0, :] = np.inf
            reduced.append(rc)
            neg = np.argwhere(rc < -1e-7 * max(1.0, self.max_cost))
            if neg.size:
                order = np.argsort(rc[neg[:, 0], neg[:, 1]])[:ADD_PER_ROUND]
                new = [(int(i), int(r)) for i, r in neg[order] if (int(i), int(r)) not in self.in_lp[gi]]
                self.add_columns(gi, new)
                added += len(new)
        return reduced, added

    def reduction(self, reduced: list[np.ndarray], rounds: int, t0: float) -> Reduction:
        """The :class:`Reduction` of the last round: the LP value, its feasibility, the reduced costs (clipped at
        0) and, for the cost objective, what the Lagrangian bound needs."""
        blocks, groups, demand, served = self.blocks, self.groups, self.demand, self.sides.served
        y_dem, y_card, y_avail, y_spot = self.y_dem, self.y_card, self.y_avail, self.y_spot
        values = np.asarray(self.sol.col_value, dtype=float)
        if served:
            z = float(self.h.getInfo().objective_function_value)
            feasible = rounds < MAX_ROUNDS
        else:
            slack = values[: self.n_groups + len(self.link_members)]
            z = float(self.h.getInfo().objective_function_value) - self.big_m * float(slack.sum())
            feasible = bool((slack <= 1e-7 * max(1.0, max(demand.values(), default=1.0))).all()) and rounds < MAX_ROUNDS
        rc_min: list[np.ndarray] = []
        w_min: list[np.ndarray] = []
        running: list[list[tuple[int, float, float, float]]] = [[] for _ in blocks]
        if not served:
            for gi, (b, rc) in enumerate(zip(blocks, reduced, strict=True)):
                # W = rc + T'·y_d + y_n (rc before clipping: exact up to the LP's tolerance)
                rmin = rc.min(axis=1) if rc.size else np.zeros(0)
                rc_min.append(rmin)
                w_min.append(np.where(np.isfinite(rc), rc + (b.throughput * y_dem[gi])[:, None] + y_card[gi],
                                      np.inf).min(axis=1) if rc.size else np.zeros(0))
            for gi, i, ri, nu_f in self.kept_cols:
                idx, cost = self.local[gi]
                w = float(cost[i, ri]) / (1.0 + self.K) - float(self.usage_f[gi][i] @ y_avail[ri, idx])
                if gi in self.caps and self.non_spot[ri]:
                    w -= float(self.t_cap[gi][i]) * y_spot[gi]
                if gi in self.link_of:
                    w -= float(blocks[gi].throughput[i]) * float(self.y_link[gi][ri])
                running[gi].append((i, nu_f, w, w - float(blocks[gi].throughput[i]) * float(y_dem[gi])
                                    - float(y_card[gi])))
        for rc in reduced:
            np.maximum(rc, 0.0, out=rc, where=np.isfinite(rc))
        total = sum(int(np.isfinite(rc).sum()) for rc in reduced)
        return Reduction(z_lp=z, regions=tuple(self.regions), reduced_costs=reduced, feasible_lp=feasible,
                         rounds=rounds, lp_seconds=time.perf_counter() - t0, columns_total=total, rc_min=rc_min,
                         w_min=w_min, t_eff=[b.throughput for b in blocks], y_dem=y_dem, y_card=y_card,
                         y_avail_value=float((y_avail * self.available).sum())
                         + sum(y_spot.get(gi, 0.0) * (1.0 - s) * demand[groups[gi]] for gi, s in self.caps.items())
                         + (float(self.y_split.sum()) if not served else 0.0),
                         running=running, y_avail=None if served else y_avail)


def _sender(links: Sequence[tuple[str, ...]], group: str) -> str | None:
    """The sending group of the link ``group`` is in (None when it is in none)."""
    return next((link[0] for link in links if group in link), None)


def _link_index(links: Sequence[tuple[str, ...]], group: str) -> int:
    """The index of the link ``group`` is in (in the order given)."""
    return next(i for i, link in enumerate(links) if group in link)


# ------------------------------------------------------------------------------------------ Lagrangian bound
COVER_SEED = 64  # rows per group (best W per throughput) for the first integer cover (its value U)


def _cover_with_running(w: np.ndarray, t: np.ndarray, rows: np.ndarray, running: Sequence[tuple[int, float, float, float]],
                        demand: float, time_limit_s: float) -> tuple[float, float]:
    """The cover ILP over ``rows`` (cost w, unbounded) and the running columns (cost W, at most ν′ each)."""
    cost = np.concatenate([w[rows], [x[2] for x in running]])
    thr = np.concatenate([t[rows], [float(t[x[0]]) for x in running]])
    ub = np.concatenate([np.full(rows.size, np.inf), [x[1] for x in running]])
    return cover_ilp(cost, thr, demand, time_limit_s, ub)


@dataclass(frozen=True)
class LagrangianBound:
    """z_LB = Σ_g L_g + Σ y_a·A ≥ z_LP, with L_g ≤ the cheapest integer cover of D_g at the prices W."""

    z_lag: float  # Σ_g L_g + Σ y_a·A (−inf when some group has no integer cover)
    z_lp: float
    group_bounds: np.ndarray
    corrections: np.ndarray  # per group Σ_running min(rc, 0)·ν′ ≤ 0
    seconds: float

    @property
    def z_lb(self) -> float:
        """The better of the two lower bounds on the integer optimum."""
        return max(self.z_lag, self.z_lp)

    def thresholds(self, red: Reduction, demand: Sequence[float], target: float) -> list[float]:
        """Per group θ_g: a plan using a column of reduced cost rc > θ_g costs more than ``target``.

        A plan using column j of group g costs ≥ z_LB − L_g + (its group's cover at prices W) and that cover
        costs ≥ W_j + y_d·(D − T'_j) + Σ_running min(rc, 0)·ν′ = rc_j + y_d·D + y_n + corr_g (every unbounded
        column has rc ≥ 0); so rc_j > target − z_LB + L_g − y_d·D − y_n − corr_g rules j out. Plain reduced-cost
        fixing (rc_j > target − z_LP) rules it out too; the smaller threshold applies.
        """
        assert red.y_dem is not None and red.y_card is not None
        plain = target - red.z_lp
        if not np.isfinite(self.z_lag):
            return [plain] * len(demand)
        return [min(plain, target - self.z_lag + float(self.group_bounds[g]) - float(red.y_dem[g]) * d
                    - float(red.y_card[g]) - float(self.corrections[g])) if d > 0 else plain
                for g, d in enumerate(demand)]


def lagrangian_bound(red: Reduction, demand: Sequence[float], time_limit_s: float = 2.0,
                     budget_s: float = math.inf) -> LagrangianBound:
    """Per-group integer cover bounds at the LP's availability duals (cost objective; ``red`` from lp_reduction).

    Each cover ILP stops at ``time_limit_s``, all of them together at ``budget_s`` (wall): past it the groups
    left give no cover bound, and the bound is the LP's (z_lag = −inf), as when a group has no integer cover.

    Per group: U = the cover ILP over the ``COVER_SEED`` best rows and the running columns; every column a cover
    of cost ≤ U may use has rc ≤ U − y_d·D − y_n − corr (as in ``thresholds``); L_g = the cover ILP's dual bound
    over those rows (plus the running columns, bounded by ν′). Demand-free groups have L_g = 0.
    """
    t0 = time.perf_counter()
    assert red.y_dem is not None and red.y_card is not None
    G = len(red.w_min)
    L = np.zeros(G)
    corr = np.zeros(G)
    for g in range(G):
        D = float(demand[g])
        run = red.running[g]
        corr[g] = sum(min(rc, 0.0) * n for _i, n, _w, rc in run)
        if D <= 0:
            continue
        left = budget_s - (time.perf_counter() - t0)
        if left <= 0:
            L[g] = -np.inf  # out of time: the LP bound stands
            continue
        w, t, rcm = red.w_min[g], red.t_eff[g], red.rc_min[g]
        ok = np.flatnonzero(np.isfinite(w) & (t > 0))
        seed = ok[np.argsort(w[ok] / t[ok], kind="stable")[:COVER_SEED]]
        upper, _ = _cover_with_running(w, t, seed, run, D, min(time_limit_s, left))
        if not np.isfinite(upper):
            L[g] = -np.inf  # no integer cover at all: leave the bound to the LP
            continue
        theta = upper - float(red.y_dem[g]) * D - float(red.y_card[g]) - corr[g]
        rows = ok[rcm[ok] <= theta * (1 + 1e-9) + 1e-9]
        _value, bound = _cover_with_running(w, t, rows, run, D,
                                            min(time_limit_s, max(0.01, budget_s - (time.perf_counter() - t0))))
        L[g] = min(bound, upper)
    z_lag = float(L.sum()) + red.y_avail_value if np.isfinite(L).all() else -np.inf
    return LagrangianBound(z_lag, red.z_lp, L, corr, time.perf_counter() - t0)
