"""Issue 38 §6, the smaller items, each as the user meets it in the app: the save confirmation stays in view, an
edited scenario is renamed once and no longer claims the paper as its source, and a baseline that cannot meet
demand says so instead of "$0.00/h"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planning.scenario import load_scenario
from tests.app.conftest import TIMEOUT, app, save_tiny, texts


def _load(at: AppTest, choice: str) -> None:
    next(s for s in at.selectbox if s.label == "Preset or saved scenario").set_value(choice)
    next(b for b in at.button if b.label == "Load").click()
    at.run()


def _edit_nmax(at: AppTest, value: int) -> None:
    next(n for n in at.number_input if n.label.startswith("Nmax")).set_value(value)
    next(b for b in at.button if b.label == "Apply").click()
    at.run()


def _save(at: AppTest, name: str) -> None:
    next(t for t in at.text_input if t.label == "Save as").set_value(name)
    next(b for b in at.button if b.label == "Save to my scenarios").click()
    at.run()


def test_the_save_confirmation_is_shown_outside_the_expander(planning_home: Path) -> None:
    save_tiny(planning_home)
    at = app("views/1_Scenario.py")
    _load(at, "saved:tiny")
    _save(at, "kept")
    assert not at.exception
    success = [str(s.value) for s in at.success]
    assert any("Saved kept.yaml" in s for s in success)
    # on the page itself, not inside the (collapsed) "Load, save, download, upload" expander
    assert all("Saved kept.yaml" not in str(s.value) for e in at.expander for s in e.success)


def test_a_loaded_then_edited_scenario_is_renamed_once(planning_home: Path) -> None:
    save_tiny(planning_home)
    at = app("views/1_Scenario.py")
    _load(at, "saved:tiny")
    _edit_nmax(at, 4)
    assert at.session_state["scenario"].name == "tiny (edited)"
    _save(at, "tiny (edited)")  # saved under the suggested name, loaded again and edited again
    _load(at, "saved:tiny-edited")
    assert at.session_state["scenario"].name == "tiny (edited)"
    _edit_nmax(at, 3)
    assert not at.exception
    assert at.session_state["scenario"].name == "tiny (edited)"  # never "tiny (edited) (edited)"
    assert at.session_state["scenario"].description.count("Edited from") == 1


def test_an_edited_or_saved_preset_does_not_cite_the_paper_as_its_source(planning_home: Path) -> None:
    at = app("views/1_Scenario.py")
    _load(at, "preset:coral-core")
    paper = at.session_state["scenario"].source
    assert paper  # the preset cites its paper
    _save(at, "my coral")  # a preset saved under a name of its own
    saved = load_scenario(planning_home / "scenarios" / "my-coral.yaml")
    assert saved.source.startswith("Saved in the workbench as my coral from the preset coral-core")
    assert f"(the preset's setup: {paper})" in saved.source
    _edit_nmax(at, 3)
    edited = at.session_state["scenario"]
    assert edited.source.startswith("Edited in the workbench from the preset coral-core")
    _save(at, edited.name)
    assert load_scenario(planning_home / "scenarios" / "coral-core-edited.yaml").source == edited.source
    assert "Saved" in texts(at)


def _baselines_script() -> None:  # an AppTest script: the Plan page's baselines table of $BILL_PLAN
    import os
    from pathlib import Path

    import streamlit as st

    from planning.result import PlanResult
    from ui import widgets

    st.dataframe(widgets.baselines_table(PlanResult.from_json(Path(os.environ["BILL_PLAN"]).read_text())))


def test_a_baseline_that_cannot_meet_demand_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The enterprise preset's homo served "0.0 %" beside a note of 92 % and showed $0.00/h, $0/month and None."""
    from planning.result import BaselineSummary, PlanResult

    short = BaselineSummary("homo", 0.0, 0.0, False, note="cannot meet demand: q/decode falls short at 92 %",
                            served_by_group={"q/prefill": 0.92, "q/decode": 0.92, "g/prefill": 0.0, "g/decode": 0.0,
                                             "p/prefill": 1.0})
    ok = BaselineSummary("single:L4", 12.0, 1.0, True, note="all demand met")
    plan = PlanResult(status="optimal", objective="cost", cost_per_hour=10.0, provisioning_per_hour=10.0,
                      penalty_per_hour=0.0, served_fraction=1.0, mip_gap=0.0, baselines=(short, ok))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_dict()))
    monkeypatch.setenv("BILL_PLAN", str(path))
    at = AppTest.from_function(_baselines_script, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    table = at.dataframe[0].value.set_index("plan")
    assert table.loc["homo", "$/h"] == table.loc["homo", "$/month"] == "cannot meet demand"
    assert table.loc["homo", "served"] == "0.0% (worst model)"
    assert table.loc["homo", "note"].startswith("serves g/decode 0 %, g/prefill 0 %, q/decode 92 %, q/prefill 92 %")
    assert table.loc["single:L4", "$/h"] == "$12.00" and table.loc["single:L4", "plan saves"] == "16.7 %"
    assert table.loc["this plan (design hour, full cost)", "$/month"] == "$7,300"
    assert not table.isna().any().any()  # no None cell
