"""Before export: every difference between a plan and its files, with what it costs (issue 38 §5)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from planning import api
from planning.export import kubernetes_manifests, skypilot_tasks
from planning.export.preview import differences, preview
from planning.scenario import save_scenario
from tests.export.test_export import PLAN, REPOS
from tests.export.test_weights import _custom


def _files() -> list:
    return skypilot_tasks(PLAN, REPOS) + kubernetes_manifests(PLAN, REPOS)


def test_every_note_becomes_one_costed_difference_per_instance() -> None:
    files = _files()
    diffs = differences(PLAN, files)
    noted = {(f.instance, n) for f in files if f.instance is not None for n in f.notes}
    assert {(d.instance, d.what) for d in diffs} == noted  # each note once, though two formats carry it
    kinds = {(PLAN.instances[d.instance].model, d.kind) for d in diffs}
    assert ("llama-3-70b", "kv-transfer") in kinds  # pipelined prefill and decode of a disaggregated model
    assert ("qwen3-32b", "weights") in kinds  # no repository given for it in REPOS
    assert all(d.cost for d in diffs)
    assert not any(d.kind == "kv-transfer" for d in diffs if d.model == "phi-4")  # single-node P/D: connected


def test_the_price_of_deploying_as_planned_is_stated() -> None:
    files = _files()
    dearer = replace(PLAN, cost_per_hour=50.0)
    text = preview(PLAN, files, dearer, priced=True).alternative_text()
    assert "$50.00/h against this plan's $40.00/h" in text and "this plan is 20.0 % cheaper" in text
    none = preview(PLAN, files, None, priced=True).alternative_text()
    assert none.startswith("the scenario has no plan with options.max_stages: 1")
    assert preview(PLAN, files).alternative_text() == ""  # not priced: nothing claimed
    lines = preview(PLAN, files, dearer, priced=True).lines()
    assert lines[0].startswith("export differs from the plan in") and lines[-1].startswith("  to deploy as planned")


def test_a_custom_model_scenario_says_before_export_what_is_missing(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI prints the preview before it writes: the custom model's missing weights, at $0/h, and the field."""
    from planning.cli import main

    path = save_scenario(_custom(None), tmp_path / "custom.yaml")
    assert main(["export", str(path), "--format", "kubernetes", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "export differs from the plan in" in err and "[weights]" in err and "models[].weights" in err
    plan = api.solve(_custom("my-org/my-3b"), with_baselines=False)
    assert api.export_preview(plan).deploys_as_planned
    assert api.export_preview(plan).lines() == ["export: every instance deploys as planned"]


def test_the_export_as_the_simulator_sees_it() -> None:
    """as_exported: a model left without a connected prefill/decode pair serves whole requests on its engines
    without KV transfer (round robin); a model that keeps a connected pair keeps its proxy, the others idle."""
    from planning.export.preview import as_exported, lost_kv_instances

    lost = lost_kv_instances(differences(PLAN, _files()))
    assert lost == {1, 2}  # llama-3-70b's pipelined prefill and decode
    exported, notes = as_exported(PLAN, lost)
    seventy = [i for i in exported.instances if i.model == "llama-3-70b"]
    assert [i.phase for i in seventy] == ["aggregated", "aggregated"] and {i.throughput for i in seventy} == {1.0}
    assert [i.stages for i in seventy] == [PLAN.instances[1].stages, PLAN.instances[2].stages]  # same placement
    assert [i for i in exported.instances if i.model != "llama-3-70b"] == [
        i for i in PLAN.instances if i.model != "llama-3-70b"]
    assert len(notes) == 1 and notes[0].startswith("llama-3-70b: no prefill/decode pair connects")

    # one of two decode-connected phi-4 prefills lost: the proxy still has a pair, the lost one gets no request
    two = replace(PLAN, instances=(*PLAN.instances, PLAN.instances[4]))
    kept, said = as_exported(two, frozenset({4}))
    assert [i.phase for i in kept.instances if i.model == "phi-4"] == ["decode", "prefill"]
    assert said[0].startswith("phi-4: the proxy sends every request to its connected")
    # a lost prefill beside a connected decode only: no pair, the decode gets none
    alone, said = as_exported(PLAN, frozenset({4}))
    assert [i.phase for i in alone.instances if i.model == "phi-4"] == ["aggregated"]
    assert "its 1 connected engine(s) get none" in said[0]


def test_the_files_are_simulated_as_exported_beside_the_plan() -> None:
    """api.export_preview(simulate=True) reports, per model with a lost KV transfer, the simulator's own figures
    for the plan and for the plan as exported (same arrivals), and the CLI prints them."""
    from planning.export.preview import as_exported, lost_kv_instances
    from planning.scenario import Scenario
    from tests.app.test_export_check import PIPELINED

    plan = api.solve(Scenario.from_dict(PIPELINED), with_baselines=False)
    shown = api.export_preview(plan, price_alternative=False, simulate=True, duration_s=60.0)
    sim = shown.simulation
    assert sim is not None and not sim.error, sim
    assert [r.model for r in sim.runs] == ["qwen3-32b"]
    planned = api.simulate(plan, duration_s=60.0)
    exported, notes = as_exported(plan, lost_kv_instances(shown.differences))
    assert {i.phase for i in exported.instances} == {"aggregated"} and sim.notes == notes
    deployed = api.simulate(exported, duration_s=60.0)
    run = sim.runs[0]
    assert run.planned_attainment == planned.model("qwen3-32b").attainment
    assert run.exported_attainment == deployed.model("qwen3-32b").attainment
    assert run.exported_goodput == deployed.model("qwen3-32b").goodput_tokens_per_s
    lines = shown.lines()
    assert any(line.startswith("  simulated as exported (60 s of Poisson") for line in lines)
    assert any(f"{run.exported_attainment:.1%} as exported" in line for line in lines)
