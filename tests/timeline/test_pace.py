"""The timeline's progress as a share of its expected time (planning.timeline.pace): the job's "about N s left"
read from it is the work still to come. Clocks are injected; nothing here depends on the machine's speed."""

from __future__ import annotations

import json
import threading

import pytest

from planning.jobs.record import JobRecord
from planning.scenario import Scenario
from planning.timeline.pace import Pace


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _running(kind: str, fraction: float, limit: float | None = 60.0) -> JobRecord:
    request = {"scenario": {"options": {"time_limit_s": limit}}}
    return JobRecord(id="j", kind=kind, request_key="k", request_json=json.dumps(request), status="running",
                     progress=fraction, message="", result_json=None, error=None, error_field=None, error_detail=None,
                     cancel_requested=False, owner=None, host=None, pid=None, heartbeat=None, created=0.0, started=0.0,
                     finished=None)


def test_the_reported_fraction_reads_back_as_the_time_left() -> None:
    """10 s of templates, then look-ahead steps of 3 s over H = 3 epochs, a 40 s offline limit and 24 epochs: after
    two steps the job's estimate is 22 steps × 3 s + 40 s + 24 epochs × 1 s (epochs not begun: a step ÷ H)."""
    clock, seen = Clock(), []
    pace = Pace(lambda f, m: seen.append((f, m)), 24, lookahead_steps=24, offline_limit_s=40.0, horizon=3,
                clock=clock)
    clock.now = 10.0
    pace.lookahead_started("look-ahead")
    for _ in range(2):
        clock.now += 3.0
        pace.step_done("step")
    expected = 22 * 3.0 + 40.0 + 24 * 1.0
    assert pace.left_s() == pytest.approx(expected)
    f = seen[-1][0]
    assert f == pytest.approx(16.0 / (16.0 + expected))
    # the job store reads it back: the timeline's per-epoch time limit (60 s) does not cap a timeline's estimate
    assert _running("timeline", f).time_left(now=16.0) == pytest.approx(expected)
    assert _running("solve", f).time_left(now=16.0) == pytest.approx(60.0 - 16.0)


def test_epochs_take_their_own_mean_once_begun_and_the_offline_limit_runs_down() -> None:
    clock, seen = Clock(), []
    pace = Pace(lambda f, m: seen.append((f, m)), 4, offline_limit_s=30.0, clock=clock)
    pace.offline_started = 0.0
    clock.now = 12.0
    assert pace.left_s() == pytest.approx(18.0)  # no step timed yet: the epochs are unknown, the MILP has 18 s
    pace.offline_done = True
    clock.now = 14.0
    pace.epoch_done(2.0, "planning hour 1 of 4")
    assert pace.left_s() == pytest.approx(3 * 2.0)
    clock.now = 15.0
    pace.epoch_done(1.0, "planning hour 2 of 4")
    assert pace.left_s() == pytest.approx(2 * 1.5)
    assert seen[-1] == (pytest.approx(15.0 / 18.0), "planning hour 2 of 4")


def test_the_offline_milp_is_reported_on_a_timer_while_it_runs() -> None:
    """Inside ``offline`` the fraction is reported again without a step (the MILP has no progress of its own)."""
    clock, seen = Clock(), []
    two = threading.Event()

    def progress(f: float, m: str) -> None:
        seen.append((f, m))
        if len(seen) >= 2:
            two.set()

    pace = Pace(progress, 2, offline_limit_s=100.0, clock=clock)
    with pace.offline("offline", tick_s=0.01):
        clock.now = 50.0
        assert two.wait(5.0)  # the tick reported once more (an event, not a timing)
    assert seen[0][1] == "offline" and seen[-1][1] == "offline"
    assert max(f for f, _ in seen) == pytest.approx(0.5)  # 50 s spent, 50 s of the limit left, no epoch time known
    assert pace.offline_done and pace.left_s() == 0.0  # nothing timed yet: the epochs count 0 s each


def test_a_timeline_reports_rising_estimates_in_the_users_words(small: Scenario) -> None:
    """A real (small) day with the look-ahead policy: every fraction in (0, 1], the last 1, the epochs' lines
    in the user's words, and the look-ahead's steps reported one by one."""
    from planning.context import engine_context
    from planning.progress_words import planning_period
    from planning.timeline import TimelineOptions, run_timeline
    from planning.timeline.demand import diurnal

    seen: list[tuple[float, str]] = []
    demand = [diurnal(m.id, [1, 2, 3, 2], m.demand.rate_rps, m.demand.input_len, m.demand.output_len, 6.0)
              for m in small.models]
    run_timeline(small, demand, options=TimelineOptions(policies=("myopic", "lookahead"), baselines=()),
                 context=engine_context(), progress=lambda f, m: seen.append((f, m)))
    assert all(0.0 < f <= 1.0 for f, _ in seen) and seen[-1][0] == 1.0
    # the look-ahead runs beside the loop (myopic first): while both run, the loop's line follows the look-ahead's
    loop_lines: list[str] = []
    for _, m in seen:
        part = m.split("; beside it, myopic and baselines: ")[-1]
        if part.startswith("planning hours") and (not loop_lines or loop_lines[-1] != part):
            loop_lines.append(part)
    assert loop_lines == [planning_period(i, 4, 6.0) for i in range(1, 5)]
    ahead_lines = {m.split("; beside it")[0] for _, m in seen if m.startswith("look-ahead")}
    assert len({line for line in ahead_lines if "hours" in line}) == 4


def test_epochs_that_repeat_the_one_before_are_timed_apart() -> None:
    """Four epochs, the 2nd and 4th repeating the one before: after the first (new, 3 s) the repeats count nothing
    yet; once one is timed (0.2 s) it prices the last."""
    clock = Clock()
    pace = Pace(None, 4, clock=clock, repeats=(False, True, False, True))
    pace.epoch_done(3.0, "planning hour 1 of 4")
    assert pace.left_s() == pytest.approx(3.0)  # the 3rd epoch is a new problem; the repeats are not timed yet
    pace.epoch_done(0.2, "planning hour 2 of 4")
    assert pace.left_s() == pytest.approx(3.0 + 0.2)
