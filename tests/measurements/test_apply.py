"""Measurements reach plans on their own: trusted fits kept under PLANNING_HOME correct their own setting (model,
GPU, count, TP, engine) only, `options.measurements` selects them, and the plan, report and exports name them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planning import api
from planning.context import default_context
from planning.errors import PlanningError
from planning.measurements.apply import (
    MeasuredPerfModel,
    MeasuredSetting,
    fits_path,
    load_settings,
    planned_settings,
    save_settings,
)
from planning.perf.model import PerfModel, Workload
from planning.scenario import Scenario
from tests.measurements.test_close_loop import SCENARIO

SLOW = MeasuredSetting("llama-3-8b", "A10G", 1, 1, "vllm", prefill=0.7, decode=0.6, step_ms=3.0, points=4,
                       sources=("bench-a10g.json",))
MILD = MeasuredSetting(**{**SLOW.__dict__, "prefill": 0.9, "decode": 0.85, "step_ms": 1.0})
WL = Workload(input_len=1024, output_len=128)


@pytest.fixture(scope="module")
def base() -> PerfModel:
    return PerfModel()


def _table(perf: PerfModel, model: str, shape: str, phase: str) -> np.ndarray:
    slo = 1500.0 if phase == "prefill" else 80.0
    return perf.stage_table(perf.model(model), shape, phase, slo, WL, max_stages=2,
                            ttft_ms=1500.0 if phase == "aggregated" else None)


@pytest.mark.parametrize("phase", ["prefill", "decode", "aggregated"])
def test_a_fit_changes_its_own_setting_only(base: PerfModel, phase: str) -> None:
    measured = MeasuredPerfModel(base, [SLOW])
    own_before, own_after = _table(base, "llama-3-8b", "1xA10G", phase), _table(measured, "llama-3-8b", "1xA10G", phase)
    assert own_after.max() < own_before.max()  # slower prefill, decode and steps: less throughput
    # another model on the same GPU, and the same model on another node size, keep the shipped estimates
    for model, shape in (("llama-2-7b", "1xA10G"), ("llama-3-8b", "2xA10G"), ("llama-3-8b", "1xL4")):
        assert np.array_equal(_table(measured, model, shape, phase), _table(base, model, shape, phase)), (model, shape)


def test_a_fit_of_another_engine_corrects_nothing(base: PerfModel) -> None:
    other = MeasuredPerfModel(base, [MeasuredSetting(**{**SLOW.__dict__, "engine": "sglang"})])
    assert np.array_equal(_table(other, "llama-3-8b", "1xA10G", "decode"), _table(base, "llama-3-8b", "1xA10G", "decode"))


def test_the_fingerprint_carries_the_corrections(base: PerfModel) -> None:
    a = MeasuredPerfModel(base, [SLOW])
    b = MeasuredPerfModel(base, [MeasuredSetting(**{**SLOW.__dict__, "decode": 0.5})])
    assert len({base.fingerprint(), a.fingerprint(), b.fingerprint()}) == 3
    assert a.fingerprint() == MeasuredPerfModel(base, [SLOW]).fingerprint()
    assert a._calibration_fingerprint() != base._calibration_fingerprint()  # the T̂ table keys differ


def test_the_option_is_validated() -> None:
    data = {**SCENARIO, "options": {**SCENARIO["options"], "measurements": "sometimes"}}
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(data)
    assert "options.measurements" in err.value.field and "ignore" in str(err.value)
    assert Scenario.from_dict(SCENARIO).options.measurements == "auto"


def test_kept_fits_round_trip_and_a_damaged_file_is_named(tmp_path: Path) -> None:
    assert load_settings(tmp_path) == []
    save_settings([SLOW], tmp_path)
    assert load_settings(tmp_path) == [SLOW]
    assert api.kept_fits_fingerprint(tmp_path).startswith(":fits-")  # solve jobs cached before the fit are not reused
    assert api.kept_fits_fingerprint(tmp_path / "none") == ""
    data = json.loads(fits_path(tmp_path).read_text())
    data["fits"][0]["decode"] = -1
    fits_path(tmp_path).write_text(json.dumps(data))
    with pytest.raises(PlanningError) as err:
        load_settings(tmp_path)
    assert err.value.field.endswith("fits[0].decode") and "planning measurements fit" in str(err.value)


@pytest.mark.parametrize("mode", ["auto", "use", "ignore"])
def test_the_planned_fits_are_the_scenarios_models_unless_ignored(tmp_path: Path, mode: str) -> None:
    """``planned_settings`` (the one rule the solve and the CLI's precheck follow): the kept fits of the
    scenario's own models, none under ``ignore``."""
    other = MeasuredSetting(**{**SLOW.__dict__, "model": "phi-4"})
    save_settings([SLOW, other], tmp_path)
    scenario = Scenario.from_dict({**SCENARIO, "options": {**SCENARIO["options"], "measurements": mode}})
    assert {m.id for m in scenario.models} == {"llama-3-8b"}
    assert planned_settings(scenario, tmp_path) == ([] if mode == "ignore" else [SLOW])
    assert planned_settings(scenario, tmp_path / "none") == []


def test_plan_context_follows_the_option(tmp_path: Path) -> None:
    base = default_context()
    auto = Scenario.from_dict(SCENARIO)
    use = Scenario.from_dict({**SCENARIO, "options": {**SCENARIO["options"], "measurements": "use"}})
    ignore = Scenario.from_dict({**SCENARIO, "options": {**SCENARIO["options"], "measurements": "ignore"}})
    assert api.plan_context(auto, base, tmp_path) == (base, "")
    ctx, note = api.plan_context(use, base, tmp_path)
    assert ctx is base and "no trusted fit" in note
    save_settings([MeasuredSetting(**{**SLOW.__dict__, "model": "llama-2-7b"})], tmp_path)  # not this scenario's
    assert api.plan_context(auto, base, tmp_path)[0] is base
    save_settings([SLOW], tmp_path)
    assert isinstance(api.plan_context(auto, base, tmp_path)[0].perf, MeasuredPerfModel)
    assert api.plan_context(auto, base, tmp_path)[0] is api.plan_context(use, base, tmp_path)[0]  # tables reused
    assert isinstance(api.plan_context(use, base, tmp_path)[0].perf, MeasuredPerfModel)
    assert api.plan_context(ignore, base, tmp_path)[0] is base


def test_solve_plans_on_the_kept_fits_and_names_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))
    monkeypatch.setattr("planning.context._CTX", None)
    data = {**SCENARIO, "shapes": ["1xA10G"]}
    shipped = api.solve(Scenario.from_dict({**data, "options": {**data["options"], "measurements": "ignore"}}),
                        with_baselines=False)
    save_settings([MILD], tmp_path)
    plan = api.solve(Scenario.from_dict(data), with_baselines=False)
    assert shipped.has_plan and plan.has_plan, plan.diagnostics
    assert all(i.provenance != "measured (yours)" for i in shipped.instances)
    assert plan.instances and all(i.provenance == "measured (yours)" for i in plan.instances)
    # the slower A10G needs more of them for the same demand
    assert sum(i.count for i in plan.instances) > sum(i.count for i in shipped.instances)
    assert any("bench-a10g.json" in v for v in plan.provenance.values())
    assert any("measured (yours)" in d and "bench-a10g.json" in d for d in plan.diagnostics)
    report = api.plan_report(plan)
    assert "measured (yours) llama-3-8b 1xA10G TP1" in report and "bench-a10g.json" in report
    reloaded = api.plan_from_json(api.result_json(plan))
    assert reloaded.instances[0].provenance == "measured (yours)"
    headers = [f.text for f in api.export_plan(plan, "skypilot") if f.instance is not None]
    assert headers and all("# perf numbers: measured (yours)" in t and "bench-a10g.json" in t for t in headers)


def test_impact_lists_which_saved_plans_change(tmp_path: Path) -> None:
    data = {**SCENARIO, "shapes": ["1xA10G"]}
    other = {**data, "models": [{**SCENARIO["models"][0], "id": "llama-2-7b"}]}
    save_settings([MILD], tmp_path)
    frame = api.measurements_impact({"mine": Scenario.from_dict(data), "other": Scenario.from_dict(other)},
                                    home=tmp_path)
    rows = {r["scenario"]: r for r in frame.to_dict("records")}
    assert rows["mine"]["changes"] and rows["mine"]["corrected"] == "llama-3-8b on 1xA10G TP1"
    assert rows["mine"]["instances_after"] > rows["mine"]["instances_before"]
    assert rows["mine"]["usd_h_change"] == pytest.approx(rows["mine"]["usd_h_after"] - rows["mine"]["usd_h_before"])
    assert rows["mine"]["change_pct"] > 0
    assert not rows["other"]["changes"] and rows["other"]["note"] == "no trusted fit of its models"


def test_planning_solve_on_the_command_line_follows_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from planning.cli import main

    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("planning.context._CTX", None)
    save_settings([MILD], tmp_path / "home")
    bands = {}
    for mode in ("auto", "ignore"):
        path = tmp_path / f"{mode}.json"
        path.write_text(json.dumps({**SCENARIO, "shapes": ["1xA10G"],
                                    "options": {**SCENARIO["options"], "measurements": mode}}), encoding="utf-8")
        capsys.readouterr()
        assert main(["solve", str(path), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        bands[mode] = {i["provenance"] for i in out["instances"]}
    assert bands["auto"] == {"measured (yours)"} and "measured (yours)" not in bands["ignore"]


def test_sharing_timeline_and_simulator_run_on_the_plans_model(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: with kept fits and options.measurements asking, GPU sharing, the timeline and the simulator
    compute on the same corrected model a plan does (not the shipped one); `ignore` keeps the shipped one."""
    import planning.sharing.checked as checked
    import planning.simulate as simulate_room
    import planning.timeline as timeline_room

    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))
    monkeypatch.setattr("planning.context._CTX", None)
    save_settings([MILD], tmp_path)
    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def capture(name: str, perf_of: object) -> object:
        def fake(*args: object, **kwargs: object) -> object:
            seen[name] = perf_of(args, kwargs)  # type: ignore[operator]
            raise Stop
        return fake

    monkeypatch.setattr(checked, "solve_checked", capture("sharing", lambda a, k: k["context"].perf))
    monkeypatch.setattr(timeline_room, "run_timeline", capture("timeline", lambda a, k: k["context"].perf))
    monkeypatch.setattr("planning.timeline.matching.match_demand", lambda scenario, demand, match: demand)
    monkeypatch.setattr(simulate_room, "build_topology", capture("simulate", lambda a, k: a[2]))
    plan = api.solve(Scenario.from_dict({**SCENARIO, "shapes": ["1xA10G"]}), with_baselines=False)
    assert plan.instances and all(i.provenance == "measured (yours)" for i in plan.instances)
    for mode, expected in (("auto", True), ("ignore", False)):
        scenario = Scenario.from_dict({**SCENARIO, "options": {**SCENARIO["options"], "measurements": mode}})
        seen.clear()
        with pytest.raises(Stop):
            api.solve_shared(scenario)
        with pytest.raises(Stop):
            api.timeline(scenario, [])
        with pytest.raises(Stop):
            api.simulate(replace(plan, scenario=scenario.to_dict()))
        assert {k: isinstance(v, MeasuredPerfModel) for k, v in seen.items()} == \
            {"sharing": expected, "timeline": expected, "simulate": expected}, mode
