"""A shared plan without the dedicated part's baselines (a timeline epoch's): the same plan and cost, and no
dedicated solve asks for baselines, on the joint route and part by part."""

from __future__ import annotations

from typing import Any

import pytest

from planning import pipeline
from planning.scenario import Scenario
from planning.sharing import solve_shared


@pytest.mark.parametrize("method", ["exact", "kvpr"])
def test_a_shared_plan_without_baselines_costs_the_same_and_runs_none(small: dict[str, Any], method: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    small["options"].update(sharing=method, time_limit_s=60)
    scenario = Scenario.from_dict(small)
    asked: list[bool] = []
    real = pipeline.solve  # what the sharing step solves its dedicated part with

    def spy(*a: Any, with_baselines: bool = True, **k: Any) -> Any:
        asked.append(with_baselines)
        return real(*a, with_baselines=with_baselines, **k)

    monkeypatch.setattr(pipeline, "solve", spy)
    full = solve_shared(scenario)
    assert full.dedicated is not None and True in asked and full.dedicated.baselines  # the answer's baselines
    asked.clear()
    bare = solve_shared(scenario, baselines=False)
    assert asked and not any(asked)
    assert bare.dedicated is not None and not bare.dedicated.baselines
    assert bare.status == full.status and bare.cost_per_hour == pytest.approx(full.cost_per_hour, rel=1e-9)
    assert sorted((n.region, n.shape) for n in bare.shared_nodes) == sorted((n.region, n.shape) for n in full.shared_nodes)
