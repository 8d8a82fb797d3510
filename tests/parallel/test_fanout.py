"""Scenario fan-out (issue 29 §2): sweep points and what-if variants on the process pool give the sequential
answers (the Ray cases run in tests/parallel/test_ray_cluster.py and test_backends.py)."""

from __future__ import annotations

import threading

import pandas as pd
import pytest

from planning import api
from planning.context import Cancelled
from planning.errors import PlanningError
from planning.whatif import DemandScale, DropGpu, PriceChange

PRESET = "melange-arena"


def _frame(results: dict[str, object]) -> pd.DataFrame:
    return api.comparison_frame(results)  # type: ignore[arg-type]


def test_sweep_on_the_pool_equals_the_sequential_sweep() -> None:
    scenario = api.load_preset_scenario(PRESET)
    here = api.sweep(scenario, "demand", [0.5, 1.0, 2.0])
    seen: list[str] = []
    pooled = api.sweep(scenario, "demand", [0.5, 1.0, 2.0], workers=2, progress=lambda _f, m: seen.append(m))
    assert pooled.equals(here)
    assert sorted(seen) == ["demand ×0.5", "demand ×1", "demand ×2"]
    assert set(here.x) == {0.5, 1.0, 2.0} and here[here.method == "Plan (mixed templates)"].feasible.all()


def test_what_if_on_the_pool_equals_the_sequential_what_if() -> None:
    scenario = api.load_preset_scenario(PRESET)
    variants = [DemandScale(2.0), DropGpu("A100-80G"), PriceChange(-20.0)]
    here = api.what_if(scenario, variants)
    pooled = api.what_if(scenario, variants, workers=2)
    assert list(here) == list(pooled) == ["base", "demand ×2 (all models)", "without A100-80G", "prices -20 %"]
    pd.testing.assert_frame_equal(_frame(pooled), _frame(here))
    for name in here:  # the plans themselves, not only their costs
        assert [(i.template_id, i.region, i.count) for i in pooled[name].instances] == \
            [(i.template_id, i.region, i.count) for i in here[name].instances], name
    # and each case is the plan a direct solve gives (the fan-out changes where, not what)
    alone = api.solve(api.apply_variants(scenario, [DropGpu("A100-80G")]))
    assert pooled["without A100-80G"].comparable_cost == pytest.approx(alone.comparable_cost, rel=1e-9)
    assert here["demand ×2 (all models)"].comparable_cost > here["base"].comparable_cost


def test_sharing_threshold_sweep_on_the_pool_equals_the_sequential_sweep() -> None:
    """Sharing packings fan out too: one checked shared plan per threshold, the same rows on the pool as here."""
    from planning.sharing import threshold_sweep

    scenario = api.load_preset_scenario("long-tail")
    values = [0.2, 0.5, None]
    here = threshold_sweep(scenario, values)
    seen: list[str] = []
    pooled = threshold_sweep(scenario, values, workers=2, progress=lambda _f, m: seen.append(m))
    assert pooled == here
    assert sorted(seen) == sorted(["sharing threshold 0.2 req/s", "sharing threshold 0.5 req/s",
                                   "sharing threshold: none"])
    assert [r["threshold_rps"] for r in here] == values
    assert here[0]["sharing_plan_models"] < here[-1]["sharing_plan_models"]  # the shared plan's, returned or not


def test_what_if_groups_changes_and_refuses_bad_input() -> None:
    scenario = api.load_preset_scenario(PRESET)
    out = api.what_if(scenario, {"cheap and busy": [DemandScale(2.0), PriceChange(-50.0)]}, base=False)
    assert list(out) == ["cheap and busy"]
    with pytest.raises(PlanningError, match="variants"):
        api.what_if(scenario, [])
    with pytest.raises(PlanningError, match="given twice"):
        api.what_if(scenario, [DemandScale(2.0), DemandScale(2.0)])
    with pytest.raises(PlanningError):  # a GPU the scenario does not have fails before anything runs
        api.what_if(scenario, [DropGpu("NOPE")], workers=2)


def test_a_cancelled_fan_out_stops() -> None:
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        api.what_if(api.load_preset_scenario(PRESET), [DemandScale(2.0)], workers=2, cancel=ev)
    with pytest.raises(Cancelled):
        api.sweep(api.load_preset_scenario(PRESET), "slo", [1.0, 2.0], cancel=ev)


def test_planning_errors_cross_process_boundaries_as_themselves() -> None:
    import pickle

    from planning.errors import UnknownIdError

    err = UnknownIdError("gpu", "NOPE", ["L4", "L40S"])
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is UnknownIdError and str(back) == str(err)
    assert (back.field, back.value, back.closest) == ("gpu", "NOPE", err.closest)
