"""planning.context's CallClock: the one clock of a call with its own limit (sharing's joint solve, the timeline's
multi-epoch allocation), read through an injected clock so nothing depends on the machine's speed."""

from __future__ import annotations

import pytest

from planning.context import CallClock, CancelFlag, Cancelled, Deadline
from tests.clock import skip_clock


def test_time_left_falls_as_the_clock_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = skip_clock(monkeypatch)
    call = CallClock(60.0)
    clock.skip(20.0)
    assert call.elapsed() == pytest.approx(20.0, abs=1.0)
    assert call.left() == pytest.approx(40.0, abs=1.0)
    clock.skip(100.0)
    assert call.left() == 0.0  # past the limit: nothing left, never negative
    assert CallClock(60.0, floor_s=0.05, t0=call.t0).left() == 0.05  # a floor for solver calls


def test_the_callers_deadline_caps_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = skip_clock(monkeypatch)
    caller = CancelFlag(deadline_s=10.0)
    call = CallClock(60.0, caller)
    assert call.left() == pytest.approx(10.0, abs=1.0)  # the caller's deadline comes first
    clock.skip(5.0)
    assert call.left() == pytest.approx(5.0, abs=1.0)
    assert CallClock(3.0, caller).left() == pytest.approx(3.0, abs=1.0)  # the call's own limit comes first


def test_only_the_callers_cancel_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = skip_clock(monkeypatch)
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
