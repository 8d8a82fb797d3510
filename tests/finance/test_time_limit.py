"""The finance solve keeps the one-deadline contract: a sizing the time limit stops returns its best plan with
its proven gap, or no plan (never $0), and the design hour is still planned."""

from __future__ import annotations

import time
from typing import Any

import pytest

from planning.scenario import Scenario


def test_sizing_without_time_for_a_plan_says_so() -> None:
    from planning.api import engine_context
    from planning.context import Deadline
    from planning.finance.commitments import candidates_of, epochs_of, size
    from planning.resolve import resolve_scenario
    from planning.templates.sets import build_template_sets
    from tests.finance.conftest import SMALL

    s = Scenario.from_dict(SMALL)
    ctx = engine_context()
    resolved = resolve_scenario(s, ctx.catalog)
    sets = build_template_sets(ctx, resolved)
    deadline = Deadline(0.001)
    time.sleep(0.01)
    sizing = size(resolved, sets, epochs_of(s), candidates_of(s, ctx.catalog), cancel=deadline)
    assert sizing.status == "time_limit" and not sizing.has_plan
    assert sizing.gap is None and "time limit" in sizing.message


def test_time_limit_in_the_sizings_library_build_still_plans_the_hour(monkeypatch: pytest.MonkeyPatch,
                                                                     small: dict[str, Any]) -> None:
    import planning.templates.sets as sets_module
    from planning.api import finance_summary, solve
    from planning.context import check_cancel

    real = sets_module.build_template_sets

    def slow(ctx: Any, resolved: Any, progress: Any = None, cancel: Any = None) -> Any:
        while cancel is not None and not cancel.is_set():  # a library that takes longer than the sizing's share
            time.sleep(0.02)
        check_cancel(cancel, "library build")
        return real(ctx, resolved, progress, cancel)

    monkeypatch.setattr(sets_module, "build_template_sets", slow)
    result = solve(Scenario.from_dict({**small, "options": {**small["options"], "time_limit_s": 4}}))
    assert result.has_plan  # the design hour is planned with the time left
    assert any("no commitment was sized" in d for d in result.diagnostics)
    summary = finance_summary(result)
    assert summary["horizon_total_usd"] is None and summary["all_on_demand_usd"] is None  # not $0
    assert summary["bill_usd"] is not None  # the design hour's plan, billed every hour
