"""The baselines' shortcuts answer exactly what the solver answers: the served MIP of a baseline that cannot serve
some class (no solver), and one pruned instance shared by a baseline's cost ILP and its max-served MIP."""

from __future__ import annotations

from dataclasses import replace

import pytest

import planning.allocate.solve as solve_mod
from planning.allocate import AllocationProblem, AllocationResult, solve_allocation
from planning.allocate.instance import build_instance
from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines import baseline_names, run_baseline

SPEC = Synthetic(groups=3, templates_per_group=6, regions=2, shapes=4, max_available=6, demand_scale=0.4)


def _answer(res: AllocationResult) -> tuple:
    """What a plan says: status, α, the plan, its cost and what it serves."""
    return (res.status, res.alpha, dict(res.counts), dict(res.nodes_used), res.cost_per_hour, res.penalty_per_hour,
            res.transfer_per_hour, dict(res.served), res.objective_value)


def _unservable(seed: int) -> AllocationProblem:
    """A served-objective problem whose first group has no template left (a GPU type too small for its model)."""
    p = random_problem(seed, SPEC, objective="served")
    first = p.classes[0].group
    return replace(p, templates=tuple(t for t in p.templates if t.group != first))


@pytest.mark.parametrize("seed", range(6))
def test_unservable_served_objective_answers_as_the_solver(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _unservable(seed)
    fast = solve_allocation(p, diagnose=False)
    assert fast.phases[0].solver_status == solve_mod._UNSERVABLE  # the shortcut ran (no solver)
    monkeypatch.setattr(solve_mod, "_nothing_servable", lambda inst, problem: False)
    slow = solve_allocation(p, diagnose=False)
    assert slow.phases[0].solver_status != solve_mod._UNSERVABLE
    assert _answer(fast) == _answer(slow)
    assert fast.alpha == 0.0 and fast.counts == {}


def test_unservable_shortcut_stays_off_with_running_instances() -> None:
    p = _unservable(0)
    sold = {(o.region, o.shape) for o in p.offers if o.available > 0}
    t, region = next((t, r) for t in p.templates for r in sorted({o.region for o in p.offers})
                     if all((r, s) in sold for s in t.usage))
    running = replace(p, current={(t.id, region): 1})
    assert build_instance(running).pair_current.sum() == 1
    res = solve_allocation(running, diagnose=False)
    assert res.phases[0].solver_status != solve_mod._UNSERVABLE  # keeping a running node is no longer free


@pytest.mark.parametrize("seed", range(6))
def test_a_reused_instance_gives_the_same_answer(seed: int) -> None:
    cost = random_problem(seed, SPEC)
    served = replace(cost, objective="served", time_limit_s=7.0)
    built = build_instance(cost)
    assert _answer(solve_allocation(served, diagnose=False, instance=built)) == \
        _answer(solve_allocation(served, diagnose=False))
    other = random_problem(seed + 100, SPEC)  # built for another problem: ignored, pruned afresh
    assert _answer(solve_allocation(served, diagnose=False, instance=build_instance(other))) == \
        _answer(solve_allocation(served, diagnose=False))


@pytest.mark.parametrize("seed", range(4))
def test_baselines_same_with_and_without_the_shortcuts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    p = random_problem(seed, Synthetic(groups=3, templates_per_group=8, regions=2, shapes=5, max_available=4,
                                       demand_scale=0.6))
    names = baseline_names(p)
    fast = [run_baseline(n, p) for n in names if n != "memp"]
    monkeypatch.setattr(solve_mod, "_nothing_servable", lambda inst, problem: False)
    monkeypatch.setattr(solve_mod, "_instance", lambda problem, built: build_instance(problem))
    slow = [run_baseline(n, p) for n in names if n != "memp"]
    for a, b in zip(fast, slow, strict=True):
        assert (a.name, a.cost_per_hour, dict(a.served_fraction), dict(a.counts), a.note, a.feasible) == \
            (b.name, b.cost_per_hour, dict(b.served_fraction), dict(b.counts), b.note, b.feasible)
