"""A sweep gives each point's own answer (issue 41): points solved here, each warm from the points before it, cost
what the same points cost solved one by one through ``api.solve``, and every row says what its solve proved — a
point stopped by its time limit is labelled with its proven gap, never as optimal."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

import planning.allocate.ondemand as ondemand
import planning.pipeline as pipeline
from planning import api
from planning.context import Deadline
from planning.errors import PlanningError
from tests.clock import SkipClock, skip_clock

PRESET = "coral-core"
PLAN = "Plan (mixed templates)"


def test_a_sweeps_points_cost_what_each_point_costs_alone() -> None:
    # a far time limit: on a busy machine the preset's own 60 s may stop a point (or a baseline) before its proof,
    # and this test is about equal answers, not speed (the labels of a stopped point are tested below)
    preset = api.load_preset_scenario(PRESET)
    scenario = replace(preset, options=replace(preset.options, time_limit_s=3600.0))
    values = [0.5, 2.0]
    frame = api.sweep(scenario, "demand", values)
    assert list(frame.columns) == api.SWEEP_COLUMNS
    for x in values:
        alone = api.solve(replace(scenario.with_demand_scaled(x), name=f"{scenario.name} (demand ×{x:g})"),
                          cache=False)
        rows = frame[frame.x == x].set_index("method")
        plan = rows.loc[PLAN]
        assert alone.status == plan.status == "optimal"
        assert plan.cost_per_hour == pytest.approx(alone.comparable_cost, rel=1e-9)
        assert plan.proven_gap == 0.0 and plan.proof == alone.proof() and plan.proof.startswith("proven optimal")
        proven = [b for b in alone.baselines if b.feasible and not b.time_limited]
        assert proven, "coral-core has baselines that meet all demand"
        for b in alone.baselines:  # the baselines the figure draws beside the plan: the same answers
            row = rows.loc[b.name]
            assert bool(row.feasible) == b.feasible, b.name
            if b.feasible and not b.time_limited and row.status == "proven":
                assert row.cost_per_hour == pytest.approx(b.cost_per_hour, rel=1e-9), b.name
            if not b.feasible:
                assert math.isnan(row.cost_per_hour) and row.status in ("infeasible", "not run"), b.name
    assert [n for n in api.sweep_notes(frame) if n.startswith("plan")] == []
    low, high = (frame[(frame.x == x) & (frame.method == PLAN)].cost_per_hour.item() for x in values)
    assert high > low


def test_a_sweep_without_baselines_has_the_plans_rows_only() -> None:
    scenario = api.load_preset_scenario(PRESET)
    with_all = api.sweep(scenario, "demand", [0.5])
    plan_only = api.sweep(scenario, "demand", [0.5], options=api.SweepOptions(baselines=False))
    assert list(plan_only.method) == [PLAN]
    assert len(with_all) > 1
    assert plan_only.cost_per_hour.item() == pytest.approx(
        with_all[with_all.method == PLAN].cost_per_hour.item(), rel=1e-9)


def test_a_point_stopped_by_its_limit_is_labelled_with_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point limit reaches the solve's one deadline; when the clock passes it (moved, not waited for) after the
    first plan, the point keeps that plan, labelled "within … of the optimum (proven gap)", status feasible."""
    clock: SkipClock = skip_clock(monkeypatch)
    made: list[Deadline] = []

    class Recorded(Deadline):
        def __init__(self, seconds: float, inner: Any = None) -> None:
            super().__init__(seconds, inner)
            made.append(self)

    real_bounds = ondemand.group_bounds

    def late_bounds(*args: Any, **kwargs: Any) -> Any:
        clock.skip_past(made[-1])  # the point's deadline passes before its Lagrangian bounds
        return real_bounds(*args, **kwargs)

    monkeypatch.setattr(pipeline, "Deadline", Recorded)
    monkeypatch.setattr(ondemand, "group_bounds", late_bounds)
    scenario = api.load_preset_scenario(PRESET)
    frame = api.sweep(scenario, "demand", [2.0], options=api.SweepOptions(baselines=False, point_limit_s=45.0))
    assert [d.limit_s for d in made] == [45.0]  # below the preset's 60 s: the point limit is the solve's limit
    plan = frame.set_index("method").loc[PLAN]
    assert plan.status == "feasible" and bool(plan.feasible)
    assert math.isfinite(plan.proven_gap) and plan.proven_gap >= 0.0
    assert plan.proof.startswith("within ") and plan.proof.endswith("(proven gap)")
    assert plan.status != "optimal" and "proven optimal" not in plan.proof
    assert api.sweep_notes(frame) == [f"plan at ×2: {plan.proof}"]  # what the page and the CLI print under it


@pytest.mark.parametrize("limit", [0.0, -5.0, math.inf, math.nan, "10"])
def test_a_bad_point_limit_names_the_field(limit: Any) -> None:
    with pytest.raises(PlanningError) as err:
        api.SweepOptions(point_limit_s=limit)
    assert err.value.field == "point_limit_s"


def test_the_cli_sweep_says_what_each_point_proved(capsys: pytest.CaptureFixture[str]) -> None:
    from planning.cli import main

    assert main(["sweep", "--preset", "melange-arena", "--values", "1", "--no-baselines"]) == 0
    out = capsys.readouterr().out
    assert "every point proven" in out and "Plan (mixed templates)" in out
    assert main(["sweep", "--preset", "melange-arena", "--values", "1", "--no-baselines", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["method"], r["status"], r["proven_gap"]) for r in rows] == [(PLAN, "optimal", 0.0)]


@pytest.mark.parametrize("limit", ["0", "-3", "inf", "nan"])
def test_the_cli_refuses_a_bad_point_limit(limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    from planning.cli import main

    assert main(["sweep", "--preset", "melange-arena", "--values", "1", "--point-limit", limit]) == 2
    assert "--point-limit" in capsys.readouterr().err
