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


def test_provenance_badges_carry_the_estimates_bands() -> None:
    """The Plan page's per-GPU badges and every estimate show the same validation-derived bands (a roofline-only
    GPU never below band_roofline); they used to show the kernel-fit errors (A10G ±13 % next to a ±40 % estimate)."""
    scenario = api.load_preset_scenario("coral-core")
    result = api.solve(scenario, with_baselines=False)
    ctx = api.engine_context()
    wide = ctx.perf.calibration.settings.band_roofline
    dtypes = {ctx.catalog.models[m.id].dtype or "bf16" for m in scenario.models}
    for gpu, text in result.provenance.items():
        bands = ctx.perf.kind_bands(gpu, "bf16")
        kinds = [ctx.perf.kind_bands(gpu, d) for d in dtypes]  # the badge shows the widest of the plan's dtypes
        widest = {k: max(b[k] for b in kinds) for k in ("ttft", "tpot")}
        assert f"±{widest['ttft']:.0%} prefill" in text and f"±{widest['tpot']:.0%} decode" in text, (gpu, text)
        est = ctx.perf.estimate("llama-3-8b", gpu, input_len=512, output_len=128)
        assert math.isclose(est.band["prefill_ms"], bands["ttft"]) and math.isclose(est.band["decode_step_ms"],
                                                                                    bands["tpot"])
    assert result.provenance["A10G"].startswith("roofline") and bands is not None
    assert ctx.perf.kind_bands("A10G", "bf16")["tpot"] >= wide
