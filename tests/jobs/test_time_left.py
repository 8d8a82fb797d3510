"""A running job's estimate of the time left (JobRecord.time_left / time_left_text), with an injected clock."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from planning.jobs.record import JobRecord

T0 = 1_000_000.0


def _record(progress: float, *, status: str = "running", limit: float | None = None, kind: str = "solve") -> JobRecord:
    request: dict[str, Any] = {"scenario": {"options": {"time_limit_s": limit}}} if limit is not None else {}
    return JobRecord(id="j", kind=kind, request_key="k", request_json=json.dumps(request), status=status,  # type: ignore[arg-type]
                     progress=progress, message="pricing: round 3", result_json=None, error=None, error_field=None,
                     error_detail=None, cancel_requested=False, owner=None, host=None, pid=None, heartbeat=None,
                     created=T0, started=T0, finished=None)


def test_linear_estimate_from_the_share_done() -> None:
    assert _record(0.25).time_left(now=T0 + 10) == pytest.approx(30.0)  # a quarter in 10 s: 30 s to go
    assert _record(0.25).time_left_text(now=T0 + 10) == "about 30 s left"
    assert _record(0.5).time_left_text(now=T0 + 600) == "about 10 min left"
    assert _record(0.999).time_left_text(now=T0 + 100) == "almost done"


def test_no_estimate_without_enough_to_go_on() -> None:
    assert _record(0.01).time_left(now=T0 + 10) is None  # below ESTIMATE_FROM
    assert _record(0.5).time_left(now=T0 + 0.5) is None  # under a second
    assert _record(0.01).time_left_text(now=T0 + 10) == "estimating the time left"
    assert _record(0.5, status="done").time_left_text(now=T0 + 10) == ""
    assert replace(_record(0.5), started=None).time_left(now=T0 + 10) is None


def test_the_time_limit_caps_the_estimate() -> None:
    assert _record(0.1, limit=60).time_left(now=T0 + 20) == pytest.approx(40.0)  # linear says 180 s
    assert _record(0.1, limit=10).time_left(now=T0 + 20) == pytest.approx(0.0)  # past it: the plan is imminent


def test_a_per_epoch_limit_does_not_cap_a_timeline() -> None:
    """A timeline's (or a sweep's) scenario limit bounds each epoch's (point's) solve, not the job."""
    assert _record(0.4, limit=60, kind="timeline").time_left(now=T0 + 80) == pytest.approx(120.0)
    assert _record(0.4, limit=60, kind="sweep").time_left(now=T0 + 80) == pytest.approx(120.0)
    assert _record(0.4, limit=60, kind="solve").time_left(now=T0 + 80) == pytest.approx(0.0)


def test_every_job_over_ten_seconds_has_an_estimate() -> None:
    """Past ESTIMATE_AFTER_S a small share still gives the pace, and a job with no progress yet is estimated by
    its time limit; with neither there is nothing honest to say."""
    assert _record(0.01).time_left(now=T0 + 11) == pytest.approx(11 * 99)  # 1 % in 11 s
    assert _record(0.01).time_left_text(now=T0 + 11) == "about 18 min left"
    assert _record(0.0, limit=120).time_left(now=T0 + 20) == pytest.approx(100.0)
    assert _record(0.0, limit=120).time_left(now=T0 + 5) is None  # not yet 10 s: wait for a pace
    assert _record(0.0).time_left(now=T0 + 60) is None


def test_timeline_progress_in_the_users_words() -> None:
    """The timeline's progress lines count the horizon in the user's unit, not the solver's epochs."""
    from planning.progress_words import period, planning_period, sizing_check

    assert planning_period(12, 24, 1.0) == "planning hour 12 of 24"
    assert period(2, 24, 2.0) == "hours 3–4 of 48"
    assert period(3, 7, 24.0) == "day 3 of 7"
    assert period(1, 2, 48.0) == "days 1–2 of 4"
    assert period(5, 96, 0.25) == "period 5 of 96 (0.25 h each)"
    assert "cut master" not in sizing_check("step 148: bound 1, best plan 2")
