"""An epoch with the previous epoch's problem keeps that epoch's optimal plan without a solve
(planning.timeline.policies.held_epoch): the day costs what it cost when every epoch was solved, and each kept
plan costs what its own solve from the same running instances costs. A re-planned baseline whose epoch repeats an
earlier one's problem from the same instances reuses its answer (loop._baselines): the same costs as re-planning."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.context import engine_context
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, engine, policies, run_timeline
from planning.timeline.demand import diurnal


def _day(small: Scenario, seed: int) -> list:
    """A seeded step-function day: four levels, each held three hours (as the shipped 4-h samples are hourly)."""
    import random

    rng = random.Random(seed)
    levels = [rng.uniform(0.3, 1.0) for _ in range(4)]
    shape = [v for v in levels for _ in range(3)]
    return [diurnal(m.id, shape, m.demand.rate_rps, m.demand.input_len, m.demand.output_len, 2.0)
            for m in small.models]


@pytest.mark.parametrize("seed", [1, 2])
def test_held_plans_cost_what_every_epoch_solved_costs(small: Scenario, seed: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = engine_context()
    demand = _day(small, seed)
    options = TimelineOptions(policies=("myopic", "lookahead"), baselines=())
    solves: list[int] = []
    real = engine.solve_epoch_alone

    def counted(*args: object, **kwargs: object) -> engine.EpochSolve:
        solves.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "solve_epoch_alone", counted)
    held = run_timeline(small, demand, options=options, context=ctx)
    n_held = len(solves)
    solves.clear()
    monkeypatch.setattr(policies, "held_epoch", lambda *a, **k: None)  # the previous path: every epoch solved
    solved = run_timeline(small, demand, options=options, context=ctx)
    assert n_held < len(solves)  # some epochs were kept, not solved
    assert held.total_cost == pytest.approx(solved.total_cost, rel=1e-9)
    assert [e.cost_per_hour for e in held.epochs] == pytest.approx([e.cost_per_hour for e in solved.epochs], rel=1e-9)
    assert held.to_dict()["policies"]["lookahead"]["total_cost"] == pytest.approx(
        solved.to_dict()["policies"]["lookahead"]["total_cost"], rel=1e-9)
    assert all(e.has_plan and e.status == "optimal" for e in held.epochs)


def test_a_held_plan_costs_its_own_solve_from_the_same_running_instances(small: Scenario) -> None:
    """Independently of the timeline: solve an epoch, then hold its plan for an equal epoch, and solve that epoch
    from the plan as the running cluster: the two cost the same, to the cent, with nothing started."""
    ctx = engine_context()
    from planning.resolve import resolve_scenario

    prep = engine.prepare(small, ctx)
    groups = list(resolve_scenario(small, ctx.catalog).groups)
    first = engine.solve_epoch_alone(prep, small, groups)
    prev = dict(first.counts)
    held = policies.held_epoch(prep, small, groups, first, prev)
    assert held is not None
    again = engine.solve_epoch_alone(prep, replace(small, current=engine.current_of(prev)), groups)
    assert held.result.cost_per_hour == pytest.approx(again.result.cost_per_hour, abs=0.005)
    assert held.result.penalty_per_hour == 0.0
    assert policies.held_epoch(prep, small, groups, first, {}) is None  # not started from that plan: solve it


class _Forget(dict):  # type: ignore[type-arg]
    """A memo that keeps nothing: the previous path, every baseline re-planned in every epoch."""

    def __setitem__(self, key: object, value: object) -> None:
        return None


def test_repeated_baseline_epochs_reuse_their_answer_and_cost_the_same(small: Scenario,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from planning.baselines.registry import REPLANNED_LABELS
    from planning.timeline import loop

    ctx = engine_context()
    demand = _day(small, 3)
    options = TimelineOptions(baselines=("homo", "homo-ilp"))
    calls: list[int] = []
    real = engine.homogeneous_epoch

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "homogeneous_epoch", counted)
    memo = run_timeline(small, demand, options=options, context=ctx)
    n_memo = len(calls)
    calls.clear()
    real_state = loop._BaselineState
    monkeypatch.setattr(loop, "_BaselineState", lambda prev, cache, _memo: real_state(prev, cache, _Forget()))
    every = run_timeline(small, demand, options=options, context=ctx)
    assert len(calls) == 2 * len(every.epochs) and n_memo < len(calls)
    for a, b in zip(memo.epochs, every.epochs, strict=True):
        for label in REPLANNED_LABELS.values():
            assert a.methods[label].cost_per_hour == pytest.approx(b.methods[label].cost_per_hour, rel=1e-12)
            assert a.methods[label].nodes_started == b.methods[label].nodes_started
    assert memo.to_dict()["baselines_total_cost"] == pytest.approx(every.to_dict()["baselines_total_cost"], rel=1e-12)
