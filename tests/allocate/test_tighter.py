"""Exact placements carried into a tighter SLO (``planning.allocate.tighter``, issue 41: SLOs × f < 1).

A space under a tighter SLO, seeded from the same space under the looser one, gives every multiset the throughput a
fresh space gives (bit for bit), each copied placement is a valid one under the new tables, and only the multisets
not copied are placed again (the pipeline's what-if: ``tests/engine/test_warm_whatif.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from planning.allocate.tighter import seed_from_looser, seed_tighter
from planning.templates.partitions import multiset_partitions
from planning.templates.search import MultisetSpace
from planning.templates.synthetic import shape_tables

SHAPES = ["1xA10G", "1xH100", "1xL4", "1xL40S", "2xL4", "2xL40S"]
LAYERS = 16


def _space(seed: int, factor: float = 1.0, nmax: int = 3) -> MultisetSpace:
    """A synthetic space whose per-shape speeds vary by ``seed``; ``factor`` < 1 tightens its SLO as the perf
    model's tables tighten: in each (shape, stage count) row the entries from a random layer count on (where the
    latency binds) scale by ``factor``, the others (bound by memory or the batch grid) stay, so the rows stay
    non-increasing."""
    tables, mem = shape_tables(SHAPES, LAYERS, 30.0, 60.0, 4)
    rng = np.random.default_rng(seed)
    tables = tables * rng.uniform(0.7, 1.3, size=(len(SHAPES), 1, 1))
    if factor != 1.0:
        cut = rng.integers(1, LAYERS + 2, size=tables.shape[:2])  # j ≥ cut tightened (LAYERS + 1: none)
        j = np.arange(1, LAYERS + 1)[None, None, :]
        tables = np.where(j >= cut[:, :, None], tables * factor, tables)
    return MultisetSpace(tuple(SHAPES), mem, tables, 30.0, LAYERS, nmax=nmax)


def _valid(space: MultisetSpace, entry: tuple) -> bool:  # type: ignore[type-arg]
    """The cached placement reaches its value under ``space``'s tables: every stage's summed rows at its split."""
    value, (pattern, ids, result) = entry
    stages = int(np.asarray(result[1]))
    if stages <= 1:
        return True
    part = multiset_partitions(tuple(pattern), stages)[int(np.asarray(result[2]))]
    split = np.asarray(result[3])[:stages]
    sums = [sum(c * space.tables[ids[p], stages - 1, j - 1] for p, c in enumerate(block))
            for block, j in zip(part, split.tolist(), strict=True)]
    return int(split.sum()) == LAYERS and min(sums) >= value


@pytest.mark.parametrize(("seed", "factor"), [(0, 0.8), (1, 0.8), (2, 0.9), (3, 0.6), (4, 0.95)])
def test_a_tighter_space_seeded_from_a_looser_one_places_as_a_fresh_one(seed: int, factor: float) -> None:
    """Every multiset's throughput in the seeded space equals a fresh space's exactly; some were copied, the rest
    placed again, each copied placement valid under the tighter tables; the frames' throughputs are equal."""
    looser = _space(seed)
    P = looser.all_multisets()
    looser.throughput(P)
    seeded, fresh = _space(seed, factor), _space(seed, factor)
    assert seeded.monotone and np.all(seeded.tables <= looser.tables)
    copied = seed_tighter(seeded, looser)
    assert 0 < copied < P.shape[0]  # some kept, some changed by the tighter budget
    assert all(_valid(seeded, seeded.cache[c]) for c in seeded.cache)
    assert np.array_equal(seeded.throughput(P), fresh.throughput(P))
    assert seeded.stats.evaluated == P.shape[0] - copied  # only the others placed again
    a, b = seeded.frame(P), fresh.frame(P)
    assert a["template_id"].to_list() == b["template_id"].to_list()
    assert a["throughput"].to_list() == b["throughput"].to_list()


def test_nothing_is_copied_from_a_space_whose_entries_are_lower() -> None:
    """Seeding a looser space from a tighter one (entries that grew): no copy of a multiset over a grown shape, and
    copying everything regardless would give other throughputs (the check is what keeps them exact)."""
    tight = _space(0, 0.7)
    P = tight.all_multisets()
    tight.throughput(P)
    loose = _space(0)
    grown = ~(loose.tables <= tight.tables).reshape(len(SHAPES), -1).all(axis=1)
    assert grown.any()
    copied = seed_tighter(loose, tight)
    kept = set(np.flatnonzero(~grown).tolist())
    assert all(set(np.asarray(loose.cache[c][1][1]).tolist()) <= kept for c in loose.cache) and copied == len(loose.cache)
    unchecked = _space(0)
    unchecked.cache.update(tight.cache)
    assert not np.array_equal(unchecked.throughput(P), loose.throughput(P))


def test_only_spaces_of_the_same_shapes_and_caps_seed() -> None:
    """Another node cap or other shapes: nothing copied; ``seed_from_looser`` skips the space itself."""
    looser = _space(0)
    looser.throughput(looser.all_multisets())
    assert seed_tighter(_space(0, 0.8, nmax=2), looser) == 0
    tables, mem = shape_tables(SHAPES[:4], LAYERS, 30.0, 48.0, 4)
    assert seed_tighter(MultisetSpace(tuple(SHAPES[:4]), mem, tables, 30.0, LAYERS, nmax=3), looser) == 0
    child = _space(0, 0.8)
    assert seed_from_looser(child, [child, looser]) == seed_tighter(_space(0, 0.8), looser) > 0
