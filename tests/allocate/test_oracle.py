"""Oracles: the ILP (both builders, both solvers) equals brute force on tiny seeded instances; hand-computed LP."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass, solve_allocation
from planning.allocate.brute import brute_force
from planning.allocate.synthetic import Synthetic, random_problem

COMBOS = [("matrix", "highs"), ("pulp", "highs"), ("pulp", "cbc")]


def _tiny(seed: int, classes: int, objective: str) -> AllocationProblem:
    p = random_problem(seed, Synthetic(groups=2, templates_per_group=3 if classes == 1 else 2,
                       regions=1 + seed % 2, shapes=3, classes_per_group=classes, max_available=3),
                       objective=objective, K=0.1 * (seed % 3),
                       budget_per_hour=None if objective == "cost" else 15.0, mip_rel_gap=1e-9)
    if seed % 4 == 0:  # running instances exercise the penalty rows
        p = replace(p, current={(p.templates[0].id, p.offers[0].region): 1})
    return p


def _check(p: AllocationProblem, builder: str, solver: str, evaluations: int = 20_000) -> None:
    b = brute_force(p, evaluations)
    r = solve_allocation(replace(p, builder=builder, solver=solver))  # type: ignore[arg-type]
    if not b.feasible:
        assert r.status == "infeasible"
        return
    assert r.status == "optimal"
    assert r.total_per_hour == pytest.approx(b.cost, rel=1e-6, abs=1e-6)
    if p.objective == "served":
        assert r.alpha == pytest.approx(b.alpha, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize(("builder", "solver"), COMBOS)
@pytest.mark.parametrize("objective", ["cost", "served"])
@pytest.mark.parametrize("classes", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_ilp_equals_brute_force(seed: int, classes: int, objective: str, builder: str, solver: str) -> None:
    _check(_tiny(seed, classes, objective), builder, solver)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 30))
def test_ilp_equals_brute_force_sweep(seed: int) -> None:
    for classes in (1, 2):
        for objective in ("cost", "served"):
            for builder, solver in COMBOS:
                _check(_tiny(seed, classes, objective), builder, solver)


def _two_class_problem(**options: object) -> AllocationProblem:
    # A is fast on w1 (4/s) and slow on w2 (1/s); B the reverse; one node of each, $1/h each.
    t = (
        TemplateOption("A", "m", {"1xa": 1}, {"w1": 4.0, "w2": 1.0}),
        TemplateOption("B", "m", {"1xb": 1}, {"w1": 1.0, "w2": 4.0}),
    )
    offers = (Offer("r", "1xa", 1.0, 1), Offer("r", "1xb", 1.0, 1))
    classes = (WorkloadClass("w1", "m", 2.0), WorkloadClass("w2", "m", 2.0))
    return AllocationProblem(t, offers, classes, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(("builder", "solver"), COMBOS)
def test_workload_classes_hand_computation(builder: str, solver: str) -> None:
    # Both needed: A alone carries load 2/4 + 2/1 = 2.5 > 1; with both, e.g. A takes w1 (load 0.5), B w2.
    r = solve_allocation(_two_class_problem(builder=builder, solver=solver))
    assert r.status == "optimal"
    assert r.cost_per_hour == pytest.approx(2.0)
    thr = {"A": {"w1": 4.0, "w2": 1.0}, "B": {"w1": 1.0, "w2": 4.0}}
    for w in ("w1", "w2"):
        assert sum(v for (q, _t, _r), v in r.assignment.items() if q == w) == pytest.approx(2.0)
    for t in ("A", "B"):
        assert sum(v / thr[t][q] for (q, tt, _r), v in r.assignment.items() if tt == t) <= 1 + 1e-6
    # With $1/h only one instance fits: α (2/4 + 2/1) ≤ 1 gives α = 0.4 on A (same on B by symmetry).
    s = solve_allocation(_two_class_problem(builder=builder, solver=solver, objective="served", budget_per_hour=1.0))
    assert s.alpha == pytest.approx(1 / 2.5)
    assert s.cost_per_hour == pytest.approx(1.0)


def test_single_class_groups_use_the_direct_form() -> None:
    p = random_problem(3, Synthetic(groups=2, templates_per_group=4, classes_per_group=1))
    r = solve_allocation(p)
    # no x (class assignment) columns: ν per pair plus α
    assert r.stats.variables == r.stats.pairs + 1


def test_builders_agree_on_a_medium_instance() -> None:
    p = random_problem(12, Synthetic(groups=4, templates_per_group=40, regions=2, shapes=6,
                       classes_per_group=2, max_nodes=4, max_available=6, demand_scale=0.2), mip_rel_gap=1e-6)
    a = solve_allocation(replace(p, builder="matrix"))
    b = solve_allocation(replace(p, builder="pulp"))
    assert a.status == b.status == "optimal"
    if a.has_plan:
        assert a.cost_per_hour == pytest.approx(b.cost_per_hour, rel=1e-6)
