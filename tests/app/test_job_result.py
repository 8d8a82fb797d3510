"""widgets.job_result: the one "no job / running / failed / done" switch of the Plan and What-if job panels."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import TIMEOUT


def _panel_script() -> None:  # an AppTest script: job_result on a record built from $JOB_STATUS / $JOB_RESULT
    import os

    import streamlit as st

    from planning.jobs import JobRecord
    from ui import widgets

    status = os.environ["JOB_STATUS"]
    record = None if status == "none" else JobRecord(
        id="job-1", kind="markets", request_key="k", request_json="{}", status=status,  # type: ignore[arg-type]
        progress=0.5, message="", result_json=os.environ.get("JOB_RESULT") or None, error="the solver broke",
        error_field=None, error_detail=None, cancel_requested=False, owner=None, host=None, pid=None,
        heartbeat=None, created=0.0, started=None, finished=None)
    done = widgets.job_result(record, "Comparing markets", key="markets")
    st.caption(f"returned {None if done is None else done.id}")


def _run(monkeypatch: pytest.MonkeyPatch, status: str, result: str = "") -> tuple[AppTest, list[tuple[dict, str]]]:
    drawn: list[tuple[dict, str]] = []

    def live_jobs(jobs: Mapping[str, str], key: str, watch: object = None) -> None:  # the fragment polls: record it
        drawn.append((dict(jobs), key))

    monkeypatch.setattr("ui.widgets.live_jobs", live_jobs)
    monkeypatch.setenv("JOB_STATUS", status)
    monkeypatch.setenv("JOB_RESULT", result)
    at = AppTest.from_function(_panel_script, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    return at, drawn


def _returned(at: AppTest) -> str:
    return next(str(c.value) for c in at.caption if str(c.value).startswith("returned"))


def test_no_job_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    at, drawn = _run(monkeypatch, "none")
    assert _returned(at) == "returned None" and not drawn and not at.error and not at.warning


def test_a_running_job_gets_its_progress_panel(monkeypatch: pytest.MonkeyPatch) -> None:
    at, drawn = _run(monkeypatch, "running")
    assert _returned(at) == "returned None"
    assert drawn == [({"Comparing markets": "job-1"}, "markets")]


@pytest.mark.parametrize(("status", "says"), [("failed", "The markets job failed: the solver broke"),
                                              ("cancelled", "The markets job was cancelled")])
def test_a_job_without_a_result_says_why(monkeypatch: pytest.MonkeyPatch, status: str, says: str) -> None:
    at, drawn = _run(monkeypatch, status)
    shown = " ".join(str(e.value) for e in [*at.error, *at.warning])
    assert says in shown and _returned(at) == "returned None" and not drawn


def test_a_done_job_without_a_result_is_an_outcome_not_a_panel(monkeypatch: pytest.MonkeyPatch) -> None:
    at, drawn = _run(monkeypatch, "done")
    assert _returned(at) == "returned None" and not drawn


def test_a_done_job_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    at, drawn = _run(monkeypatch, "done", json.dumps({"rows": []}))
    assert _returned(at) == "returned job-1" and not drawn and not at.error and not at.warning


def _live_script() -> None:  # an AppTest script: the live panel of the job $JOB_ID
    import os

    from ui import widgets

    widgets.live_jobs({"Planning a day": os.environ["JOB_ID"]}, key="day")


def test_a_progress_bar_never_goes_back_though_the_estimate_does(planning_home: object,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeline's progress is its share of the expected time, which falls when a slower step begins: the bar
    keeps what it showed (the time left still reads the progress itself), and a retried attempt starts anew."""
    from pathlib import Path

    from planning.jobs import JobStore

    store = JobStore(Path(str(planning_home)) / "jobs.sqlite")
    job_id, _ = store.create_or_reuse("day-1", "timeline", {"day": 1}, None)
    store.mark_running(job_id)
    monkeypatch.setenv("JOB_ID", job_id)
    at = AppTest.from_function(_live_script, default_timeout=TIMEOUT)

    def bar() -> int:
        at.run()
        assert not at.exception
        return int(at.get("progress")[0].proto.value)

    store.set_progress(job_id, 0.5, "templates")  # fractions exact in binary: the bar's percent is truncated
    assert bar() == 50
    store.set_progress(job_id, 0.25, "look-ahead: planning hour 1 of 24")
    assert bar() == 50
    store.set_progress(job_id, 0.75, "look-ahead: planning hour 9 of 24")
    assert bar() == 75
    assert store.note_retry(job_id, 2, "attempt 1: its worker died")
    store.set_progress(job_id, 0.125, "templates")
    assert bar() == 12
    store.close()
