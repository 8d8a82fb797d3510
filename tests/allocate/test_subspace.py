"""Exact placements carried into a narrower space (``planning.allocate.subspace``, issue 41: a dropped GPU type).

A space over a subset of another's shapes, seeded from it, holds for every multiset over its shapes the placement a
fresh space gives (throughput, pattern, shape indices, stage count and splits), and its frames are the fresh
space's frames; nothing is copied when a kept shape's table row differs or the order of the shapes changes.
"""

from __future__ import annotations

import numpy as np
import pytest

from planning.allocate.subspace import seed_from_wider, seed_subspace
from planning.templates.search import MultisetSpace
from planning.templates.synthetic import shape_tables

SHAPES = ["1xA10G", "1xH100", "1xL4", "1xL40S", "2xL4", "2xL40S"]


def _space(shapes: list[str], seed: int, nmax: int = 3) -> MultisetSpace:
    """A synthetic space whose per-shape tables depend on the shape only (as the perf model's do)."""
    tables, mem = shape_tables(SHAPES, 16, 30.0, 60.0, 4)
    factors = np.random.default_rng(seed).uniform(0.7, 1.3, size=(len(SHAPES), 1, 1))
    keep = [SHAPES.index(s) for s in shapes]
    return MultisetSpace(tuple(shapes), mem[keep], (tables * factors)[keep], 30.0, 16, nmax=nmax)


def _entry_equal(a: tuple, b: tuple) -> bool:  # type: ignore[type-arg]
    (va, (pa, ia, ra)), (vb, (pb, ib, rb)) = a, b
    return va == vb and pa == pb and np.array_equal(ia, ib) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(ra, rb, strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_a_seeded_narrower_space_holds_the_placements_a_fresh_one_makes(seed: int) -> None:
    """Drop the L40S shapes: every multiset of the narrower space, placed in the wider one first and copied, equals
    the fresh placement entry by entry, and the frames of all its multisets are equal."""
    wider = _space(SHAPES, seed)
    wider.throughput(wider.all_multisets())
    kept = [s for s in SHAPES if "L40S" not in s]
    seeded, fresh = _space(kept, seed), _space(kept, seed)
    copied = seed_from_wider(seeded, [wider])
    P = fresh.all_multisets()
    assert copied == P.shape[0] > 0  # every multiset over the kept shapes was placed in the wider space
    fresh.throughput(P)
    assert seeded.cache.keys() == fresh.cache.keys()
    assert all(_entry_equal(seeded.cache[c], fresh.cache[c]) for c in fresh.cache)
    assert seeded.stats.evaluated == 0  # nothing placed again
    assert seeded.frame(P).equals(fresh.frame(P))


def test_nothing_is_copied_when_a_kept_row_differs_or_the_order_changes() -> None:
    """A kept shape whose T̂ row differs (another SLO, another perf model) or shapes in another order: no copy."""
    wider = _space(SHAPES, 0)
    wider.throughput(wider.all_multisets())
    other = _space(["1xA10G", "1xH100", "1xL4"], 1)  # other per-shape factors: other tables
    assert seed_subspace(other, wider) == 0 and not other.cache
    tables, mem = shape_tables(SHAPES, 16, 30.0, 60.0, 4)
    factors = np.random.default_rng(0).uniform(0.7, 1.3, size=(len(SHAPES), 1, 1))
    order = [SHAPES.index(s) for s in ("1xH100", "1xA10G")]
    swapped = MultisetSpace(("1xH100", "1xA10G"), mem[order], (tables * factors)[order], 30.0, 16, nmax=3)
    assert seed_subspace(swapped, wider) == 0 and not swapped.cache
    same = _space(["1xA10G", "1xH100"], 0)
    assert seed_subspace(same, wider) > 0
