"""Time-limited answers said so (issue 37 §6): a baseline whose ILP stops at a wall clock (its safety net or the
solve's limit) before its gap carries ``time_limited`` (its cost is the incumbent of that moment, which another run
need not keep), through the BaselineSummary and the JSON; ``checks.stable_dict`` keeps only its name and the flag,
so two runs of one input compare what is reproducible, and any other difference still shows."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

import planning.allocate.solve as allocate_solve
from planning import api
from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass
from planning.baselines import run_baseline
from planning.checks import stable_dict
from planning.scenario import Scenario


def _problem() -> AllocationProblem:
    t = (TemplateOption("a:H100", "a/decode", {"1xH100": 1}, {"a": 10.0}),
         TemplateOption("a:L4", "a/decode", {"1xL4": 1}, {"a": 3.0}))
    offers = (Offer("r", "1xH100", 4.0, 8), Offer("r", "1xL4", 1.0, 8))
    return AllocationProblem(t, offers, (WorkloadClass("a", "a/decode", 25.0),))


def _stopped_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baselines' ILP returns its plan as HiGHS does at its wall-clock limit: status time_limit, gap 4 %."""
    real = allocate_solve.solve_allocation

    def stopped(problem: AllocationProblem, **kw: Any) -> Any:
        return replace(real(problem, **kw), status="time_limit", gap=0.04)

    monkeypatch.setattr(allocate_solve, "solve_allocation", stopped)


def test_a_baseline_ilp_stopped_at_its_limit_says_time_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proven to its gap: not time-limited; stopped at the limit 4 % from its optimum: time-limited, and the note
    says so."""
    proven = run_baseline("homo-ilp", _problem())
    assert proven.feasible and proven.details["time_limited"] is False
    _stopped_at_the_limit(monkeypatch)
    stopped = run_baseline("homo-ilp", _problem())
    assert stopped.feasible and stopped.details["time_limited"] is True
    assert "time-limited: its ILP stopped after the solve's time limit within 4.0 %" in stopped.note


def _served_stopped_before_any_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost ILP proves infeasibility; the max-served MIP then stops at the solve's time limit before any plan,
    as HiGHS on a busy machine."""
    real = allocate_solve.solve_allocation

    def stopped(problem: AllocationProblem, **kw: Any) -> Any:
        res = real(problem, **kw)
        status = "infeasible" if problem.objective == "cost" else "time_limit"
        return replace(res, status=status, cost_per_hour=None)

    monkeypatch.setattr(allocate_solve, "solve_allocation", stopped)


def test_a_served_mip_cut_short_before_any_plan_says_time_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    """A max-served MIP stopped by a clock before any plan proves nothing: "no plan" is time-limited and names that
    ILP, not "no plan (time_limit)" unflagged (moe5's f75dcd6, kept in main's node-limit design: the cost ILP's own
    stop before any plan is main's ``_no_plan``, tested in tests/baselines/test_baseline_work_limit.py)."""
    _served_stopped_before_any_plan(monkeypatch)
    none = run_baseline("homo-ilp", _problem())
    assert not none.feasible and none.cost_per_hour == 0.0
    assert none.details == {"time_limited": True, "stopped_by": "clock"}
    assert none.note.startswith("no plan: time-limited: its served-fraction ILP stopped after the solve's time limit")


def test_the_flag_reaches_the_result_and_its_json(tiny: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The solve's BaselineSummary of each ILP baseline carries the flag, and the JSON round trip keeps it."""
    _stopped_at_the_limit(monkeypatch)
    result = api.solve(Scenario.from_dict(tiny))
    flagged = {b.name for b in result.baselines if b.time_limited}
    assert "homo-ilp" in flagged and "homo" not in flagged  # the greedy has no ILP and no limit of its own
    again = json.loads(api.result_json(result))
    assert {b["name"] for b in again["baselines"] if b["time_limited"]} == flagged


def test_stable_dict_compares_what_is_reproducible() -> None:
    """Two runs that differ only in a time-limited baseline's cost are the same; the same difference in a baseline
    proven to its gap, or in the plan, is not; the flag itself is kept."""
    def run(cost: float, limited: bool, plan: float = 10.0) -> dict[str, Any]:
        return {"cost_per_hour": plan, "timings": {"total_seconds": cost},
                "baselines": [{"name": "homo-ilp", "cost_per_hour": cost, "note": f"stopped at {cost}",
                               "ran": True, "time_limited": limited}]}

    assert stable_dict(run(12.0, True)) == stable_dict(run(12.5, True))
    assert stable_dict(run(12.0, True))["baselines"] == [{"name": "homo-ilp", "ran": True, "time_limited": True}]
    assert stable_dict(run(12.0, False)) != stable_dict(run(12.5, False))
    assert stable_dict(run(12.0, True)) != stable_dict(run(12.0, True, plan=11.0))
