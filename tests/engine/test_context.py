"""The run contract: one Cancelled with a reason, a settable token with an optional deadline, sub-progress."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from planning import api
from planning.context import CancelFlag, Cancelled, check_cancel, sub_progress
from planning.scenario import Scenario


def test_flag_reason_and_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag is set by cancel() (reason "cancelled") or by its deadline (reason "time limit", 0 s remaining), and
    an explicit cancel wins over the deadline. The clock is injected (``planning.context.time``): under load a
    pause of 50 ms between making a flag and reading it no longer reads as its deadline."""
    import planning.context as context_module

    clock = [100.0]
    monkeypatch.setattr(context_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    flag = CancelFlag()
    assert not flag.is_set() and flag.remaining_s() is None
    check_cancel(flag)  # not set: no exception
    flag.cancel()
    with pytest.raises(Cancelled) as err:
        flag.check()
    assert err.value.reason == "cancelled"
    timed = CancelFlag(deadline_s=0.05)
    clock[0] += 0.04
    assert not timed.is_set() and timed.remaining_s() == pytest.approx(0.01)
    clock[0] += 0.02
    assert timed.is_set() and timed.reason == "time limit" and timed.remaining_s() == 0.0
    with pytest.raises(Cancelled) as err:
        check_cancel(timed, "ILP")
    assert err.value.reason == "time limit" and "ILP" in str(err.value)
    timed.cancel()
    assert timed.reason == "cancelled"  # an explicit request wins over the deadline


def test_threading_event_is_a_cancel_token() -> None:
    ev = threading.Event()
    check_cancel(ev)
    ev.set()
    with pytest.raises(Cancelled) as err:
        check_cancel(ev)
    assert err.value.reason == "cancelled"


def test_sub_progress_maps_into_its_slice() -> None:
    seen: list[tuple[float, str]] = []
    part = sub_progress(lambda f, m: seen.append((f, m)), 0.2, 0.6, "step: ")
    assert part is not None
    part(0.5, "half")
    part(2.0, "over")
    assert seen == [(pytest.approx(0.4), "step: half"), (pytest.approx(0.6), "step: over")]
    assert sub_progress(None, 0, 1) is None


def test_a_passed_deadline_stops_a_solve_with_reason_time_limit(tiny: dict[str, Any]) -> None:
    with pytest.raises(Cancelled) as err:
        api.solve(Scenario.from_dict(tiny), cancel=CancelFlag(deadline_s=0.0))
    assert err.value.reason == "time limit"
