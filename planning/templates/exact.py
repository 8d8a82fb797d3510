"""Exact placement by enumerating multiset partitions of identical nodes and solving each layer split exactly.

Sets: node types p = 1..P (nodes with identical rows in every stage table are interchangeable), m_p nodes of
type p; stage counts S = 1..min(n, L, depth).
Parameters: row r_p^S(j) = thr[S-1][k][j-1] of any node k of type p.
Enumeration: every unordered partition of the multiset m into S non-empty blocks β_1..β_S (count vectors)
exactly once (``multiset_partitions``); stage order does not change throughput, so unordered suffices.
Block curve: c_b(j) = Σ_p β_{b,p} · r_p^S(j).
Inner problem for a fixed partition: V = max_{j_b ≥ 1, Σ j_b = L} min_b c_b(j_b).
  * Monotone fast path (every c_b non-increasing in j, checked per call): V = min(min_b c_b(1), v_L) where v_L
    is the L-th largest value of the pooled multiset {c_b(j) : b, j}. Proof: for a threshold T let
    J_b(T) = #{j : c_b(j) ≥ T} (a prefix 1..J_b because c_b is non-increasing). T is achievable iff every
    J_b(T) ≥ 1 and Σ_b J_b(T) ≥ L (then pick 1 ≤ j_b ≤ J_b summing to L, possible since S ≤ L). Σ_b J_b(T)
    counts pooled values ≥ T, so it is ≥ L iff T ≤ v_L; and J_b(T) ≥ 1 iff T ≤ c_b(1).
  * General path (any non-negative table): max-min DP over blocks, h_1(l) = c_1(l),
    h_t(l) = max_{1 ≤ j ≤ l-t+1} min(c_t(j), h_{t-1}(l-j)), V = h_S(L); O(S·L²) per partition, vectorized
    across partitions.
Pruning: a partition is only solved if its upper bound (min_b max_j c_b(j)) beats the incumbent.
Objective: the best V over all S and partitions; ties keep the smallest S and the first partition.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from planning.errors import PlanningError
from planning.templates.partitions import Block, multiset_partitions
from planning.templates.placement import Solution, Stage

MAX_NODE_TYPES = 10


def group_nodes(thr: np.ndarray) -> tuple[list[int], list[list[int]]]:
    """Group nodes whose rows are identical in every stage table; returns (representative, members) per type."""
    reps: list[int] = []
    members: list[list[int]] = []
    index: dict[bytes, int] = {}
    for k in range(thr.shape[1]):
        key = np.ascontiguousarray(thr[:, k, :]).tobytes()
        if key in index:
            members[index[key]].append(k)
        else:
            index[key] = len(reps)
            reps.append(k)
            members.append([k])
    return reps, members


@lru_cache(maxsize=256)
def _dp_index(L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index matrices for h_new(l) = max_j min(c(j), h(l-j)) with l, j ≥ 1 (0-based columns)."""
    l_idx = np.arange(1, L + 1)[:, None]
    j_idx = np.arange(1, L + 1)[None, :]
    valid = j_idx < l_idx  # j ≤ l-1 so that the earlier blocks keep ≥ 1 layer
    jj = np.where(valid, j_idx - 1, 0)
    hh = np.where(valid, l_idx - j_idx - 1, 0)
    return jj, hh, valid


def maxmin_dp(curves: np.ndarray, L: int) -> np.ndarray:
    """Exact max over compositions of min_b c_b(j_b) for a batch of partitions.

    Parameters
    ----------
    curves:
        Array ``(batch, S, L)`` of block curves.
    L:
        Number of layers.

    Returns
    -------
    np.ndarray
        ``(batch,)`` optimal values (−1 where no composition exists, i.e. S > L).
    """
    jj, hh, valid = _dp_index(L)
    h = curves[:, 0, :].copy()
    for t in range(1, curves.shape[1]):
        c = curves[:, t, :]
        cand = np.minimum(c[:, jj], h[:, hh])
        cand = np.where(valid[None, :, :], cand, -1.0)
        h = cand.max(axis=2)
    return h[:, L - 1]


def _split_general(curves: np.ndarray, L: int) -> list[int]:
    """Layer counts attaining the DP optimum for one partition (curves ``(S, L)``)."""
    S = curves.shape[0]
    NEG = -1.0
    h = np.full((S, L + 1), NEG)
    arg = np.zeros((S, L + 1), dtype=int)
    h[0, 1:] = curves[0]
    for t in range(1, S):
        for ltot in range(t + 1, L + 1):
            js = np.arange(1, ltot - t + 1)
            vals = np.minimum(curves[t, js - 1], h[t - 1, ltot - js])
            i = int(np.argmax(vals))
            h[t, ltot] = vals[i]
            arg[t, ltot] = js[i]
    split = [0] * S
    rem = L
    for t in range(S - 1, 0, -1):
        split[t] = int(arg[t, rem])
        rem -= split[t]
    split[0] = rem
    return split


def split_monotone(curves: np.ndarray, value: float, L: int) -> list[int]:
    """Layer counts for non-increasing curves ``(S, L)`` reaching ``value``: j_b ≤ J_b(value), Σ j_b = L."""
    caps = [int(np.count_nonzero(c >= value)) for c in curves]
    split = [1] * len(caps)
    rem = L - len(caps)
    for b, cap in enumerate(caps):
        add = min(rem, cap - 1)
        split[b] += add
        rem -= add
    if rem != 0:  # pragma: no cover - guarded by the proof in the module docstring
        raise AssertionError("monotone split failed")
    return split


def _monotone_values(curves: np.ndarray, L: int) -> np.ndarray:
    batch, S, _ = curves.shape
    pooled = curves.reshape(batch, S * L)
    kth = S * L - L
    v_l = np.partition(pooled, kth, axis=1)[:, kth]
    return np.minimum(curves[:, :, 0].min(axis=1), v_l)


def solve_exact(layers: int, thr: np.ndarray) -> Solution:
    """Exact placement (see module docstring) on a validated table ``thr`` of shape ``(Smax, n, L)``.

    Raises
    ------
    PlanningError
        If there are more than ``MAX_NODE_TYPES`` distinct node types (partition count explodes).
    """
    L = layers
    n = thr.shape[1]
    reps, members = group_nodes(thr)
    if len(reps) > MAX_NODE_TYPES:
        raise PlanningError(
            "thr",
            f"has {len(reps)} distinct node rows; the exact method enumerates partitions and supports ≤ {MAX_NODE_TYPES}.",
            "merge identical nodes, split the node set, or use method='ilp'.",
        )
    counts: Block = tuple(len(m) for m in members)
    rows = thr[:, reps, :]  # (Smax, P, L)
    best = 0.0
    best_choice: tuple[int, tuple[Block, ...], list[int]] | None = None
    for S in range(1, min(n, L, thr.shape[0]) + 1):
        parts = multiset_partitions(counts, S)
        if not parts:
            continue
        R = rows[S - 1]
        B = np.asarray(parts, dtype=float)  # (nP, S, P)
        curves = B @ R  # (nP, S, L)
        monotone = bool(np.all(np.diff(R, axis=1) <= 0))
        ub = curves[:, :, 0].min(axis=1) if monotone else curves.max(axis=2).min(axis=1)
        keep = np.flatnonzero(ub > best)
        if keep.size == 0:
            continue
        sub = curves[keep]
        values = _monotone_values(sub, L) if monotone else maxmin_dp(sub, L)
        i = int(np.argmax(values))
        if values[i] > best:
            best = float(values[i])
            c = sub[i]
            split = split_monotone(c, best, L) if monotone else _split_general(c, L)
            best_choice = (S, parts[int(keep[i])], split)
    if best_choice is None:
        return Solution(0.0, ())
    _, blocks, split = best_choice
    pools = [list(m) for m in members]
    stages = []
    for block, j in zip(blocks, split, strict=True):
        nodes: list[int] = []
        for p, cnt in enumerate(block):
            nodes.extend(pools[p][:cnt])
            del pools[p][:cnt]
        stages.append(Stage(layers=int(j), nodes=tuple(sorted(nodes))))
    stages.sort(key=lambda s: s.nodes[0])
    return Solution(best, tuple(stages))
