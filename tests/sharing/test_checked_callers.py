"""Issue 37: every caller of a sharing solve gets the checked one (a timeline epoch with sharing, the threshold
sweep), and the checked solve — the shared plan, then the plan without sharing — keeps to the caller's one time
limit."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from planning import api
from planning.context import engine_context
from planning.scenario import Scenario
from planning.sharing import checked


@pytest.fixture()
def shared_misses_its_slo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shared model at 50 % SLO attainment in the simulation: the shared plan must lose to dedicated."""
    monkeypatch.setattr(checked, "simulated_attainment",
                        lambda res, *_a: {m.model: 0.5 for n in res.shared_nodes for m in n.models})


def _share_all(small: dict[str, Any]) -> Scenario:
    s = Scenario.from_dict(small)
    return replace(s, options=replace(s.options, sharing_threshold_rps=None, time_limit_s=600))


def _dedicated_cost(s: Scenario) -> float:
    return api.solve(replace(s, options=replace(s.options, sharing="off"))).cost_per_hour


def test_a_timeline_epoch_gets_the_checked_shared_plan(small: dict[str, Any], shared_misses_its_slo: None) -> None:
    """An epoch whose shared plan misses its SLO plans the epoch without sharing (its cost, its note why)."""
    from planning.timeline.shared import solve_epochs

    s = _share_all(small)
    (epoch,), distinct = solve_epochs([s], engine_context())
    assert distinct == 1 and epoch.has_plan
    assert epoch.cost_per_hour == pytest.approx(_dedicated_cost(s), rel=1e-9)
    assert epoch.shared_nodes == 0 and any("lost to the plan without sharing" in n for n in epoch.notes)


def test_the_threshold_sweep_gets_the_checked_shared_plan(small: dict[str, Any], shared_misses_its_slo: None) -> None:
    """A sweep point whose shared plan misses its SLO shows the plan without sharing, and says which it returned
    and what the shared plan cost."""
    from planning.sharing import solve_shared, threshold_sweep

    s = _share_all(small)
    (row,) = threshold_sweep(s, [None])
    assert row["returned"] == "dedicated" and row["shared_gpus"] == 0
    assert row["cost_per_hour"] == pytest.approx(_dedicated_cost(s), rel=1e-9)
    raw = solve_shared(s, context=engine_context())
    assert row["sharing_plan_cost_per_hour"] == pytest.approx(raw.cost_per_hour, rel=1e-9)
    assert row["sharing_plan_models"] == len(raw.shared_models) > 0


class _Clock:
    """An injected clock for planning.context's deadlines: time moves only when a fake solve spends it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_the_checked_solve_keeps_to_one_time_limit(small: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared solve spends every second it is given (injected clock); the plan without sharing then gets
    only what is left of the caller's limit: the two limits passed down add up to at most the caller's."""
    import planning.context as context

    clock = _Clock()
    monkeypatch.setattr(context, "time", SimpleNamespace(monotonic=clock.monotonic))
    s = _share_all(small)
    real = checked.solve_shared(s, context=engine_context())
    given: dict[str, float] = {}

    def shared(scenario: Scenario, **_k: Any) -> Any:
        given["shared"] = scenario.options.time_limit_s
        clock.now += scenario.options.time_limit_s  # it ran to its limit
        return real

    def dedicated(scenario: Scenario) -> Any:
        given["dedicated"] = scenario.options.time_limit_s
        return api.solve(replace(scenario, options=replace(scenario.options, time_limit_s=600)))

    monkeypatch.setattr(checked, "solve_shared", shared)
    monkeypatch.setattr(checked, "simulated_attainment", lambda *_a: {})
    out = checked.solve_checked(s, method="kvpr", context=engine_context(), solve_dedicated=dedicated)
    assert out.status in ("optimal", "feasible")
    assert 0 < given["shared"] < s.options.time_limit_s
    assert 0 < given["dedicated"] <= s.options.time_limit_s - given["shared"] + 1e-9
