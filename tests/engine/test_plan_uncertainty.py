"""Plan uncertainty: instance bands come from the validation-derived bands, and the cost range brackets the cost."""

from __future__ import annotations

import math

from planning import api


def test_bands_and_cost_range_of_a_plan() -> None:
    result = api.solve(api.load_preset_scenario("coral-core"))
    frame, totals = api.plan_uncertainty(result)
    assert len(frame) == len(result.instances)
    ctx = api.engine_context()
    for inst, row in zip(result.instances, frame.itertuples(), strict=True):
        dtype = ctx.catalog.models[inst.model].dtype
        expected = max(ctx.perf.kind_bands(g, dtype)["throughput"] for g in inst.gpus)
        assert math.isclose(row.band, expected)
        assert row.capacity_low < row.capacity < row.capacity_high
    assert totals["band"] > 0
    assert 0 < totals["cost_low"] < totals["cost_per_hour"] == result.comparable_cost < totals["cost_high"]
    # The band is a factor both ways: the cost range is cost / (1 + b) .. cost * (1 + b), finite for any b.
    assert math.isclose(totals["cost_low"] * totals["cost_high"], totals["cost_per_hour"] ** 2)
    for row in frame.itertuples():
        assert math.isclose(row.capacity_low * row.capacity_high, row.capacity ** 2)
        assert row.capacity_low > 0
