"""A plan without baselines (a slider's position, a sweep's plan rows) leaves the baselines' single-GPU-type rows
out of the on-demand engine's sets and never places them (``OnDemandOptions.single_rows``): the same plan as with
them, and no single-GPU-type multiset placed for nobody."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import planning.allocate.ondemand as ondemand
import planning.api as api
from planning.allocate.ondemand import solve_on_demand
from planning.allocate.warm import WarmStart
from planning.catalog.schema import shape_gpu
from planning.pipeline import Reuse
from planning.pipeline import solve as pipeline_solve
from planning.resolve import resolve_scenario
from planning.whatif import DemandScale, DropGpu, SloScale, apply_variants

from .test_warm_whatif import _scenario


def _single_type(ts: Any) -> np.ndarray:
    """Per row of a template set: whether all its nodes are of one GPU type."""
    gpus = np.array([shape_gpu(s) for s in ts.shapes])
    return np.array([len(set(gpus[np.asarray(row) > 0].tolist())) == 1 for row in ts.usage], dtype=bool)


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_without_single_rows_the_plan_is_the_same(tiny: dict[str, Any], seed: int) -> None:
    ctx = api.engine_context()
    for variant in (None, DemandScale(1.5), SloScale(0.8), DropGpu("L40S")):
        scenario = _scenario(tiny, seed) if variant is None else apply_variants(_scenario(tiny, seed), [variant])
        resolved = resolve_scenario(scenario, ctx.catalog)
        full = solve_on_demand(ctx, resolved)
        lean = solve_on_demand(ctx, resolved, with_baselines=False)
        assert full is not None and lean is not None and full.sets is not None and lean.sets is not None
        assert full.masks is not None and lean.masks is not None
        assert lean.result.status == full.result.status, variant
        assert lean.result.total_per_hour == pytest.approx(full.result.total_per_hour, rel=1e-9), variant
        assert {k: v for k, v in lean.result.counts.items() if v} == {k: v for k, v in full.result.counts.items() if v}
        for ts_full, mask_full, ts_lean, mask_lean in zip(full.sets, full.masks, lean.sets, lean.masks, strict=True):
            assert mask_lean.all(), "without the baselines' rows every row of a set is an ILP row"
            assert set(ts_lean.ids) == {t for t, m in zip(ts_full.ids, mask_full, strict=True) if m}
            single = _single_type(ts_full)
            assert single.any() and (~mask_full).any(), "with them the sets carry rows no ILP holds"


def test_a_plan_without_baselines_places_no_single_type_rows(tiny: dict[str, Any],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline asks for the rows only when it runs baselines: with the rows' builder broken, a plan without
    baselines (cold and warm from a base plan, as a slider's position) still solves, and one with them fails."""
    ctx = api.engine_context()
    scenario = _scenario(tiny, 2)
    base = pipeline_solve(scenario, context=ctx, with_baselines=False)
    variant = apply_variants(scenario, [SloScale(0.9)])

    def broken(*_args: Any) -> np.ndarray:
        raise AssertionError("single-GPU-type rows built for a plan without baselines")

    monkeypatch.setattr(ondemand, "single_type_multisets", broken)
    monkeypatch.setattr(ondemand, "single_type_sets", broken)
    lean = pipeline_solve(variant, context=ctx, with_baselines=False,
                          reuse=Reuse(warm=WarmStart.from_result(base)))
    assert lean.status == "optimal"
    with pytest.raises(AssertionError, match="single-GPU-type rows"):
        pipeline_solve(variant, context=ctx, with_baselines=True)
    monkeypatch.undo()
    cold = pipeline_solve(variant, context=ctx, with_baselines=True)
    assert lean.comparable_cost == pytest.approx(cold.comparable_cost, rel=1e-9)


def test_single_rows_placed_on_a_pool_are_the_ones_placed_here(tiny: dict[str, Any]) -> None:
    """The pipeline places the single-GPU-type rows on the baselines' pool too (``SingleRows.pool``,
    ``planning.templates.placing``): the sets handed to the baselines and the plan are the ones placed here."""
    from concurrent.futures import ProcessPoolExecutor

    from planning.allocate.ondemand_sets import SingleRows
    from planning.spawning import spawn_context

    ctx = api.engine_context()
    resolved = resolve_scenario(_scenario(tiny, 1), ctx.catalog)
    here: list[Any] = []
    beside: list[Any] = []
    alone = solve_on_demand(ctx, resolved, on_single=here.append)
    with ProcessPoolExecutor(2, mp_context=spawn_context()) as pool:
        pooled = solve_on_demand(ctx, resolved, on_single=SingleRows(beside.append, pool))
    assert alone is not None and pooled is not None
    assert pooled.result.total_per_hour == alone.result.total_per_hour
    assert pooled.result.counts == alone.result.counts
    for a, b in zip(here[0], beside[0], strict=True):
        assert a.ids == b.ids and a.stages_json == b.stages_json
        assert np.array_equal(a.usage, b.usage) and np.array_equal(a.throughput, b.throughput)
