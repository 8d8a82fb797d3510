"""A solve hands each better plan it finds before its proof to a progress callback with a ``plan`` method (the job
store's ``ProgressWriter``): what a far slider position shows while it is proven (issue 41 §5, round 21)."""

from __future__ import annotations

from typing import Any

from planning import api
from planning.pipeline import Reuse, solve
from planning.result import PlanResult


class Listening:
    """A progress callback that also listens for plans (``plan``), or fails on the ``fail``-th plan."""

    def __init__(self, fail: int = 0) -> None:
        self.plans: list[PlanResult] = []
        self.fail = fail

    def __call__(self, fraction: float, message: str = "") -> None:
        pass

    def plan(self, result: PlanResult) -> None:
        self.plans.append(result)
        if len(self.plans) == self.fail:
            raise OSError("the store is full")


def test_each_better_plan_reaches_the_listener_before_the_proof_and_none_beats_the_optimum() -> None:
    scenario = api.load_preset_scenario("coral-core")
    listening = Listening()
    final = solve(scenario, progress=listening, with_baselines=False, reuse=Reuse())
    assert final.status == "optimal"
    assert listening.plans, "coral-core's solve finds a plan before its certificate"
    costs = [p.comparable_cost for p in listening.plans]
    assert costs == sorted(costs, reverse=True)  # each one better than the one before (or equal in value)
    assert costs[-1] >= final.comparable_cost - 1e-6
    for p in listening.plans:
        assert p.status == "feasible" and p.has_plan and p.instances
        assert p.served_fraction >= 1 - 1e-6  # an incumbent of the cost objective serves every request
        assert p.message.startswith("best plan so far, found after ")
        assert p.message.endswith("the solver is still proving it.")
        assert p.mip_gap is not None and p.mip_gap >= 0
        assert not p.baselines  # the plan only: baselines come with the proven answer
        assert PlanResult.from_json(api.result_json(p)).comparable_cost == p.comparable_cost  # it round-trips


def test_a_listener_that_fails_is_dropped_and_the_answer_is_unchanged() -> None:
    scenario = api.load_preset_scenario("coral-core")
    quiet = solve(scenario, with_baselines=False, reuse=Reuse())
    failing = Listening(fail=1)
    answer = solve(scenario, progress=failing, with_baselines=False, reuse=Reuse())
    assert len(failing.plans) == 1  # dropped after its failure
    assert (answer.status, answer.comparable_cost) == (quiet.status, quiet.comparable_cost)


def test_a_plain_progress_function_is_never_handed_a_plan() -> None:
    seen: list[Any] = []
    result = solve(api.load_preset_scenario("coral-core"), progress=lambda f, m="": seen.append(m),
                   with_baselines=False, reuse=Reuse())
    assert result.status == "optimal" and seen and all(isinstance(m, str) for m in seen)


class Recording(Listening):
    """A listening callback that also keeps the progress lines."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def __call__(self, fraction: float, message: str = "") -> None:
        self.lines.append(message)


def test_the_progress_line_names_the_figure_the_best_so_far_box_shows() -> None:
    """The panel's "So far: best plan $389.10/h" was the objective (with the initialisation penalty) while the box
    beside it said "$353.73 per hour" (the bill): each plan the listener gets is now named by its bill's $/h in
    the progress line, and no line names a figure that no plan's bill shows."""
    import re

    scenario = api.load_preset_scenario("coral-core")
    recording = Recording()
    final = solve(scenario, progress=recording, with_baselines=False, reuse=Reuse())
    assert final.status == "optimal" and final.penalty_per_hour > 0  # the objective differs from the bill here
    said = {m.group(1) for line in recording.lines if (m := re.search(r" · best plan (\$[\d,.]+)/h", line))}
    shown = {p.bill.hour_text for p in recording.plans}
    assert said and shown and said == shown
    objective = {f"${p.cost_per_hour:,.2f}" for p in recording.plans}  # provisioning + penalty + transfer
    assert not said & objective
