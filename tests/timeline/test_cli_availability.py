"""CLI `planning timeline` (JSON/CSV contract, errors) and availability series (step function, spot rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planning.cli import main
from planning.scenario import Scenario, save_scenario
from planning.timeline import load_series
from tests.timeline.conftest import TWO_MODELS

DATA = Path(__file__).resolve().parents[2] / "data" / "demand"


def _scenario_file(tmp_path: Path) -> Path:
    return save_scenario(Scenario.from_dict(TWO_MODELS), tmp_path / "small.yaml")


def test_cli_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "m.csv"
    table.write_text("epoch_start,rate_rps,input_len,output_len\n0,4,1155,211\n2,1,1155,211\n", encoding="utf-8")
    code = main(["timeline", str(_scenario_file(tmp_path)), "--demand", f"llama-3-8b={table}",
                 "--demand", f"phi-4={DATA / 'azure_code_day.csv'}", "--epoch", "2h", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("epochs", "total_cost", "static_peak_total_cost", "baselines_total_cost"):
        assert key in out
    assert len(out["epochs"]) == 12  # the 24-h sample sets the horizon; the 4-h table holds its last value
    assert {"start", "cost_per_hour", "served_fraction", "nodes_started", "nodes_stopped"} <= set(out["epochs"][0])
    assert out["total_cost"] <= out["static_peak_total_cost"] + 1e-6
    assert set(out["baselines_total_cost"]) == {"Homo (re-planned)", "Homo-ILP (re-planned)"}


def test_cli_csv_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _scenario_file(tmp_path)
    assert main(["timeline", str(f), "--demand", f"llama-3-8b={DATA / 'azure_conv_day.csv'}", "--epoch", "6h",
                 "--csv", "--no-baselines"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("epoch,start,label,model")
    assert len(lines) == 1 + 4 * 2  # 4 epochs × 2 models
    assert main(["timeline", str(f), "--demand", "llama-3-8b"]) == 2
    assert "MODEL=FILE" in capsys.readouterr().err
    assert main(["timeline", str(f), "--demand", f"gpt-oss-120b={DATA / 'azure_conv_day.csv'}"]) == 2
    assert "not a model" in capsys.readouterr().err


def test_shipped_spot_series_is_a_step_function() -> None:
    s = load_series(DATA / "availability_spot_day.csv", 24, 1.0)
    assert len(s.epochs) == 24
    first = s.at(0)
    assert all(region.endswith("/spot") for region, _ in first)
    counts = [s.at(e)[("aws:us-east-2/spot", "1xL40S")] for e in range(24)]
    assert max(counts) == 48 and min(counts) == 0  # the traced outage
    assert s.at(100) == s.at(23)


def test_series_before_first_row_and_on_demand(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("timestamp,region,shape,nodes\n1.5,aws:us-east-2,1xL4,3\n0.5,aws:us-east-2,1xL4,7\n", encoding="utf-8")
    s = load_series(p, 3, 1.0)
    assert s.at(0) == {}  # before the first row: the scenario's own count
    assert s.at(1) == {("aws:us-east-2", "1xL4"): 7}
    assert s.at(2) == {("aws:us-east-2", "1xL4"): 3}


def test_cli_spot_with_the_shipped_spot_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _scenario_file(tmp_path)
    assert main(["timeline", str(f), "--demand", f"llama-3-8b={DATA / 'azure_conv_day.csv'}",
                 "--availability", str(DATA / "availability_spot_day.csv"), "--spot", "--no-baselines", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["spot"]["enabled"] and out["spot"]["uptime"] == pytest.approx(1 - 0.05 * 0.25)
    by_hour = {e["start"]: e for e in out["epochs"]}
    # hours 3-4 of the slice have no spot L40S/L4 in us-east-2: the plan still serves all demand (on demand)
    for h in (3.0, 4.0):
        assert min(by_hour[h]["served_fraction"].values()) == pytest.approx(1.0)
    assert any(e["spot_share"] > 0 for e in out["epochs"])  # spot is used when it is there


def _azure_trace(path: Path, per_hour: tuple[int, ...]) -> Path:
    """An Azure LLM inference trace (TIMESTAMP,ContextTokens,GeneratedTokens) with per_hour[h] requests in hour h."""
    from datetime import datetime, timedelta

    t0 = datetime(2023, 11, 16, 18, 0, 0)
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for h, n in enumerate(per_hour):
        for i in range(n):
            t = t0 + timedelta(hours=h, seconds=(i + 0.5) * 3600 / n)
            rows.append(f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond:06d}0,1000,200")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_cli_azure_trace_rate_scale_and_month_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An Azure-format trace as FILE at its own numbers (--match absolute): epochs from its timestamps, rate =
    requests per epoch / 3600 × --rate-scale, month = day total × 730 / horizon hours, saving vs the static plan
    from the two totals."""
    trace = _azure_trace(tmp_path / "azure.csv", (360, 180))
    code = main(["timeline", str(_scenario_file(tmp_path)), "--demand", f"llama-3-8b={trace}", "--rate-scale", "2",
                 "--match", "absolute", "--no-baselines", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    # hour 0: 360 requests / 3600 s × 2; hour 1 is cut short by the trace's end (first arrival 5 s, last 7190 s),
    # so its rate is over the covered 7185 − 3600 s
    assert [e["demand_rps"]["llama-3-8b"] for e in out["epochs"]] == pytest.approx(
        [2 * 360 / 3600, 2 * 180 / (7185 - 3600)], rel=1e-6)
    assert out["horizon_hours"] == 2
    assert out["total_cost"] == pytest.approx(sum(e["cost_per_hour"] * out["epoch_hours"] for e in out["epochs"]))
    assert out["total_cost_month"] == pytest.approx(out["total_cost"] * 730 / 2)
    assert out["saving_vs_static_pct"] == pytest.approx(
        100 * (1 - out["total_cost"] / out["static_peak_total_cost"]), abs=1e-6)
    assert out["epochs"][1]["cost_per_hour"] <= out["epochs"][0]["cost_per_hour"] + 1e-9  # half the demand
    for e in out["epochs"]:  # tokens/s of requests served within SLO: served rate × output tokens
        assert e["goodput_tok_s"]["llama-3-8b"] == pytest.approx(
            e["demand_rps"]["llama-3-8b"] * e["served_fraction"]["llama-3-8b"] * 200, rel=1e-6)


def test_cli_preset_with_a_shipped_sample(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["timeline", "--preset", "coral-core", "--demand", f"phi-4={DATA / 'azure_conv_day.csv'}",
                 "--epoch", "12h", "--match", "absolute", "--no-baselines", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == "coral-core" and len(out["epochs"]) == 2
    assert set(out["epochs"][0]["served_fraction"]) == {"phi-4", "gpt-oss-20b", "qwen3-32b"}
    assert out["total_cost"] <= out["static_peak_total_cost"] + 1e-6


def test_cli_mooncake_jsonl_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Mooncake JSONL trace (timestamp in ms, input_length, output_length) as FILE: hourly epochs from its
    timestamps, rate and mean sizes per epoch (its own numbers: --match absolute)."""
    lines = []
    for i in range(540):  # 360 requests in hour 0 (inputs 800), 180 in hour 1 (inputs 1600)
        hour = 0 if i < 360 else 1
        t_ms = 1000 * (hour * 3600 + 5 + (i if hour == 0 else i - 360) * (3590 / (360 if hour == 0 else 180)))
        lines.append(json.dumps({"timestamp": int(t_ms), "input_length": 800 * (hour + 1), "output_length": 100,
                                 "hash_ids": [i]}))
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["timeline", str(_scenario_file(tmp_path)), "--demand", f"llama-3-8b={trace}", "--no-baselines",
                 "--match", "absolute", "--json"])
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert len(out["epochs"]) == 2
    rates = [e["demand_rps"]["llama-3-8b"] for e in out["epochs"]]
    assert rates[0] == pytest.approx(360 / 3600, rel=1e-6)
    stamps = [json.loads(line)["timestamp"] / 1000 for line in lines]
    covered = max(stamps) - min(stamps)  # the last epoch is cut short at the trace's end (as for Azure traces)
    assert rates[1] == pytest.approx(180 / (covered - 3600), rel=1e-6)
    assert all(e["served_fraction"]["llama-3-8b"] == pytest.approx(1.0) for e in out["epochs"])
    assert "mooncake.jsonl" in out["demand_sources"]["llama-3-8b"]


def test_cli_policies_side_by_side_with_total_cost_and_churn(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`planning timeline … --policy lookahead --policy myopic --policy offline --horizon 2 --json`: each run has a
    total cost and its churn; the offline optimum is the lower bound of the others (issue 27 §2)."""
    f = _scenario_file(tmp_path)
    code = main(["timeline", str(f), "--demand", f"llama-3-8b={DATA / 'azure_conv_day.csv'}",
                 "--demand", f"phi-4={DATA / 'azure_code_day.csv'}", "--epoch", "3h", "--no-baselines",
                 "--policy", "lookahead", "--policy", "myopic", "--policy", "offline", "--horizon", "2", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "lookahead" and out["horizon_epochs"] == 2
    runs = out["policies"]
    assert set(runs) == {"myopic", "lookahead", "offline"}
    for run in runs.values():
        assert run["total_cost"] > 0 and {"nodes_started", "nodes_stopped"} == set(run["churn"])
        assert run["min_served_fraction"] == pytest.approx(1.0)
    assert runs["lookahead"]["total_cost"] == pytest.approx(out["total_cost"])  # the first policy planned the epochs
    assert runs["lookahead"]["churn"] == out["churn"]
    assert runs["offline"]["status"] == "optimal"
    low = runs["offline"]["total_cost"]
    assert all(r["total_cost"] >= low - 1e-6 * low for r in runs.values())
    assert runs["offline"]["bound"] == pytest.approx(low, rel=1e-6)  # the MILP's proof prices as the timeline does
    assert runs["lookahead"]["label"] == "look-ahead (H=2)"
    assert main(["timeline", str(f), "--demand", f"llama-3-8b={DATA / 'azure_conv_day.csv'}", "--policy", "offline",
                 "--horizon", "0"]) == 2
    assert "--horizon" in capsys.readouterr().err
