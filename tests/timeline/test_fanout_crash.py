"""A timeline epoch whose worker process dies (issue 37): the fan-out of distinct epoch problems keeps the other
epochs' answers and answers the dead one with its ``crashed`` rule (the timeline: that epoch's "no plan" with the
error and fix), instead of failing the horizon."""

from __future__ import annotations

import os

from planning import spawning
from planning.errors import PlanningError
from planning.parallel import FanOut
from planning.timeline.fanout import Distinct, run_distinct

WORKERS = 3  # a worker count no other test's shared pool uses


def _task(e: int) -> str:
    """Problem 2's process dies every time; the others answer."""
    if e == 2:
        os._exit(3)
    return f"plan {e}"


def _crashed(e: int, exc: PlanningError) -> str:
    return f"no plan {e}: {exc.field}: {exc.problem} Fix: {exc.fix}"


def test_a_crashed_epoch_is_its_own_no_plan_and_the_others_are_kept() -> None:
    """Epochs 0..4 with problems [0, 1, 2, 1, 2]: problems 0 and 1 are answered by the pool, problem 2 (whose
    process dies in the pool and again alone) by the crashed rule with the worker error and a fix, in every epoch
    that shares it; three problems were solved."""
    how = Distinct(here=_task, task=_task, item=lambda e: e, crashed=_crashed, label="epoch problem")
    try:
        out, solved = run_distinct([0, 1, 2, 1, 2], how, FanOut(workers=WORKERS, what="timeline epochs"))
    finally:
        spawning.discard_pool(spawning.shared_pool(WORKERS))
    assert solved == 3
    assert out[0] == "plan 0" and out[1] == out[3] == "plan 1"
    assert out[2] == out[4] and out[2].startswith("no plan 2: workers: the worker process solving it died")
    assert "Fix: " in out[2] and out[2].split("Fix: ", 1)[1]
