"""The timeline on the scenario's own demand: a series gives the shape, the scenario the rates and sizes."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

from planning import api
from planning.errors import PlanningError
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, from_trace, load_demand, parse_epoch_table
from planning.timeline.matching import match_demand, match_series
from planning.traces import parse_trace
from tests.timeline.conftest import TWO_MODELS

DATA = Path(__file__).resolve().parents[2] / "data" / "demand"


def _table(model: str, rows: list[tuple[float, float, float]]) -> object:
    text = "epoch_start,rate_rps,input_len,output_len\n" + "\n".join(
        f"{h},{r},{i},{o}" for h, (r, i, o) in enumerate(rows))
    return parse_epoch_table(model, text, 1.0)


def test_peak_match_keeps_the_shape_and_sets_the_busiest_epoch() -> None:
    s = _table("m", [(0.5, 100, 20), (1.0, 300, 40), (0.25, 200, 30)])
    p = match_series(s, 20.0, 1000.0, 300.0, "peak")
    assert p.rate_rps == pytest.approx((10.0, 20.0, 5.0))
    assert max(p.rate_rps) == 20.0
    # every epoch at the scenario's request sizes: the busiest one is exactly the scenario's demand
    assert p.input_len == (1000.0,) * 3 and p.output_len == (300.0,) * 3
    assert "20 req/s (peak)" in p.source


def test_mean_match_sets_the_horizon_mean() -> None:
    s = _table("m", [(0.5, 100, 20), (1.0, 100, 20), (1.5, 100, 20)])
    p = match_series(s, 20.0, 1000.0, 300.0, "mean")
    assert sum(p.rate_rps) / len(p) == pytest.approx(20.0)
    assert p.rate_rps == pytest.approx((10.0, 20.0, 30.0))
    assert p.input_len == (1000.0,) * 3 and p.output_len == (300.0,) * 3


def test_absolute_keeps_the_trace_numbers() -> None:
    s = load_demand("llama-3-8b", DATA / "azure_conv_day.csv", 1.0)
    assert match_series(s, 20.0, 1000.0, 300.0, "absolute") is s


def test_histogram_buckets_scale_with_the_sizes_and_rates() -> None:
    text = "arrival_s,input_tokens,output_tokens\n" + "\n".join(
        f"{k * 10},{100 if k % 2 else 1000},{10 if k % 2 else 50}" for k in range(360))
    s = from_trace("m", parse_trace(text, source="two sizes"), 0.5, histogram=True)
    assert len(s.buckets) == 2
    p = match_series(s, 12.0, 1100.0, 120.0, "peak")
    for row, rate in zip(p.bucket_rates, p.rate_rps, strict=True):
        assert sum(row) == pytest.approx(rate)
    ratio_in = p.buckets[0][0] / s.buckets[0][0]
    assert all(b[0] / a[0] == pytest.approx(ratio_in) for a, b in zip(s.buckets, p.buckets, strict=True))
    assert p.design_sizes() == pytest.approx((1100.0, 120.0))  # the mix kept, its mean the scenario's


def test_unknown_match_and_unknown_model_name_the_field(small: Scenario) -> None:
    s = _table("llama-3-8b", [(1.0, 100, 20)])
    with pytest.raises(PlanningError, match="demand_match"):
        match_demand(small, [s], "median")
    with pytest.raises(PlanningError, match="not a model of scenario"):
        match_demand(small, [_table("qwen3-32b", [(1.0, 100, 20)])], "peak")


def test_constant_demand_costs_the_constant_plan_every_epoch(small: Scenario) -> None:
    """Issue 38 §3 target: a flat series at the trace's own (small) numbers, matched to the scenario, plans the
    scenario's demand in every epoch, so every epoch costs what ``api.solve`` costs for the scenario."""
    scenario = replace(small, options=replace(small.options, K=0.0))
    flat = [_table(m.id, [(0.93, 700, 28)] * 3) for m in scenario.models]
    res = api.timeline(scenario, flat, options=TimelineOptions(baselines=()))
    constant = api.solve(scenario, with_baselines=False)
    assert constant.status == "optimal"
    assert res.demand_match == "peak"
    for e in res.epochs:
        assert e.cost_per_hour == pytest.approx(constant.cost_per_hour, rel=1e-6)
        for m in scenario.models:
            assert e.demand_rps[m.id] == pytest.approx(m.demand.rate_rps)
    assert res.static_peak_cost_per_hour == pytest.approx(constant.cost_per_hour, rel=1e-6)
    frame = res.epochs_frame()
    assert set(frame["trace_rps"]) == {0.93}  # the series' own rate, shown beside the planned one
    assert set(frame["demand_rps"]) == {m.demand.rate_rps for m in scenario.models}


def test_absolute_plans_the_trace_rate(small: Scenario) -> None:
    scenario = replace(small, options=replace(small.options, K=0.0))
    flat = [_table(m.id, [(0.5, 700, 28)] * 2) for m in scenario.models]
    res = api.timeline(scenario, flat, options=TimelineOptions(baselines=(), static_peak=False),
                       demand_match="absolute")
    assert res.demand_match == "absolute"
    assert all(e.demand_rps[m.id] == pytest.approx(0.5) for e in res.epochs for m in scenario.models)
    roundtrip = api.timeline_result(res.to_dict())
    assert roundtrip.demand_match == "absolute" and roundtrip.trace_rps == res.trace_rps


def test_cli_match_mean_and_the_trace_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from planning.cli import main
    from planning.scenario import save_scenario

    scenario = save_scenario(Scenario.from_dict(TWO_MODELS), tmp_path / "small.yaml")
    table = tmp_path / "m.csv"
    table.write_text("epoch_start,rate_rps,input_len,output_len\n0,1,500,20\n2,3,500,20\n", encoding="utf-8")
    assert main(["timeline", str(scenario), "--demand", f"llama-3-8b={table}", "--epoch", "2h", "--match", "mean",
                 "--no-baselines", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    llama = [r for r in rows if r["model"] == "llama-3-8b"]
    assert [float(r["trace_rps"]) for r in llama] == pytest.approx([1.0, 3.0])
    assert [float(r["demand_rps"]) for r in llama] == pytest.approx([2.0, 6.0])  # mean = the scenario's 4 req/s
    with pytest.raises(SystemExit) as bad:  # argparse names the choices
        main(["timeline", str(scenario), "--demand", f"llama-3-8b={table}", "--match", "median"])
    assert bad.value.code == 2


def test_peak_matched_static_plan_is_the_constant_plan(small: Scenario) -> None:
    """With the busiest epoch at the scenario's demand, the plan sized for the peak is the scenario's own plan, so
    the timeline's month can no longer come out below the constant plan's static peak (issue 38 §3)."""
    scenario = replace(small, options=replace(small.options, K=0.0))
    shaped = [_table(m.id, [(0.3, 400, 20), (0.93, 900, 35), (0.6, 700, 28)]) for m in scenario.models]
    res = api.timeline(scenario, shaped, options=TimelineOptions(baselines=()))
    constant = api.solve(scenario, with_baselines=False)
    assert res.static_peak_cost_per_hour == pytest.approx(constant.cost_per_hour, rel=1e-6)
    busiest = res.epochs[1]
    assert busiest.cost_per_hour == pytest.approx(constant.cost_per_hour, rel=1e-6)
    assert all(e.cost_per_hour <= constant.cost_per_hour + 1e-9 for e in res.epochs)


def test_job_request_carries_the_matching_and_refuses_unknown_options(small: Scenario) -> None:
    request = api.timeline_request(small, {"llama-3-8b": {"sample": "azure_conv_day"}}, demand_match="mean")
    assert request["demand_match"] == "mean" and request["epoch"] == "1h"
    with pytest.raises(PlanningError, match="epok"):
        api.timeline_request(small, {}, epok="1h")
    with pytest.raises(PlanningError, match="demand_match"):
        api.timeline_request(small, {}, demand_match="median")
