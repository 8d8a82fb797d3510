"""The baselines' settle stops at a round in vain (``AllocationProblem.settle_stall``, issue 41): the answer stays the
joint optimum, the settle runs fewer rounds, and every baseline ILP asks for it."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from planning.allocate import AllocationProblem, linked, solve_allocation
from planning.baselines import base
from tests.allocate.test_decompose_merge import (
    _scarce,  # seeded problems whose parts compete for scarce offers
)


def test_a_round_in_vain_is_one_that_moved_nothing() -> None:
    assert not linked.stalled(None, 10.0, 12.0)  # no priced round yet
    assert not linked.stalled((10.0, math.inf), 10.0, math.inf)  # no plan in hand: a repair may still come
    assert not linked.stalled((10.0, math.inf), 10.0, 12.0)  # the first plan is progress
    assert not linked.stalled((10.0, 12.0), 10.5, 12.0)  # the bound rose
    assert not linked.stalled((10.0, 12.0), 10.0, 11.9)  # a cheaper plan
    assert linked.stalled((10.0, 12.0), 10.0, 12.0)
    assert linked.stalled((10.0, 12.0), 10.0, 12.5)  # a dearer repair is no progress


def _rounds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """From now on, (closed, rounds) of every settle, in the list returned."""
    real = linked.settle
    log: list[tuple[bool, int]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out, seconds = real(*args, **kwargs)
        if out is not None:
            log.append((out.closed, out.rounds))
        return out, seconds

    monkeypatch.setattr(linked, "settle", spy)
    return log


def test_a_stalled_settle_gives_way_to_the_exact_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _rounds(monkeypatch)
    shorter = 0
    for seed in range(40, 64):
        p = _scarce(seed)
        log.clear()
        full = solve_allocation(p, diagnose=False)
        before = list(log)
        log.clear()
        cut = solve_allocation(replace(p, settle_stall=True), diagnose=False)
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        assert cut.status == full.status == joint.status == "optimal", seed
        assert cut.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-7), seed
        assert sum(r for _c, r in log) <= sum(r for _c, r in before), seed  # never more rounds
        shorter += sum(r for _c, r in log) < sum(r for _c, r in before)
    assert shorter >= 4  # the rule fires on these seeds (6 of the 24 when written)


def test_every_baseline_ilp_asks_for_the_stall_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    import planning.allocate.solve as solve

    seen: list[tuple[str, bool]] = []
    real = solve.solve_allocation

    def spy(problem: AllocationProblem, *args: Any, **kwargs: Any) -> Any:
        seen.append((problem.objective, problem.settle_stall))
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(solve, "solve_allocation", spy)
    p = _scarce(44)
    base.from_allocation("test", p, "ok")
    starved = replace(p, offers=tuple(replace(o, available=0 if i % 2 else o.available)
                                      for i, o in enumerate(p.offers)))
    base.from_allocation("test", starved, "ok")  # cannot meet demand: its max-served MIP too
    assert ("cost", True) in seen and ("served", True) in seen
    assert all(flag for _objective, flag in seen)
