"""Brute-force placement oracles: plain enumeration (tiny cases) and set-partition × threshold search (larger L).

``solve_brute`` enumerates every ordered assignment of nodes to S stages (all stages non-empty) and every
composition of L into S positive parts, evaluating min over stages of summed throughput; it refuses instances
with more than ``MAX_BRUTE_NODES`` nodes or more than ``MAX_BRUTE_EVALS`` evaluations.

``solve_partition_search`` is an independent exhaustive oracle for larger L that shares no code with the exact
solver: it enumerates every set partition of the labelled nodes (restricted-growth strings, no merging of
identical nodes) and, for each, finds the best threshold by binary search over the sorted candidate values
{c_b(j)}, testing "is there a composition with c_b(j_b) ≥ T for all b" by boolean convolution (subset-sum
reachability of the allowed layer counts). Feasibility is monotone in T, so the binary search is exact for
arbitrary (non-monotone) tables.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from planning.errors import PlanningError
from planning.templates.partitions import set_partitions
from planning.templates.placement import Solution, Stage

MAX_BRUTE_NODES = 7
MAX_BRUTE_EVALS = 3_000_000


def _stages_from(assign: tuple[int, ...], split: tuple[int, ...]) -> tuple[Stage, ...]:
    S = len(split)
    stages = [
        Stage(layers=split[s], nodes=tuple(k for k, a in enumerate(assign) if a == s)) for s in range(S)
    ]
    stages.sort(key=lambda st: st.nodes[0])
    return tuple(stages)


def _compositions(L: int, S: int) -> list[tuple[int, ...]]:
    return [
        tuple(b - a for a, b in zip((0, *cuts), (*cuts, L), strict=True))
        for cuts in itertools.combinations(range(1, L), S - 1)
    ]


def brute_evaluations(L: int, n: int, depth: int) -> int:
    """Number of (assignment, composition) pairs the plain brute force would evaluate."""
    return sum(S**n * math.comb(L - 1, S - 1) for S in range(1, min(n, L, depth) + 1))


def solve_brute(layers: int, thr: np.ndarray) -> Solution:
    """Plain enumeration of all node→stage assignments and layer compositions.

    Raises
    ------
    PlanningError
        When the instance has more than ``MAX_BRUTE_NODES`` nodes or needs more than ``MAX_BRUTE_EVALS``
        evaluations.
    """
    L = layers
    depth, n, _ = thr.shape
    if n > MAX_BRUTE_NODES:
        raise PlanningError("thr", f"has {n} nodes; brute force handles ≤ {MAX_BRUTE_NODES}.", "use method='exact'.")
    evals = brute_evaluations(L, n, depth)
    if evals > MAX_BRUTE_EVALS:
        raise PlanningError(
            "layers",
            f"brute force would evaluate {evals:,} placements (limit {MAX_BRUTE_EVALS:,}).",
            "use fewer layers or nodes, or method='exact'.",
        )
    best = 0.0
    best_stages: tuple[Stage, ...] = ()
    for S in range(1, min(n, L, depth) + 1):
        comps = _compositions(L, S)
        T = thr[S - 1]
        for assign in itertools.product(range(S), repeat=n):
            if len(set(assign)) != S:
                continue
            for split in comps:
                v = min(sum(T[k, split[s] - 1] for k in range(n) if assign[k] == s) for s in range(S))
                if v > best:
                    best = float(v)
                    best_stages = _stages_from(assign, split)
    return Solution(best, best_stages)


def _feasible(allowed: list[np.ndarray], L: int) -> np.ndarray | None:
    """Reachable layer totals (boolean, index = total) when block b may take j with allowed[b][j-1]."""
    reach = np.zeros(L + 1)
    reach[0] = 1.0
    for a in allowed:
        kernel = np.concatenate(([0.0], a.astype(float)))
        reach = (np.convolve(reach, kernel)[: L + 1] > 0).astype(float)
        if not reach.any():
            return None
    return reach


def _split_for(allowed: list[np.ndarray], L: int) -> tuple[int, ...]:
    """Recover one composition from the allowed sets (backwards over prefix reachability)."""
    prefixes = [np.zeros(L + 1)]
    prefixes[0][0] = 1.0
    for a in allowed:
        kernel = np.concatenate(([0.0], a.astype(float)))
        prefixes.append((np.convolve(prefixes[-1], kernel)[: L + 1] > 0).astype(float))
    split = [0] * len(allowed)
    rem = L
    for b in range(len(allowed) - 1, -1, -1):
        for j in range(1, rem + 1):
            if allowed[b][j - 1] and prefixes[b][rem - j] > 0:
                split[b] = j
                rem -= j
                break
    return tuple(split)


def solve_partition_search(layers: int, thr: np.ndarray) -> Solution:
    """Exhaustive oracle over labelled set partitions with a threshold search per partition (any table)."""
    L = layers
    depth, n, _ = thr.shape
    best = 0.0
    best_stages: tuple[Stage, ...] = ()
    for S in range(1, min(n, L, depth) + 1):
        T = thr[S - 1]
        for rgs in set_partitions(n, S):
            curves = np.zeros((S, L))
            for k, b in enumerate(rgs):
                curves[b] += T[k]
            cand = np.unique(curves[curves > 0])
            lo, hi = -1, cand.size - 1  # invariant: cand[lo] feasible (lo = -1: none yet), beyond hi infeasible
            while lo < hi:
                mid = (lo + hi + 1) // 2
                reach = _feasible([c >= cand[mid] for c in curves], L)
                if reach is not None and reach[L] > 0:
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= 0 and cand[lo] > best:
                best = float(cand[lo])
                split = _split_for([c >= cand[lo] for c in curves], L)
                stages = [Stage(split[s], tuple(k for k in range(n) if rgs[k] == s)) for s in range(S)]
                stages.sort(key=lambda st: st.nodes[0])
                best_stages = tuple(stages)
    return Solution(best, best_stages)
