"""Chunk solver: exact placements of a chunk of templates that share one multiplicity pattern.

Sets: a chunk of N templates of pattern P (ids[i, p] = shape of the p-th distinct node kind), stage counts S.
Parameters: tables[k, S-1, j-1] = T̂_j of one node of shape k holding j layers with S stages.
Per template: max over S, multiset partitions of the nodes into S blocks and layer counts j_b ≥ 1 (Σ j_b = L) of
min_b c_b(j_b), c_b = Σ of the block's node rows (data-parallel replicas), i.e. Coral's exact placement.

Vectorized (tables non-increasing in j): S = 1 by the pooled formula; for S ≥ 2 the partition-free bound
UB_S = min(Σ_k A_k / L, Σ_k thr_k(1) / S), A_k = max_j j·thr_k(j), skips hopeless S; block curves are built
incrementally; the test "Σ_b #{j : c_b(j) > incumbent} ≥ L and min_b c_b(1) > incumbent" selects the only
(template, partition) pairs that can still improve, which get the exact pooled L-th-largest evaluation.
Arbitrary tables go through ``planning.templates.exact.solve_exact`` one template at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planning.templates.exact import solve_exact
from planning.templates.partitions import Block, multiset_partitions

ChunkResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # throughput, S, partition index, splits

@dataclass
class _Level:
    """Data of one stage count S for the active rows of a chunk."""

    S: int
    act: np.ndarray  # active row indices into the chunk
    parts: tuple[tuple[Block, ...], ...]
    pidx: np.ndarray  # (P, S) block index of each partition's blocks
    curves: np.ndarray  # (nB, Na, L) block curves
    c1: np.ndarray  # (nB, Na) c_b(1)


def _level(pattern: Block, ids: np.ndarray, act: np.ndarray, tables: np.ndarray, S: int) -> _Level:
    parts = multiset_partitions(pattern, S)
    blocks = sorted({b for part in parts for b in part}, key=lambda b: (sum(b), b))
    index = {b: i for i, b in enumerate(blocks)}
    rows = [tables[ids[act, p], S - 1, :] for p in range(len(pattern))]
    curves = np.empty((len(blocks), act.size, tables.shape[2]))
    for i, b in enumerate(blocks):  # by size: each curve is a smaller block's curve plus one node row
        p = max(q for q, c in enumerate(b) if c > 0)
        smaller = tuple(c - 1 if q == p else c for q, c in enumerate(b))
        if sum(smaller) == 0:
            curves[i] = rows[p]
        else:
            np.add(curves[index[smaller]], rows[p], out=curves[i])
    pidx = np.asarray([[index[b] for b in part] for part in parts], dtype=np.int64).reshape(len(parts), S)
    return _Level(S, act, parts, pidx, curves, curves[:, :, 0])


_PAIR_BATCH = 4096


def _evaluate_pairs(lv: _Level, p_arr: np.ndarray, r_arr: np.ndarray, L: int) -> np.ndarray:
    """Exact values min(min_b c_b(1), L-th largest pooled value) of (partition, active-row) pairs."""
    out = np.empty(p_arr.size)
    kth = lv.S * L - L
    for a in range(0, p_arr.size, _PAIR_BATCH):
        p = p_arr[a : a + _PAIR_BATCH]
        r = r_arr[a : a + _PAIR_BATCH]
        bl = lv.pidx[p]  # (m, S)
        pooled = lv.curves[bl, r[:, None]].reshape(p.size, lv.S * L)
        m1 = lv.c1[bl, r[:, None]].min(axis=1)
        out[a : a + _PAIR_BATCH] = np.minimum(m1, np.partition(pooled, kth, axis=1)[:, kth])
    return out


def _update(
    best: np.ndarray,
    best_s: np.ndarray,
    best_pi: np.ndarray,
    lv: _Level,
    p_arr: np.ndarray,
    r_arr: np.ndarray,
    vals: np.ndarray,
) -> None:
    """Per row keep the best pair (ties: first partition) if it beats the incumbent strictly."""
    if vals.size == 0:
        return
    order = np.lexsort((p_arr, -vals, r_arr))
    r_sorted = r_arr[order]
    first = order[np.r_[True, r_sorted[1:] != r_sorted[:-1]]]
    rows = lv.act[r_arr[first]]
    better = vals[first] > best[rows]
    rows = rows[better]
    best[rows] = vals[first][better]
    best_s[rows] = lv.S
    best_pi[rows] = p_arr[first][better]


@lru_cache(maxsize=64)
def _area_grid(L: int, ratio: float = 1.2) -> tuple[np.ndarray, np.ndarray]:
    """Grid q_0 = 1 < q_1 < ... ≤ L (0-based indices) and multipliers q_{i+1} − 1 (q_G = L + 1).

    For non-increasing c, j·c(j) ≤ (q_{i+1} − 1)·c(q_i) on [q_i, q_{i+1} − 1], so the max over the grid
    bounds A = max_j j·c(j) from above while reading only G ≈ log(L)/log(ratio) columns.
    """
    pts = [1]
    while pts[-1] < L:
        pts.append(max(pts[-1] + 1, min(L, int(pts[-1] * ratio))))
    q = np.asarray(pts)
    nxt = np.append(q[1:], L + 1)
    return q - 1, (nxt - 1).astype(float)


def _count_above(curves: np.ndarray, rows: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """#{j : curves[b, r, j] > thr[r]} for non-increasing curves, by vectorized binary search."""
    nB, Na, L = curves.shape
    flat = curves.reshape(-1)
    base = (np.arange(nB)[:, None] * Na + rows[None, :]) * L
    lo = np.zeros(base.shape, dtype=np.int64)
    hi = np.full(base.shape, L, dtype=np.int64)
    t = thr[None, :]
    for _ in range(L.bit_length()):
        mid = (lo + hi) >> 1
        gt = flat[base + np.minimum(mid, L - 1)] > t
        open_ = lo < hi
        lo = np.where(open_ & gt, mid + 1, lo)
        hi = np.where(open_ & ~gt, mid, hi)
    return lo


def solve_chunk_monotone(
    pattern: Block, ids: np.ndarray, tables: np.ndarray, layers: int
) -> ChunkResult:
    """Exact placements of a chunk of templates sharing ``pattern`` (tables non-increasing in j).

    Best-first branch and bound: per S, every partition gets the bound min(min_b c_b(1), Σ_b A_b / L)
    (A_b = max_j j·c_b(j)); the partition with the best bound per template is evaluated first to set a strong
    incumbent, then the exact test "Σ_b #{j : c_b(j) > incumbent} ≥ L and min_b c_b(1) > incumbent" selects
    the only (template, partition) pairs that can still improve, which are evaluated exactly.

    Returns
    -------
    tuple
        ``(throughput (N,), S (N,), partition index (N,), layer split (N, S_max))``; the partition index refers
        to ``multiset_partitions(pattern, S)``; rows with throughput 0 are infeasible.
    """
    L = layers
    N = ids.shape[0]
    depth = tables.shape[1]
    n = sum(pattern)
    cnt = np.asarray(pattern, dtype=float)
    best = (tables[ids, 0, L - 1] * cnt).sum(axis=1)
    best_s = np.where(best > 0, 1, 0)
    best_pi = np.zeros(N, dtype=np.int64)
    jj = np.arange(1, L + 1, dtype=float)
    area = (tables * jj).max(axis=2)  # A_k per (shape, S)
    first = tables[:, :, 0]
    s_top = min(n, L, depth)
    levels: list[_Level] = []
    bounds: list[np.ndarray] = []
    ub = {
        S: np.minimum((area[ids, S - 1] * cnt).sum(axis=1) / L, (first[ids, S - 1] * cnt).sum(axis=1) / S)
        for S in range(2, s_top + 1)
    }
    q_idx, q_mult = _area_grid(L)
    # most promising stage counts first, so the incumbent is strong before the expensive levels are built
    for S in sorted(ub, key=lambda S: -float(np.mean(ub[S]))):
        act = np.flatnonzero(ub[S] > best)
        if act.size == 0:
            continue
        lv = _level(pattern, ids, act, tables, S)
        blk_area = (lv.curves[:, :, q_idx] * q_mult).max(axis=2)  # ≥ A_b = max_j j·c_b(j), (nB, Na)
        bound = np.minimum(
            lv.c1[lv.pidx].min(axis=1), blk_area[lv.pidx].sum(axis=1) / L
        )  # (P, Na) valid bound
        r_arr = np.flatnonzero(bound.max(axis=0) > best[act])  # rows this level can still improve
        p_arr = bound[:, r_arr].argmax(axis=0)
        _update(best, best_s, best_pi, lv, p_arr, r_arr, _evaluate_pairs(lv, p_arr, r_arr, L))
        levels.append(lv)
        bounds.append(bound)
    for lv, bound in zip(levels, bounds, strict=True):
        inc = best[lv.act]
        open_pairs = bound > inc[None, :]
        need = np.flatnonzero(open_pairs.any(axis=0))
        if need.size == 0:
            continue
        above = _count_above(lv.curves, need, inc[need])  # (nB, m) = #{j : c_b(j) > incumbent}
        tot = above[lv.pidx].sum(axis=1)  # (P, m)
        m1 = lv.c1[:, need][lv.pidx].min(axis=1)
        p_arr, r_loc = np.nonzero((tot >= L) & (m1 > inc[need][None, :]) & open_pairs[:, need])
        r_arr = need[r_loc]
        _update(best, best_s, best_pi, lv, p_arr, r_arr, _evaluate_pairs(lv, p_arr, r_arr, L))
    splits = np.zeros((N, depth), dtype=np.int64)
    splits[best_s == 1, 0] = L
    for lv in levels:
        pos = np.full(N, -1)
        pos[lv.act] = np.arange(lv.act.size)
        sel = np.flatnonzero(best_s == lv.S)
        if sel.size == 0:
            continue
        r = pos[sel]
        bl = lv.pidx[best_pi[sel]]  # (m, S)
        caps = (lv.curves[bl, r[:, None]] >= best[sel][:, None, None]).sum(axis=2)  # (m, S)
        split = np.ones_like(caps)
        rem = np.full(sel.size, L - lv.S)
        for b in range(lv.S):
            add = np.minimum(rem, caps[:, b] - 1)
            split[:, b] += add
            rem -= add
        splits[sel, : lv.S] = split
    return best, best_s, best_pi, splits


def solve_chunk_general(
    pattern: Block, ids: np.ndarray, tables: np.ndarray, layers: int
) -> ChunkResult:
    """Same contract as ``solve_chunk_monotone`` for arbitrary tables, one ``solve_exact`` call per template."""
    N = ids.shape[0]
    depth = tables.shape[1]
    best = np.zeros(N)
    best_s = np.zeros(N, dtype=np.int64)
    best_pi = np.zeros(N, dtype=np.int64)
    splits = np.zeros((N, depth), dtype=np.int64)
    node_part = [p for p, c in enumerate(pattern) for _ in range(c)]
    for i in range(N):
        thr = np.transpose(tables[ids[i, node_part]], (1, 0, 2))
        sol = solve_exact(layers, thr)
        if sol.throughput <= 0:
            continue
        S = len(sol.stages)
        blocks = tuple(
            tuple(sum(1 for k in st.nodes if node_part[k] == p) for p in range(len(pattern)))
            for st in sol.stages
        )
        parts = multiset_partitions(pattern, S)
        order = sorted(range(S), key=lambda s: blocks[s], reverse=True)
        canon = tuple(blocks[s] for s in order)
        best[i] = sol.throughput
        best_s[i] = S
        best_pi[i] = parts.index(canon)
        splits[i, :S] = [sol.stages[s].layers for s in order]
    return best, best_s, best_pi, splits
