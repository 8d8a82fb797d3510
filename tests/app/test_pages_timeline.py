"""Timeline page: a day of demand is planned in the background and drawn with the static/homogeneous comparison."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import app, planned, texts, wait_for_job


def test_timeline_page_plans_a_day_in_the_background(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/7_Timeline.py")  # the working scenario is "tiny"
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
    frames = [d.value for d in at.dataframe]
    methods = set(next(f for f in frames if "method" in f.columns)["method"])
    assert {"myopic (Coral)", "static peak", "Homo (re-planned)", "offline (all epochs at once)"} <= methods
    assert any(m.startswith("look-ahead (H=") for m in methods)
    policies = next(f for f in frames if "policy" in f.columns).set_index("policy")  # the three side by side
    assert {"myopic (Coral)", "offline (all epochs at once)"} <= set(policies.index) and len(policies) == 3
    offline = float(policies.loc["offline (all epochs at once)", "best_found"])
    assert all(float(t) >= offline - 1e-6 for t in policies["best_found"])  # it starts from the others
    bound = policies["proven_bound"].dropna()
    assert len(bound) == 3 and all(float(b) <= offline + 1e-6 for b in bound)  # one bound, below every schedule
    for proof, gap in zip(policies["proof"], policies["gap"], strict=True):  # "optimum" only at gap 0
        assert ("optimum" in proof) == (gap is not None and float(gap) <= 1e-6)
    assert len(at.get("plotly_chart")) >= 5


def test_timeline_page_without_a_job_explains(planning_home: Path) -> None:
    at = app("views/7_Timeline.py")
    assert not at.exception
    assert "Plan the day" in texts(at)


def _run_timeline(planning_home: Path, setup: Callable[[AppTest], None]) -> AppTest:
    at, _ = planned(planning_home, page="views/7_Timeline.py")  # the working scenario is "tiny" (2 req/s)
    setup(at)
    next(b for b in at.button if b.label == "Plan the day").click()
    at.run()
    assert not at.exception
    return at


def _finished(planning_home: Path, at: AppTest) -> dict[str, Any]:
    job_id = str(at.session_state["timeline_job"])
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    from planning.jobs.store import JobStore

    store = JobStore(planning_home / "jobs.sqlite")
    try:
        record = store.get(job_id)
    finally:
        store.close()
    assert record.result_json is not None
    out: dict[str, Any] = json.loads(record.result_json)
    return out


def test_timeline_page_plans_an_edited_diurnal_curve(planning_home: Path) -> None:
    """A curve typed into the form: 24 hourly values scaled so the peak is the scenario's rate."""
    curve = [1.0] * 24
    curve[18] = 4.0  # the evening peak
    curve[3] = 0.5

    def setup(at: AppTest) -> None:
        at.selectbox(key="tl_src_llama-3-8b").set_value("diurnal curve")
        at.run()
        at.text_input(key="tl_curve_llama-3-8b").set_value(",".join(f"{v:g}" for v in curve))

    at = _run_timeline(planning_home, setup)
    result = _finished(planning_home, at)
    rates = [ep["demand_rps"]["llama-3-8b"] for ep in result["epochs"]]
    assert len(rates) == 24
    assert max(rates) == pytest.approx(2.0) and rates.index(max(rates)) == 18  # peak = the scenario's 2 req/s
    assert rates[3] == pytest.approx(2.0 * 0.5 / 4.0)
    assert rates[0] == pytest.approx(2.0 / 4.0)
    assert "Adaptive plan, month (730 h)" in [m.label for m in at.metric]


def test_timeline_page_rejects_a_curve_that_is_not_numbers(planning_home: Path) -> None:
    def setup(at: AppTest) -> None:
        at.selectbox(key="tl_src_llama-3-8b").set_value("diurnal curve")
        at.run()
        at.text_input(key="tl_curve_llama-3-8b").set_value("1, 2, lots")

    at = _run_timeline(planning_home, setup)
    assert at.session_state["timeline_job"] is None  # nothing was submitted
    message = " ".join(str(e.value) for e in at.error)
    assert "llama-3-8b curve" in message and "not a list of numbers" in message


_EVENING = "epoch_start,rate_rps,input_len,output_len\n" + "".join(
    f"{h},{r},{400 + 10 * h},{100}\n" for h, r in enumerate([1.0, 3.0, 2.0, 0.5]))


@pytest.mark.parametrize(("match", "planned"), [("absolute", [1.0, 3.0, 2.0, 0.5]),
                                                ("peak", [2 / 3, 2.0, 4 / 3, 1 / 3])])
def test_timeline_page_plans_an_uploaded_epoch_table(planning_home: Path, match: str, planned: list[float]) -> None:
    """The table's own rates on request; by default its shape with the peak at the scenario's 2 req/s."""
    def setup(at: AppTest) -> None:
        at.selectbox(key="tl_src_llama-3-8b").set_value("upload")
        at.run()
        at.file_uploader(key="tl_up_llama-3-8b").upload("evening.csv", _EVENING.encode(), "text/csv")
        at.radio(key="tl_match").set_value(match)

    at = _run_timeline(planning_home, setup)
    result = _finished(planning_home, at)
    assert [ep["demand_rps"]["llama-3-8b"] for ep in result["epochs"]] == pytest.approx(planned)
    assert result["trace_rps"]["llama-3-8b"] == pytest.approx([1.0, 3.0, 2.0, 0.5])
    assert result["demand_match"] == match
    assert "evening.csv" in result["demand_sources"]["llama-3-8b"]
    assert any("Demand planned:" in c.value for c in at.caption)


def test_timeline_page_explains_a_bad_upload(planning_home: Path) -> None:
    def setup(at: AppTest) -> None:
        at.selectbox(key="tl_src_llama-3-8b").set_value("upload")
        at.run()
        at.file_uploader(key="tl_up_llama-3-8b").upload("notes.csv", b"hello,world\n1,2\n", "text/csv")

    at = _run_timeline(planning_home, setup)
    job_id = at.session_state["timeline_job"]
    if job_id is not None:  # the file is read in the job: it fails with the field and the fix, not a traceback
        assert wait_for_job(planning_home, str(job_id)) == "failed"
        at.run()
    assert not at.exception
    shown = texts(at)
    assert "notes.csv" in shown and "Traceback" not in shown
