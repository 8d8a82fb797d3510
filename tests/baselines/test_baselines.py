"""Baselines on small instances: each meets demand at a computable cost or says how far it falls short."""

from __future__ import annotations

import pytest

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass, solve_allocation
from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines import baseline_names, run_all_baselines, run_baseline
from planning.errors import PlanningError


def _pool() -> AllocationProblem:
    t = (
        TemplateOption("p:L4x2", "m/prefill", {"1xL4": 2}, {"p": 6.0}),
        TemplateOption("p:H100", "m/prefill", {"1xH100": 1}, {"p": 20.0}),
        TemplateOption("p:mix", "m/prefill", {"1xL4": 1, "1xH100": 1}, {"p": 24.0}),
        TemplateOption("d:L4", "m/decode", {"1xL4": 1}, {"d": 4.0}),
        TemplateOption("d:H100", "m/decode", {"1xH100": 1}, {"d": 9.0}),
    )
    offers = (Offer("r", "1xL4", 1.0, 8), Offer("r", "1xH100", 4.0, 2))
    cls = (WorkloadClass("p", "m/prefill", 30.0), WorkloadClass("d", "m/decode", 8.0))
    return AllocationProblem(t, offers, cls)


def test_homo_greedy_takes_most_cost_efficient_first() -> None:
    # prefill: H100 20/4 = 5 per $ beats L4x2 6/2 = 3; two H100 give 40 ≥ 30. decode: L4 4/1 beats H100 9/4.
    r = run_baseline("homo", _pool())
    assert r.feasible
    assert r.counts == {("p:H100", "r"): 2, ("d:L4", "r"): 2}
    assert r.cost_per_hour == pytest.approx(2 * 4.0 + 2 * 1.0)
    assert r.gpus_used == {"H100": 2, "L4": 2}


def test_homo_greedy_partial_service_is_reported() -> None:
    p = _pool()
    short = AllocationProblem(p.templates, (Offer("r", "1xL4", 1.0, 3), Offer("r", "1xH100", 4.0, 1)), p.classes)
    r = run_baseline("homo", short)
    # prefill: one H100 (20) + one L4 pair (6) = 26 of 30; decode gets the last L4 node: 4 of 8
    assert not r.feasible
    assert r.served_fraction["m/prefill"] == pytest.approx(26 / 30)
    assert r.served_fraction["m/decode"] == pytest.approx(0.5)
    assert "falls short" in r.note and "availability ran out" in r.note


def test_homo_ilp_never_beats_the_full_ilp_and_is_no_worse_than_greedy() -> None:
    for seed in range(5):
        p = random_problem(seed, Synthetic(groups=3, templates_per_group=6, regions=2, shapes=4,
                           max_available=10, demand_scale=0.3))
        full = solve_allocation(p, diagnose=False)
        hilp = run_baseline("homo-ilp", p)
        greedy = run_baseline("homo", p)
        if hilp.feasible:
            assert full.status == "optimal"
            assert full.cost_per_hour <= hilp.cost_per_hour + 1e-6
            if greedy.feasible:
                assert hilp.cost_per_hour <= greedy.cost_per_hour + 1e-6
        else:
            assert hilp.served_fraction_min < 1
            assert "cannot meet" in hilp.note


def test_single_type_one_result_per_gpu() -> None:
    p = _pool()
    assert baseline_names(p) == ["homo", "homo-ilp", "single:H100", "single:L4", "memp"]
    h100 = run_baseline("single:H100", p)
    # H100 only: 2 nodes; prefill needs 2 (40 ≥ 30) leaving none for decode → best uniform fraction
    assert not h100.feasible
    assert "cannot meet all demand" in h100.note
    l4 = run_baseline("single:L4", p)
    # L4 only: prefill 5 pairs (30) = 10 nodes > 8 available → also short
    assert not l4.feasible
    none = run_baseline("single:A100", p)
    assert not none.feasible and none.served_fraction_min == 0.0


def test_memp_splits_memory_in_proportion() -> None:
    t = (
        TemplateOption("big:H", "big", {"1xH100": 1}, {"b": 10.0}),
        TemplateOption("big:L", "big", {"1xL4": 2}, {"b": 3.0}),
        TemplateOption("small:L", "small", {"1xL4": 1}, {"s": 5.0}),
        TemplateOption("small:H", "small", {"1xH100": 1}, {"s": 12.0}),
    )
    offers = (Offer("r", "1xH100", 4.0, 2), Offer("r", "1xL4", 1.0, 4))
    cls = (WorkloadClass("b", "big", 20.0), WorkloadClass("s", "small", 10.0))
    p = AllocationProblem(t, offers, cls)
    # weights 20×70 = 1400 vs 10×8 = 80 → big's target 1400/1480 × (2×80 + 4×24 = 256 GB) ≈ 242 GB:
    # big takes both H100 (160) and three L4 (72) → 232; small gets the last L4 (24 GB ≈ its 13.8 target)
    r = run_baseline("memp", p, model_size={"big": 70, "small": 8}, gpu_memory_gb={"H100": 80, "L4": 24})
    shares = r.details["share_nodes"]
    assert shares["big"] == {("r", "1xH100"): 2, ("r", "1xL4"): 3}
    assert shares["small"] == {("r", "1xL4"): 1}
    # small needs 10 at 5 per L4 → 2 nodes but owns 1 → 50 %; big: 2 H100 = 20 → met
    assert r.served_fraction == {"big": pytest.approx(1.0), "small": pytest.approx(0.5)}
    assert not r.feasible and "small" in r.note
    # the joint ILP meets both: big 2×H100 (20), small 2×L4 (10)
    assert solve_allocation(p).status == "optimal"


def test_memp_without_sizes_says_so() -> None:
    r = run_baseline("memp", _pool())
    assert "no model sizes given" in r.note


def test_run_all_and_unknown() -> None:
    results = run_all_baselines(_pool())
    assert [r.name for r in results] == baseline_names(_pool())
    with pytest.raises(PlanningError, match="unknown baseline"):
        run_baseline("nope", _pool())


def test_homo_breaks_efficiency_ties_by_the_stated_rule_not_float_noise() -> None:
    """Issue 37 §6: two pairs equally efficient in exact arithmetic (b is three of a's nodes with three times its
    throughput; in floats b comes out 2e-15 more efficient) tie; the cheaper instance wins (10 × $0.01 = $0.10
    serves the demand, where 4 of b's cost $0.12)."""
    from planning.baselines.homo import homo_greedy, tie_key

    t_a, t_b = 0.1, 0.1 * 3
    assert (t_b / 0.03) > (t_a / 0.01) and tie_key(t_b / 0.03) == tie_key(t_a / 0.01)  # the float noise is real
    templates = (TemplateOption("g:b", "g", {"1xL4": 3}, {"q": t_b}), TemplateOption("g:a", "g", {"1xL4": 1}, {"q": t_a}))
    problem = AllocationProblem(templates, (Offer("r", "1xL4", 0.01, 100),), (WorkloadClass("q", "g", 1.0),))
    res = homo_greedy(problem)
    assert res.feasible and res.counts == {("g:a", "r"): 10}
    assert res.cost_per_hour == pytest.approx(0.10)
