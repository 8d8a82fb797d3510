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
