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
