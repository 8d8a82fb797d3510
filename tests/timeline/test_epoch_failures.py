"""Timeline epochs fail alone (issue 37 §3): an epoch whose solve raises is that epoch's "no plan" with its error and
the fix, the other epochs are planned as without it (sequential loop, fan-out worker, shared route), the notes and
the epoch table say which epochs failed; the static peak reuses an epoch's plan when it is the same problem."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from planning import api
from planning.context import Cancelled
from planning.errors import PlanningError
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, diurnal, fanout, run_timeline
from planning.timeline import engine as tl_engine
from planning.timeline import shared as tl_shared
from tests.sharing.conftest import SMALL

SHAPE = [1.0, 0.4, 0.7, 0.25]
BAD = 0.7  # the demand level whose epoch's solve raises


def _demand(scenario: Scenario, shape: list[float] = SHAPE) -> list:
    return [diurnal(m.id, shape, m.demand.rate_rps, m.demand.input_len, m.demand.output_len,
                    epoch_hours=24 / len(shape))
            for m in scenario.models]


def _failing_at(scenario: Scenario, level: float, exc: Exception):  # type: ignore[no-untyped-def]
    """A ``solve_epoch`` that raises ``exc`` for the epoch at demand ``level`` (told by its first model's decode
    rate: that epoch's requests/s × output tokens)."""
    real = tl_engine.solve_epoch
    series = _demand(scenario)[0]
    e = SHAPE.index(level)
    bad = series.rate_rps[e] * series.output_len[e]

    def solve(prep, scn, groups, **k):  # type: ignore[no-untyped-def]
        rate = sum(c.rate for g in groups if g.model == series.model and g.phase == "decode" for c in g.classes)
        if abs(rate - bad) <= 1e-9 * bad:
            raise exc
        return real(prep, scn, groups, **k)

    return solve


def _costs(res: object) -> list[float | None]:
    return [ep.cost_per_hour if ep.has_plan else None for ep in res.epochs]  # type: ignore[attr-defined]


@pytest.mark.parametrize("K", [0.1, 0.0])
def test_an_epoch_that_raises_has_no_plan_and_the_others_are_planned(small: Scenario, K: float,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 0.1 (the sequential loop) and K = 0 (the fan-out, here): the epoch whose solve raises IndexError is
    status ``error`` with the error and a fix; every other epoch costs what it costs in a run without the fault
    (K = 0) or is planned (K > 0: the epoch after the failure starts from nothing running); the total is not
    stated and the notes name the failed epoch."""
    opts = TimelineOptions(K=K, baselines=(), static_peak=False)
    clean = run_timeline(small, _demand(small), options=opts, context=api.engine_context())
    monkeypatch.setattr(tl_engine, "solve_epoch", _failing_at(small, BAD, IndexError("list index out of range")))
    res = run_timeline(small, _demand(small), options=opts, context=api.engine_context())
    bad = SHAPE.index(BAD)
    ep = res.epochs[bad]
    assert not ep.has_plan and ep.status == "error"
    assert "IndexError: list index out of range" in ep.error and "Fix:" in ep.error
    assert ep.served_fraction == {m.id: 0.0 for m in small.models}  # nothing bought, nothing served
    assert all(e.has_plan for i, e in enumerate(res.epochs) if i != bad)
    if K == 0:
        assert [c for i, c in enumerate(_costs(res)) if i != bad] == \
            [c for i, c in enumerate(_costs(clean)) if i != bad]
    else:
        assert _costs(res)[:bad] == _costs(clean)[:bad]
    assert res.to_dict()["total_cost"] is None
    assert any(f"epochs {bad})" in n and "failed" in n for n in res.notes)
    assert "failed" in res.summary_text()
    frame = res.epochs_frame()
    assert set(frame[frame["status"] == "error"]["epoch"]) == {bad}


def test_a_planning_error_in_an_epoch_keeps_its_own_fix(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PlanningError raised in an epoch is reported with its field, problem and fix, not as a bug."""
    err = PlanningError("options.templates", "the pool has no template for this epoch.", "use templates: library.")
    monkeypatch.setattr(tl_engine, "solve_epoch", _failing_at(small, BAD, err))
    res = run_timeline(small, _demand(small), options=TimelineOptions(K=0.1, baselines=(), static_peak=False),
                       context=api.engine_context())
    ep = res.epochs[SHAPE.index(BAD)]
    assert ep.error.endswith("options.templates: the pool has no template for this epoch. Fix: use templates: library.")


def test_cancel_still_stops_the_timeline(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Cancelled`` is not an epoch failure: it stops the whole timeline."""
    monkeypatch.setattr(tl_engine, "solve_epoch", _failing_at(small, BAD, Cancelled("cancelled")))
    with pytest.raises(Cancelled):
        run_timeline(small, _demand(small), options=TimelineOptions(K=0.1, baselines=(), static_peak=False),
                     context=api.engine_context())


def test_a_worker_task_that_raises_returns_the_epoch_as_failed(small: Scenario,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The fan-out's worker function (``fanout.epoch_task``, what the process pool and Ray run) returns a failed
    epoch instead of raising, so the pool's other epochs are kept."""
    design = small.to_dict()
    monkeypatch.setattr(tl_engine, "solve_epoch", lambda *a, **k: (_ for _ in ()).throw(KeyError("shape")))
    prep = tl_engine.prepare(small, api.engine_context())
    rates = [[float(c.rate) for c in g.classes] for g in prep.groups]
    out = fanout.epoch_task((design, small.to_dict(), rates, True, None))
    assert not out.has_plan and out.result.status == "error" and "KeyError" in out.error


def test_the_static_peak_reuses_the_epoch_with_its_problem(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """Epoch 0 is at the peak rates on the constant availability with nothing running: the static plan is its
    plan (no extra solve), and costs what epoch 0's plan costs without the start-up penalty."""
    calls: list[int] = []
    real = tl_engine.solve_epoch

    def counting(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(tl_engine, "solve_epoch", counting)
    without = run_timeline(small, _demand(small), options=TimelineOptions(K=0.1, baselines=(), static_peak=False),
                           context=api.engine_context())
    n_without = len(calls)
    res = run_timeline(small, _demand(small), options=TimelineOptions(K=0.1, baselines=()),
                       context=api.engine_context())
    assert len(calls) - n_without == n_without  # the same solves: none for the static peak
    assert res.timings["static_from_epoch"] == 0.0
    assert res.static_peak_feasible
    ep0 = res.epochs[0]
    assert res.static_peak_cost_per_hour == pytest.approx(ep0.cost_per_hour - ep0.penalty_per_hour, rel=1e-9)
    assert _costs(res) == _costs(without)


def test_the_static_peak_is_solved_when_no_epoch_has_its_problem(small: Scenario) -> None:
    """Two models peaking in different epochs: no epoch is the peak problem, so it is solved on its own."""
    a, b = small.models
    demand = [diurnal(a.id, [1.0, 0.3], a.demand.rate_rps, a.demand.input_len, a.demand.output_len, epoch_hours=12),
              diurnal(b.id, [0.3, 1.0], b.demand.rate_rps, b.demand.input_len, b.demand.output_len, epoch_hours=12)]
    res = run_timeline(small, demand, options=TimelineOptions(K=0.1, baselines=()), context=api.engine_context())
    assert "static_from_epoch" not in res.timings
    assert res.static_peak_feasible
    assert res.static_peak_cost_per_hour >= max(ep.cost_per_hour - ep.penalty_per_hour for ep in res.epochs) - 1e-9


def _shared_scenario() -> Scenario:
    d = copy.deepcopy(SMALL)
    d["options"]["sharing"] = "kvpr"
    d["options"]["time_limit_s"] = 600
    return Scenario.from_dict(d)


def test_a_shared_epoch_that_raises_has_no_plan_and_the_others_are_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared route (K = 0, sharing on): the epoch whose shared solve raises is "no plan" with its error; the
    others keep the plans of a run without the fault; the static peak (the high level) is still planned."""
    s = _shared_scenario()
    levels = [1.0, 0.15, 0.5, 0.15]
    opts = TimelineOptions(K=0.0, baselines=())
    clean = run_timeline(s, _demand(s, levels), options=opts, context=api.engine_context())
    import planning.sharing.checked as sharing  # the epoch's checked solve calls this shared solve

    real = sharing.solve_shared
    bad_rate = s.models[0].demand.rate_rps * 0.5

    def solve(scn, **k):  # type: ignore[no-untyped-def]
        if abs(scn.model(s.models[0].id).demand.rate_rps - bad_rate) < 1e-9:
            raise ZeroDivisionError("float division by zero")
        return real(scn, **k)

    monkeypatch.setattr(sharing, "solve_shared", solve)
    res = run_timeline(s, _demand(s, levels), options=opts, context=api.engine_context())
    assert res.timings["shared_epochs"] == 1.0
    ep = res.epochs[2]
    assert not ep.has_plan and ep.status == "error" and "ZeroDivisionError" in ep.error
    assert [c for i, c in enumerate(_costs(res)) if i != 2] == [c for i, c in enumerate(_costs(clean)) if i != 2]
    assert res.static_peak_feasible and res.static_peak_cost_per_hour == clean.static_peak_cost_per_hour
    assert any("epochs 2)" in n for n in res.notes)
    assert tl_shared.failed("x", 0.0).status == "error"
    assert replace(ep, error="").error == ""
