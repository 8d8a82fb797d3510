"""Measurements page: the stored points, a fit job, its before/after figure."""

from __future__ import annotations

import json
from pathlib import Path

from planning import api
from planning.simulate.bench import benchmark
from tests.app.conftest import app, texts, wait_for_job
from tests.measurements.builders import vllm_result, write_json


def test_page_without_measurements_says_how_to_import(planning_home: Path) -> None:
    at = app("views/9_Measurements.py")
    assert not at.exception
    assert "No measurements yet" in texts(at)


def test_page_lists_fits_and_draws_before_after(planning_home: Path, tmp_path: Path) -> None:
    run = benchmark("llama-3-8b", "A10G", input_len=512, output_len=128, concurrency=8, requests=48)
    path = write_json(tmp_path / "bench.json", vllm_result(run, concurrency=8))
    api.import_measurements([path], api.MeasurementSetup(gpu="A10G", tp=1))
    at = app("views/9_Measurements.py")
    assert not at.exception
    assert "Stored measurements (1)" in texts(at)
    assert at.dataframe[0].value["file"].tolist() == ["bench.json"]
    next(b for b in at.button if b.label.startswith("Fit the perf model")).click().run()
    job_id = at.session_state["fit_job"]
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    shown = texts(at)
    assert "llama-3-8b on 1xA10G TP1" in shown and "median error" in shown
    assert len(at.get("plotly_chart")) == 1


def test_validate_job_flags_the_slow_instance(planning_home: Path, tmp_path: Path) -> None:
    import json

    from tests.measurements.test_close_loop import SCENARIO, _result_file
    from ui.jobs import validate_job, validate_request

    plan = api.solve(api.parse_scenario_text(json.dumps(SCENARIO)))
    slow = _result_file(plan, 0, 1.2, tmp_path)
    request = validate_request(api.result_json(plan), {slow.name: slow.read_text(encoding="utf-8")})

    class _Token:
        def check(self) -> None:
            return None

    out = validate_job(request, lambda _f, _m: None, _Token())  # type: ignore[arg-type]
    assert out["missing"] == [0] and out["instances"][0]["misses"]
    assert out["note"].startswith("re-planned") and out["diff"][-1]["model"] == "total"


def test_page_lists_the_saved_plans_the_kept_fits_change(planning_home: Path) -> None:
    from planning.measurements.apply import save_settings
    from tests.measurements.test_apply import MILD
    from tests.measurements.test_close_loop import SCENARIO

    scenario = api.parse_scenario_text(json.dumps({**SCENARIO, "shapes": ["1xA10G"]}))
    api.save_scenario(scenario, planning_home / "scenarios" / "loop.yaml")
    save_settings([MILD], planning_home)
    at = app("views/9_Measurements.py")
    assert not at.exception
    next(b for b in at.button if b.label == "Which saved plans change?").click().run()
    assert wait_for_job(planning_home, at.session_state["impact_job"]) == "done"
    at.run()
    assert not at.exception
    assert "1 of 1" in texts(at) and "loop" in texts(at)
    [frame] = [d.value for d in at.dataframe if "usd_h_after" in d.value]
    assert frame["instances_after"].iloc[0] > frame["instances_before"].iloc[0]
