"""The joint sharing engine stops on work, not on the clock (issue 37 §6): its column generation, ILPs, listing and
certificate stop at counts of work (``joint.JointWork``), so a tiny wall clock that never binds gives the same
plan, bit for bit, as a generous one; when the wall clock (the safety net) does bind, the answer is flagged
``time_limited`` with a note naming the step and the fix. The clock is injected (``planning.context``'s ``time``):
no assert here depends on the machine's speed."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from planning.context import Deadline
from planning.sharing import joint
from planning.sharing.joint import JointPlan, JointWork, solve_joint
from planning.sharing.plan import clock_flagged
from planning.sharing.result import SharingResult
from tests.clock import FrozenClock, frozen_clock
from tests.sharing.test_joint import _instance

SEED = 8  # an instance whose column generation takes three rounds (asserted below)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FrozenClock:
    return frozen_clock(monkeypatch)


def _plan_of(p: JointPlan) -> tuple[Any, ...]:
    """What two runs must share: the plan, its cost, bound, gap, status and work counts (no seconds)."""
    work = {k: v for k, v in p.stats.items() if "second" not in k}
    return (p.status, p.cost_per_hour, p.bound, p.gap, p.nodes, dict(p.counts), p.shared, p.dedicated, work, p.notes)


def test_a_tiny_wall_clock_that_never_binds_gives_the_same_plan(clock: FrozenClock) -> None:
    """A limit of 1 ms on a clock that stands still (the work limits bind first) against an hour: the same plan,
    bound, gap, status and work counts, neither flagged; also with work limits that bind (one column-generation
    round, a 1-node ILP), which stop both runs at the same point."""
    inst, _ = _instance(SEED)
    generous = solve_joint(inst, time_limit_s=3600.0)
    assert generous.stats["lp_rounds"] >= 2  # the column generation has a round after the first
    tiny = solve_joint(inst, time_limit_s=1e-3)
    assert _plan_of(tiny) == _plan_of(generous)
    assert not tiny.time_limited and not generous.time_limited
    short = JointWork(rounds=1, ilp_nodes=1, farley_nodes=1)
    a, b = solve_joint(inst, time_limit_s=3600.0, work=short), solve_joint(inst, time_limit_s=1e-3, work=short)
    assert a.stats["lp_rounds"] == 1 and _plan_of(a) == _plan_of(b) and not a.time_limited


def test_the_wall_clock_binding_is_flagged_time_limited(clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock passes the 1 ms limit during the first column-generation round: the call stops there (round 1,
    not converged), flagged ``time_limited`` with a note naming the step and the fix; the same work with the
    clock standing still is not flagged."""
    inst, _ = _instance(SEED)
    real = joint._price_patterns

    def slow_pricing(*args: Any, **kwargs: Any) -> int:
        clock.skip(1.0)  # this pricing round took a second: past the limit
        return real(*args, **kwargs)

    monkeypatch.setattr(joint, "_price_patterns", slow_pricing)
    stopped = solve_joint(inst, time_limit_s=1e-3)
    assert stopped.time_limited and stopped.stats["lp_rounds"] == 1
    assert stopped.status in ("feasible", "time_limit")  # not certified: the proof never ran
    assert any(n.startswith("time-limited: the wall clock") and "column generation round 1" in n
               and "options.time_limit_s" in n for n in stopped.notes)


def test_the_clock_interrupts_the_ilp(clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock passes the limit just before the incumbent ILP: HiGHS's interrupt callback (or the certificate's
    check after it) stops the proof, and an answer that is not certified is flagged ``time_limited``."""
    inst, _ = _instance(SEED)
    real = joint.columns_ilp

    def late(*args: Any, **kwargs: Any) -> Any:
        clock.skip(10.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(joint, "columns_ilp", late)
    out = solve_joint(inst, time_limit_s=5.0)
    assert out.status != "optimal" and out.time_limited
    assert any("time-limited" in n for n in out.notes)


def _result(**fields: Any) -> SharingResult:
    base = SharingResult(sharing="exact", status="feasible", threshold_rps=None, shared_nodes=(),
                         shared_cost_per_hour=1.0, shared_status="feasible", shared_gap=0.01, dedicated=None,
                         shared_models=("a",), dedicated_models=(), gap=0.01)
    return dataclasses.replace(base, **fields)


def test_a_shared_plan_is_flagged_only_when_a_clock_bound(clock: FrozenClock) -> None:
    """``solve_shared``'s last step: a result with a proven gap whose call ended before its deadline is returned
    as it is (work stopped it: the same plan everywhere); one whose deadline passed, or whose part a clock
    stopped, is flagged with the note and the fix, once."""
    deadline = Deadline(60.0)
    assert clock_flagged(_result(), deadline) == _result()
    clock.skip(61.0)
    flagged = clock_flagged(_result(), deadline)
    assert flagged.time_limited and sum("time-limited" in n for n in flagged.notes) == 1
    assert flagged.to_dict()["sharing"]["time_limited"] is True
    again = clock_flagged(flagged, deadline)
    assert again.notes == flagged.notes
    assert clock_flagged(_result(time_limited=True), Deadline(60.0)).time_limited
    assert math.isfinite(flagged.cost_per_hour)
