"""Serving templates on demand: branch and bound over node multisets for LP pricing, exact placement at the leaves.

Sets: shapes k = 0..K−1 of one (model, phase, SLO); multisets M of 1..Nmax shapes with memory ≤ ρ·W (the
library's template space, ``planning.templates.library``); regions r.
Parameters: tables[k, S−1, j−1] = T̂_j (perf model); per-node weights w[r, k] ≥ 0 (the LP's price of a node of
shape k in region r: (1 + K)·p[r, k] − y_avail[r, k], +inf where not sold); y_d ≥ 0 the demand dual, y_n ≥ 0
the cardinality dual, D the demand; reduced cost of column (M, r):
    rc(M, r) = Σ_{k∈M} w[r, k] − y_d · min(T(M), D) − y_n.

Admissible throughput bound (valid for any non-negative tables). For a placement with S stages, stage b holding
j_b layers, T ≤ c_b(j_b) = Σ_{k∈b} T̂_{j_b}(k), so j_b·T ≤ Σ_{k∈b} A_k(S) with A_k(S) = max_j j·T̂_j(k); summed over
the stages L·T ≤ Σ_{k∈M} A_k(S). Also T ≤ c_b(j_b) ≤ Σ_{k∈b} F_k(S), F_k(S) = max_j T̂_j(k), so S·T ≤ Σ_k F_k(S).
With S = 1 the value is exact: T = Σ_k T̂_L(k). Hence
    UB(M) = max over feasible S of  (S = 1: Σ_k T̂_L(k);  S ≥ 2: min(Σ_k A_k(S)/L, Σ_k F_k(S)/S)),
feasible meaning S ≤ |M| and Σ_k #{j : T̂_j(k) > 0} ≥ L (otherwise no composition exists). Every term is a sum
over the nodes, and UB(M) ≤ Σ_{k∈M} v_k with v_k = max_S A_k(S)/L (A_k(1) ≥ L·T̂_L(k)).

Search (level by level, vectorised). A node of the tree is a prefix P (shape indices non-decreasing, so each
multiset is reached once); its descendants append shapes ≥ last(P). For every completion M ⊇ P with
e ≤ Nmax − |P| more nodes and every region r (w ≥ 0):
    rc(M, r) ≥ W_r(P) − y_d·D − y_n                                       (min(T, D) ≤ D)
    rc(M, r) ≥ W_r(P) − y_d·V(P) + e · min(0, min_{k ≥ last(P)} (w[r, k] − y_d v_k)) − y_n   (T ≤ Σ v)
so a prefix whose bound exceeds the threshold θ in every region is pruned with all its descendants, and a
memory cap violation prunes too (memory only grows). A surviving prefix is itself a leaf candidate when its
tight bound min_r (W_r − y_d·min(UB, D)) − y_n ≤ θ. Only candidates get the exact placement
(``planning.templates.library.solve_chunk_monotone``, the library's own solver), cached per multiset: the
throughput of a multiset does not depend on prices or duals, so later rounds and what-ifs reuse it.

Exactness: every multiset with rc ≤ θ in some region is a candidate (the bounds are valid), so evaluating all
candidates exactly finds every column with rc ≤ θ — θ slightly below 0 proves the LP optimal over all
templates, θ = δ lists every column reduced-cost fixing may need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from planning.context import CancelToken, check_cancel
from planning.errors import PlanningError
from planning.templates.chunks import ChunkResult
from planning.templates.enumeration import is_monotone as _is_monotone
from planning.templates.frame import SCHEMA as _SCHEMA
from planning.templates.frame import assemble as _assemble
from planning.templates.partitions import Block
from planning.templates.pool import solve_task as _solve_task

__all__ = ["MultisetSpace", "Pending", "SearchStats", "multisets_to_patterns"]

CHUNK = 128
"""Multisets per placement block (one call of the library's chunk solver; a cancel is checked between blocks)."""
GRID_RATIO = 1.02  # coverage-bound grid: consecutive throughput levels differ by 2 %
GRID_POINTS = 700  # down to hi / 1.02**700 ≈ hi · 1e-6
BOUNDS_KEPT = 1_000_000
"""Most multisets whose bound a space keeps (:meth:`MultisetSpace.known_bound`; 16 bytes each)."""


@dataclass
class SearchStats:
    """Work done by the searches of one space (summed over calls)."""

    calls: int = 0
    prefixes: int = 0  # tree nodes (prefixes) visited
    candidates: int = 0  # leaves passing the tight bound
    evaluated: int = 0  # distinct multisets placed exactly
    seconds_search: float = 0.0
    seconds_exact: float = 0.0


def multisets_to_patterns(P: np.ndarray, K: int) -> dict[Block, np.ndarray]:
    """Group padded multisets (rows of non-decreasing shape indices, ``K`` = empty slot) by pattern.

    Returns
    -------
    dict
        pattern (non-increasing multiplicities) → ``(N, len(pattern))`` shape indices, column p holding the
        shape of multiplicity ``pattern[p]`` (ties by index) — the layout of ``multisets_by_pattern``.
    """
    out: dict[Block, list[np.ndarray]] = {}
    if P.size == 0:
        return {}
    nmax = P.shape[1]
    sizes = (P < K).sum(axis=1)
    for n in np.unique(sizes).tolist():
        rows = P[sizes == n, :n]
        mult = (rows[:, :, None] == rows[:, None, :]).sum(axis=2)
        order = np.argsort(-mult * (K + 1) + rows, axis=1, kind="stable")
        vals = np.take_along_axis(rows, order, axis=1)
        mult = np.take_along_axis(mult, order, axis=1)
        new = np.ones_like(vals, dtype=bool)
        new[:, 1:] = vals[:, 1:] != vals[:, :-1]
        code = np.sort(np.where(new, mult, 0), axis=1)[:, ::-1]
        key = (code * (nmax + 1) ** np.arange(n)).sum(axis=1)
        for kv in np.unique(key):
            sel = key == kv
            i0 = int(np.argmax(sel))
            pattern = tuple(int(c) for c in code[i0] if c > 0)
            out.setdefault(pattern, []).append(vals[sel][new[sel]].reshape(-1, len(pattern)))
    return {pat: np.concatenate(v) for pat, v in out.items()}


@dataclass(frozen=True)
class Pending:
    """The placements some multisets of a space still need (:meth:`MultisetSpace.pending`): ``P`` the rows not yet
    placed, ``tasks`` their blocks (pattern, shape indices of at most :data:`CHUNK` multisets)."""

    P: np.ndarray
    tasks: list[tuple[Block, np.ndarray]]


@dataclass
class MultisetSpace:
    """The template space of one (model, phase, SLO), searched on demand (see the module docstring).

    ``tables`` (K, S_max, L), ``mem_gb`` per node of each shape, memory cap ``rho * weight_gb``, ``nmax`` nodes.
    Exact placements are cached per multiset (``code`` = Σ_p idx_p·(K+1)^p over the padded sorted row).
    """

    shapes: tuple[str, ...]
    mem_gb: np.ndarray
    tables: np.ndarray
    weight_gb: float
    layers: int
    nmax: int = 6
    rho: float = 12.0
    stats: SearchStats = field(default_factory=SearchStats)
    # stages_json of placed templates -> their throughput when it can be below the separable min over stages (decode
    # pipelines at a common micro-batch, ``planning.templates.sets.common_batch_throughput``); never above it, so
    # the bounds below stay valid upper bounds.
    correct: Callable[[list[str]], np.ndarray] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        tab = np.asarray(self.tables, dtype=float)
        K = len(self.shapes)
        if tab.ndim != 3 or tab.shape[0] != K or tab.shape[2] != self.layers:
            raise PlanningError("tables", f"must have shape (K={K}, S_max, L={self.layers}), got {tab.shape}.",
                                "use PerfModel.stage_tables.")
        if (K + 1) ** self.nmax >= 2**62:
            raise PlanningError("nmax", f"{self.nmax} nodes over {K} shapes is too large for on-demand search.",
                                "lower nmax or the number of shapes.")
        self.tables = tab
        self.mem_gb = np.asarray(self.mem_gb, dtype=float)
        L = self.layers
        depth = tab.shape[1]
        self.cap = float(self.rho) * float(self.weight_gb) * (1 + 1e-12)
        self.monotone = _is_monotone(tab)
        jj = np.arange(1, L + 1, dtype=float)
        self.t1 = tab[:, 0, L - 1].copy()  # exact S = 1 contribution
        self.area = (tab * jj).max(axis=2) / L  # (K, depth): A_k(S) / L
        self.first = tab.max(axis=2) / np.arange(1, depth + 1)[None, :]  # F_k(S) / S
        self.jmax = (tab > 0).sum(axis=2).astype(float)  # (K, depth)
        self.v = self.area.max(axis=1)  # per-node additive bound on T
        self.pow = (K + 1) ** np.arange(self.nmax, dtype=np.int64)
        self.cache: dict[int, tuple[float, tuple[Any, ...]]] = {}  # code -> (throughput, (pattern, ids, result))
        self._cover: np.ndarray | None = None  # the coverage tables, built at the first search (``cover``)
        self._ext: dict[str, np.ndarray] | None = None  # ``upper_bound``'s padded tables (``_extended``)
        self._cover_flat: list[np.ndarray] = []  # … and its coverage tables per stage count, flattened
        self._rows: pl.DataFrame | None = None  # library rows assembled so far, with their ``code`` (``_frame_rows``)
        self._rowed: set[int] = set()  # codes whose row was assembled (or has none: separable throughput 0)
        self._row_of: dict[int, int] = {}  # code -> its row's position in ``_rows``
        self._row_ids: list[str] = []  # ``_rows``' template ids, by position
        # codes whose UB is known (``known_bound``), sorted, and their UB: one pair, replaced whole, so that a
        # reader in another thread never sees the codes of one insertion with the values of another
        self._ub_known: tuple[np.ndarray, np.ndarray] = (np.zeros(0, dtype=np.int64), np.zeros(0))

    @property
    def K(self) -> int:
        return len(self.shapes)

    # ------------------------------------------------------------------------------------------ bounds
    @property
    def cover(self) -> np.ndarray:
        """The coverage tables (:meth:`_grid`), built on first use: only the search's bounds need them, so a space
        gives its seed columns and its first plan without paying for them (catalog-wide: 24 spaces, ~0.3 s)."""
        if self._cover is None:
            self._grid()
        assert self._cover is not None
        return self._cover

    def _grid(self) -> None:
        """Coverage tables a[k, S, g] = max_j min(j, j·T̂^S_j(k) / T_g) on a geometric grid T_0 < … < T_G−1.

        Per (k, S) row, with the T̂_j sorted: the j with T̂_j < T give j·T̂_j / T (below j), the others give j, so
        a(T) = max(prefix max of j·T̂_j over the c smallest, suffix max of j over the rest) with c = #{T̂_j < T}
        (a search per row). The row-by-grid loop it replaces cost catalog-wide 0.45 CPU-s over its 24 spaces."""
        tab = self.tables
        L = self.layers
        hi = float(self.v.max()) * self.nmax if self.v.size else 1.0
        self.grid = hi * GRID_RATIO ** -np.arange(GRID_POINTS)[::-1]  # increasing, T_{G−1} = hi
        G = self.grid.size
        rows = tab.reshape(-1, L)
        if not hi > 0:  # a model no shape can hold: v = 0, grid 0 (0/0 in the definition: no coverage)
            self._cover = np.full((tab.shape[0], tab.shape[1], G), np.nan)
            return
        jj = np.arange(1, L + 1, dtype=float)
        order = np.argsort(rows, axis=1, kind="stable")
        t_sorted = np.take_along_axis(rows, order, axis=1)
        below = np.maximum.accumulate(np.take_along_axis(rows * jj, order, axis=1), axis=1)  # max j·T̂_j, c smallest
        above = np.maximum.accumulate(jj[order][:, ::-1], axis=1)[:, ::-1]  # max j over the rest
        below = np.concatenate([np.zeros((rows.shape[0], 1)), below], axis=1)  # index c: c smallest (c = 0: none)
        above = np.concatenate([above, np.zeros((rows.shape[0], 1))], axis=1)  # index c: from the (c+1)-th on
        a = np.empty((rows.shape[0], G))
        for r in range(rows.shape[0]):
            c = np.searchsorted(t_sorted[r], self.grid, side="left")  # #{j: T̂_j < T_g}
            a[r] = np.maximum(np.minimum(below[r, c] / self.grid, L), above[r, c])
        self._cover = a.reshape(tab.shape[0], tab.shape[1], G)

    def upper_bound(self, P: np.ndarray, enough: float = np.inf) -> np.ndarray:
        """UB(M) for padded multisets (rows), 0 where no stage count is feasible or memory exceeds the cap.

        ``enough`` > 0: a row whose bound reaches it is not raised further (the search reads min(UB, D) only, so
        with ``enough`` = D > 0 it gets the same min(UB, D) and the same UB > 0 for less work).

        For S ≥ 2 the bound is min(Σ A_k(S)/L, Σ F_k(S)/S, the coverage bound): a stage b with j_b layers and
        throughput ≥ T has Σ_{k∈b} min(1, T̂_{j_b}(k)/T) ≥ 1, so j_b ≤ Σ_{k∈b} a_k(S, T) with
        a_k(S, T) = max_j min(j, j·T̂_j(k)/T); summed, Σ_{k∈M} a_k(S, T) ≥ L. The sum is non-increasing in T, so
        the first grid point T_g where it drops below L bounds T < T_g.
        """
        K, L = self.K, self.layers
        n = (P < K).sum(axis=1)
        ext = self._extended()  # the per-shape tables with a zero row for the empty slot (index K)
        t1 = ext["t1"][P].sum(axis=1)
        area = ext["area"][P].sum(axis=1)
        first = ext["first"][P].sum(axis=1)
        jm = ext["jmax"][P].sum(axis=1)
        depth = self.tables.shape[1]
        ub = np.where(jm[:, 0] >= L, t1, 0.0)
        G = self.grid.size
        grid_hi = np.append(self.grid, np.inf)
        for S in range(2, min(depth, L, self.nmax) + 1):
            # a row whose min(Σ A/L, Σ F/S) is already ≤ its bound cannot raise it (b ≤ that min): no coverage search
            ok = (n >= S) & (jm[:, S - 1] >= L) & (np.minimum(area[:, S - 1], first[:, S - 1]) > ub) & (ub < enough)
            if not ok.any():
                continue
            rows = np.flatnonzero(ok)
            flat = self._cover_flat[S - 1]  # cover[:, S − 1, :] flattened: one contiguous gather per step
            base = P[rows] * G
            lo = np.full(rows.size, -1)  # largest g with Σ cover ≥ L (−1: none; T_−1 = 0 always holds here)
            hi_ = np.full(rows.size, G)
            while True:
                open_ = hi_ - lo > 1
                if not open_.any():
                    break
                mid = (lo + hi_) // 2
                val = flat[base + np.minimum(mid, G - 1)[:, None]].sum(axis=1)
                good = val >= L - 1e-9
                lo = np.where(open_ & good, mid, lo)
                hi_ = np.where(open_ & ~good, mid, hi_)
            b = np.minimum(np.minimum(area[rows, S - 1], first[rows, S - 1]), grid_hi[lo + 1])
            ub[rows] = np.maximum(ub[rows], b)
        mem = ext["mem_gb"][P].sum(axis=1)
        return np.where(mem <= self.cap, ub, 0.0)

    def known_bound(self, P: np.ndarray) -> np.ndarray:
        """:meth:`upper_bound` of each padded multiset (every stage count: no ``enough``), computed once per
        multiset and kept (up to :data:`BOUNDS_KEPT`): UB(M) depends on the tables only, never on prices or duals,
        and every search of a space walks the same prefixes again (the pricing rounds, the group and linked bounds,
        the fixing rounds, later what-ifs). coral-extended's first what-if at demand ×2 spent 1.3 of its 5.5 CPU-s
        in ``upper_bound`` (335 calls). The search reads min(UB, D) and UB > 0 only, which the full bound gives as
        the bound stopped at D does (a bound stopped at D is ≥ D, a bound below D was not stopped)."""
        codes = self.codes(P)
        known, values = self._ub_known
        at = np.searchsorted(known, codes)
        hit = at < known.size
        hit[hit] = known[at[hit]] == codes[hit]
        out = np.empty(P.shape[0])
        out[hit] = values[at[hit]]
        if not hit.all():
            miss = ~hit
            out[miss] = new = self.upper_bound(P[miss])
            if known.size < BOUNDS_KEPT:
                fresh, first = np.unique(codes[miss], return_index=True)
                where = np.searchsorted(known, fresh)
                self._ub_known = (np.insert(known, where, fresh), np.insert(values, where, new[first]))
        return out

    def _extended(self) -> dict[str, np.ndarray]:
        """``upper_bound``'s tables with a zero row appended (padded slots index K), built once per space: a
        search calls the bound once per depth, and copying the coverage tables each time (K+1 × depth × 700)
        was a fifth of a pricing round on catalog-wide."""
        if self._ext is None:
            def ext(a: np.ndarray) -> np.ndarray:
                return np.concatenate([a, np.zeros((1, *a.shape[1:]))])

            self._ext = {"t1": ext(self.t1), "area": ext(self.area), "first": ext(self.first),
                         "jmax": ext(self.jmax), "mem_gb": ext(self.mem_gb)}
            cover = ext(self.cover)  # (K + 1, depth, G)  (builds self.grid on first use)
            self._cover_flat = [np.ascontiguousarray(cover[:, S, :]).reshape(-1) for S in range(cover.shape[1])]
        return self._ext

    def search(self, weights: np.ndarray, y_d: float, y_n: float, demand: float, theta: float,
               per_region: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Every multiset whose bound on min_r rc(M, r) is ≤ ``theta`` (padded rows, bounds).

        Parameters
        ----------
        weights:
            (R, K) node weights w[r, k] ≥ 0 (+inf where shape k is not sold in region r).
        y_d, y_n, demand:
            Demand dual, cardinality dual and the demand D of the group.
        theta:
            Threshold on the reduced cost.
        per_region:
            False replaces the R price vectors by their componentwise minimum (one vector: cheaper, looser).

        Returns
        -------
        tuple
            ``(P (m, Nmax) int64 padded with K, lb (m,))`` sorted by the bound.
        """
        import time

        t0 = time.perf_counter()
        K, nmax = self.K, self.nmax
        w = np.asarray(weights, dtype=float)
        if not per_region:
            w = w.min(axis=0, keepdims=True)
        delta = np.minimum(w - y_d * self.v[None, :], 0.0)
        delta = np.where(np.isfinite(delta), delta, 0.0)
        sufneg = np.minimum.accumulate(delta[:, ::-1], axis=1)[:, ::-1]  # (R, K) min over k' ≥ k
        wT = w.T  # (K, R)
        P = np.full((K, nmax), K, dtype=np.int64)
        P[:, 0] = np.arange(K)
        W = wT.copy()
        V = self.v.copy()
        mem = self.mem_gb.copy()
        out_p: list[np.ndarray] = []
        out_lb: list[np.ndarray] = []
        visited = 0
        for n in range(1, nmax + 1):
            visited += P.shape[0]
            keep = mem <= self.cap
            P, W, V, mem = P[keep], W[keep], V[keep], mem[keep]
            if P.shape[0] == 0:
                break
            ub = self.known_bound(P)
            with np.errstate(invalid="ignore"):
                leaf = (W - y_d * np.minimum(ub, demand)[:, None]).min(axis=1) - y_n
            cand = (ub > 0) & (leaf <= theta)
            out_p.append(P[cand])
            out_lb.append(leaf[cand])
            if n == nmax:
                break
            last = P[:, n - 1]
            e = nmax - n
            with np.errstate(invalid="ignore"):
                lb = np.maximum(W - y_d * demand, W - y_d * V[:, None] + e * sufneg[:, last].T).min(axis=1) - y_n
            grow = np.flatnonzero(lb <= theta)
            if grow.size == 0:
                break
            counts = K - last[grow]
            rep = np.repeat(grow, counts)
            starts = np.cumsum(counts) - counts
            child = last[rep] + (np.arange(rep.size) - np.repeat(starts, counts))
            P = P[rep]
            P[:, n] = child
            W = W[rep] + wT[child]
            V = V[rep] + self.v[child]
            mem = mem[rep] + self.mem_gb[child]
        P_all = np.concatenate(out_p) if out_p else np.zeros((0, nmax), dtype=np.int64)
        lb_all = np.concatenate(out_lb) if out_lb else np.zeros(0)
        order = np.argsort(lb_all, kind="stable")
        self.stats.calls += 1
        self.stats.prefixes += visited
        self.stats.candidates += int(P_all.shape[0])
        self.stats.seconds_search += time.perf_counter() - t0
        return P_all[order], lb_all[order]

    # ------------------------------------------------------------------------------------------ exact values
    def codes(self, P: np.ndarray) -> np.ndarray:
        return np.asarray(P @ self.pow, dtype=np.int64)

    def throughput(self, P: np.ndarray, cancel: CancelToken | None = None) -> np.ndarray:
        """Exact template throughput of each padded multiset (placed once, then cached); ``cancel`` is checked
        between blocks of 128 placements (a proof round's list can take seconds on a busy machine)."""
        self.place(self.pending(P), cancel)
        return np.array([self.cache[c][0] for c in self.codes(P).tolist()])

    def place(self, pending: Pending, cancel: CancelToken | None = None) -> None:
        """Place ``pending``'s blocks in this process and cache them (:meth:`fill`); ``cancel`` is checked between
        blocks, and a cancel stores nothing."""
        import time

        if not pending.tasks:
            return
        t0 = time.perf_counter()
        results = []
        for pattern, chunk in pending.tasks:
            check_cancel(cancel, "placing templates")
            results.append(_solve_task((pattern, chunk, self.tables, self.layers, self.monotone)))
        self.fill(pending, results, time.perf_counter() - t0)

    def pending(self, P: np.ndarray) -> Pending:
        """The placements the multisets ``P`` still need: blocks of at most :data:`CHUNK` multisets of one pattern
        (:func:`place_beside` runs them on a process pool; :meth:`fill` stores what they found)."""
        codes = self.codes(P)
        missing = np.array([c not in self.cache for c in codes.tolist()], dtype=bool)
        if not missing.any():
            return Pending(P[:0], [])
        _, first = np.unique(codes[missing], return_index=True)
        todo = P[missing][first]
        tasks = [(pattern, ids[a : a + CHUNK]) for pattern, ids in multisets_to_patterns(todo, self.K).items()
                 for a in range(0, ids.shape[0], CHUNK)]
        return Pending(P[missing], tasks)

    def fill(self, pending: Pending, results: Sequence[ChunkResult], seconds: float = 0.0) -> None:
        """Cache the placements ``results`` of ``pending``'s blocks (in their order), corrected when ``correct``
        is set; ``seconds`` (the placements' own time, where they ran) and this call's count in the space's
        exact-placement seconds."""
        import time

        t0 = time.perf_counter()
        added: list[int] = []
        try:
            for (pattern, chunk), res in zip(pending.tasks, results, strict=True):
                rows = np.full((chunk.shape[0], self.nmax), self.K, dtype=np.int64)
                exp = np.repeat(chunk, pattern, axis=1)
                rows[:, : exp.shape[1]] = np.sort(exp, axis=1)
                for i, c in enumerate(self.codes(rows).tolist()):
                    self.cache[c] = (float(res[0][i]), (pattern, chunk[i], tuple(r[i] for r in res)))
                    added.append(c)
                self.stats.evaluated += chunk.shape[0]
            if self.correct is not None:
                self._apply_correction(pending.P)
        except BaseException:
            for c in added:  # separable values not yet corrected: never leave them in the cache
                self.cache.pop(c, None)
            raise
        self.stats.seconds_exact += time.perf_counter() - t0 + seconds

    def _apply_correction(self, P: np.ndarray) -> None:
        """Replace the cached separable throughput of the multisets ``P`` by ``correct``'s (never larger)."""
        assert self.correct is not None
        # one stage: nothing to share, the separable value is exact (res[1] is the placement's stage count)
        deep = np.array([self.cache[c][0] > 0 and int(np.asarray(self.cache[c][1][2][1])) >= 2
                         for c in self.codes(P).tolist()], dtype=bool)
        P = P[deep]
        if P.shape[0] == 0:
            return
        frame = self._frame_rows(P)
        if frame.height == 0:
            return
        fixed = dict(zip(frame["code"].to_list(), self.correct(frame["stages_json"].to_list()).tolist(), strict=True))
        for c in self.codes(P).tolist():
            value, rest = self.cache[c]
            if value > 0:
                self.cache[c] = (min(value, float(fixed[c])), rest)

    def _separable_frame(self, P: np.ndarray) -> pl.DataFrame:
        """Library rows of the (placed) multisets ``P`` with a separable throughput > 0, sorted by id."""
        return _without_code(self._frame_rows(P))

    def _frame_rows(self, P: np.ndarray) -> pl.DataFrame:
        """``_separable_frame`` with each row's multiset ``code``. A multiset's row depends on its placement only, so
        it is assembled once per space and kept: the fixing attempts, the incumbent and linked-bound ILPs and later
        what-ifs ask for the same rows again (coral-extended's single-GPU-type rows in every attempt). The rows asked
        for are gathered by position (no polars query: see :mod:`planning.templates.frame`)."""
        codes = np.unique(self.codes(P)).tolist()
        new = [c for c in codes if c not in self._rowed]
        if new:
            tasks: list[tuple[Block, np.ndarray]] = []
            results: list[tuple[np.ndarray, ...]] = []
            for c in new:
                pattern, ids, res = self.cache[c][1]
                tasks.append((pattern, ids[None, :]))
                results.append(tuple(np.asarray(r)[None, ...] for r in res))
            df = _assemble(list(self.shapes), self.mem_gb, tasks, results,  # type: ignore[arg-type]
                           codes=[np.array([c], dtype=np.int64) for c in new])
            first = 0 if self._rows is None else self._rows.height
            self._row_of.update((c, first + i) for i, c in enumerate(df.get_column("code").to_list()))
            self._row_ids.extend(df.get_column("template_id").to_list())
            # one chunk: a gather from ~180 chunks took ~3x the CPU of one from a single chunk (polars' per-chunk work)
            self._rows = df if self._rows is None else self._rows.vstack(df).rechunk()
            self._rowed.update(new)
        if self._rows is None or not codes:
            return pl.DataFrame(schema={**_SCHEMA, "code": pl.Int64})
        at = sorted((self._row_of[c] for c in codes if c in self._row_of), key=self._row_ids.__getitem__)
        return self._rows[pl.Series(at, dtype=pl.get_index_type())]

    def usage_codes(self, usage: np.ndarray) -> np.ndarray:
        """Multiset code of each row of an (n, K) node-count matrix (its padded sorted multiset · ``pow``)."""
        K = self.K
        usage = np.asarray(usage, dtype=np.int64).reshape(-1, K)
        n = usage.shape[0]
        counts = usage.ravel()
        shape = np.repeat(np.tile(np.arange(K, dtype=np.int64), n), counts)
        row = np.repeat(np.repeat(np.arange(n), K), counts)
        sizes = usage.sum(axis=1)
        starts = np.cumsum(sizes) - sizes
        pad = np.full((n, self.nmax), K, dtype=np.int64)
        pad[row, np.arange(row.size) - starts[row]] = shape
        return np.asarray(pad @ self.pow, dtype=np.int64)

    def frame(self, P: np.ndarray) -> pl.DataFrame:
        """Library rows (``planning.templates.library.SCHEMA``) of the given multisets with throughput > 0
        (``throughput`` = the cached value, corrected when ``correct`` is set)."""
        self.throughput(P)  # placed (and corrected) first
        df = self._frame_rows(P)
        if self.correct is not None and df.height:
            value = pl.Series("throughput", [self.cache[c][0] for c in df["code"].to_list()], dtype=pl.Float64)
            return _without_code(df, value)
        return _without_code(df)

    def all_multisets(self, shape_mask: Sequence[bool] | None = None) -> np.ndarray:
        """Every multiset within the caps (optionally only over the shapes in ``shape_mask``), padded.

        Used for the small sub-spaces the baselines need (one GPU type) and by tests as the oracle.
        """
        K, nmax = self.K, self.nmax
        allowed = np.ones(K, dtype=bool) if shape_mask is None else np.asarray(shape_mask, dtype=bool)
        ks = np.flatnonzero(allowed)
        P = np.full((ks.size, nmax), K, dtype=np.int64)
        P[:, 0] = ks
        mem = self.mem_gb[ks].copy()
        out = []
        for n in range(1, nmax + 1):
            keep = mem <= self.cap
            P, mem = P[keep], mem[keep]
            out.append(P)
            if n == nmax or P.shape[0] == 0:
                break
            last = P[:, n - 1]
            nxt = [(i, k) for i, lst in enumerate(last.tolist()) for k in ks.tolist() if k >= lst]
            if not nxt:
                break
            rep = np.array([i for i, _ in nxt], dtype=np.int64)
            child = np.array([k for _, k in nxt], dtype=np.int64)
            P = P[rep]
            P[:, n] = child
            mem = mem[rep] + self.mem_gb[child]
        return np.concatenate(out) if out else np.zeros((0, nmax), dtype=np.int64)


def _without_code(df: pl.DataFrame, throughput: pl.Series | None = None) -> pl.DataFrame:
    """``df`` without its ``code`` column (and with ``throughput`` in place of its own when given), built from the
    columns themselves rather than by a polars query."""
    return pl.DataFrame([throughput if throughput is not None and c.name == "throughput" else c
                         for c in df.get_columns() if c.name != "code"])
