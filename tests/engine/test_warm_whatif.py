"""What-ifs started from the base plan (planning.allocate.warm, pipeline.Reuse): the answer is the cold one.

A warm start only adds the base plan's templates as first columns; pricing and the certificate still cover every
template. On seeded small scenarios, every kind of variant solved warm costs what it costs cold.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import planning.api as api
from planning.allocate import pricing
from planning.allocate.warm import WarmStart
from planning.pipeline import Reuse
from planning.pipeline import solve as pipeline_solve
from planning.scenario import Scenario
from planning.whatif import (
    AvailabilityScale,
    DemandScale,
    DropGpu,
    DropRegion,
    PriceChange,
    SloScale,
    apply_variants,
)

VARIANTS = [DemandScale(2.0), DropGpu("L40S"), PriceChange(-20), SloScale(0.8), AvailabilityScale(0.5),
            DropRegion("aws:us-west-2")]


def _scenario(tiny: dict[str, Any], seed: int) -> Scenario:
    rng = np.random.default_rng(seed)
    data = copy.deepcopy(tiny)
    data["regions"] = ["aws:us-east-2", "aws:us-west-2"]
    model = data["models"][0]
    model["demand"]["rate_rps"] = float(rng.uniform(1.0, 6.0))
    model["slo"]["decode_ms"] = float(rng.choice([60, 80, 100]))
    return Scenario.from_dict(data)


@pytest.mark.parametrize("seed", [0, 1])
def test_warm_variants_cost_what_cold_ones_cost(tiny: dict[str, Any], seed: int) -> None:
    ctx = api.engine_context()
    base = _scenario(tiny, seed)
    base_plan = pipeline_solve(base, context=ctx, with_baselines=False)
    assert base_plan.status == "optimal"
    warm = WarmStart.from_result(base_plan)
    assert len(warm) > 0
    for variant in VARIANTS:
        scenario = apply_variants(base, [variant])
        cold = pipeline_solve(scenario, context=ctx, with_baselines=False)
        hot = pipeline_solve(scenario, context=ctx, with_baselines=False, reuse=Reuse(warm=warm))
        assert hot.status == cold.status, variant
        if cold.has_plan:
            assert hot.comparable_cost == pytest.approx(cold.comparable_cost, rel=1e-6), variant
            assert hot.served_fraction == pytest.approx(cold.served_fraction, abs=1e-9), variant


def test_warm_rows_follow_the_variant_space() -> None:
    warm = WarmStart({"m/decode": ((("1xL4", 2),), (("1xA10G", 1), ("1xL4", 1)), (("1xL40S", 3),))})
    rows = warm.rows("m/decode", ("1xA10G", "1xL4"), nmax=3)  # L40S dropped: its column goes
    assert rows is not None
    assert rows.tolist() == [[1, 1, 2], [0, 1, 2]]  # shape indices ascending, padded with len(shapes)
    assert warm.rows("m/decode", ("1xA10G", "1xL4", "1xL40S"), nmax=2) is not None
    assert len(warm.rows("m/decode", ("1xA10G", "1xL4", "1xL40S"), nmax=2)) == 2  # 3 nodes > nmax: dropped
    assert warm.rows("other/prefill", ("1xL4",), nmax=3) is None
    both = WarmStart.union([warm, None, WarmStart({"m/decode": ((("1xL4", 2),),), "m/prefill": ((("1xL4", 1),),)})])
    assert len(both) == 4


def test_what_if_here_gives_the_cold_answers(tiny: dict[str, Any]) -> None:
    base = _scenario(tiny, 2)
    results = api.what_if(base, [DemandScale(2.0), DropGpu("L40S")])
    for name, variant in (("demand ×2 (all models)", DemandScale(2.0)), ("without L40S", DropGpu("L40S"))):
        cold = api.solve(apply_variants(base, [variant]), cache=False)
        assert results[name].status == cold.status
        assert results[name].comparable_cost == pytest.approx(cold.comparable_cost, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_tighter_what_if_from_its_base_costs_its_cold_solve(tiny: dict[str, Any], seed: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """SLOs × 0.8 warm from the base plan (its spaces seeded from the base's) is proven optimal at the cost of the
    same variant solved in a process whose spaces never saw the base (no seed)."""
    ctx = api.engine_context()
    base = _scenario(tiny, seed)
    variant = apply_variants(base, [SloScale(0.8)])
    monkeypatch.setattr(pricing, "_SPACES", type(pricing._SPACES)())
    cold = pipeline_solve(variant, context=ctx, with_baselines=False)
    monkeypatch.setattr(pricing, "_SPACES", type(pricing._SPACES)())
    base_plan = pipeline_solve(base, context=ctx, with_baselines=False)
    placed_base = sum(len(sp.cache) for sp in pricing._SPACES.values())
    hot = pipeline_solve(variant, context=ctx, with_baselines=False, reuse=Reuse(warm=WarmStart.from_result(base_plan)))
    assert hot.status == cold.status == "optimal"
    assert hot.comparable_cost == pytest.approx(cold.comparable_cost, rel=1e-9)
    assert hot.stats["templates_placed_now"] < cold.stats["templates_placed_now"]  # the seed copied some
    assert placed_base > 0
