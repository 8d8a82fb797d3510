"""A multiset space's kept library rows and its cheaper search bound give what recomputing them gives.

``MultisetSpace.frame`` assembles each multiset's row once and answers later calls from the kept rows
(issue 41, alloc8); ``upper_bound`` skips the coverage bisection for rows it cannot change. Both are checked
against a reference computed here from the definitions, on seeded synthetic spaces, over overlapping calls in
changing orders and with a common-batch correction (the decode path)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from planning.templates.frame import assemble
from planning.templates.search import MultisetSpace
from planning.templates.synthetic import shape_tables

SHAPES = ["1xL4", "2xL4", "1xL40S", "2xL40S", "1xA10G", "1xH100"]


def _lowered(stages: list[str]) -> np.ndarray:
    """A deterministic common-batch correction (``MultisetSpace.correct``): a throughput read from the placement
    text, below the separable value for some placements and above it for others (the space keeps the minimum)."""
    return np.array([float(len(st) % 7) for st in stages])


def _space(seed: int, corrected: bool = False) -> MultisetSpace:
    rng = np.random.default_rng(seed)
    layers, weight, slo = (16, 30.0, 900.0) if seed % 2 else (24, 60.0, 1500.0)
    tables, mem = shape_tables(SHAPES, layers, weight, slo, 4)
    tables = tables * rng.uniform(0.7, 1.3, size=(len(SHAPES), 1, 1))
    return MultisetSpace(tuple(SHAPES), mem, tables, weight, layers, nmax=4, correct=_lowered if corrected else None)


def _reference_frame(sp: MultisetSpace, P: np.ndarray) -> pl.DataFrame:
    """The rows of ``P`` assembled afresh from their placements in one call, the correction applied to the
    placements of two or more stages with a positive separable throughput (as the code before kept rows)."""
    codes = list(dict.fromkeys(sp.codes(P).tolist()))
    tasks = [(sp.cache[c][1][0], sp.cache[c][1][1][None, :]) for c in codes]
    results = [tuple(np.asarray(r)[None, ...] for r in sp.cache[c][1][2]) for c in codes]
    df = assemble(list(sp.shapes), sp.mem_gb, tasks, results)  # type: ignore[arg-type]
    if sp.correct is None or df.height == 0:
        return df
    separable = df["throughput"].to_numpy()
    fixed = np.minimum(separable, _lowered(df["stages_json"].to_list()))
    deep = (df["S"].to_numpy() >= 2) & (separable > 0)
    return df.with_columns(pl.Series("throughput", np.where(deep, fixed, separable), dtype=pl.Float64))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("corrected", [False, True])
def test_frames_from_kept_rows_equal_fresh_assembly(seed: int, corrected: bool) -> None:
    sp = _space(seed, corrected)
    rng = np.random.default_rng(100 + seed)
    P = sp.all_multisets()
    assert P.shape[0] > 50
    for _ in range(5):  # overlapping subsets, shuffled, with repeats: some rows kept, some new each time
        pick = P[rng.choice(P.shape[0], size=P.shape[0] // 3, replace=True)]
        got = sp.frame(pick)
        assert got.columns == list(assemble(list(sp.shapes), sp.mem_gb, [], []).columns)
        assert got.equals(_reference_frame(sp, pick))
        assert got["template_id"].to_list() == sorted(got["template_id"].to_list())
    whole = sp.frame(P)
    assert whole.equals(_reference_frame(sp, P))
    assert sp.frame(P[:0]).height == 0
    if corrected:  # the correction lowered some rows (else this test would not exercise it)
        plain = _space(seed)
        plain.throughput(P)
        assert (whole["throughput"].to_numpy() < _reference_frame(plain, P)["throughput"].to_numpy()).any()


def _reference_upper_bound(sp: MultisetSpace, P: np.ndarray) -> np.ndarray:
    """UB(M) from its definition, every stage count bisected for every row (no skipped rows)."""
    cover = sp.cover  # builds sp.grid
    L, G = sp.layers, sp.grid.size
    out = np.zeros(P.shape[0])
    for i, row in enumerate(P):
        m = row[row < sp.K]
        if sp.mem_gb[m].sum() > sp.cap:
            continue
        best = sp.t1[m].sum() if sp.jmax[m, 0].sum() >= L else 0.0
        for S in range(2, min(sp.tables.shape[1], L, sp.nmax) + 1):
            if m.size < S or sp.jmax[m, S - 1].sum() < L:
                continue
            total = cover[m, S - 1, :].sum(axis=0)  # non-increasing in the grid point
            good = np.flatnonzero(total >= L - 1e-9)
            g = int(good.max()) + 1 if good.size else 0
            t_cov = sp.grid[g] if g < G else np.inf
            best = max(best, min(sp.area[m, S - 1].sum(), sp.first[m, S - 1].sum(), t_cov))
        out[i] = best
    return out


@pytest.mark.parametrize("seed", range(4))
def test_upper_bound_equals_its_definition_and_search_reads_the_same(seed: int) -> None:
    sp = _space(seed)
    P = sp.all_multisets()
    ub = sp.upper_bound(P)
    assert np.allclose(ub, _reference_upper_bound(sp, P), rtol=0, atol=1e-9 * max(1.0, float(ub.max())))
    for demand in (0.5 * float(np.median(ub[ub > 0])), float(ub.max()) * 2, 1e-3):
        capped = sp.upper_bound(P, demand)  # what the search asks: rows stop once they reach the demand
        assert np.array_equal(np.minimum(capped, demand), np.minimum(ub, demand))
        assert np.array_equal(capped > 0, ub > 0)
        assert np.all(capped <= ub)
