"""A baseline that cannot meet demand is told so by its LP relaxation (``base.cannot_serve_all``, issue 41): the LP's
verdict is never wrong, the cost ILP is then not solved, and the answer (the max-served MIP's) is the one the
plain path gives."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning.allocate import AllocationProblem, solve_allocation
from planning.allocate.instance import build_instance
from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines import base

SEEDS = range(40, 52)


def _crowded(seed: int) -> AllocationProblem:
    """Seeded problems of scarce offers and high demand: 5 of these 12 cannot meet all demand (the groups of
    ``test_settle_stall``, demand × 4)."""
    return random_problem(seed, Synthetic(groups=4, templates_per_group=8, regions=2, shapes=4, max_available=6,
                                          demand_scale=1.2), K=0.05, mip_rel_gap=1e-9)


def _answer(b: base.BaselineResult) -> tuple[Any, ...]:
    return (b.cost_per_hour, dict(b.served_fraction), dict(b.gpus_used), dict(b.nodes_used), dict(b.counts),
            b.feasible, b.note, b.penalty_per_hour, dict(b.details))


def test_the_lp_calls_infeasible_only_what_the_ilp_proves_infeasible() -> None:
    """Every problem the LP relaxation calls unservable is infeasible for the cost ILP, and the LP finds most of
    the infeasible ones (it misses only those whose shortfall is integer rounding)."""
    said = infeasible = 0
    for seed in SEEDS:
        p = _crowded(seed)
        lp = base.cannot_serve_all(build_instance(p), p)
        status = solve_allocation(p, diagnose=False).status
        assert status in ("optimal", "infeasible"), seed
        assert not lp or status == "infeasible", seed
        said += lp
        infeasible += status == "infeasible"
    assert infeasible >= 4 and said >= infeasible // 2  # the instances exercise both (5 of 5 of 12 when written)


def test_a_baseline_the_lp_rules_out_gives_the_plain_paths_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``from_allocation`` with the LP's verdict skips the cost ILP (no cost solve) and answers exactly as the plain
    path does (cost, served fractions, GPUs, nodes, counts, note, details)."""
    import planning.allocate.solve as solve

    objectives: list[str] = []
    real = solve.solve_allocation

    def spy(problem: AllocationProblem, *args: Any, **kwargs: Any) -> Any:
        objectives.append(problem.objective)
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(solve, "solve_allocation", spy)
    skipped = 0
    for seed in SEEDS:
        p = _crowded(seed)
        if not base.cannot_serve_all(build_instance(p), p):
            continue
        objectives.clear()
        fast = base.from_allocation("test", p, "ok")
        assert objectives == ["served"], seed  # no cost ILP
        with monkeypatch.context() as m:
            m.setattr(base, "cannot_serve_all", lambda *_a: False)
            plain = base.from_allocation("test", p, "ok")
        assert _answer(fast) == _answer(plain), seed
        assert not fast.feasible and fast.served_fraction_min < 1, seed
        skipped += 1
    assert skipped >= 3


def test_a_servable_problem_is_not_ruled_out() -> None:
    """Demand the offers can carry (the LP's α reaches 1) is solved by its cost ILP as before."""
    p = random_problem(44, Synthetic(groups=4, templates_per_group=8, regions=2, shapes=4, max_available=6,
                                     demand_scale=0.3), K=0.05, mip_rel_gap=1e-9)
    assert not base.cannot_serve_all(build_instance(p), p)
    out = base.from_allocation("test", p, "ok")
    assert out.feasible and out.note == "ok"
    other = replace(p, builder="pulp", solver="cbc")  # another builder: the LP check does not apply
    assert not base.cannot_serve_all(build_instance(other), other)
