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
    from planning.finance.commitments import candidates_of, epochs_of
    from planning.finance.sizing import size
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
    """The sizing's share of the limit runs out while its libraries build: no commitment is sized (said so, no $0
    totals) and the design hour is still planned with the rest. The share is 3 s of a 600 s limit, so the design
    hour's time (~570 s) never binds, however busy the machine (at 4 s in all, ~1.6 s were left for it)."""
    import planning.finance.plan as finance_plan
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
    monkeypatch.setattr(finance_plan, "SIZING_SHARE", 0.005)
    result = solve(Scenario.from_dict({**small, "options": {**small["options"], "time_limit_s": 600}}), cache=False)
    assert result.has_plan  # the design hour is planned with the time left
    assert any("no commitment was sized" in d for d in result.diagnostics)
    summary = finance_summary(result)
    assert summary["horizon_total_usd"] is None and summary["all_on_demand_usd"] is None  # not $0
    assert summary["bill_usd"] is not None  # the design hour's plan, billed every hour


def _small_sizing_inputs() -> tuple[Any, Any, Any, Any]:
    from planning.api import engine_context
    from planning.finance.commitments import candidates_of, epochs_of
    from planning.resolve import resolve_scenario
    from planning.templates.sets import build_template_sets
    from tests.finance.conftest import SMALL

    s = Scenario.from_dict(SMALL)
    ctx = engine_context()
    resolved = resolve_scenario(s, ctx.catalog)
    return resolved, build_template_sets(ctx, resolved), epochs_of(s), candidates_of(s, ctx.catalog)


def test_large_library_path_finds_the_small_paths_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decomposition used for large libraries (relaxation, epochs alone, MILP over their templates, epochs
    re-solved at R, the cut master) reaches the optimum of the MILP over every template on a small scenario and
    proves it: the cut master's bound closes the gap (status optimal)."""
    import planning.finance.sizing as sizing_module

    resolved, sets, epochs, cands = _small_sizing_inputs()
    exact = sizing_module.size(resolved, sets, epochs, cands)
    assert exact.status == "optimal" and exact.certified_over.startswith("all templates (every one")
    monkeypatch.setattr(sizing_module, "REDUCE_MIN_TEMPLATES", 0)
    forced = sizing_module.size(resolved, sets, epochs, cands)
    assert "milp_value" in forced.stats  # the large path ran to its MILP
    assert forced.value == pytest.approx(exact.value, rel=1e-6)
    assert forced.bound <= exact.value * (1 + 1e-9)
    assert forced.counts == exact.counts
    assert forced.stats["master_bound"] > forced.stats["lagrangian_epoch_bound"]  # the master proved more
    assert forced.status == "optimal" and forced.gap is not None and forced.gap <= 1e-6


def test_sizing_stopped_after_a_plan_returns_it_with_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anytime: the deadline expires while the epochs are re-solved at the chosen commitments (step 4 of the
    large-library path): the sizing returns its best plan so far with status feasible, a positive value and a
    proven gap, never $0."""
    import planning.finance.sizing as sizing_module
    from planning.context import Deadline

    resolved, sets, epochs, cands = _small_sizing_inputs()
    monkeypatch.setattr(sizing_module, "REDUCE_MIN_TEMPLATES", 0)
    real = sizing_module.solve_epochs
    calls = {"n": 0}
    deadline = Deadline(3600.0)

    def expiring(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:  # the re-solve at the chosen R: the time limit strikes
            deadline._deadline = time.monotonic()  # the deadline expires now
        return real(*args, **kwargs)

    monkeypatch.setattr(sizing_module, "solve_epochs", expiring)
    sizing = sizing_module.size(resolved, sets, epochs, cands, cancel=deadline)
    assert calls["n"] == 3 and deadline.timed_out()
    assert sizing.status == "feasible" and sizing.has_plan
    assert sizing.value > 0 and sizing.gap is not None and 0 <= sizing.gap < 1
    assert "time limit" in sizing.message
    assert len(sizing.plans) == len(epochs) and all(p.nodes for p in sizing.plans)


def test_repeated_demand_levels_are_solved_once_with_the_same_answer() -> None:
    """A profile that repeats a level (0.6 twice): ``size`` solves three levels, the 0.6 one weighted by both
    epochs' hours, and returns the same value, bound and commitments as the model over all four epochs, with
    the repeated epochs' plans equal."""
    import planning.finance.sizing as sizing_module
    from planning.finance.commitments import Epoch

    resolved, sets, epochs, cands = _small_sizing_inputs()
    repeated = [*epochs[:3], Epoch(3, 0, 3, epochs[3].hours, dict(epochs[1].factor))]
    levels, where = sizing_module.dedupe_epochs(repeated)
    assert len(levels) == 3 and where == [0, 1, 2, 1] and levels[1].hours == 2 * epochs[1].hours
    once = sizing_module.size(resolved, sets, repeated, cands)
    every = sizing_module._size(resolved, sets, repeated, cands)
    assert once.stats["distinct_epochs"] == 3 and len(once.plans) == len(once.epochs) == 4
    assert once.status == every.status == "optimal"
    assert once.value == pytest.approx(every.value, rel=1e-6)
    assert once.counts == every.counts
    assert once.plans[3] == once.plans[1]
