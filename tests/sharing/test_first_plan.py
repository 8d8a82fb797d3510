"""Exact sharing on a busy machine: a KV-pressure plan first when the time left is short, then the joint model.
Whether the time left is short is read from the profile step's seconds (``time.perf_counter`` in
``planning.sharing.plan``), which these tests replace, so no assert depends on how busy the machine is."""

from __future__ import annotations

import time
from typing import Any

import pytest

from planning.context import Cancelled
from planning.scenario import Scenario
from planning.sharing import plan as sharing_plan
from planning.sharing import solve_shared


class _ProfileClock:
    """Stands in for ``time`` inside ``planning.sharing.plan``: ``perf_counter()`` advances ``step`` seconds per read
    (0: it stands still, so the profile step took no time and the time left is never short)."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_a_joint_model_cut_before_its_plan_returns_the_kvpr_plan_made_first(small: dict[str, Any],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The joint model stopped by the limit (injected) after the first plan: that plan, status feasible, no gap,
    and a note naming the fix, not ``time_limit`` with no plan."""
    from planning.sharing import joint_plan

    monkeypatch.setattr(sharing_plan, "EXACT_PER_PROFILE", 1e12)  # "the time left is short"

    def cut(*_a: Any, cancel: Any = None, **_k: Any) -> None:
        cancel.timed_out = lambda: True  # the solve's own deadline stopped it
        raise Cancelled("time limit", "injected: the joint model's library build")

    monkeypatch.setattr(joint_plan, "solve_joint_sharing", cut)
    small["options"].update(sharing="exact", time_limit_s=60)
    res = solve_shared(Scenario.from_dict(small))
    kvpr = solve_shared(Scenario.from_dict(small), method="kvpr")
    assert res.status == "feasible" and res.sharing == "kvpr" and res.gap is None
    assert res.cost_per_hour == pytest.approx(kvpr.cost_per_hour)
    assert any("joint sharing model stopped at injected" in n and "options.time_limit_s" in n for n in res.notes)


def test_the_joint_plan_replaces_the_first_plan_when_cheaper(small: dict[str, Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With time to finish, the joint model's plan is the answer even though a KV-pressure plan came first; and
    without the pressure no KV-pressure plan is made. The pressure is the profile step's seconds as read: a clock
    standing still (no pressure, on any machine) and one racing 100 s a read (15 × 100 s > the 60 s limit)."""
    small["options"].update(sharing="exact", time_limit_s=60)
    monkeypatch.setattr(sharing_plan, "time", _ProfileClock(0.0))
    plain = solve_shared(Scenario.from_dict(small))
    made: list[str] = []
    real = sharing_plan._solve_shared

    def spy(*a: Any, **k: Any) -> Any:
        made.append(a[0].method)  # the call: its method
        return real(*a, **k)

    monkeypatch.setattr(sharing_plan, "_solve_shared", spy)
    assert solve_shared(Scenario.from_dict(small)).sharing == "exact" and made == []  # quiet: no first plan
    monkeypatch.setattr(sharing_plan, "time", _ProfileClock(100.0))
    res = solve_shared(Scenario.from_dict(small))
    assert made == ["kvpr"]
    kvpr = solve_shared(Scenario.from_dict(small), method="kvpr")
    assert res.cost_per_hour <= kvpr.cost_per_hour + 1e-9
    if plain.cost_per_hour < kvpr.cost_per_hour - 1e-9:
        assert res.sharing == "exact" and res.cost_per_hour == pytest.approx(plain.cost_per_hour)
    else:
        assert res.cost_per_hour == pytest.approx(min(plain.cost_per_hour, kvpr.cost_per_hour))
