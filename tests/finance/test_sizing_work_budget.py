"""The commitment sizing stops on work, not on the clock (issue 37 §6): every stop of its proof is counted in work
(Kelley steps, cut-master steps, HiGHS nodes), so a machine that looks a thousand times slower returns the same
commitments, value and step counts; the wall clock is only the deadline, a safety net whose stop flags the answer
(``stopped_by == "clock"``, status ``feasible``, a note naming it and the fix); a work budget that binds gives a
``feasible`` answer flagged ``stopped_by == "work"``, the same on every machine. Clocks are injected: no test here
depends on the machine's speed."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

import planning.finance.proof as proof_module
import planning.finance.sizing as sizing_module
from planning.context import Deadline
from planning.finance.commitments import Sizing
from planning.finance.plan import sizing_note, time_limited
from tests.finance.conftest import small_sizing_inputs


class _SlowClock:
    """``time`` as the sizing sees it on a machine a thousand times slower: every reading is 1,000 s later."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def perf_counter(self) -> float:
        return 1000.0 * next(self._ticks)

    monotonic = perf_counter


class _TinyBudget(Deadline):
    """A deadline that always says a minute is left (a tiny budget beside a slow clock) and never expires."""

    def remaining_s(self) -> float | None:
        return 60.0


@pytest.fixture(scope="module")
def inputs() -> tuple[Any, Any, Any, Any]:
    return small_sizing_inputs()


def _size(inputs: tuple[Any, Any, Any, Any], monkeypatch: pytest.MonkeyPatch, cancel: Any = None) -> Sizing:
    """SMALL sized on the large-library path (relaxation, epochs, MILP, Kelley, the cut master)."""
    monkeypatch.setattr(sizing_module, "REDUCE_MIN_TEMPLATES", 0)
    resolved, sets, epochs, candidates = inputs
    return sizing_module.size(resolved, sets, epochs, candidates, cancel=cancel)


def _work(sizing: Sizing) -> dict[str, float]:
    """The sizing's figures that count work (no seconds)."""
    return {k: v for k, v in sizing.stats.items() if "second" not in k}


def test_a_slow_clock_and_a_tiny_budget_give_the_same_plan(inputs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With an ample budget the proof closes (optimal, not flagged). Seen through a clock that jumps 1,000 s at
    every reading with a minute always left (the old rules then skipped Kelley and the cut master: "a pass no
    longer fits"), the sizing returns the same commitments, value, bound and work counts, still optimal."""
    ample = _size(inputs, monkeypatch, Deadline(3600.0))
    assert ample.status == "optimal" and ample.stopped_by == "" and not time_limited(ample)
    assert ample.stats["master_steps"] >= 1 and ample.stats["dual_steps"] >= 1  # both stops are exercised
    monkeypatch.setattr(sizing_module, "time", _SlowClock())
    monkeypatch.setattr(proof_module, "time", _SlowClock(), raising=False)
    slow = _size(inputs, monkeypatch, _TinyBudget(3600.0))
    assert slow.stats["seconds"] >= 1000.0  # the injected clock was read
    assert slow.counts == ample.counts and slow.value == ample.value and slow.bound == ample.bound
    assert _work(slow) == _work(ample)
    assert slow.status == "optimal" and slow.stopped_by == ""


def test_a_binding_work_budget_is_flagged_alike_on_every_run(inputs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Kelley step and no cut-master step: the proof ends above its gap, status feasible, flagged
    ``time_limited`` with ``stopped_by == "work"`` and a note naming the work budget (not the clock); two runs
    give the same plan and figures."""
    monkeypatch.setattr(proof_module, "DUAL_STEPS", 0)
    monkeypatch.setattr(proof_module, "MASTER_STEPS", 0)
    first = _size(inputs, monkeypatch, Deadline(3600.0))
    again = _size(inputs, monkeypatch, Deadline(3600.0))
    assert first.status == "feasible" and first.stopped_by == "work" and time_limited(first)
    assert first.gap is not None and first.gap > 1e-6  # the requested gap (1e-6) is not reached
    assert (first.counts, first.value, first.bound, _work(first)) == (again.counts, again.value, again.bound,
                                                                      _work(again))
    note = sizing_note(first, first.candidates, len(first.epochs), 1e-6)
    assert "work budget" in note and "wall clock" not in note


def test_the_clock_stopping_the_proof_is_said_loudly(inputs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline expires during Kelley's first pass (the fourth epoch pass): the best plan so far comes back
    ``feasible``, ``stopped_by == "clock"``, its message saying the time limit stopped it and its note saying the
    plan depends on the machine, with the fix (raise options.time_limit_s)."""
    deadline = Deadline(3600.0)
    real = sizing_module.solve_epochs
    calls = {"n": 0}

    def expiring(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real(*args, **kwargs)

    def kelley_pass(*args: Any, **kwargs: Any) -> Any:
        deadline._deadline = time.monotonic()  # the deadline expires now
        return real(*args, **kwargs)

    monkeypatch.setattr(sizing_module, "solve_epochs", expiring)
    monkeypatch.setattr(proof_module, "solve_epochs", kelley_pass)
    out = _size(inputs, monkeypatch, deadline)
    assert calls["n"] == 3 and deadline.timed_out()
    assert out.status == "feasible" and out.stopped_by == "clock" and time_limited(out)
    assert "time limit" in out.message
    note = sizing_note(out, out.candidates, len(out.epochs), 1e-6)
    assert "wall clock" in note and "options.time_limit_s" in note
