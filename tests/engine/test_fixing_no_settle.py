"""The on-demand engine's fixing ILPs run with no linked settle (``AllocationProblem.settle`` off; issue 41: over
their few fixed columns the merged ILP proves the optimum sooner; coral-extended's sweep point ×2.5, 31 → 24 s).
Their answers stay the library ILP's proven optimum (``test_on_demand.test_on_demand_equals_library_ilp``)."""

from __future__ import annotations

from typing import Any

import pytest

import planning.allocate.ondemand as ondemand

from .test_on_demand import on_demand_run


def test_every_fixing_ilp_runs_without_the_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ondemand.solve_allocation
    without: list[int] = []

    def spy(problem: Any, *args: Any, **kwargs: Any) -> Any:
        if not problem.settle:
            without.append(1)
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(ondemand, "solve_allocation", spy)
    rounds = 0
    for seed in range(24):
        run = on_demand_run.__wrapped__(seed)  # solved here, not the session's cached run
        rounds += sum(message.startswith("fixing: templates within") for message, _value in run.steps)
    assert rounds, "no seeded instance reached a fixing round: the test would prove nothing"
    assert len(without) == rounds, (len(without), rounds)  # the fixing ILPs, and only they
