"""Simulation figures (pure functions) and the CLI, which must give the API's answer."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from planning import api
from planning.cli import main
from planning.errors import PlanningError
from planning.perf import PerfModel
from planning.simulate import SimConfig, SimResult, simulate_plan
from planning.viz._common import EMPTY_NAME
from planning.viz.simulate import (
    attainment_figure,
    goodput_figure,
    instance_load_figure,
    latency_cdf_figure,
    simulation_kpis,
    variants_attainment_figure,
)
from tests.simulate.conftest import small_plan


@pytest.fixture(scope="module")
def result() -> SimResult:
    plan, sc = small_plan()
    return simulate_plan(plan, sc, SimConfig(duration_s=60, seed=2), perf=PerfModel())


def test_cdf_has_one_line_per_model_and_the_slo_line(result: SimResult) -> None:
    fig = latency_cdf_figure(result, "ttft")
    assert isinstance(fig, go.Figure)
    assert [t.name for t in fig.data] == ["llama-3-8b", "SLO 1000 ms (llama-3-8b)"]
    xs = list(fig.data[0].x)
    assert xs == sorted(xs) and len(xs) == 101
    assert list(fig.data[1].x) == [1000, 1000]  # the TTFT SLO, a dashed line named in the legend
    tpot = latency_cdf_figure(result, "tpot")
    assert list(tpot.data[1].x) == [60, 60] and tpot.data[1].line.dash == "dash"
    with pytest.raises(PlanningError, match="metric"):
        latency_cdf_figure(result, "e2e")


def test_bars_and_kpis(result: SimResult) -> None:
    att = attainment_figure(result)
    assert [t.name for t in att.data] == ["TTFT within SLO", "TPOT within SLO", "both (attainment)"]
    assert att.data[2].y[0] == pytest.approx(result.models[0].attainment)
    good = goodput_figure(result)
    assert good.data[1].y[0] <= good.data[0].y[0]
    load = instance_load_figure(result)
    assert len(load.data[0].y) == len(result.instances) == 4
    kpis = simulation_kpis(result)
    assert kpis["requests"] == result.requests and 0 <= kpis["attainment"] <= 1


def test_variants_figure_colours_by_target(result: SimResult) -> None:
    from dataclasses import replace

    fig = variants_attainment_figure({"plan": result, "x2 demand": replace(result, attainment=0.5)})
    assert list(fig.data[0].x) == ["plan", "x2 demand"]
    assert fig.data[0].marker.color[1] == "#de2d26"
    assert variants_attainment_figure({}).layout.annotations[0].name == EMPTY_NAME


def test_empty_and_bad_inputs(result: SimResult) -> None:
    from dataclasses import replace

    empty = replace(result, models=(), instances=())
    assert attainment_figure(empty).layout.annotations[0].name == EMPTY_NAME
    assert latency_cdf_figure(empty).layout.annotations[0].name == EMPTY_NAME
    with pytest.raises(PlanningError):
        goodput_figure({"attainment": 1})  # type: ignore[arg-type]


def test_cli_benchmark_equals_api(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--model", "llama-3-8b", "--gpu", "L40S", "--input-len", "512", "--output-len", "64",
            "--concurrency", "4", "--json"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)
    ref = api.simulate_benchmark("llama-3-8b", "L40S", input_len=512, output_len=64, concurrency=4).to_dict()
    cli.pop("wall_s"), ref.pop("wall_s")
    assert cli == pytest.approx(ref)
    for key in ("ttft_ms_mean", "itl_ms_mean", "output_tokens_per_s", "ttft_ms_p90", "itl_ms_p90"):
        assert key in cli
    assert main([*argv, "--scheduling", "prefill-first"]) == 0
    first = json.loads(capsys.readouterr().out)
    ref = api.simulate_benchmark("llama-3-8b", "L40S", input_len=512, output_len=64, concurrency=4,
                                 scheduling="prefill-first").to_dict()
    first.pop("wall_s"), ref.pop("wall_s")
    assert first == pytest.approx(ref) and first["itl_ms_mean"] > cli["itl_ms_mean"]


def test_cli_plan_file_equals_api(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    plan, _sc = small_plan()
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json(), encoding="utf-8")
    assert main(["simulate", str(path), "--duration", "30", "--seed", "4", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    ref = api.simulate(plan, duration_s=30, seed=4)
    assert cli["requests"] == ref.requests
    assert cli["attainment"] == pytest.approx(ref.attainment)
    assert [m["ttft_ms"]["p90"] for m in cli["models"]] == pytest.approx([m.ttft_ms.p90 for m in ref.models])


def test_cli_errors_name_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate"]) == 2
    assert "nothing to simulate" in capsys.readouterr().err
    assert main(["simulate", "--model", "llama-3-8b", "--gpu", "H100"]) == 2
    assert "input-len" in capsys.readouterr().err
