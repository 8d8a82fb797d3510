"""Region links (issue 12 §4): a model's prefill and decode capacity are paired per region, so the KV cache of
a request reaches a decode node in the region of its prefill. Checked against brute force on seeded instances,
across both model builders and the group-by-group shortcut, and on a designed case where pairing changes the
answer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planning.allocate import solve_allocation
from planning.allocate.brute import BruteResult, brute_force
from planning.allocate.problem import AllocationProblem, Offer, TemplateOption, TransferPrice, WorkloadClass
from planning.allocate.synthetic import Synthetic, random_problem
from planning.errors import PlanningError


def _crossed() -> AllocationProblem:
    """Prefill runs cheaply only in region a (L4 at 1 $/h), decode only in region b (H100 at 1 $/h)."""
    offers = (Offer("c:a", "1xL4", 1.0, 4), Offer("c:a", "1xH100", 10.0, 4),
              Offer("c:b", "1xL4", 10.0, 4), Offer("c:b", "1xH100", 1.0, 4))
    templates = (TemplateOption("p", "m/prefill", {"1xL4": 1}, {"m/prefill": 10.0}),
                 TemplateOption("d", "m/decode", {"1xH100": 1}, {"m/decode": 10.0}))
    classes = (WorkloadClass("m/prefill", "m/prefill", 10.0), WorkloadClass("m/decode", "m/decode", 10.0))
    return AllocationProblem(templates, offers, classes)


@pytest.mark.parametrize("builder", ["matrix", "pulp"])
def test_pairing_keeps_prefill_and_decode_in_one_region(builder: str) -> None:
    free = solve_allocation(replace(_crossed(), builder=builder))
    assert free.cost_per_hour == pytest.approx(2.0)  # unlinked: prefill in a, decode in b
    assert {r for (_t, r) in free.counts} == {"c:a", "c:b"}
    paired = solve_allocation(replace(_crossed(), builder=builder, links=(("m/prefill", "m/decode"),)))
    assert paired.status == "optimal"
    assert paired.cost_per_hour == pytest.approx(11.0)  # one region holds both: 1 + 10
    assert len({r for (_t, r) in paired.counts}) == 1
    region = next(iter({r for (_t, r) in paired.counts}))
    assert paired.assignment[("m/prefill", "p", region)] == pytest.approx(10.0)
    assert paired.assignment[("m/decode", "d", region)] == pytest.approx(10.0)
    assert brute_force(replace(_crossed(), links=(("m/prefill", "m/decode"),))).cost == pytest.approx(11.0)


def test_a_link_with_no_common_region_is_infeasible() -> None:
    base = _crossed()
    offers = tuple(o for o in base.offers if (o.region, o.shape) in {("c:a", "1xL4"), ("c:b", "1xH100")})
    res = solve_allocation(replace(base, offers=offers, links=(("m/prefill", "m/decode"),)))
    assert res.status == "infeasible" and not res.counts


def test_links_are_checked() -> None:
    with pytest.raises(PlanningError, match="unknown workload class"):
        replace(_crossed(), links=(("m/prefill", "nope"),))
    with pytest.raises(PlanningError, match="two links"):
        replace(_crossed(), links=(("m/prefill", "m/decode"), ("m/prefill",)))


def _scrambled(problem: AllocationProblem, seed: int) -> AllocationProblem:
    """Region prices that disagree by shape (each offer × U(0.3, 3), at least 1 node): pairing then matters."""
    rng = np.random.default_rng(seed)
    offers = tuple(replace(o, price_per_hour=o.price_per_hour * float(rng.uniform(0.3, 3.0)),
                           available=max(1, o.available)) for o in problem.offers)
    return replace(problem, offers=offers)


def _linked(problem: AllocationProblem, classes_per_group: int) -> AllocationProblem:
    """Pair group 2k (prefill) with group 2k+1 (decode), class by class (bucket c with bucket c)."""
    groups = problem.groups()
    links = tuple((f"{groups[g]}#{c}", f"{groups[g + 1]}#{c}")
                  for g in range(0, len(groups) - 1, 2) for c in range(classes_per_group))
    return replace(problem, links=links)


def _seeded(seed: int) -> tuple[AllocationProblem, AllocationProblem]:
    """(unlinked, linked) seeded instance: 1 or 2 models, 1 or 2 request-size classes, 2 regions."""
    classes = 1 if seed < 10 else 2
    groups = 4 if seed % 4 == 3 else 2  # two models (their plans compete for nodes) or one
    base = _scrambled(random_problem(seed, Synthetic(groups=groups, templates_per_group=2, regions=2,
                                     shapes=2, classes_per_group=classes, max_nodes=2,
                                     max_available=2 if groups == 4 else 3, demand_scale=0.3)), seed)
    return base, _linked(base, classes)


def test_the_seeded_instances_exercise_the_links() -> None:
    """Pairing changes the answer on enough of the seeded instances for the oracle test below to mean something."""
    changed = 0
    for seed in range(16):
        base, linked = _seeded(seed)
        a, b = solve_allocation(replace(base, mip_rel_gap=0.0)), solve_allocation(replace(linked, mip_rel_gap=0.0))
        changed += a.has_plan and (not b.has_plan or b.objective_value > a.objective_value + 1e-6)
    assert changed >= 5


def _agrees_with_brute_force(problem: AllocationProblem) -> BruteResult:
    """Both builders, with and without the group-by-group shortcut, give brute force's optimum (cost objective,
    transfers included) or its infeasibility."""
    oracle = brute_force(problem, max_evaluations=400_000)
    for builder, decompose in (("matrix", True), ("matrix", False), ("pulp", False)):
        res = solve_allocation(replace(problem, builder=builder, decompose=decompose, mip_rel_gap=0.0))
        if not oracle.feasible:
            assert res.status == "infeasible", (builder, decompose)
            continue
        assert res.status == "optimal", (builder, decompose, res.messages)
        assert res.objective_value == pytest.approx(oracle.cost, rel=1e-6, abs=1e-9), (builder, decompose)
        assert res.total_per_hour == pytest.approx(oracle.cost, rel=1e-6, abs=1e-9)
    return oracle


@pytest.mark.parametrize("seed", range(16))
def test_linked_optimum_equals_brute_force(seed: int) -> None:
    base, problem = _seeded(seed)
    oracle = _agrees_with_brute_force(problem)
    unlinked = solve_allocation(replace(base, mip_rel_gap=0.0))
    if oracle.feasible and unlinked.has_plan:
        assert unlinked.objective_value <= oracle.cost + 1e-6  # pairing can only cost more


@pytest.mark.parametrize("seed", range(4))
def test_linked_served_objective_equals_brute_force(seed: int) -> None:
    base = random_problem(100 + seed, Synthetic(groups=2, templates_per_group=2, regions=2, shapes=2,
                          max_nodes=2, max_available=2, demand_scale=1.5))
    problem = replace(_linked(base, 1), objective="served", mip_rel_gap=0.0)
    oracle = brute_force(problem, max_evaluations=400_000)
    res = solve_allocation(problem)
    assert res.alpha == pytest.approx(oracle.alpha, abs=1e-6)


# --- cross-region KV transfer (options.kv_transfer: cross-region) -------------------------------------------

def _cross(price: float, **changes: object) -> AllocationProblem:
    """The crossed case with pairing, plus a priced a->b flow (prefill in a, decode in b) at ``price`` $/h."""
    linked = replace(_crossed(), links=(("m/prefill", "m/decode"),),
                     transfers=(TransferPrice("m/prefill", "c:a", "c:b", price),))
    return replace(linked, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("builder", ["matrix", "pulp"])
def test_a_cheap_transfer_sends_the_kv_across_regions(builder: str) -> None:
    res = solve_allocation(_cross(3.0, builder=builder))
    assert res.status == "optimal"
    assert res.cost_per_hour == pytest.approx(2.0)  # L4 prefill in a + H100 decode in b
    assert res.transfer_per_hour == pytest.approx(3.0)
    assert res.total_per_hour == pytest.approx(5.0) and res.objective_value == pytest.approx(5.0)
    assert res.flows == pytest.approx({("m/prefill", "c:a", "c:b"): 1.0})
    assert res.assignment[("m/prefill", "p", "c:a")] == pytest.approx(10.0)
    assert res.assignment[("m/decode", "d", "c:b")] == pytest.approx(10.0)
    assert brute_force(_cross(3.0)).cost == pytest.approx(5.0)


@pytest.mark.parametrize("builder", ["matrix", "pulp"])
def test_an_expensive_transfer_pairs_per_region(builder: str) -> None:
    res = solve_allocation(_cross(20.0, builder=builder))
    assert res.cost_per_hour == pytest.approx(11.0) and res.transfer_per_hour == 0.0
    assert len({r for (_t, r) in res.counts}) == 1
    (flow, share), = res.flows.items()
    assert flow[1] == flow[2] and share == pytest.approx(1.0)
    assert brute_force(_cross(20.0)).cost == pytest.approx(11.0)


def test_the_transfer_is_only_allowed_in_the_listed_direction() -> None:
    """b->a would need prefill in b (L4 at 10 $/h) and decode in a (H100 at 10 $/h): listing only that flow
    leaves the pairing as the best plan."""
    p = replace(_crossed(), links=(("m/prefill", "m/decode"),),
                transfers=(TransferPrice("m/prefill", "c:b", "c:a", 0.0),))
    assert solve_allocation(p).total_per_hour == pytest.approx(11.0)


def test_the_budget_counts_the_transfer() -> None:
    tight = solve_allocation(_cross(3.0, objective="served", budget_per_hour=4.0))
    assert tight.alpha == pytest.approx(brute_force(_cross(3.0, objective="served", budget_per_hour=4.0)).alpha, abs=1e-6)
    assert tight.total_per_hour <= 4.0 + 1e-6
    assert tight.alpha < 1.0


def test_transfers_are_checked() -> None:
    with pytest.raises(PlanningError, match="first \\(sending\\) class"):
        _cross(1.0, transfers=(TransferPrice("m/decode", "c:a", "c:b", 1.0),))
    with pytest.raises(PlanningError, match="same"):
        TransferPrice("m/prefill", "c:a", "c:a", 1.0)
    with pytest.raises(PlanningError, match="finite number"):
        TransferPrice("m/prefill", "c:a", "c:b", -1.0)
    with pytest.raises(PlanningError, match="twice"):
        _cross(1.0, transfers=(TransferPrice("m/prefill", "c:a", "c:b", 1.0),) * 2)


def _with_transfers(problem: AllocationProblem, seed: int) -> AllocationProblem:
    """Every ordered pair of regions for every link, at random prices up to the mean node price."""
    rng = np.random.default_rng(1000 + seed)
    regions = sorted({o.region for o in problem.offers})
    scale = float(np.mean([o.price_per_hour for o in problem.offers]))
    transfers = tuple(TransferPrice(link[0], a, b, float(rng.uniform(0.0, scale)))
                      for link in problem.links for a in regions for b in regions if a != b)
    return replace(problem, transfers=transfers)


def test_the_seeded_transfers_are_used() -> None:
    """Cross-region flows win on enough seeded instances for the oracle test below to mean something."""
    used = sum(solve_allocation(replace(_with_transfers(_seeded(s)[1], s), mip_rel_gap=0.0)).transfer_per_hour > 0
               for s in range(12))
    assert used >= 3


@pytest.mark.parametrize("seed", range(12))
def test_transfer_optimum_equals_brute_force(seed: int) -> None:
    _base, linked = _seeded(seed)
    problem = _with_transfers(linked, seed)
    oracle = _agrees_with_brute_force(problem)
    paired = solve_allocation(replace(linked, mip_rel_gap=0.0))
    if paired.has_plan:
        assert oracle.feasible and oracle.cost <= paired.objective_value + 1e-6  # transfers can only help


@pytest.mark.parametrize("seed", range(4))
def test_transfer_served_objective_equals_brute_force(seed: int) -> None:
    base = random_problem(100 + seed, Synthetic(groups=2, templates_per_group=2, regions=2, shapes=2,
                          max_nodes=2, max_available=2, demand_scale=1.5))
    problem = replace(_with_transfers(_linked(base, 1), seed), objective="served", mip_rel_gap=0.0)
    oracle = brute_force(problem, max_evaluations=400_000)
    res = solve_allocation(problem)
    assert res.alpha == pytest.approx(oracle.alpha, abs=1e-6)
    assert res.total_per_hour == pytest.approx(oracle.cost, rel=1e-5, abs=1e-6)


def test_transfers_and_flows_survive_the_json_round_trip() -> None:
    import json

    from planning.allocate.io import problem_from_dict, problem_to_dict, result_to_dict

    problem = _cross(3.0)
    again = problem_from_dict(json.loads(json.dumps(problem_to_dict(problem))))
    assert again.transfers == problem.transfers and again.links == problem.links
    out = result_to_dict(solve_allocation(again))
    assert out["transfer_per_hour"] == pytest.approx(3.0)
    assert out["flows"] == [{"sender": "m/prefill", "src": "c:a", "dst": "c:b", "share": pytest.approx(1.0)}]
