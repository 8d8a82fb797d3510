"""Timeline page: a day of demand is planned in the background and drawn with the static/homogeneous comparison."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import app, planned, texts, wait_for_job


def test_timeline_page_plans_a_day_in_the_background(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="pages/7_Timeline.py")  # the working scenario is "tiny"
    assert not at.exception
    assert "Plan the day" in [b.label for b in at.button]
    at.selectbox(key="tl_src_llama-3-8b").set_value("sample: azure_conv_day")
    at.selectbox(key="tl_epoch").set_value("4h")
    next(b for b in at.button if b.label == "Plan the day").click()
    at.run()
    job_id = str(at.session_state["timeline_job"])
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "Adaptive plan, month (730 h)" in labels and "Node starts / stops" in labels
    methods = set(at.dataframe[0].value["method"])
    assert {"adaptive (mixed templates)", "static peak", "Homo (re-planned)"} <= methods
    assert len(at.get("plotly_chart")) >= 5


def test_timeline_page_without_a_job_explains(planning_home: Path) -> None:
    at = app("pages/7_Timeline.py")
    assert not at.exception
    assert "Plan the day" in texts(at)
