"""Exact placements carried into a space under a tighter SLO: a what-if or sweep point with SLOs × f < 1 (issue 41).

A tighter SLO shrinks every stage's time budget, so each T̂ entry of the new tables is at most the old one (checked
per shape, not assumed). A multiset's exact placement T(M) is the max over stage counts S, partitions of its nodes
into S blocks and layer splits (j_b) of min_b c_b(j_b), c_b(j) the sum of the block's node rows T̂^S_j(k) (the chunk
solver's definition, ``templates.chunks``). Hence, with the new tables T̂′ ≤ T̂ on every shape of M:

- every candidate's value under T̂′ is at most its value under T̂ (float sums, mins and maxes are monotone), so
  T′(M) ≤ T(M);
- the old optimum's own candidate (S*, its partition, its split j*) reads only the entries T̂^{S*}_{j*_b}(k) of its
  nodes; when each of them is unchanged, that candidate is worth exactly T(M) under T̂′ (the same numbers added in
  the same order), so T′(M) ≥ T(M).

So T′(M) = T(M) bit for bit, and the old placement (its stage count, partition and split) is an optimal placement
under the new tables: :func:`seed_tighter` copies it, as a fresh placement's value, without placing M again. A
multiset with no placement (S = 0: no candidate above 0) has none under T̂′ ≤ T̂ either and is copied too.

Not copied: a decode pipeline of two or more stages when a common-batch correction applies (its corrected value
reads the SLO's batch curves, not only T̂), and any multiset some of whose entries changed or one of whose shapes
has an entry that grew. A copied multi-stage placement may differ from the one a fresh solve would return among
equal-valued ones (another stage count or split of the same throughput, as a placement already depends on which
multisets share its chunk); its throughput — what every ILP, bound and baseline reads — is the fresh one's
(``tests/allocate/test_tighter.py`` places every multiset both ways).

Measured on coral-extended at SLOs × 0.8 (docs/benchmarks.md, "SLOs × 0.8 from the base's placements").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from planning.templates.partitions import multiset_partitions
from planning.templates.search import MultisetSpace


def seed_tighter(child: MultisetSpace, parent: MultisetSpace) -> int:
    """Copy into ``child.cache`` the placements of ``parent`` (the same shapes, model and caps under a looser SLO)
    whose value the module docstring proves unchanged under ``child``'s tables.

    Returns
    -------
    int
        How many placements were copied (0 when the shapes, caps or table shapes differ).
    """
    if child.shapes != parent.shapes or child.nmax != parent.nmax or child.layers != parent.layers \
            or child.cap != parent.cap or child.tables.shape != parent.tables.shape \
            or not np.array_equal(child.mem_gb, parent.mem_gb):
        return 0
    new, old = child.tables, parent.tables
    below = np.asarray((new <= old).reshape(new.shape[0], -1).all(axis=1))  # per shape: no entry grew
    corrected = child.correct is not None or parent.correct is not None
    L = child.layers
    copied = 0
    for code, entry in list(parent.cache.items()):
        if code in child.cache:
            continue
        value, (pattern, ids, result) = entry
        kinds = np.asarray(ids, dtype=np.int64)
        if not below[kinds].all():
            continue
        stages = int(np.asarray(result[1]))
        if stages == 0:
            ok = value <= 0  # no candidate above 0 under the old tables, so none under the new
        elif stages == 1:
            ok = bool(np.array_equal(new[kinds, 0, L - 1], old[kinds, 0, L - 1]))
        else:
            ok = not corrected and _split_unchanged(new, old, pattern, kinds, result, stages)
        if ok:
            child.cache[code] = entry
            copied += 1
    return copied


def _split_unchanged(new: np.ndarray, old: np.ndarray, pattern: tuple[int, ...], kinds: np.ndarray,
                     result: tuple[object, ...], stages: int) -> bool:
    """True when every entry the placement ``result`` (stage count, partition index, split) reads is unchanged."""
    part = multiset_partitions(tuple(pattern), stages)[int(np.asarray(result[2]))]
    split = np.asarray(result[3])[:stages]
    for block, j in zip(part, split.tolist(), strict=True):
        used = kinds[[p for p, c in enumerate(block) if c > 0]]
        if not np.array_equal(new[used, stages - 1, j - 1], old[used, stages - 1, j - 1]):
            return False
    return True


def seed_from_looser(child: MultisetSpace, candidates: Iterable[MultisetSpace]) -> int:
    """Seed ``child`` from every one of ``candidates`` (spaces of the same model, phase, request sizes, shapes, caps
    and perf model under another SLO; the caller keys them, most recent first); the number of placements copied.
    A candidate under a tighter SLO copies little (its entries are rarely all unchanged), and the check is exact
    either way."""
    return sum(seed_tighter(child, parent) for parent in candidates if parent is not child)
