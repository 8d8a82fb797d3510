"""Epochs that do not chain (K = 0) fanned out on the backend (issue 29 §2): each distinct problem is solved once,
and the plans and the total are the sequential run's, here and on the process pool. (The Ray cluster run of a
timeline is in tests/parallel/test_ray_cluster.py.)"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from planning import api
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, diurnal, fanout, run_timeline
from planning.timeline import engine as tl_engine

SHAPE = [1.0, 0.4, 0.7, 1.0, 0.4, 0.7, 0.25, 1.0]  # the day's levels repeat: 4 distinct epoch problems of 8


def _demand(scenario: Scenario) -> list:
    return [diurnal(m.id, SHAPE, m.demand.rate_rps, m.demand.input_len, m.demand.output_len,
                    epoch_hours=24 / len(SHAPE))
            for m in scenario.models]


def _plans(res: object) -> list:
    return [(ep.cost_per_hour, ep.gpus, ep.nodes_started, ep.nodes_stopped, ep.served_fraction)
            for ep in res.epochs]  # type: ignore[attr-defined]


def test_repeated_epochs_are_solved_once_with_the_plan_of_a_solve_of_their_own(
        small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = tl_engine.solve_epoch

    def counting(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(tl_engine, "solve_epoch", counting)
    opts = TimelineOptions(K=0.0, baselines=(), static_peak=False)
    res = run_timeline(small, _demand(small), options=opts, context=api.engine_context())
    assert len(calls) == 4 and res.timings["distinct_epoch_problems"] == 4
    by_level = {}
    for level, ep in zip(SHAPE, res.epochs, strict=True):
        assert by_level.setdefault(level, (ep.cost_per_hour, ep.gpus)) == (ep.cost_per_hour, ep.gpus)
    # each epoch's plan costs what a solve of that epoch alone costs (no dedupe, no fan-out)
    for level, ep in zip(SHAPE, res.epochs, strict=True):
        models = tuple(replace(m, demand=replace(m.demand, rate_rps=m.demand.rate_rps * level)) for m in small.models)
        alone = api.solve(replace(small, models=models, options=replace(small.options, K=0.0)), with_baselines=False)
        assert ep.cost_per_hour == pytest.approx(alone.cost_per_hour, rel=1e-6)


def test_the_process_pool_gives_the_sequential_plans_and_total(small: Scenario) -> None:
    here = run_timeline(small, _demand(small), options=TimelineOptions(K=0.0, baselines=(), workers=1),
                        context=api.engine_context())
    pooled = run_timeline(small, _demand(small), options=TimelineOptions(K=0.0, baselines=(), workers=2),
                          context=api.engine_context())
    assert _plans(pooled) == _plans(here)
    assert pooled.total_cost == here.total_cost and pooled.nodes_started == here.nodes_started


def test_epochs_with_a_penalty_chain_and_are_not_fanned_out(small: Scenario,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("K > 0 epochs must stay in the sequential loop")

    monkeypatch.setattr(fanout, "solve_independent", boom)
    res = run_timeline(small, _demand(small), options=TimelineOptions(K=0.1, baselines=(), static_peak=False,
                                                                      workers=2), context=api.engine_context())
    assert res.timings["distinct_epoch_problems"] == len(SHAPE)


def test_distinct_epochs_key_on_rates_and_availability(small: Scenario) -> None:
    from planning.scenario import AvailabilityOverride

    g = [("a", 1.0)]
    scn = small
    other = replace(small, availability_overrides=(AvailabilityOverride(region="aws:us-east-2", shape="1xL4",
                                                                        nodes=1),))
    groups = [[_G(g)], [_G(g)], [_G([("a", 2.0)])], [_G(g)]]
    assert fanout.distinct_epochs([scn, scn, scn, other], groups) == [0, 0, 2, 3]


class _C:
    def __init__(self, id: str, rate: float) -> None:
        self.id, self.rate = id, rate


class _G:
    def __init__(self, classes: list[tuple[str, float]]) -> None:
        self.classes = tuple(_C(i, r) for i, r in classes)


def _two_days(scenario: Scenario) -> list:
    out = []
    for m in scenario.models:
        s = diurnal(m.id, [1.0, 0.4, 0.7, 0.25], m.demand.rate_rps, m.demand.input_len, m.demand.output_len,
                    epoch_hours=6.0)
        out.append(replace(s, rate_rps=s.rate_rps * 2, input_len=s.input_len * 2, output_len=s.output_len * 2,
                           labels=()))
    return out


@pytest.mark.parametrize("policy", ["myopic", "lookahead"])
def test_a_repeated_day_reuses_its_steps_with_the_plans_of_a_run_without_reuse(
        small: Scenario, policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """K > 0: an epoch (myopic) or a horizon step (look-ahead) whose demand, availability and running instances
    were seen before reuses that answer; the plans and the total are those of a run that solves every one."""
    from planning.timeline import policies

    calls = []
    real_epoch, real_horizon = tl_engine.solve_epoch, policies.solve_horizon

    def counting_epoch(*a, **k):  # type: ignore[no-untyped-def]
        calls.append("epoch")
        return real_epoch(*a, **k)

    def counting_horizon(*a, **k):  # type: ignore[no-untyped-def]
        calls.append("step")
        return real_horizon(*a, **k)

    monkeypatch.setattr(tl_engine, "solve_epoch", counting_epoch)
    monkeypatch.setattr(policies, "solve_horizon", counting_horizon)
    opts = TimelineOptions(K=0.1, baselines=(), static_peak=False, policies=(policy,), horizon=2)
    reused = run_timeline(small, _two_days(small), options=opts, context=api.engine_context())
    n_reused = len(calls)
    calls.clear()
    counter = iter(range(10**6))
    monkeypatch.setattr(fanout, "epoch_key", lambda *a: ("unique", next(counter)))
    monkeypatch.setattr(policies, "step_key", lambda *a: str(next(counter)).encode())
    every = run_timeline(small, _two_days(small), options=opts, context=api.engine_context())
    assert len(calls) == 8 and n_reused < 8
    assert _plans(reused) == _plans(every) and reused.total_cost == every.total_cost


def test_cli_workers_give_the_sequential_week(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: `planning timeline … --K 0 --workers 2` prints the plans and total of `--workers 1`; a bad
    --workers is a clear error naming the flag."""
    from planning.cli import main
    from planning.scenario import save_scenario
    from tests.timeline.conftest import TWO_MODELS

    f = save_scenario(Scenario.from_dict(TWO_MODELS), tmp_path / "small.yaml")
    day = Path(__file__).resolve().parents[2] / "data" / "demand" / "azure_conv_day.csv"
    args = ["timeline", str(f), "--demand", f"llama-3-8b={day}", "--epoch", "4h", "--K", "0", "--no-baselines",
            "--json"]
    runs = {}
    for workers in ("1", "2"):
        assert main([*args, "--workers", workers]) == 0
        out = json.loads(capsys.readouterr().out)
        runs[workers] = (out["total_cost"], [(e["cost_per_hour"], e["nodes_started"], e["nodes_stopped"])
                                             for e in out["epochs"]])
    assert runs["2"] == runs["1"] and len(runs["1"][1]) == 6
    assert main([*args, "--workers", "-1"]) == 2
    assert "--workers" in capsys.readouterr().err
