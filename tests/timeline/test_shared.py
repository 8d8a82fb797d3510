"""A timeline with GPU sharing (``planning.timeline.shared``): with K = 0 each epoch is the checked shared plan of
its demand alone, each distinct epoch solved once, the same on the process pool; otherwise the dedicated route says
sharing was not applied."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from planning import api
from planning.scenario import Demand, Scenario
from planning.timeline import TimelineOptions, diurnal, run_timeline
from tests.sharing.conftest import SMALL

LEVELS = [1.0, 0.15, 1.0, 0.15]


def _scenario(method: str = "kvpr") -> Scenario:
    d = copy.deepcopy(SMALL)
    d["options"]["sharing"] = method
    d["options"]["time_limit_s"] = 600  # the fixture's 30 s can run out on a busy machine (status time_limit)
    return Scenario.from_dict(d)


def _demand(s: Scenario) -> list:
    return [diurnal(m.id, LEVELS, m.demand.rate_rps, m.demand.input_len, m.demand.output_len,
                    epoch_hours=24 / len(LEVELS))
            for m in s.models]


@pytest.mark.parametrize("method", ["kvpr", "exact"])
def test_each_epoch_is_the_shared_plan_of_its_demand(method: str) -> None:
    s = _scenario(method)
    res = run_timeline(s, _demand(s), options=TimelineOptions(baselines=()), context=api.engine_context())
    assert res.timings["shared_epochs"] == 1.0
    # two demand levels; the static peak (the high level on the constant availability) is the high epochs' problem
    assert res.timings["distinct_epoch_problems"] == 2
    for level, ep in zip(LEVELS, res.epochs, strict=True):
        models = tuple(replace(m, demand=Demand(rate_rps=m.demand.rate_rps * level, input_len=m.demand.input_len,
                                                output_len=m.demand.output_len)) for m in s.models)
        alone = api.solve_shared(replace(s, models=models))  # checked, as every epoch's
        assert ep.has_plan and ep.cost_per_hour == pytest.approx(alone.cost_per_hour, rel=1e-9)
        assert ep.gap == alone.gap  # the epoch's proven gap, as its shared plan states it
        assert sum(ep.gpus.values()) == alone.n_gpus
    low, high = res.epochs[1], res.epochs[2]
    assert low.cost_per_hour < high.cost_per_hour  # less demand is cheaper …
    assert high.nodes_started > 0 and low.nodes_stopped > 0  # … so nodes stop and start again
    assert res.static_peak_cost_per_hour == pytest.approx(res.epochs[0].cost_per_hour, rel=1e-9)
    assert res.total_cost == pytest.approx(6 * sum(ep.cost_per_hour for ep in res.epochs), rel=1e-9)  # 6 h epochs


def test_the_process_pool_gives_the_sequential_shared_plans() -> None:
    s = _scenario()
    here = run_timeline(s, _demand(s), options=TimelineOptions(baselines=(), static_peak=False),
                        context=api.engine_context())
    pooled = run_timeline(s, _demand(s), options=TimelineOptions(baselines=(), static_peak=False, workers=2),
                          context=api.engine_context())
    assert [(e.cost_per_hour, e.gpus, e.nodes_started) for e in pooled.epochs] == \
        [(e.cost_per_hour, e.gpus, e.nodes_started) for e in here.epochs]


def test_a_chained_timeline_says_sharing_was_not_applied() -> None:
    s = _scenario()
    res = run_timeline(s, _demand(s), options=TimelineOptions(baselines=(), K=0.1, static_peak=False),
                       context=api.engine_context())
    assert "shared_epochs" not in res.timings
    assert any("sharing (kvpr) is not applied" in n and "K = 0.1" in n for n in res.notes)


def test_the_horizon_total_is_stated_against_the_epochs_bounds_added(monkeypatch: pytest.MonkeyPatch) -> None:
    """Epoch plans not proven optimal: the horizon's total is stated against its proven lower bound (each epoch's
    cost × (1 − its gap), added)."""
    from planning.timeline import shared

    real = shared._solve
    monkeypatch.setattr(shared, "_solve", lambda *a, **k: replace(real(*a, **k), gap=0.1))
    s = _scenario()
    res = run_timeline(s, _demand(s), options=TimelineOptions(baselines=(), static_peak=False),
                       context=api.engine_context())
    assert all(e.gap == 0.1 for e in res.epochs)
    total = res.total_cost
    assert any(f"the horizon's total ${total:,.2f} is within 10.00% of its proven lower bound ${0.9 * total:,.2f}" in n
               for n in res.notes), res.notes
