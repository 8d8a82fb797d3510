"""planning.context's CallClock: the one clock of a call with its own limit (sharing's joint solve, the timeline's
multi-epoch allocation), read through an injected clock so nothing depends on the machine's speed."""

from __future__ import annotations

import pytest

from planning.context import CallClock, CancelFlag, Cancelled, Deadline
from tests.clock import frozen_clock


def test_time_left_falls_as_the_clock_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elapsed and left follow the injected clock exactly (it stands still between skips: no tolerance for a slow
    machine is needed); past the limit nothing is left and the call has expired, never before."""
    clock = frozen_clock(monkeypatch)
    call = CallClock(60.0)
    clock.skip(20.0)
    assert call.elapsed() == 20.0 and call.left() == 40.0 and not call.expired()
    clock.skip(100.0)
    assert call.left() == 0.0 and call.expired()  # past the limit: nothing left, never negative
    assert CallClock(60.0, floor_s=0.05, t0=call.t0).left() == 0.05  # a floor for solver calls


def test_the_callers_deadline_caps_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """The time left is the sooner of the call's own limit and the caller's deadline (exact: the clock stands
    still between skips)."""
    clock = frozen_clock(monkeypatch)
    caller = CancelFlag(deadline_s=10.0)
    call = CallClock(60.0, caller)
    assert call.left() == 10.0  # the caller's deadline comes first
    clock.skip(5.0)
    assert call.left() == 5.0
    assert CallClock(3.0, caller).left() == 3.0  # the call's own limit comes first


def test_only_the_callers_cancel_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """A passed deadline only stops the call's work (no exception); the caller's cancel raises ``Cancelled`` with
    its reason and the step."""
    clock = frozen_clock(monkeypatch)
    deadline = Deadline(10.0)
    call = CallClock(60.0, deadline)
    call.check_caller("step")  # nothing set
    clock.skip_past(deadline)
    call.check_caller("step")  # the deadline passed: the call returns its best, no exception
    assert call.left() <= 0.05  # time_left's own floor: a last solver call may still be given 50 ms
    flag = CancelFlag()
    flag.cancel()
    with pytest.raises(Cancelled) as err:
        CallClock(60.0, flag).check_caller("sharing: column generation")
    assert err.value.reason == "cancelled" and err.value.detail == "sharing: column generation"


def test_a_call_expires_with_its_callers_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CallClock.expired`` (the sharing engine's safety net): the caller's deadline passing expires the call too,
    before the call's own limit."""
    clock = frozen_clock(monkeypatch)
    call = CallClock(600.0, Deadline(10.0))
    clock.skip(9.0)
    assert not call.expired()
    clock.skip(2.0)
    assert call.expired() and call.elapsed() == 11.0
