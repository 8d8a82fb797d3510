"""The *dominated* pruning rule of :mod:`planning.allocate.instance` (its docstring states the rule and why it
keeps every optimal cost): within one group, which templates another template, or a multiset of smaller ones,
dominates."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

# A template whose proper sub-usages number more than this is not checked for (multi-class) dominance.
_MAX_SUBUSAGES = 4096
# Combination dominance enumerates splits of templates up to this many nodes, and recurses up to this depth.
_MAX_SPLIT_NODES = 12
_MAX_DEPTH_NODES = 200


def dominated_mask(
    usages: Sequence[dict[int, int]], thr: np.ndarray, protected: Sequence[bool]
) -> np.ndarray:
    """Which templates of one group are dominated by another template of the same group.

    Parameters
    ----------
    usages:
        Per template, shape index -> node count.
    thr:
        ``(n_templates, n_classes)`` throughputs.
    protected:
        Templates that must not be pruned (running instances); they may still dominate others.

    Returns
    -------
    Boolean mask, True = dominated (safe to drop).
    """
    n = len(usages)
    out = np.zeros(n, dtype=bool)
    if n <= 1:
        return out
    keys = [tuple(sorted(u.items())) for u in usages]
    by_key: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    # Same usage: dominated by a template with ≥ throughput everywhere and (> somewhere or earlier position).
    for members in by_key.values():
        if len(members) == 1:
            continue
        block = thr[members]
        for a, i in enumerate(members):
            ge = np.all(block >= block[a], axis=1)
            gt = np.any(block > block[a], axis=1)
            earlier = np.arange(len(members)) < a
            ge[a] = False
            if np.any(ge & (gt | earlier)):
                out[i] = True
    if thr.shape[1] == 1:
        _dominated_by_subusage_scalar(keys, by_key, thr[:, 0], out)
    else:
        _dominated_by_subusage_vector(keys, by_key, thr, out)
    out &= ~np.asarray(protected, dtype=bool)
    return out


Key = tuple[tuple[int, int], ...]


def _dominated_by_subusage_scalar(keys: list[Key], by_key: dict[Key, list[int]], thr: np.ndarray, out: np.ndarray) -> None:
    """Single class: τ is dominated when *several* instances of smaller templates fit in its nodes and give
    at least its throughput (combination dominance; one smaller template is the special case).

    F(u) = the best total throughput of a multiset of templates whose summed usage is ≤ u, by memoised
    recursion: F(u) = max(best(u), F(u − one node), max over splits u = s + (u − s) of F(s) + F(u − s)).
    τ with usage u is dominated iff F over proper parts of u (any removal or split) ≥ T(τ). Replacing each
    instance of τ by that multiset keeps availability, demand and cost/penalty no higher; by induction on the
    node count the multiset can be made of unpruned templates.
    """
    best: dict[tuple[int, ...], float] = {}
    for k, members in by_key.items():
        best[_flat(k)] = float(thr[members].max())
    memo: dict[tuple[int, ...], float] = {}

    def parts(u: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        # unordered splits (s, rest) with s holding u[0] and rest non-empty (rest = () is covered by removals)
        n = len(u)
        if n > _MAX_SPLIT_NODES:  # 2^(n−1) splits: skip (only weaker pruning, still lossless)
            return []
        seen: set[tuple[int, ...]] = set()
        res = []
        for take_s, take_rest in _split_getters(n):
            sub = take_s(u)
            if sub in seen:
                continue
            seen.add(sub)
            res.append((sub, take_rest(u)))
        return res

    def removals(u: tuple[int, ...]) -> list[tuple[int, ...]]:
        return list(dict.fromkeys(u[:i] + u[i + 1 :] for i in range(len(u))))

    def proper(u: tuple[int, ...]) -> float:
        val = 0.0
        for r in removals(u):
            if r:
                val = max(val, full(r))
        for sub, rest in parts(u):
            val = max(val, full(sub) + full(rest))
        return val

    def full(u: tuple[int, ...]) -> float:
        v = memo.get(u)
        if v is None:
            v = max(best.get(u, 0.0), proper(u))
            memo[u] = v
        return v

    for k, members in by_key.items():
        flat = _flat(k)
        if len(flat) > _MAX_DEPTH_NODES:
            continue
        below = proper(flat)
        for i in members:
            if below >= thr[i]:
                out[i] = True


@functools.cache
def _split_getters(n: int) -> list[tuple[Callable[[tuple[int, ...]], tuple[int, ...]], Callable[[tuple[int, ...]], tuple[int, ...]]]]:
    """For length n: getters of (s, rest) for every split with position 0 in s and rest non-empty."""
    out = []
    for mask in range(1 << (n - 1)):
        s_idx = [0, *(i + 1 for i in range(n - 1) if mask >> i & 1)]
        rest_idx = [i + 1 for i in range(n - 1) if not mask >> i & 1]
        if not rest_idx:
            continue
        out.append((_getter(s_idx), _getter(rest_idx)))
    return out


def _getter(idx: list[int]) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
    if len(idx) == 1:
        i = idx[0]
        return lambda u: (u[i],)
    return operator.itemgetter(*idx)


def _flat(k: Key) -> tuple[int, ...]:
    return tuple(s for s, c in k for _ in range(c))


def _dominated_by_subusage_vector(keys: list[Key], by_key: dict[Key, list[int]], thr: np.ndarray, out: np.ndarray) -> None:
    """Several classes: check every proper sub-usage of each usage (bounded enumeration)."""
    for k, members in by_key.items():
        ranges = [range(c + 1) for _, c in k]
        total = 1
        for r in ranges:
            total *= len(r)
        if total - 1 > _MAX_SUBUSAGES:
            continue
        cand: list[int] = []
        for counts in product(*ranges):
            sub = tuple((s, c) for (s, _), c in zip(k, counts, strict=True) if c > 0)
            if sub == k or not sub:
                continue
            cand.extend(by_key.get(sub, ()))
        if not cand:
            continue
        block = thr[cand]
        for i in members:
            if np.any(np.all(block >= thr[i], axis=1)):
                out[i] = True
