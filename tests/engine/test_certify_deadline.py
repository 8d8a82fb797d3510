"""The certified ILP loop under a deadline: when time runs out after a plan was found but before the LP-reduction
certificate holds, that plan comes back with status ``feasible`` (not ``optimal``) and its gap to the best bound
proven by then. The deadline's expiry is injected (no sleeping, no wall-clock assertion)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import planning.allocate.certify as certify
import planning.api as api
from planning.allocate.reduce import LagrangianBound
from planning.context import Deadline
from planning.resolve import resolve_scenario
from planning.templates.sets import build_template_sets


class _ExpiresOnRequest(Deadline):
    """A deadline whose time is up when the test says so (``expire()``), whatever the clock."""

    def __init__(self) -> None:
        super().__init__(3600.0)
        self._up = False

    def expire(self) -> None:
        self._up = True

    def expired(self) -> bool:
        return self._up

    def remaining_s(self) -> float | None:
        return 0.0 if self._up else 3600.0


def test_deadline_between_attempts_returns_the_best_plan_with_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline passes right after the first ILP (over the LP's support) found a plan: the loop makes no
    second attempt and returns that plan as ``feasible`` with a valid bound (≥ the LP's, ≤ the optimum) and the
    gap between them; never ``optimal`` without the certificate."""
    ctx = api.engine_context()
    scenario = api.load_preset_scenario("coral-core")
    resolved = resolve_scenario(scenario, ctx.catalog)
    sets = build_template_sets(ctx, resolved, None, None)
    assert certify._reducible(resolved, sets)
    full = certify.solve_certified(resolved, sets)  # no deadline: the certified optimum
    monkeypatch.setattr(certify, "REDUCE_START_FRACTION", 0.0)  # first ILP over the LP's support only
    # and plain reduced-cost fixing (no Lagrangian bound, which certifies coral-core at the first attempt)
    monkeypatch.setattr(certify, "lagrangian_bound", lambda red, demand, limit, budget_s=None: LagrangianBound(
        -math.inf, red.z_lp, np.full(len(demand), -np.inf), np.zeros(len(demand)), 0.0))
    real = certify._solve
    calls: list[float] = []

    deadline = _ExpiresOnRequest()

    def solve_then_expire(problem: Any, cancel: Any, ilp_gap: float | None = None) -> Any:
        calls.append(problem.time_limit_s)
        out = real(problem, cancel, ilp_gap)
        deadline.expire()  # the time is up once this ILP has answered
        return out

    monkeypatch.setattr(certify, "_solve", solve_then_expire)
    alloc = certify.solve_certified(resolved, sets, cancel=deadline)
    assert deadline.timed_out()
    assert len(calls) == 1  # the loop stopped at the deadline instead of trying again
    res = alloc.result
    # the ILP over the LP's support alone (6 of 30,540 templates) does not certify: the best plan so far is
    # returned as feasible, with its gap to the best bound proven by then (the LP bound, raised by the refuted
    # target: no plan of value ≤ target exists when the ILP over every column such a plan can use found none)
    assert res.status == "feasible" and res.has_plan and res.gap is not None and res.gap > 0
    assert "best plan found so far" in " ".join(res.messages)
    assert "reduction_certified" not in alloc.stats
    lp, bound = alloc.stats["lp_bound_per_hour"], alloc.stats["anytime_bound"]
    assert lp - 1e-6 <= bound <= full.result.total_per_hour + 1e-6  # a valid bound, at least the LP's
    assert res.total_per_hour >= full.result.total_per_hour - 1e-6
    assert res.gap == pytest.approx((res.total_per_hour - bound) / res.total_per_hour, rel=1e-6)
