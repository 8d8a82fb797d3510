"""Exact placements carried into a narrower template space: a what-if that drops a GPU type or some shapes (issue 41).

A multiset's exact placement (``MultisetSpace.throughput``: the library's chunk solver, then the decode common-batch
correction) reads only the T̂ table rows, the memory and the layer count of its own shapes. A space over a subset of
another's shapes, with the same model, phase, SLO, request sizes, caps and perf model, and equal table rows for every
shape it keeps, therefore gives every multiset over those shapes the placement the wider space already cached.
:func:`seed_subspace` copies them, re-coded to the narrower space's shape indices, so the narrower space's searches,
frames and ILPs see the very values a fresh placement would give (``tests/allocate/test_subspace.py`` places every
multiset both ways), without placing them again (coral-extended without L40S: ~6,000 placements of the base).

Not copied: a decode pipeline of two or more stages when a common-batch correction applies (``correct``): the
separable placement is the same, but the corrected value, computed over the space's stacked batch curves, can differ
in its last bit between spaces (measured: one of coral-extended's 8,569, 1525.6015732057526 against …524), so those
are placed again in the narrower space, as a fresh one would.

Conditions, each checked (otherwise nothing is copied): the kept shapes appear in the wider space in the same
order (a pattern's columns of equal multiplicity are ordered by shape index, so the order must be kept), equal table
rows, memories, node cap, memory cap and the same solver (``monotone``: whether every table row is non-increasing
in the layer count, which picks the chunk solver).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from planning.templates.search import MultisetSpace


def seed_subspace(child: MultisetSpace, parent: MultisetSpace) -> int:
    """Copy ``parent``'s cached placements of the multisets over ``child``'s shapes into ``child.cache``.

    Returns
    -------
    int
        How many placements were copied (0 when a condition of the module docstring fails).
    """
    index = {s: i for i, s in enumerate(parent.shapes)}
    if any(s not in index for s in child.shapes) or child.nmax != parent.nmax or child.layers != parent.layers:
        return 0
    idx = np.array([index[s] for s in child.shapes], dtype=np.int64)
    if idx.size == 0 or np.any(np.diff(idx) <= 0) or child.monotone != parent.monotone or child.cap != parent.cap:
        return 0
    if child.tables.shape[1:] != parent.tables.shape[1:] or not np.array_equal(child.tables, parent.tables[idx]) \
            or not np.array_equal(child.mem_gb, parent.mem_gb[idx]):
        return 0
    to_child = np.full(parent.K, -1, dtype=np.int64)
    to_child[idx] = np.arange(idx.size)
    pow_ = [int(p) for p in child.pow]
    copied = 0
    corrected = child.correct is not None or parent.correct is not None
    for value, (pattern, ids, result) in list(parent.cache.values()):
        if corrected and value > 0 and int(np.asarray(result[1])) >= 2:
            continue  # a corrected decode pipeline: placed again (the correction is not bit-equal across spaces)
        mine = to_child[np.asarray(ids, dtype=np.int64)]
        if np.any(mine < 0):
            continue  # a multiset with a shape the child does not have
        code = _code(sorted(int(k) for k, n in zip(mine.tolist(), pattern, strict=True) for _ in range(n)),
                     child.K, pow_)
        if code not in child.cache:
            child.cache[code] = (value, (pattern, mine, result))
            copied += 1
    return copied


def _code(row: list[int], K: int, pow_: list[int]) -> int:
    """``MultisetSpace.codes`` of one sorted multiset (shape indices), padded with ``K``."""
    padded = row + [K] * (len(pow_) - len(row))
    return sum(k * p for k, p in zip(padded, pow_, strict=True))


def seed_from_wider(child: MultisetSpace, candidates: Iterable[MultisetSpace]) -> int:
    """Seed ``child`` from the first of ``candidates`` (spaces of the same model, phase, SLO, sizes, caps and perf
    model; the caller keys them) whose shapes include all of ``child``'s; the number of placements copied."""
    wanted = set(child.shapes)
    for parent in candidates:
        if parent is not child and wanted < set(parent.shapes):
            return seed_subspace(child, parent)
    return 0
