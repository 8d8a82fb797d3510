"""A baseline's ILPs stop on work, not on a wall clock (issue 37 §6): its cost ILP stops at a number of HiGHS
branch-and-bound nodes, which is the same on a busy machine and a quiet one, so the incumbent, cost and note do not
depend on the clock; a wall clock is only a far safety net (read through ``planning.context``'s clock, which these
tests replace), and when it binds the baseline says "time-limited" and carries the flag. No assert here depends on
the machine's speed: the clock either stands still or races ahead on every read."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

import planning.context as context
from planning.allocate.problem import AllocationProblem
from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines.base import BaselineLimits, from_allocation

SPEC = Synthetic(groups=3, templates_per_group=8, regions=2, shapes=3, classes_per_group=2, max_nodes=3,
                 max_available=30, demand_scale=2.0, homogeneous_share=0.5)


def _problem() -> AllocationProblem:
    """Seed 17 of SPEC: proven optimal in well under a second, and one node short of its optimum (found by hand);
    HiGHS's own time limit is one no run reaches, so only the work limit or the injected clock can stop it."""
    return random_problem(17, SPEC, decompose=False, mip_rel_gap=1e-6, time_limit_s=86_400.0)


class _Clock:
    """Stands in for ``time`` inside ``planning.context``: ``monotonic()`` advances ``step`` seconds per read (0: the
    clock stands still)."""

    def __init__(self, step: float) -> None:
        self.now = 1000.0
        self.step = step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_when_the_work_limit_binds_first_the_wall_clock_does_not_change_the_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the clock standing still, a 1 ms safety net and a 10⁶ s one give the same plan, cost and note: the
    work limit (1 node) stopped both, at a cost above the optimum the search without it proves (so it bound)."""
    monkeypatch.setattr(context, "time", _Clock(0.0))
    p = _problem()
    tiny = from_allocation("b", p, "ok", limits=BaselineLimits(nodes=1, safety_s=1e-3))
    generous = from_allocation("b", p, "ok", limits=BaselineLimits(nodes=1, safety_s=1e6))
    assert (tiny.cost_per_hour, dict(tiny.counts), tiny.note) == (generous.cost_per_hour, dict(generous.counts),
                                                                  generous.note)
    assert tiny.feasible and tiny.details["stopped_by"] == "work" and tiny.details["time_limited"] is False
    assert "its ILP stopped at its work limit of 1 branch-and-bound nodes within" in tiny.note
    assert "time-limited" not in tiny.note
    full = from_allocation("b", p, "ok")
    assert full.details["stopped_by"] == "" and full.details["time_limited"] is False and full.note == "ok"
    assert full.cost_per_hour < tiny.cost_per_hour - 1e-6


def test_when_the_wall_clock_binds_the_baseline_says_time_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock races 1,000 s a read past a 1 s safety net: HiGHS is interrupted at its first check. Given a MIP
    start (the 1-node plan), it returns that incumbent flagged time-limited with its gap; without one it has no
    plan and says so, flagged too. Neither is reported as a work stop."""
    p = _problem()
    monkeypatch.setattr(context, "time", _Clock(0.0))
    one_node = from_allocation("b", p, "ok", limits=BaselineLimits(nodes=1))
    monkeypatch.setattr(context, "time", _Clock(1000.0))
    started = from_allocation("b", replace(p, start=dict(one_node.counts)), "ok", limits=BaselineLimits(safety_s=1.0))
    assert started.feasible and started.details["time_limited"] is True and started.details["stopped_by"] == "clock"
    assert started.cost_per_hour <= one_node.cost_per_hour + 1e-9
    assert "time-limited: its ILP stopped after its 1 s wall-clock safety net within" in started.note
    cold = from_allocation("b", p, "ok", limits=BaselineLimits(safety_s=1.0))
    assert not cold.feasible and cold.cost_per_hour == 0.0
    assert cold.details == {"time_limited": True, "stopped_by": "clock"}
    assert cold.note.startswith("no plan: time-limited: its ILP stopped after its 1 s wall-clock safety net")


def test_the_baselines_ilps_run_lean_and_lean_proves_the_same_optima(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baselines' ILPs run without HiGHS's sub-MIP heuristics (``AllocationProblem.lean``: RINS, RENS), which
    spent most of the small part ILPs' time; on seeded problems proven to a 10⁻⁶ gap, lean and full searches give
    the same optimum, and HiGHS really gets the options."""
    import planning.allocate.matrix_model as mm
    from planning.allocate.solve import solve_allocation

    seen: list[tuple[bool, bool]] = []
    real = mm.stop_rules

    def recording(h: Any, problem: Any) -> None:
        real(h, problem)
        seen.append((bool(problem.lean), bool(h.getOptionValue("mip_heuristic_run_rins")[1])))

    monkeypatch.setattr(mm, "stop_rules", recording)
    assert from_allocation("b", random_problem(2, SPEC, mip_rel_gap=1e-6, time_limit_s=86_400.0), "ok").feasible
    assert seen and all(lean for lean, _ in seen)  # every ILP of the baseline is of a lean problem
    assert any(not rins for _, rins in seen)  # its part ILPs lean in HiGHS too (merged and joint ones: full)
    for seed in (0, 2, 4, 6, 9):  # the quick ones of seeds 0-11 (one infeasible); all twelve agree
        p = random_problem(seed, SPEC, mip_rel_gap=1e-6, time_limit_s=86_400.0)
        full, lean = solve_allocation(p), solve_allocation(replace(p, lean=True))
        assert full.status == lean.status
        if full.has_plan:
            assert lean.cost_per_hour == pytest.approx(full.cost_per_hour, rel=1e-6, abs=1e-9)
    assert any(not lean and rins for lean, rins in seen)  # the allocation's own ILPs keep them
