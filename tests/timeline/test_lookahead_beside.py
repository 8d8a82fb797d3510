"""The look-ahead on a thread beside the epoch loop (planning.timeline.beside.lookahead_beside): with myopic first,
the day's answers are those planned one after another — the detailed epochs are the ones the loop plans alone,
field by field, and the look-ahead's schedule is the same —; a step that falls back to a myopic epoch plans it
apart from the loop; a failure on either side reaches the caller and stops the other; the time left is the longer
part's and the progress line says both. Clocks are injected where time is read; nothing asserts a duration."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from planning.context import engine_context
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, beside, loop, policies, run_timeline
from planning.timeline.demand import diurnal
from planning.timeline.pace import Pace

OPTIONS = TimelineOptions(policies=("myopic", "lookahead"), baselines=(), static_peak=False)


def _day(small: Scenario, seed: int) -> list:
    import random

    rng = random.Random(seed)
    shape = [rng.uniform(0.3, 1.0) for _ in range(6)]
    return [diurnal(m.id, shape, m.demand.rate_rps, m.demand.input_len, m.demand.output_len, 1.0)
            for m in small.models]


def _untimed(value: Any) -> Any:
    """``value`` without its timings (the only fields a run may change), at every depth."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if "second" not in k}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _epochs(result: Any, methods: bool = True) -> list[dict[str, Any]]:
    """Every epoch's record without its timings (and, ``methods`` False, without the policies compared)."""
    return [_untimed({k: v for k, v in e.items() if methods or k != "methods"}) for e in result.to_dict()["epochs"]]


@pytest.mark.parametrize("seed", [4, 5])
def test_beside_gives_the_answers_planned_one_after_another(small: Scenario, seed: int) -> None:
    """Beside the loop or before it: the same detailed epochs, field by field, and the same look-ahead schedule."""
    ctx, demand = engine_context(), _day(small, seed)
    started: list[beside.Beside] = []
    real = beside.Beside.run

    def spy(*args: Any, **kwargs: Any) -> beside.Beside:
        started.append(real(*args, **kwargs))
        return started[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(beside.Beside, "run", spy)
        with_thread = run_timeline(small, demand, options=OPTIONS, context=ctx)
    assert [b._thread.name for b in started if b._thread] == ["timeline-lookahead"]  # it did run beside
    one_after = run_timeline(small, demand, options=replace(OPTIONS, lookahead_beside=False), context=ctx)
    assert _epochs(with_thread) == _epochs(one_after)
    a, b = with_thread.to_dict()["policies"]["lookahead"], one_after.to_dict()["policies"]["lookahead"]
    assert a["total_cost"] == pytest.approx(b["total_cost"], rel=1e-12)


def test_a_fallback_step_is_planned_apart_from_the_loop(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every look-ahead step made to fall back to a myopic epoch: the loop's epochs are still the ones the loop
    plans alone (myopic only), and the look-ahead's schedule is those fallbacks, noted as such."""
    ctx, demand = engine_context(), _day(small, 6)
    alone = run_timeline(small, demand, options=replace(OPTIONS, policies=("myopic",)), context=ctx)
    real = policies.solve_horizon

    def no_plan(*args: Any, **kwargs: Any) -> Any:
        return replace(real(*args, **kwargs), value=math.inf)  # no plan: the step falls back

    monkeypatch.setattr(policies, "solve_horizon", no_plan)
    both = run_timeline(small, demand, options=OPTIONS, context=ctx)
    assert _epochs(both, methods=False) == _epochs(alone, methods=False)
    info = both.to_dict()["policy_info"]["lookahead"]
    assert info["myopic_epochs"] == list(range(len(both.epochs)))
    assert any("planned myopically" in n for n in both.notes)


def test_a_failure_in_the_loop_stops_the_look_ahead(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in the epoch loop reaches the caller, and the look-ahead thread's token is set."""
    started: list[beside.Beside] = []
    real = beside.Beside.run

    def spy(*args: Any, **kwargs: Any) -> beside.Beside:
        started.append(real(*args, **kwargs))
        return started[-1]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("an epoch failed")

    monkeypatch.setattr(beside.Beside, "run", spy)
    monkeypatch.setattr(loop, "run_epochs", broken)
    with pytest.raises(RuntimeError, match="an epoch failed"):
        run_timeline(small, _day(small, 1), options=OPTIONS, context=engine_context())
    assert len(started) == 1 and started[0].token.is_set()


def test_a_failure_in_the_look_ahead_reaches_the_caller(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error raised on the look-ahead's thread is raised by the day, after the loop."""
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a step failed")

    monkeypatch.setattr(policies, "solve_horizon", broken)
    with pytest.raises(RuntimeError, match="a step failed"):
        run_timeline(small, _day(small, 1), options=OPTIONS, context=engine_context())


def test_the_time_left_is_the_longer_part_and_the_line_says_both() -> None:
    """24 look-ahead steps beside 24 epochs: before a step is timed, the running first step counts at least what it
    has run; with 2 steps of 3 s and 12 epochs of 1 s done, the time left is max(22 × 3, 12 × 1), not their sum;
    the loop's line is said after the look-ahead's while both run, and alone once the look-ahead is done."""
    now, seen = [0.0], []
    pace = Pace(lambda f, m: seen.append((f, m)), 24, lookahead_steps=24, horizon=3, clock=lambda: now[0])
    pace.lookahead_beside = True
    pace.lookahead_started("look-ahead (H=3): planning 24 epochs")
    now[0] = 5.0
    pace.epoch_done(0.5, "planning hour 1 of 24")
    assert seen[-1][1] == "look-ahead (H=3): planning 24 epochs; beside it, myopic and baselines: planning hour 1 of 24"
    assert pace.left_s() == pytest.approx(24 * 5.0)  # the first step has run 5 s: no step is shorter than that
    for _ in range(2):
        now[0] += 3.0
        pace.step_done("look-ahead (H=3): planning hour 2 of 24")
    pace.step_seconds, pace.epoch_seconds = [3.0, 3.0], [1.0] * 12
    assert pace.left_s() == pytest.approx(max(22 * 3.0, 12 * 1.0))
    pace.step_seconds = [3.0] * 24  # the look-ahead is done: the loop's line alone
    pace.epoch_done(1.0, "planning hour 14 of 24")
    assert seen[-1][1] == "planning hour 14 of 24"
