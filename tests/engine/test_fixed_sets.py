"""The fixing ILP's template sets: the single-GPU-type rows kept across attempts and the vectorised row codes give
exactly the sets and masks of building every attempt's rows afresh."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from planning.allocate.ondemand import _fixed_sets, row_codes, template_set
from planning.catalog.schema import shape_gpu

from .test_on_demand import _instance


def _reference_codes(space, ts) -> list[int]:  # type: ignore[no-untyped-def]
    """The per-row definition: each row's sorted multiset, padded with K, times ``pow``."""
    out = []
    for i in range(len(ts)):
        row = np.repeat(np.arange(space.K), ts.usage[i])
        pad = np.full(space.nmax, space.K, dtype=np.int64)
        pad[: row.size] = row
        out.append(int(pad @ space.pow))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_row_codes_equal_their_definition(seed: int) -> None:
    priced, _offers = _instance(seed)
    for pg in priced:
        ts = template_set(pg, pg.space.all_multisets())
        assert len(ts) > 0
        assert row_codes(pg.space, ts).tolist() == _reference_codes(pg.space, ts)


@pytest.mark.parametrize("seed", range(4))
def test_fixed_sets_over_attempts_equal_sets_built_afresh(seed: int) -> None:
    priced, _offers = _instance(seed)
    rng = np.random.default_rng(seed)
    run = SimpleNamespace(priced=priced, cancel=None, provenance=None)
    single = []
    for pg in priced:
        gpus = np.array([shape_gpu(s) for s in pg.space.shapes])
        single.append(np.concatenate([pg.space.all_multisets(gpus == g) for g in sorted(set(gpus.tolist()))]))
    frames: dict = {}
    everything = [pg.space.all_multisets() for pg in priced]
    for share in (0.0, 0.2, 0.6):  # attempts keep more and more multisets (none at first)
        kept = [P[rng.uniform(size=len(P)) < share] for P in everything]
        sets, masks = _fixed_sets(run, kept, single, frames)  # type: ignore[arg-type]
        for pg, P, S1, ts, mask in zip(priced, kept, single, sets, masks, strict=True):
            fresh = template_set(pg, np.concatenate([P, S1]) if P.size else S1)
            assert ts.ids == fresh.ids and ts.stages_json == fresh.stages_json and ts.provenance == fresh.provenance
            assert np.array_equal(ts.usage, fresh.usage) and np.array_equal(ts.throughput, fresh.throughput)
            keys = set(pg.space.codes(P).tolist())
            assert mask.tolist() == [c in keys for c in _reference_codes(pg.space, fresh)]
            assert mask.sum() == len({c for c in keys if c in set(_reference_codes(pg.space, fresh))})
    assert len(frames) == len(priced)  # one single-GPU-type frame per group, built once
