"""End-to-end engine: solve a tiny scenario, explicit templates, infeasibility, cancellation, CLI ≡ API."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from planning import api
from planning.cli import main
from planning.context import Cancelled
from planning.result import PlanResult
from planning.scenario import Scenario


def test_tiny_plan_meets_demand_within_capacity(tiny: dict[str, Any]) -> None:
    res = api.solve(Scenario.from_dict(tiny))
    assert res.status == "optimal"
    assert res.served_fraction == pytest.approx(1.0, abs=1e-6)
    for s in res.service:
        assert s.served >= s.demanded * (1 - 1e-6)
    for c in res.capacity:
        assert c.used <= c.available
    assert res.cost_per_hour == pytest.approx(sum(line.cost_per_hour for line in res.cost_lines))
    for inst in res.instances:
        assert sum(st.layers for st in inst.stages) == 32  # llama-3-8b layers, every instance holds the model
        assert 0 <= inst.utilisation <= 1 + 1e-9
    assert {b.name for b in res.baselines} >= {"homo", "homo-ilp", "memp"}
    for b in res.baselines:  # the joint ILP over all templates is never beaten by a feasible baseline
        if b.feasible:  # both sides provisioning: the plan's penalty is not a bill and no baseline carries one
            assert res.comparable_cost <= b.cost_per_hour * (1 + 1e-3) + 1e-9
    assert PlanResult.from_json(res.to_json()) == res
    md = res.to_markdown()
    assert "## Baselines" in md and "optimal" in md


def test_cli_solve_json_equals_api(tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny))
    api_res = api.solve(Scenario.from_dict(tiny))
    assert main(["solve", str(path), "--json", "--out", str(tmp_path / "out.json")]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["status"] == api_res.status
    assert cli["cost_per_hour"] == pytest.approx(api_res.cost_per_hour, rel=1e-9)
    assert set(cli["timings"]) >= {"allocation_seconds", "total_seconds"}
    assert [(b["name"], b["cost_per_hour"]) for b in cli["baselines"]] == [
        (b.name, pytest.approx(b.cost_per_hour)) for b in api_res.baselines]
    assert json.loads((tmp_path / "out.json").read_text())["status"] == api_res.status


def test_explicit_templates_only(tiny: dict[str, Any]) -> None:
    tiny.update(generate_templates=False, offers=[
        {"region": "lab", "shape": "1xL4", "price_per_hour": 1.0, "available": 4},
        {"region": "lab", "shape": "1xH100", "price_per_hour": 5.0, "available": 1}], regions=[])
    tiny["explicit_templates"] = [
        {"id": "p-l4", "model": "llama-3-8b", "phase": "prefill", "usage": {"1xL4": 1},
         "throughput": {"llama-3-8b/prefill": 1000}},
        {"id": "p-h100", "model": "llama-3-8b", "phase": "prefill", "usage": {"1xH100": 1},
         "throughput": {"llama-3-8b/prefill": 5000}},
        {"id": "d-l4", "model": "llama-3-8b", "phase": "decode", "usage": {"1xL4": 1},
         "throughput": {"llama-3-8b/decode": 300}},
    ]
    res = api.solve(Scenario.from_dict(tiny))
    assert res.status == "optimal"
    # prefill 2048 tok/s: 1×H100 ($5) vs 3×L4 ($3) -> L4s; decode 256 tok/s -> one L4; 4 L4 available
    assert res.cost_per_hour == pytest.approx(4.0 * 1.1)  # K = 0.1 initialisation penalty on new instances
    assert res.gpus_by_type() == {"L4": 4}


def test_infeasible_plan_explains_binding_capacity(tiny: dict[str, Any]) -> None:
    tiny["availability_overrides"] = [{"region": "aws:us-east-2", "shape": s, "nodes": 1}
                                      for s in ("1xL4", "1xL40S", "1xA10G")]
    tiny["models"][0]["demand"]["rate_rps"] = 200
    res = api.solve(Scenario.from_dict(tiny))
    assert res.status == "infeasible"
    assert res.diagnostics
    assert any("aws:us-east-2" in d for d in res.diagnostics)


def test_served_objective_under_budget(tiny: dict[str, Any]) -> None:
    tiny["models"][0]["demand"]["rate_rps"] = 40
    full = api.solve(Scenario.from_dict(tiny))
    assert len(full.instances) >= 2
    tiny["objective"] = {"kind": "served", "budget_per_hour": full.cost_per_hour / 2}
    res = api.solve(Scenario.from_dict(tiny))
    assert res.status in ("optimal", "feasible")
    assert res.cost_per_hour <= full.cost_per_hour / 2 + 1e-6
    assert 0.2 < res.served_fraction < 1
    for svc in res.service:  # the fraction is uniform across groups (Coral Sec. 6.4)
        assert svc.fraction >= res.served_fraction - 1e-6


def test_cancel_before_start_raises(tiny: dict[str, Any]) -> None:
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        api.solve(Scenario.from_dict(tiny), cancel=ev)


def test_cli_errors_name_field_and_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels:\n  - id: llama-3-8x\n    slo: {prefill_ms: 1000, decode_ms: 50}\n"
                   "    demand: {rate_rps: 1, input_len: 10, output_len: 10}\nregions: [aws:us-east-2]\n")
    assert main(["solve", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "models[0].id" in err and "llama-3-8b" in err
    assert main(["solve", "--preset", "coral-cor"]) == 2
    assert "coral-core" in capsys.readouterr().err


def test_presets_validate_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["presets", "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)}
    assert names >= {"coral-core", "coral-extended", "melange-arena", "demystifying"}
    for name in sorted(names):
        assert main(["validate", "--preset", name]) == 0
