"""Spot interruptions replayed by the simulator: seeded down windows at the plan's rates; the routers send no
request to an instance while it is down, every request still finishes once, and fewer meet their SLOs."""

from __future__ import annotations

from typing import Any

import pytest

from planning.scenario import Scenario


@pytest.fixture(scope="module")
def spot_plan() -> Any:
    from planning.api import solve
    from tests.finance.conftest import SMALL

    d = {**SMALL, "reservations": [], "spot": {"enabled": True, "recovery_hours": 0.05}}
    d.pop("finance")
    plan = solve(Scenario.from_dict(d))
    assert plan.has_plan and any(i.region.endswith("/spot") for i in plan.instances)
    return plan


def test_replay_is_seeded_conserves_requests_and_costs_attainment(spot_plan: Any) -> None:
    from planning.api import simulate

    calm = simulate(spot_plan, duration_s=1200, seed=3)
    # published rates interrupt a node every few thousand hours: 20,000 × makes a 20-minute run a stormy day
    stormy = simulate(spot_plan, duration_s=1200, seed=3, interruptions=True, interruption_scale=20_000)
    again = simulate(spot_plan, duration_s=1200, seed=3, interruptions=True, interruption_scale=20_000)
    assert calm.interruptions == 0
    assert stormy.interruptions > 0 and stormy.down_instance_s > 0
    assert (stormy.interruptions, stormy.down_instance_s, stormy.attainment) == (
        again.interruptions, again.down_instance_s, again.attainment)
    assert stormy.finish_events == stormy.requests == calm.requests  # same arrivals, each finished once
    assert stormy.attainment < calm.attainment  # arrivals wait while every spot prefill instance is down
    assert any("spot interruptions replayed" in n for n in stormy.notes)


def test_down_windows_follow_the_rate() -> None:
    from planning.simulate.interruptions import down_windows

    engines = [(object(), 4, "c:r/spot"), (object(), 4, "c:r")]  # an on-demand instance is never interrupted
    windows = down_windows(engines, {"c:r/spot": 9.0, "c:r": 9.0}, 10.0, 36_000.0, seed=1)  # type: ignore[list-item]
    assert list(windows) == [engines[0][0]]
    n = len(windows[engines[0][0]])
    expected = 4 * 9.0 * 10.0  # nodes × q × hours (minus the recovery time, a few percent here)
    assert 0.8 * expected < n < 1.1 * expected
    assert all(b - a == pytest.approx(10.0) for a, b in windows[engines[0][0]])


def test_replay_needs_spot_rates() -> None:
    from planning.api import simulate, solve
    from planning.errors import PlanningError
    from tests.finance.conftest import SMALL

    d = {**SMALL, "reservations": []}
    d.pop("finance")
    plan = solve(Scenario.from_dict(d))
    with pytest.raises(PlanningError, match="interruptions"):
        simulate(plan, duration_s=60, interruptions=True)
