"""Enumeration of templates: all multisets of K node shapes with 1..Nmax nodes, grouped by multiplicity pattern.

Templates of one pattern (sorted multiplicities, e.g. (2, 1, 1)) share their multiset partitions, so the chunk
solver (``planning.templates.chunks``) works one pattern at a time.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from planning.templates.partitions import Block


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


def is_monotone(tables: np.ndarray) -> bool:
    return bool(np.all(np.diff(tables, axis=2) <= 0))
