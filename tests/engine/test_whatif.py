"""What-if variants: text → frozen spec → new scenario; the CLI's --variant; comparisons use the one savings rule."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from planning import api, whatif
from planning.cli import main
from planning.errors import PlanningError
from planning.result import BaselineSummary, PlanResult
from planning.scenario import Scenario


def test_parse_each_text_form() -> None:
    assert whatif.parse_variant("demand=2") == whatif.DemandScale(2.0)
    assert whatif.parse_variant("demand=0.5@llama-3-8b") == whatif.DemandScale(0.5, "llama-3-8b")
    assert whatif.parse_variant("drop-gpu=L40S") == whatif.DropGpu("L40S")
    assert whatif.parse_variant("remove_gpu=L4") == whatif.DropGpu("L4")
    assert whatif.parse_variant("drop-region=aws:us-east-2") == whatif.DropRegion("aws:us-east-2")
    assert whatif.parse_variant("price=-20%") == whatif.PriceChange(-20.0)
    assert whatif.parse_variant("availability=0.5") == whatif.AvailabilityScale(0.5)
    assert whatif.parse_variant("slo=0.8") == whatif.SloScale(0.8)
    assert whatif.parse_variant("budget=$100") == whatif.Budget(100.0)


@pytest.mark.parametrize("text, field", [("demand", "variant"), ("demand=two", "demand"), ("speed=2", "variant")])
def test_bad_text_names_the_field_and_the_fix(text: str, field: str) -> None:
    with pytest.raises(PlanningError) as err:
        whatif.parse_variant(text)
    assert err.value.field == field
    assert err.value.fix


def test_variants_make_new_scenarios_and_leave_the_input_alone(tiny: dict[str, Any]) -> None:
    base = Scenario.from_dict({**tiny, "regions": ["aws:us-east-2", "aws:us-west-2"]})
    out = whatif.apply_variants(base, [whatif.DemandScale(2.0), whatif.DropGpu("L4"), whatif.PriceChange(-25),
                                       whatif.DropRegion("aws:us-west-2"), whatif.Budget(50.0)])
    assert base.models[0].demand.rate_rps == 2 and base.exclude_gpus == () and base.price_scale == 1.0
    assert out.models[0].demand.rate_rps == pytest.approx(4.0)
    assert out.exclude_gpus == ("L4",)
    assert out.price_scale == pytest.approx(0.75)
    assert out.regions == ("aws:us-east-2",)
    assert (out.objective.kind, out.objective.budget_per_hour) == ("served", 50.0)
    assert out.name.startswith(base.name + " (demand ×2")
    slo = whatif.apply_variant(base, whatif.SloScale(0.5)).models[0].slo
    assert (slo.prefill_ms, slo.decode_ms) == (750, 40)
    assert whatif.apply_variant(base, whatif.AvailabilityScale(0.5)).availability_scale == 0.5


@pytest.mark.parametrize("variant", [whatif.DemandScale(0.0), whatif.DemandScale(2.0, "nope"), whatif.PriceChange(-100),
                                     whatif.Budget(0.0), whatif.SloScale(-1), whatif.AvailabilityScale(-1),
                                     whatif.DropRegion("aws:us-east-2"), whatif.DropGpu("")])
def test_invalid_variants_are_refused(tiny: dict[str, Any], variant: whatif.Variant) -> None:
    with pytest.raises(PlanningError):
        whatif.apply_variant(Scenario.from_dict(tiny), variant)


def test_make_variant_covers_every_page_kind() -> None:
    for kind in whatif.KINDS:
        assert whatif.label(whatif.make_variant(kind, k=2, gpu="L4", region="r", pct=10, budget=5))
    with pytest.raises(PlanningError):
        whatif.make_variant("nope")


def test_cli_variant_changes_the_planned_scenario(tiny: dict[str, Any], tmp_path: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny))
    assert main(["solve", str(path), "--json"]) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(["solve", str(path), "--json", "--variant", "demand=2", "--variant", "drop-gpu=A10G"]) == 0
    varied = json.loads(capsys.readouterr().out)
    assert varied["scenario"]["exclude_gpus"] == ["A10G"]
    assert varied["scenario"]["models"][0]["demand"]["rate_rps"] == pytest.approx(4.0)
    assert "A10G" not in {c["gpu"] for c in varied["capacity"]}
    assert varied["cost_per_hour"] >= base["cost_per_hour"]  # twice the demand on fewer GPU types
    assert main(["solve", str(path), "--variant", "speed=2"]) == 2
    assert "variant" in capsys.readouterr().err


def _result(cost: float, served: float, baselines: tuple[BaselineSummary, ...]) -> PlanResult:
    return PlanResult(status="optimal", objective="cost", cost_per_hour=cost, provisioning_per_hour=cost,
                      penalty_per_hour=0.0, served_fraction=served, mip_gap=0.0, baselines=baselines)


def test_savings_only_between_plans_serving_the_same_demand() -> None:
    full = BaselineSummary("single:L4", 80.0, 1.0, True)
    short = BaselineSummary("single:T4", 10.0, 0.4, False)
    memp = BaselineSummary("memp", 70.0, 1.0, True)
    served_all = _result(60.0, 1.0, (full, short, memp))
    assert served_all.savings_vs(full) == pytest.approx(25.0)
    assert served_all.savings_vs(short) is None  # the baseline falls short: not comparable
    assert served_all.best_baseline() == memp and not memp.homogeneous
    budget_limited = _result(30.0, 0.5, (full,))
    assert budget_limited.savings_vs(full) is None  # half the demand vs all of it: not comparable
    frame = api.comparison_frame({"base": served_all, "budget": budget_limited})
    saving = frame.set_index(["variant", "method"])["savings_pct"]
    assert saving[("base", "single:L4")] == pytest.approx(25.0)
    assert saving[("base", "memp")] == pytest.approx(100 * 10 / 70)
    assert saving.isna()[("budget", "single:L4")] and saving.isna()[("base", "single:T4")]
    assert set(frame["prices"]) == {"on-demand"}
    spot = replace(served_all, scenario={**(served_all.scenario or {}), "pricing": "spot"})
    assert set(api.comparison_frame({"spot": spot})["prices"]) == {"spot"}  # labelled on every row


def test_slider_positions_their_neighbours_and_distances() -> None:
    """Issue 41: the What-if page plans the positions one step from the sliders' ahead of the user."""
    rest = api.slider_position()
    assert api.slider_variants(**api.slider_values(rest)) == []  # at rest: the base scenario
    assert api.slider_position(slo=0.1 + 0.2 + 0.4) == api.slider_position(slo=0.7)  # one grid, one position
    near = api.slider_neighbours(rest)
    assert len(near) == 2 * len(api.VARIANT_SLIDERS) and len(set(near)) == len(near)
    assert all(api.slider_steps(rest, p) == 1 for p in near)
    assert near[0] == api.slider_position(demand=1.25) and near[1] == api.slider_position(demand=0.75)
    edge = api.slider_position(demand=4.0, availability_pct=10.0)  # at two ends: one neighbour each there
    assert api.slider_position(demand=4.25, availability_pct=10.0) not in api.slider_neighbours(edge)
    assert len(api.slider_neighbours(edge)) == 2 * len(api.VARIANT_SLIDERS) - 2
    assert api.slider_steps(rest, api.slider_position(demand=2.0, price_pct=-20.0)) == 4 + 4
    down = api.slider_position(price_pct=-5.0)  # the user just moved Prices down: going on that way comes first
    after = api.slider_neighbours(down, came_from=rest)
    assert after[0] == api.slider_position(price_pct=-10.0) and sorted(after) == sorted(api.slider_neighbours(down))
    assert api.slider_neighbours(down, came_from=down) == api.slider_neighbours(down)
    with pytest.raises(PlanningError) as err:
        api.slider_position(speed=2.0)
    assert err.value.field == "slider" and "demand" in str(err.value)
