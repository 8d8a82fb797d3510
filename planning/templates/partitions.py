"""Enumeration of set and multiset partitions used by the exact and brute-force placement solvers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import lru_cache

Block = tuple[int, ...]
"""A block of a multiset partition: how many nodes of each node type it holds."""


def _sub_vectors(rem: Block, bound: Block) -> Iterator[Block]:
    """Non-zero vectors v ≤ rem (component-wise) with v ≤ bound in lexicographic order, largest first."""
    zero = tuple(0 for _ in rem)
    for v in itertools.product(*(range(r, -1, -1) for r in rem)):
        if v != zero and v <= bound:
            yield v


def _gen(rem: Block, blocks: int, bound: Block) -> Iterator[tuple[Block, ...]]:
    total = sum(rem)
    if blocks == 0:
        if total == 0:
            yield ()
        return
    if total < blocks:
        return
    if blocks == 1:
        if rem <= bound:
            yield (rem,)
        return
    for v in _sub_vectors(rem, bound):
        rest = tuple(r - x for r, x in zip(rem, v, strict=True))
        if sum(rest) < blocks - 1:
            continue
        for tail in _gen(rest, blocks - 1, v):
            yield (v, *tail)


@lru_cache(maxsize=4096)
def multiset_partitions(counts: Block, blocks: int) -> tuple[tuple[Block, ...], ...]:
    """All unordered partitions of a multiset into exactly ``blocks`` non-empty blocks.

    Parameters
    ----------
    counts:
        Multiplicity of each node type (the multiset).
    blocks:
        Number of blocks (pipeline stages) S.

    Returns
    -------
    tuple
        Each partition is a tuple of ``blocks`` count vectors in non-increasing lexicographic order, so every
        unordered partition appears exactly once.
    """
    if blocks < 1:
        return ()
    return tuple(_gen(tuple(counts), blocks, tuple(counts)))


def set_partitions(n: int, blocks: int) -> Iterator[tuple[int, ...]]:
    """Restricted-growth strings of length ``n`` with exactly ``blocks`` blocks (each set partition once).

    ``rgs[k]`` is the block of element ``k``; element 0 is in block 0 and each new block index is one more
    than the largest used so far.
    """
    if n == 0 or blocks < 1 or blocks > n:
        return

    def rec(prefix: list[int], used: int) -> Iterator[tuple[int, ...]]:
        k = len(prefix)
        if k == n:
            if used == blocks:
                yield tuple(prefix)
            return
        if used + (n - k) < blocks:
            return
        for b in range(min(used + 1, blocks)):
            prefix.append(b)
            yield from rec(prefix, max(used, b + 1))
            prefix.pop()

    yield from rec([], 0)
