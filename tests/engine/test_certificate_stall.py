"""The on-demand engine's ILPs ask the group-by-group shortcut's settle to give way at its first round in vain
(``ondemand.ilp_problem``'s ``settle_stall``, as the baselines' ILPs do; issue 41, a sweep's ×2.5 spent 50 of its
78 s in settles that sat at their λ = 0 bound). The answers stay the library ILP's proven optimum
(``test_on_demand.test_on_demand_equals_library_ilp`` on the same seeds)."""

from __future__ import annotations

from typing import Any

import pytest

from planning.allocate import linked

from .test_on_demand import on_demand_run


def test_every_settle_of_the_on_demand_engine_may_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    real = linked.settle
    asked: list[bool] = []

    def spy(inst: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(bool(inst.problem.settle_stall))
        return real(inst, *args, **kwargs)

    monkeypatch.setattr(linked, "settle", spy)
    for seed in range(24):
        on_demand_run.__wrapped__(seed)  # solved here, not the session's cached run (other tests fill the cache)
    assert asked, "no seeded instance reached a settle: the test would prove nothing"
    assert all(asked), asked
