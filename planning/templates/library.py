"""Serving Template library for one (model, phase, SLO): enumerate node multisets, place each exactly, cache.

Sets: shapes k = 1..K; templates = multisets of shapes with 1..Nmax nodes and total GPU memory ≤ ρ · weights.
Parameters: tables[k, S-1, j-1] = T̂_j of one node of shape k holding j layers with S stages (perf model).
Per template: the exact placement of ``planning.templates.exact`` (node k's row = its shape's table); templates
with throughput 0 (cannot hold the model) are dropped.

Vectorized engine (tables non-increasing in j, checked per call; otherwise every template goes through
``solve_exact`` one by one). Templates are grouped by *pattern* — the sorted multiplicities, e.g. (2, 1, 1) —
because all templates of a pattern share the same multiset partitions. For a chunk of templates of one pattern:
  1. S = 1: value c_M(L) (pooled formula with one block).
  2. For S ≥ 2, a partition-free upper bound UB_S = min(Σ_k A_k / L, Σ_k thr_k(1) / S) with
     A_k = max_j j · thr_k(j) (from T ≤ c_b(j_b) ≤ A_b / j_b summed over stages, and S·T ≤ Σ_b c_b(1));
     templates with UB_S ≤ incumbent skip S entirely.
  3. Block curves for every distinct block (sub-multiset) are built incrementally (one row add each); the
     counts J_b = #{j : c_b(j) > incumbent} give the test "Σ_b J_b ≥ L and min_b c_b(1) > incumbent", which
     every partition able to beat the incumbent passes; only passing (template, partition) pairs get the exact
     pooled L-th-largest evaluation. Chunks are independent, so a process pool returns the serial result.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from planning.catalog.schema import parse_shape
from planning.context import CancelToken, check_cancel
from planning.errors import PlanningError
from planning.templates.exact import solve_exact
from planning.templates.partitions import Block, multiset_partitions

ALGORITHM_VERSION = "templates-exact-2"  # 2: column homogeneous → single_gpu_type
POOL_MIN_TEMPLATES = 20_000  # below this a process pool costs more to start than it saves
CHUNK_ROWS = 128  # small chunks keep the block curves in cache (measured: 128 ≈ 1.6× faster than 512)
Progress = Callable[[int, int], None]  # progress(done, total) in templates

SCHEMA: dict[str, Any] = {
    "template_id": pl.Utf8,
    "shapes": pl.List(pl.Utf8),
    "counts": pl.List(pl.Int64),
    "n_nodes": pl.Int64,
    "n_gpus": pl.Int64,
    "n_gpu_types": pl.Int64,
    "single_gpu_type": pl.Boolean,
    "mem_gb": pl.Float64,
    "throughput": pl.Float64,
    "S": pl.Int64,
    "stages_json": pl.Utf8,
}


# ---------------------------------------------------------------------------------------------- enumeration
@lru_cache(maxsize=8)
def multisets_by_pattern(n_shapes: int, nmax: int) -> dict[Block, np.ndarray]:
    """All multisets of ``n_shapes`` shapes with 1..nmax nodes, grouped by pattern.

    Returns
    -------
    dict
        pattern (multiplicities, non-increasing) → int array ``(N, P)`` of shape indices, column p holding the
        shape with multiplicity ``pattern[p]`` (ties ordered by index); rows in lexicographic multiset order.
    """
    K = n_shapes
    groups: dict[Block, list[np.ndarray]] = {}
    for n in range(1, nmax + 1):
        combos = np.fromiter(
            itertools.chain.from_iterable(itertools.combinations_with_replacement(range(K), n)),
            dtype=np.int64,
        ).reshape(-1, n)
        mult = (combos[:, :, None] == combos[:, None, :]).sum(axis=2)  # multiplicity of each position's shape
        order = np.argsort(-mult * (K + 1) + combos, axis=1)  # by multiplicity desc, then shape id
        vals = np.take_along_axis(combos, order, axis=1)
        mult = np.take_along_axis(mult, order, axis=1)
        new = np.ones_like(vals, dtype=bool)
        new[:, 1:] = vals[:, 1:] != vals[:, :-1]  # first occurrence of each distinct shape
        code = np.where(new, mult, 0)
        code = np.sort(code, axis=1)[:, ::-1]  # pattern, zero-padded
        key = (code * (nmax + 1) ** np.arange(n)).sum(axis=1)
        for kv in np.unique(key):
            sel = key == kv
            i0 = int(np.argmax(sel))
            pattern = tuple(int(c) for c in code[i0] if c > 0)
            rows = vals[sel][new[sel]].reshape(-1, len(pattern))
            groups.setdefault(pattern, []).append(rows)
    return {pat: np.concatenate(rows) for pat, rows in groups.items()}


def _is_monotone(tables: np.ndarray) -> bool:
    return bool(np.all(np.diff(tables, axis=2) <= 0))


# ---------------------------------------------------------------------------------------------- chunk solver
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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


_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _shared_pool(workers: int) -> ProcessPoolExecutor:
    """One long-lived process pool per worker count (spawning and importing numpy costs ~1 s per pool).

    "spawn", not fork: the library is also built from worker threads of a running server (Streamlit), where
    forking a multi-threaded process can deadlock on locks held by other threads.
    """
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            _POOLS[workers] = pool
            atexit.register(pool.shutdown, wait=False, cancel_futures=True)
        return pool


def _solve_batch(args: tuple[np.ndarray, int, bool, list[tuple[Block, np.ndarray]]]) -> list[tuple[np.ndarray, ...]]:
    tab, L, monotone, items = args
    return [_solve_task((pattern, ids, tab, L, monotone)) for pattern, ids in items]


def _solve_task(args: tuple[Block, np.ndarray, np.ndarray, int, bool]) -> tuple[np.ndarray, ...]:
    pattern, ids, tables, layers, monotone = args
    fn = solve_chunk_monotone if monotone else solve_chunk_general
    return fn(pattern, ids, tables, layers)


# ---------------------------------------------------------------------------------------------- cache
def library_key(
    shapes: list[str],
    shape_mem_gb: Any,
    tables: Any,
    weight_gb: float,
    layers: int,
    nmax: int,
    rho: float,
    extra: str = "",
) -> str:
    """Content hash of everything a library depends on (plus ``extra``, e.g. model/phase/SLO/calibration)."""
    h = hashlib.sha256()
    h.update(ALGORITHM_VERSION.encode())
    h.update(
        json.dumps(
            [
                list(shapes),
                [float(m) for m in shape_mem_gb],
                float(weight_gb),
                int(layers),
                int(nmax),
                float(rho),
                extra,
            ]
        ).encode()
    )
    arr = np.ascontiguousarray(np.asarray(tables, dtype=np.float64))
    h.update(str(arr.shape).encode())
    h.update(arr.tobytes())
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class LibraryCache:
    """Parquet (zstd) files ``<dir>/<key>.parquet``, one per library."""

    directory: Path

    def path(self, key: str) -> Path:
        return Path(self.directory) / f"{key}.parquet"

    def load(self, key: str) -> pl.DataFrame | None:
        """The cached library for ``key`` or ``None``."""
        p = self.path(key)
        return pl.read_parquet(p) if p.exists() else None

    def store(self, key: str, df: pl.DataFrame) -> Path:
        """Write atomically (temp file + rename) and return the path."""
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{threading.get_ident()}")
        df.write_parquet(tmp, compression="zstd")
        tmp.replace(p)
        return p


# ---------------------------------------------------------------------------------------------- build
def _validate(
    shapes: list[str],
    mem: np.ndarray,
    tables: np.ndarray,
    weight_gb: float,
    layers: int,
    nmax: int,
    rho: float,
) -> None:
    K = len(shapes)
    if K == 0:
        raise PlanningError("shapes", "is empty.", "give at least one node shape, e.g. '1xL40S'.")
    if len(set(shapes)) != K:
        raise PlanningError("shapes", "contains duplicates.", "list each shape once.")
    if mem.shape != (K,):
        raise PlanningError(
            "shape_mem_gb", f"needs {K} entries (one per shape), got {mem.shape}.", "align with shapes."
        )
    if tables.ndim != 3 or tables.shape[0] != K or tables.shape[2] != layers or tables.shape[1] < 1:
        raise PlanningError(
            "tables",
            f"must have shape (K={K}, S_max, L={layers}), got {tables.shape}.",
            "use PerfModel.stage_tables.",
        )
    if not np.all(np.isfinite(tables)) or np.any(tables < 0):
        raise PlanningError("tables", "must be finite and ≥ 0.", "use 0 for 'cannot hold'.")
    if not weight_gb > 0:
        raise PlanningError(
            "weight_gb", f"must be > 0, got {weight_gb}.", "give the model's weight size in GB."
        )
    if layers < 1:
        raise PlanningError("layers", f"must be ≥ 1, got {layers}.", "give the model's layer count.")
    if nmax < 1:
        raise PlanningError("nmax", f"must be ≥ 1, got {nmax}.", "Coral uses Nmax = 6.")
    if not rho > 0:
        raise PlanningError("rho", f"must be > 0, got {rho}.", "Coral uses ρ = 12.")


def build_library(
    shapes: list[str],
    shape_mem_gb: Any,
    tables: Any,
    weight_gb: float,
    layers: int,
    nmax: int = 6,
    rho: float = 12.0,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    workers: int = 1,
    cache: LibraryCache | None = None,
    key: str | None = None,
) -> pl.DataFrame:
    """Serving Template library of one (model, phase, SLO).

    Parameters
    ----------
    shapes:
        Candidate node shapes (``"2xL40S"``), K of them.
    shape_mem_gb:
        GPU memory per node of each shape (GB), length K.
    tables:
        ``(K, S_max, L)`` stage tables: ``tables[k, S-1, j-1]`` = throughput of one node of shape k holding j
        layers with S stages.
    weight_gb:
        Model weight size (GB); the memory cap is ``rho * weight_gb``.
    layers:
        Number of layers L.
    nmax, rho:
        Coral's pruning: at most ``nmax`` nodes, total memory ≤ ``rho`` × weights.
    progress:
        ``progress(done, total)`` in templates, called after each chunk.
    cancel:
        A :class:`planning.context.CancelToken` (e.g. ``threading.Event``); checked between chunks.
    workers:
        > 1 solves chunks in a process pool; the output is identical to the serial run.
    cache, key:
        With a cache, the library is loaded if present (key defaults to ``library_key`` of the inputs).

    Returns
    -------
    polars.DataFrame
        One row per template with throughput > 0, sorted by ``template_id`` (columns in ``SCHEMA``):
        ``template_id`` like ``"3x1xL4+1x2xL40S"`` (parts sorted by shape key), ``shapes``/``counts`` (long
        layout: parallel lists), ``n_nodes``, ``n_gpus``, ``n_gpu_types``, ``single_gpu_type``,
        ``mem_gb``, ``throughput``, ``S``, ``stages_json`` (pipeline order: ``[{"layers": j, "shapes": [...]}]``).

    Raises
    ------
    PlanningError
        On inconsistent inputs.
    Cancelled
        When ``cancel`` is set.
    """
    shapes = list(shapes)
    mem = np.asarray(shape_mem_gb, dtype=float)
    tab = np.asarray(tables, dtype=float)
    _validate(shapes, mem, tab, float(weight_gb), int(layers), int(nmax), float(rho))
    if cache is not None:
        key = key or library_key(shapes, mem, tab, weight_gb, layers, nmax, rho)
        hit = cache.load(key)
        if hit is not None:
            return hit
    L = int(layers)
    depth = tab.shape[1]
    monotone = _is_monotone(tab)
    cap = float(rho) * float(weight_gb) * (1 + 1e-12)
    jmax = (tab > 0).sum(axis=2)  # layers a node can hold, per (shape, S) (monotone: a prefix)
    tasks: list[tuple[Block, np.ndarray]] = []
    for pattern, ids in multisets_by_pattern(len(shapes), int(nmax)).items():
        cnt = np.asarray(pattern)
        keep = (mem[ids] * cnt).sum(axis=1) <= cap
        if monotone:  # a necessary condition for throughput > 0 with some S
            s_top = min(sum(pattern), L, depth)
            reach = (jmax[ids, :s_top] * cnt[:, None]).sum(axis=1) >= L
            keep &= reach.any(axis=1)
        sel = ids[keep]
        for start in range(0, sel.shape[0], CHUNK_ROWS):
            tasks.append((pattern, sel[start : start + CHUNK_ROWS]))
    total = sum(t[1].shape[0] for t in tasks)
    results: list[tuple[np.ndarray, ...] | None] = [None] * len(tasks)
    done = 0
    if progress:
        progress(0, total)
    if workers <= 1 or total < POOL_MIN_TEMPLATES:
        for i, (pattern, ids) in enumerate(tasks):
            check_cancel(cancel, "library build")
            results[i] = _solve_task((pattern, ids, tab, L, monotone))
            done += ids.shape[0]
            if progress:
                progress(done, total)
    else:
        pool = _shared_pool(workers)
        # ~16 batches per worker: one pickle of the tables per batch (not per 128-row chunk), and still small
        # enough for progress and for cancel to take effect within a few seconds.
        n_batches = min(len(tasks), workers * 16)
        bounds = np.linspace(0, len(tasks), n_batches + 1).astype(int)
        futs: dict[Future[list[tuple[np.ndarray, ...]]], tuple[int, int]] = {
            pool.submit(_solve_batch, (tab, L, monotone, tasks[a:b])): (int(a), int(b))
            for a, b in itertools.pairwise(bounds) if b > a
        }
        pending = set(futs)
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for f in finished:
                a, b = futs[f]
                results[a:b] = f.result()
                done += sum(t[1].shape[0] for t in tasks[a:b])
                if progress:
                    progress(done, total)
            if cancel is not None and cancel.is_set():
                for f in pending:
                    f.cancel()
                check_cancel(cancel, "library build")
    df = _assemble(shapes, mem, tasks, results)
    if cache is not None and key is not None:
        cache.store(key, df)
    return df


def _list_column(values: np.ndarray, lengths: np.ndarray, inner: Any) -> pl.Series:
    """List column from flat values and per-row lengths (no Python lists per row)."""
    row = np.repeat(np.arange(lengths.size), lengths)
    grouped = pl.DataFrame({"row": row, "v": pl.Series(values, dtype=inner)}).group_by(
        "row", maintain_order=True
    )
    return grouped.agg(pl.col("v"))["v"]


def _join_columns(cols: list[np.ndarray], sep: str) -> np.ndarray:
    """Element-wise ``sep.join`` of equally long object arrays of str (C loop over Python str adds)."""
    out = cols[0].copy()
    for c in cols[1:]:
        out = out + sep + c
    return out


def _assemble(
    shapes: list[str], mem: np.ndarray, tasks: list[tuple[Block, np.ndarray]], results: list[Any]
) -> pl.DataFrame:
    gpus = [parse_shape(s) for s in shapes]
    gpu_count = np.asarray([g[0] for g in gpus])
    type_names = sorted({g[1] for g in gpus})
    gpu_type = np.asarray([type_names.index(g[1]) for g in gpus])
    name_rank = np.argsort(np.argsort(np.asarray(shapes, dtype=object)))  # rank of each shape by its key
    names = np.asarray(shapes, dtype=object)
    quoted = np.asarray([json.dumps(s) for s in shapes], dtype=object)
    count_prefix = np.asarray([f"{c}x" for c in range(64)], dtype=object)
    ids_out: list[np.ndarray] = []
    stages_out: list[np.ndarray] = []
    flat_shapes: list[np.ndarray] = []
    flat_counts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    num: dict[str, list[np.ndarray]] = {
        k: [] for k in ("n_nodes", "n_gpus", "n_gpu_types", "mem_gb", "throughput", "S")
    }
    merged: dict[Block, list[tuple[np.ndarray, Any]]] = {}
    for (pattern, ids), res in zip(tasks, results, strict=True):
        merged.setdefault(pattern, []).append((ids, res))
    for pattern, items in merged.items():
        ids = np.concatenate([it[0] for it in items])
        best, best_s, best_pi, splits = (np.concatenate([it[1][f] for it in items]) for f in range(4))
        keep = np.flatnonzero(best > 0)
        if keep.size == 0:
            continue
        rows = ids[keep]
        m = rows.shape[0]
        cnt = np.asarray(pattern)
        order = np.argsort(name_rank[rows], axis=1)
        srt = np.take_along_axis(rows, order, axis=1)
        scnt = cnt[order]
        flat_shapes.append(srt.ravel())
        flat_counts.append(scnt.ravel())
        lengths.append(np.full(m, len(pattern)))
        ids_out.append(
            _join_columns([count_prefix[scnt[:, p]] + names[srt[:, p]] for p in range(len(pattern))], "+")
        )
        types = np.sort(gpu_type[rows], axis=1)
        num["n_nodes"].append(np.full(m, sum(pattern)))
        num["n_gpus"].append((gpu_count[rows] * cnt).sum(axis=1))
        num["n_gpu_types"].append(1 + (types[:, 1:] != types[:, :-1]).sum(axis=1))
        num["mem_gb"].append((mem[rows] * cnt).sum(axis=1))
        num["throughput"].append(best[keep])
        num["S"].append(best_s[keep])
        stage_str = np.empty(m, dtype=object)
        s_k = best_s[keep]
        pi_k = best_pi[keep]
        sp_k = splits[keep]
        for S in np.unique(s_k).tolist():
            parts = multiset_partitions(pattern, S)
            for pi in np.unique(pi_k[s_k == S]).tolist():
                sel = np.flatnonzero((s_k == S) & (pi_k == pi))
                pieces = []
                for b, block in enumerate(parts[pi]):
                    members = [quoted[rows[sel, p]] for p, c in enumerate(block) for _ in range(c)]
                    layers = np.asarray(
                        [f'{{"layers":{j},"shapes":[' for j in sp_k[sel, b].tolist()], dtype=object
                    )
                    pieces.append(layers + _join_columns(members, ",") + "]}")
                stage_str[sel] = "[" + _join_columns(pieces, ",") + "]"
        stages_out.append(stage_str)
    if not ids_out:
        return pl.DataFrame(schema=SCHEMA)
    cat = {k: np.concatenate(v) for k, v in num.items()}
    lens = np.concatenate(lengths)
    df = pl.DataFrame(
        {
            "template_id": pl.Series(np.concatenate(ids_out).tolist(), dtype=pl.Utf8),
            "shapes": _list_column(names[np.concatenate(flat_shapes)].astype(str), lens, pl.Utf8),
            "counts": _list_column(np.concatenate(flat_counts).astype(np.int64), lens, pl.Int64),
            "n_nodes": cat["n_nodes"].astype(np.int64),
            "n_gpus": cat["n_gpus"].astype(np.int64),
            "n_gpu_types": cat["n_gpu_types"].astype(np.int64),
            "single_gpu_type": cat["n_gpu_types"] == 1,
            "mem_gb": cat["mem_gb"].astype(np.float64),
            "throughput": cat["throughput"].astype(np.float64),
            "S": cat["S"].astype(np.int64),
            "stages_json": pl.Series(np.concatenate(stages_out).tolist(), dtype=pl.Utf8),
        },
        schema=SCHEMA,
    )
    return df.sort("template_id")
