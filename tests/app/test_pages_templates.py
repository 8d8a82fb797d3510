"""Templates page: library build as a background job, explorer scatter, pipeline of a chosen template."""

from __future__ import annotations

import json
from pathlib import Path

from tests.app.conftest import app, save_tiny, texts, wait_for_job


def test_templates_page_asks_for_a_build() -> None:
    at = app("views/2_Templates.py")
    assert not at.exception
    assert "Build the template library" in texts(at)


def test_build_library_then_explore(planning_home: Path) -> None:
    save_tiny(planning_home)
    at = app("views/1_Scenario.py")
    next(s for s in at.selectbox if s.label == "Preset or saved scenario").set_value("saved:tiny")
    next(b for b in at.button if b.label == "Load").click()
    at.run()
    at.switch_page("views/2_Templates.py")
    at.run()
    next(b for b in at.button if b.label == "Build the template library").click()
    at.run()
    job_id = str(at.session_state["library_job"])
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    assert any("templates" in s.value for s in at.subheader)
    charts = [json.dumps(json.loads(c.proto.spec), ensure_ascii=False) for c in at.get("plotly_chart")]
    # issue 12: prompt and output tokens/s never share an axis (one scatter per phase) + the pipeline
    assert len(charts) == 3
    assert "decode templates" in charts[0] and "prefill templates" in charts[1]
    # issue 12: the diagram never labels a node "0 tok/s"; its title carries the template's real throughput
    assert " 0 tok/s" not in charts[2] and ">0 tok/s" not in charts[2]
    assert "tok/s" in json.loads(charts[2])["layout"]["title"]["text"]
    pick = next(s for s in at.selectbox if s.label == "Pipeline layout of")
    assert len(pick.options) >= 1
    # filter to one phase: the count shown follows
    phase = next(m for m in at.multiselect if m.label == "Phase")
    phase.set_value([phase.options[0]])
    next(b for b in at.button if b.label == "Filter").click()
    at.run()
    assert not at.exception
