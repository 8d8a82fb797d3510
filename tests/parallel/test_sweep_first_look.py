"""A sweep's first look (issue 41, round 22; ``SweepOptions.first_pass_s``): every point's plan at a short limit
and without baselines, handed to the job as its rows so far, before any point is solved as asked; the sweep's
answer is the one it gives without a first look; a point the first look proved is not solved again when no
baseline is asked; a point the first look could not plan is solved as asked all the same."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

from planning import api, api_fanout
from planning.errors import PlanningError

PLAN = api.PLAN_METHOD
VALUES = [0.5, 2.0]


class Listener:
    """A job's progress writer as a sweep sees it: ``progress(f, m)`` and ``plan(partial)``."""

    def __init__(self) -> None:
        self.partials: list[dict[str, Any]] = []
        self.lines: list[str] = []

    def __call__(self, fraction: float, message: str = "") -> None:
        self.lines.append(message)

    def plan(self, partial: dict[str, Any]) -> None:
        import json

        json.dumps(partial, allow_nan=False)  # what the job store's partials table writes: plain JSON, no NaN
        self.partials.append(partial)


def _scenario() -> api.Scenario:
    preset = api.load_preset_scenario("coral-core")  # a far limit: these tests are about answers, not speed
    return replace(preset, options=replace(preset.options, time_limit_s=3600.0))


def _answers(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    return [(r.x, r.method, round(r.cost_per_hour, 6) if math.isfinite(r.cost_per_hour) else None, r.status)
            for r in frame.itertuples(index=False)]


def test_the_first_look_shows_every_point_before_any_is_solved_as_asked() -> None:
    """With baselines: N partials of plan rows only (one more point each, none final), then one per point solved
    as asked (its baselines' rows with it); the frame is the sweep's answer without a first look."""
    scenario, seen = _scenario(), Listener()
    frame = api.sweep(scenario, "demand", VALUES, progress=seen,
                      options=api.SweepOptions(first_pass_s=600.0))
    first, then = seen.partials[:len(VALUES)], seen.partials[len(VALUES):]
    for i, partial in enumerate(first):
        assert partial["final"] == 0 and partial["points"] == len(VALUES)
        assert [r["x"] for r in partial["rows"]] == VALUES[:i + 1] and {r["method"] for r in partial["rows"]} == {PLAN}
    assert [p["final"] for p in then] == list(range(1, len(VALUES) + 1))
    assert len({r["method"] for r in then[-1]["rows"]}) > 1  # the baselines came with the points solved as asked
    assert any(line.startswith("first look: ") for line in seen.lines)
    plain = api.sweep(scenario, "demand", VALUES)
    assert _answers(frame) == _answers(plain)


def test_a_point_the_first_look_proved_is_kept_without_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without baselines, every point proven by its first look: one solve per point, the same answers."""
    scenario, calls = _scenario(), []
    real = api_fanout.sweep_point

    def counted(point: tuple[Any, ...], cancel: Any = None, warm: Any = None) -> list[dict[str, Any]]:
        calls.append(point[2])
        return real(point, cancel, warm)

    monkeypatch.setattr(api_fanout, "sweep_point", counted)
    frame = api.sweep(scenario, "demand", VALUES, options=api.SweepOptions(baselines=False, first_pass_s=600.0))
    assert calls == VALUES and set(frame.status) == {"optimal"}
    monkeypatch.setattr(api_fanout, "sweep_point", real)
    assert _answers(frame) == _answers(api.sweep(scenario, "demand", VALUES,
                                                 options=api.SweepOptions(baselines=False)))


def test_a_point_the_first_look_could_not_plan_is_solved_as_asked() -> None:
    """A first look too short for any plan: its rows say so (no cost, as JSON null), and every point is then solved
    as asked, with the sweep's own answers."""
    scenario, seen = _scenario(), Listener()
    frame = api.sweep(scenario, "demand", VALUES, progress=seen,
                      options=api.SweepOptions(baselines=False, first_pass_s=1e-4))
    looked = seen.partials[len(VALUES) - 1]["rows"]
    assert all(r["cost_per_hour"] is None and r["status"] != "optimal" for r in looked)
    assert set(frame.status) == {"optimal"}
    assert _answers(frame) == _answers(api.sweep(scenario, "demand", VALUES,
                                                 options=api.SweepOptions(baselines=False)))


def test_the_first_look_only_runs_where_the_points_run_here() -> None:
    """On the process pool the points are solved as asked only (the first look is one after another, here)."""
    seen = Listener()
    api.sweep(_scenario(), "demand", [1.0], progress=seen, workers=2,
              options=api.SweepOptions(baselines=False, first_pass_s=600.0))
    assert not any(line.startswith("first look: ") for line in seen.lines) and seen.partials == []


@pytest.mark.parametrize("limit", [0.0, -1.0, math.inf, math.nan, "1"])
def test_a_bad_first_look_names_the_field(limit: Any) -> None:
    with pytest.raises(PlanningError) as err:
        api.SweepOptions(first_pass_s=limit)
    assert err.value.field == "first_pass_s"


def test_no_first_look_when_the_points_own_limit_is_no_longer() -> None:
    """A point limit at or under the first look's: the points are solved as asked only (a look would repeat them)."""
    seen = Listener()
    api.sweep(_scenario(), "demand", [1.0], progress=seen,
              options=api.SweepOptions(baselines=False, point_limit_s=5.0, first_pass_s=5.0))
    assert not any(line.startswith("first look: ") for line in seen.lines)
    assert [p["final"] for p in seen.partials] == [1]  # the rows still reach the job as each point lands


def test_the_progress_is_a_share_of_the_time_still_expected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four points, a 20 s limit, a 2 s first look: while looking, every point counts its limit; after the look,
    a point it proved counts what its look took, the others their limit less their look (the limit counts it); a
    point solved as asked adds what it took
    beyond that (its baselines) to each point still to come. ``JobRecord.time_left`` reads the fraction back as
    that time left."""
    now = [0.0]
    monkeypatch.setattr(api_fanout, "time_now", lambda: now[0])
    rows = api_fanout._SweepRows(4, None, 20.0, look=2.0)
    proven, open_ = [{"status": "optimal"}], [{"status": "feasible"}]

    def left() -> float:
        f = rows.fraction()
        return now[0] * (1 - f) / f

    now[0] = 1.0
    rows.land(0, proven, final=False, seconds=1.0)
    assert left() == pytest.approx(3 * 2.0 + 1.0 + 3 * 20.0)  # 3 looks to come; ×0 proven in 1 s; 3 at their limit
    for i, r in enumerate([open_, proven, open_], start=1):
        now[0] += 2.0
        rows.land(i, r, final=False, seconds=2.0)
    assert left() == pytest.approx(1.0 + 18.0 + 2.0 + 18.0)  # an unproven point's limit counts its look
    now[0] += 6.0
    rows.land(0, proven, final=True, seconds=6.0)  # 5 s beyond its look: the baselines
    assert left() == pytest.approx((18.0 + 5.0) + (2.0 + 5.0) + (18.0 + 5.0))


def test_a_points_limit_counts_its_first_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """A point its first look did not prove is solved as asked within its limit less what the look took."""
    asked: list[tuple[float, Any]] = []
    real = api_fanout.sweep_point

    def recorded(point: tuple[Any, ...], cancel: Any = None, warm: Any = None) -> list[dict[str, Any]]:
        asked.append((point[2], point[4]))
        rows = real(point, cancel, warm)
        if point[4] == 7.0:  # the first look: said not proven, so that the point is solved again
            rows = [{**rows[0], "status": "feasible"}, *rows[1:]]
        return rows

    monkeypatch.setattr(api_fanout, "sweep_point", recorded)
    api.sweep(_scenario(), "demand", [1.0], options=api.SweepOptions(baselines=False, point_limit_s=600.0,
                                                                     first_pass_s=7.0))
    (x0, look), (x1, then) = asked
    assert x0 == x1 == 1.0 and look == 7.0 and 600.0 - 7.0 <= then < 600.0
