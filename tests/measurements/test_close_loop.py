"""Close the loop: an exported plan's recipes carry the benchmark command of each instance, and `planning
validate-plan` flags an instance measured 20 % slower than predicted and re-plans with the measurement."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from planning import api
from planning.cli import main
from planning.measurements.fit import simulate_point
from planning.measurements.readers import read_file
from planning.perf.model import PerfModel
from planning.result import PlanResult
from tests.measurements.builders import vllm_result, write_json

SCENARIO: dict[str, Any] = {
    "name": "loop", "mode": "aggregated", "regions": ["aws:us-east-2"], "shapes": ["1xL4", "1xL40S", "1xA10G"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1500, "decode_ms": 80},
                "demand": {"rate_rps": 6, "input_len": 1024, "output_len": 128}}],
    "options": {"max_stages": 1, "nmax": 3, "rho": 12, "K": 0.1, "time_limit_s": 30},
}
# vllm bench serve's options used by the command (vllm/benchmarks/serve.py and datasets/datasets.py, vllm 0.33.0)
VLLM_BENCH_OPTIONS = {"--backend", "--base-url", "--model", "--dataset-name", "--random-input-len",
                      "--random-output-len", "--ignore-eos", "--num-prompts", "--request-rate", "--percentile-metrics",
                      "--metric-percentiles", "--goodput", "--save-result", "--result-filename", "--metadata"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> PlanResult:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLANNING_HOME", str(home))
        mp.setattr("planning.context._CTX", None)
        result = api.solve(api.parse_scenario_text(json.dumps(SCENARIO)))
        mp.setattr("planning.context._CTX", None)
    assert result.has_plan and all(sum(i.usage.values()) == 1 for i in result.instances)
    return result


def _commands(plan: PlanResult) -> dict[int, list[str]]:
    out = {}
    for f in api.export_plan(plan, "all"):
        for line in f.text.splitlines():
            m = re.search(r"(vllm bench serve .*)$", line)
            if m and f.instance is not None:
                out[f.instance] = shlex.split(m.group(1))
    return out


def test_every_recipe_ships_the_benchmark_command(plan: PlanResult) -> None:
    cmds = _commands(plan)
    assert sorted(cmds) == list(range(len(plan.instances)))
    for idx, argv in cmds.items():
        flags = {a for a in argv if a.startswith("--")}
        assert flags <= VLLM_BENCH_OPTIONS
        opt = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
        assert (opt["--random-input-len"], opt["--random-output-len"]) == ("1024", "128")
        inst = plan.instances[idx]
        assert float(opt["--request-rate"]) == pytest.approx(inst.throughput * inst.load / inst.count, rel=1e-3)
        meta = argv[argv.index("--metadata") + 1:]
        (gpu, count), = inst.gpus.items()
        assert f"gpu={gpu}" in meta and f"count={count}" in meta and f"instance={idx}" in meta
        assert argv[argv.index("--goodput") + 1:argv.index("--goodput") + 3] == ["ttft:1500", "tpot:80"]


def _result_file(plan: PlanResult, idx: int, slower: float, folder: Path) -> Path:
    """The file the recipe's command would write for instance ``idx`` if it measured ``slower`` × the prediction."""
    argv = _commands(plan)[idx]
    opt = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    meta = dict(kv.split("=", 1) for kv in argv[argv.index("--metadata") + 1:])
    # what the planner predicts for that run: read the command's own file layout back as a measurement
    probe = write_json(folder / "probe.json", {"completed": 1, "duration": 1.0, "total_input_tokens": 1024, "total_output_tokens": 128,
                                               "request_rate": float(opt["--request-rate"]), "max_concurrency": None,
                                               "model_id": opt["--model"], "mean_ttft_ms": 100.0, **meta})
    [m] = read_file(probe)
    run = simulate_point(replace(m, requests=int(opt["--num-prompts"])), PerfModel())
    slow = replace(run, ttft_ms_mean=run.ttft_ms_mean * slower, ttft_ms_p50=run.ttft_ms_p50 * slower,
                   ttft_ms_p99=run.ttft_ms_p99 * slower, itl_ms_mean=run.itl_ms_mean * slower,
                   itl_ms_p90=run.itl_ms_p90 * slower, tpot_ms_mean=run.tpot_ms_mean * slower,
                   tpot_ms_p50=run.tpot_ms_p50 * slower, e2e_latency_ms_mean=run.e2e_latency_ms_mean * slower)
    data = vllm_result(slow, model_id=opt["--model"], request_rate=float(opt["--request-rate"]), metadata=meta)
    return write_json(folder / opt["--result-filename"], data)


def test_validate_plan_flags_the_slow_instance_and_replans(plan: PlanResult, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(api.result_json(plan), encoding="utf-8")
    files = [_result_file(plan, 0, 1.2, tmp_path)]
    if len(plan.instances) > 1:
        files.append(_result_file(plan, 1, 1.0, tmp_path))
    assert main(["validate-plan", str(plan_path), *map(str, files), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["missing"] == [0]
    first = out["instances"][0]
    assert first["misses"] and "above the prediction" in first["reasons"]
    assert first["tpot_ms_measured"] == pytest.approx(1.2 * first["tpot_ms_predicted"], rel=0.02)
    assert all(not r["misses"] for r in out["instances"][1:])
    assert out["note"].startswith("re-planned with your measurements")
    total = out["diff"][-1]
    assert total["model"] == "total" and total["usd_h_before"] == pytest.approx(plan.provisioning_per_hour)
    assert total["usd_h_after"] >= total["usd_h_before"] - 1e-9  # a slower node never makes the plan cheaper
    assert main(["validate-plan", str(plan_path), str(files[0])]) == 0
    text = capsys.readouterr().out
    assert "instance 0" in text and "MISSES" in text and "count_before" in text


def test_validate_plan_passes_a_plan_that_measures_as_predicted(plan: PlanResult, tmp_path: Path) -> None:
    report = api.validate_plan(plan, [_result_file(plan, 0, 1.0, tmp_path)])
    assert report.missing == [] and report.replanned is None and "within 10 %" in report.note


def test_what_if_plans_with_and_without_the_measurements(plan: PlanResult, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    slow = _result_file(plan, 0, 1.2, tmp_path)
    assert main(["measurements", "import", str(slow)]) == 0
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO), encoding="utf-8")
    capsys.readouterr()
    assert main(["measurements", "what-if", str(scenario), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (gpu, count), = plan.instances[0].gpus.items()
    assert len(out["corrections"]) == 1 and f"on {count}x{gpu}" in out["corrections"][0]
    assert '"measured (yours)"' in out["corrections"][0] and slow.name in out["corrections"][0]
    assert out["with_cost_per_hour"] >= out["without_cost_per_hour"] - 1e-9
    answer = api.measurements_what_if(api.parse_scenario_text(json.dumps(SCENARIO)))
    assert any("measured (yours)" in d for d in answer.with_measurements.diagnostics)
    assert all(i.provenance == "measured (yours)" for i in answer.with_measurements.instances
               if i.gpus == {gpu: count})
    assert not any("measured (yours)" in d for d in answer.without.diagnostics)


def test_a_histogram_plans_command_runs_the_rate_its_classes_send(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Mélange's request classes (melange-arena, 8 req/s): the command's rate is what the plan sends each copy,
    the sum of its classes' req/s, and the copies together carry the preset's demand (not the capacity figure)."""
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))
    monkeypatch.setattr("planning.context._CTX", None)
    scenario = api.load_preset_scenario("melange-arena")
    result = api.solve(scenario)
    monkeypatch.setattr("planning.context._CTX", None)
    assert result.has_plan and all(i.class_rps for i in result.instances)
    total = 0.0
    for idx, argv in _commands(result).items():
        inst = result.instances[idx]
        rate = float(argv[argv.index("--request-rate") + 1])
        assert rate == pytest.approx(sum(r for _, _, r in inst.class_rps) / inst.count, rel=1e-3)
        assert rate < inst.throughput / inst.count  # the bug: the capacity figure (343 for one A100) was used
        total += rate * inst.count
    assert total == pytest.approx(sum(m.demand.rate_rps for m in scenario.models), rel=1e-3)
