"""Constraint (S) (a cap on the demand that may depend on spot nodes) and commitment columns (first-stage nodes
that extend offers' availability at a cost): both builders and both solvers equal brute force on seeded
instances, and a hand-computed case shows each one binding."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.allocate import (
    AllocationProblem,
    Commitment,
    Offer,
    TemplateOption,
    WorkloadClass,
    solve_allocation,
)
from planning.allocate.synthetic import Synthetic, random_problem
from tests.allocate.test_oracle import (
    COMBOS,
    _check,  # ILP (builder, solver) = brute force
)


def _capped(seed: int, classes: int, objective: str) -> AllocationProblem:
    p = random_problem(seed, Synthetic(groups=2, templates_per_group=3 if classes == 1 else 2, regions=2,
                       shapes=3, classes_per_group=classes, max_available=4), objective=objective,
                       budget_per_hour=None if objective == "cost" else 15.0, mip_rel_gap=1e-9)
    spot = "cloud:r1"  # the second region plays the spot pool: cheaper, so uncapped plans lean on it
    offers = tuple(replace(o, price_per_hour=o.price_per_hour * 0.4) if o.region == spot else o for o in p.offers)
    groups = p.groups()
    cap = {groups[0]: (0.0, 0.5, 0.8)[seed % 3], groups[1]: 0.5}
    return replace(p, offers=offers, spot_regions=frozenset({spot}), spot_cap=cap)


def _committed(seed: int) -> AllocationProblem:
    p = random_problem(seed, Synthetic(groups=2, templates_per_group=3, regions=1, shapes=3, max_available=3),
                       mip_rel_gap=1e-9)
    # a reserved pool of the first shape: free at the margin, up to 3 nodes committed at a fixed cost each
    shape = p.offers[0].shape
    pool = Offer("cloud:r0/reserved", shape, 0.0, seed % 2)
    cost = p.offers[0].price_per_hour * (0.5 + 0.2 * (seed % 4))
    return replace(p, offers=(*p.offers, pool),
                   commitments=(Commitment("reserve", cost, 3, (("cloud:r0/reserved", shape),)),))


@pytest.mark.parametrize(("builder", "solver"), COMBOS)
@pytest.mark.parametrize("objective", ["cost", "served"])
@pytest.mark.parametrize("classes", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_spot_cap_equals_brute_force(seed: int, classes: int, objective: str, builder: str, solver: str) -> None:
    _check(_capped(seed, classes, objective), builder, solver, 200_000)


@pytest.mark.parametrize(("builder", "solver"), COMBOS)
@pytest.mark.parametrize("seed", range(8))
def test_commitments_equal_brute_force(seed: int, builder: str, solver: str) -> None:
    _check(_committed(seed), builder, solver, 200_000)


def _one_model(**options: object) -> AllocationProblem:
    # one group of 10 units/s; a 5-unit instance on one node: $4/h on demand, $1/h on spot
    t = (TemplateOption("A", "m", {"1xg": 1}, {"m": 5.0}),)
    offers = (Offer("c:r", "1xg", 4.0, 10), Offer("c:r/spot", "1xg", 1.0, 10))
    return AllocationProblem(t, offers, (WorkloadClass("m", "m", 10.0),), mip_rel_gap=1e-9, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(("builder", "solver"), COMBOS)
def test_spot_cap_hand_computed(builder: str, solver: str) -> None:
    free = solve_allocation(_one_model(builder=builder, solver=solver))
    assert free.cost_per_hour == pytest.approx(2.0)  # two spot instances
    capped = solve_allocation(_one_model(builder=builder, solver=solver, spot_regions=frozenset({"c:r/spot"}),
                                         spot_cap={"m": 0.5}))
    # ≥ 5 units/s must come from on-demand nodes: one on-demand instance + one spot = $5/h
    assert capped.cost_per_hour == pytest.approx(5.0)
    assert capped.counts == {("A", "c:r"): 1, ("A", "c:r/spot"): 1}


@pytest.mark.parametrize(("builder", "solver"), COMBOS)
def test_commitment_hand_computed(builder: str, solver: str) -> None:
    # a reserved pool at $0 marginal; each committed node costs $3: cheaper than on-demand ($4), so commit 2
    p = _one_model(builder=builder, solver=solver)
    p = replace(p, offers=(p.offers[0], Offer("c:r/reserved", "1xg", 0.0, 0)),
                commitments=(Commitment("res", 3.0, 5, (("c:r/reserved", "1xg"),)),))
    r = solve_allocation(p)
    assert r.commitments == {"res": 2}
    assert r.cost_per_hour == pytest.approx(0.0) and r.commitment_cost == pytest.approx(6.0)
    assert r.total_per_hour == pytest.approx(6.0)
    dearer = solve_allocation(replace(p, commitments=(Commitment("res", 5.0, 5, (("c:r/reserved", "1xg"),)),)))
    assert dearer.commitments == {} and dearer.total_per_hour == pytest.approx(8.0)


def test_commitment_must_cover_a_known_offer() -> None:
    from planning.errors import PlanningError

    with pytest.raises(PlanningError, match="commitments"):
        replace(_one_model(), commitments=(Commitment("res", 3.0, 5, (("c:nowhere", "1xg"),)),))


def test_greedy_homo_keeps_the_spot_cap() -> None:
    from planning.baselines.homo import homo_greedy

    capped = _one_model(spot_regions=frozenset({"c:r/spot"}), spot_cap={"m": 0.5})
    r = homo_greedy(capped)
    assert r.feasible
    assert r.counts.get(("A", "c:r"), 0) * 5.0 >= 5.0  # ≥ (1 − 0.5) × 10 units/s outside the spot pool
    assert homo_greedy(_one_model()).counts == {("A", "c:r/spot"): 2}  # uncapped: all on the cheap pool
