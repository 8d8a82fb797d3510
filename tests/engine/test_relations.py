"""Proofs by relation to the base plan (planning.relations): every shortcut gives the cold solve's answer.

Each relation (prices × f; a GPU type or region the base plan does not use dropped) is checked against a cold
solve of the variant, on seeded small scenarios and on coral-core through ``api.what_if``: the same status and the
same cost to 1e-9 relative. And where the shortcut must not apply (a dropped GPU the plan uses, a cost component
price_scale does not scale), it is not taken, and the variant's answer is still the cold one.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import planning.api as api
from planning.pipeline import Reuse
from planning.pipeline import solve as pipeline_solve
from planning.relations import BasePlan, answer, relate, why_prices_do_not_scale
from planning.result import PlanResult
from planning.scenario import Scenario
from planning.whatif import (
    AvailabilityScale,
    DropGpu,
    DropRegion,
    PriceChange,
    SloScale,
    apply_variants,
    label,
)

from .test_cross_region import SCENARIO as CROSS_REGION

REL = 1e-9


def _scenario(tiny: dict[str, Any], seed: int) -> Scenario:
    rng = np.random.default_rng(seed)
    data = copy.deepcopy(tiny)
    data["regions"] = ["aws:us-east-2", "aws:us-west-2"]
    data["shapes"] = ["1xL4", "1xL40S", "1xA10G", "1xH100"]
    model = data["models"][0]
    model["demand"]["rate_rps"] = float(rng.uniform(1.0, 6.0))
    model["slo"]["decode_ms"] = float(rng.choice([60, 80, 100]))
    return Scenario.from_dict(data)


def _gpus(result: PlanResult) -> set[str]:
    return {g for i in result.instances for g, n in i.gpus.items() if n > 0}


def _regions(result: PlanResult) -> set[str]:
    return {i.region for i in result.instances}


def _same(hot: PlanResult, cold: PlanResult) -> None:
    assert hot.status == cold.status
    assert hot.comparable_cost == pytest.approx(cold.comparable_cost, rel=REL)
    assert hot.served_fraction == pytest.approx(cold.served_fraction, abs=1e-9)


def _proven(result: PlanResult) -> bool:
    return result.stats.get("proven_by_relation") == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_relation_gives_the_cold_answer_on_small_scenarios(tiny: dict[str, Any], seed: int) -> None:
    ctx = api.engine_context()
    base = _scenario(tiny, seed)
    plan = pipeline_solve(base, context=ctx, with_baselines=False)
    assert plan.status == "optimal"
    unused_gpus = sorted({"L4", "L40S", "A10G", "H100"} - _gpus(plan))
    unused_regions = sorted(set(base.regions) - _regions(plan))
    variants = [PriceChange(-20), PriceChange(35), PriceChange(0), *(DropGpu(g) for g in unused_gpus),
                *(DropRegion(r) for r in unused_regions)]
    assert unused_gpus  # one plan never uses all four types: the drop relation is exercised on every seed
    for variant in variants:
        scenario = apply_variants(base, [variant])
        hot = pipeline_solve(scenario, context=ctx, with_baselines=False, reuse=Reuse(base=BasePlan(base, plan)))
        assert _proven(hot), variant
        assert hot.message.startswith("proven optimal: "), variant
        _same(hot, pipeline_solve(scenario, context=ctx, with_baselines=False))


def test_prices_scale_the_plan_its_bound_and_its_baselines(tiny: dict[str, Any]) -> None:
    ctx = api.engine_context()
    base = _scenario(tiny, 0)
    plan = pipeline_solve(base, context=ctx)
    scenario = apply_variants(base, [PriceChange(-20)])
    hot = pipeline_solve(scenario, context=ctx, reuse=Reuse(base=BasePlan(base, plan)))
    cold = pipeline_solve(scenario, context=ctx)
    assert _proven(hot) and "prices × 0.8" in hot.message
    _same(hot, cold)
    assert hot.stats["anytime_bound"] == pytest.approx(0.8 * plan.stats["anytime_bound"], rel=REL)
    assert [b.name for b in hot.baselines] == [b.name for b in cold.baselines]
    for h, c in zip(hot.baselines, cold.baselines, strict=True):
        assert h.feasible == c.feasible, h.name
        if c.feasible:  # each baseline's ILP stops at the scenario's mip_rel_gap, so within it
            assert h.cost_per_hour == pytest.approx(c.cost_per_hour, rel=base.options.mip_rel_gap + REL), h.name
    assert [c.status for c in hot.checks] == [c.status for c in cold.checks]
    assert hot.scenario["price_scale"] == pytest.approx(0.8)


def test_a_dropped_gpu_the_plan_uses_is_only_a_bound(tiny: dict[str, Any]) -> None:
    ctx = api.engine_context()
    base = _scenario(tiny, 0)
    plan = pipeline_solve(base, context=ctx, with_baselines=False)
    used = sorted(_gpus(plan))[0]
    scenario = apply_variants(base, [DropGpu(used)])
    relation = relate(BasePlan(base, plan), scenario)
    assert relation is not None and relation.kind == "tightened"
    assert relation.bound == pytest.approx(plan.comparable_cost)
    hot = pipeline_solve(scenario, context=ctx, with_baselines=False, reuse=Reuse(base=BasePlan(base, plan)))
    cold = pipeline_solve(scenario, context=ctx, with_baselines=False)
    assert not _proven(hot)
    _same(hot, cold)
    if cold.has_plan:  # the base optimum is a valid lower bound of the variant's
        assert cold.comparable_cost >= plan.comparable_cost * (1 - REL)


@pytest.mark.parametrize("change", [SloScale(0.8), AvailabilityScale(0.5), SloScale(1.25)])
def test_tightened_what_ifs_start_from_the_base_optimum_as_a_bound(tiny: dict[str, Any], change: Any) -> None:
    """SLOs × 0.8 or availability × 0.5 only remove plans: the base optimum bounds the variant's from below and
    the solve starts from it (its best bound is at least that); SLOs × 1.25 adds plans: no bound."""
    ctx = api.engine_context()
    base = _scenario(tiny, 1)
    plan = pipeline_solve(base, context=ctx, with_baselines=False)
    scenario = apply_variants(base, [change])
    relation = relate(BasePlan(base, plan), scenario)
    tightened = not isinstance(change, SloScale) or change.factor < 1
    assert (relation is not None and relation.bound == plan.comparable_cost) if tightened else relation is None
    hot = pipeline_solve(scenario, context=ctx, with_baselines=False, reuse=Reuse(base=BasePlan(base, plan)))
    cold = pipeline_solve(scenario, context=ctx, with_baselines=False)
    _same(hot, cold)
    if tightened and cold.has_plan:
        assert cold.comparable_cost >= plan.comparable_cost * (1 - REL)
        assert hot.stats["anytime_bound"] >= plan.comparable_cost * (1 - REL)


def test_a_dropped_option_with_baselines_asked_is_solved(tiny: dict[str, Any]) -> None:
    """memP splits the whole pool, so its plan can change when an unused GPU type goes: not carried over."""
    ctx = api.engine_context()
    base = _scenario(tiny, 0)
    plan = pipeline_solve(base, context=ctx)
    unused = sorted({"L4", "L40S", "A10G", "H100"} - _gpus(plan))[0]
    scenario = apply_variants(base, [DropGpu(unused)])
    assert answer(BasePlan(base, plan), scenario, with_baselines=True) is None
    assert answer(BasePlan(base, plan), scenario, with_baselines=False) is not None


def test_egress_does_not_scale_so_prices_are_solved() -> None:
    """Cross-region KV egress is priced per GB: at prices × 3 the transfer is relatively cheaper, so the plan is
    not the base's × 3 and the relation must refuse; the variant is solved and gives the cold answer."""
    ctx = api.engine_context()
    base = Scenario.from_dict(CROSS_REGION)
    plan = pipeline_solve(base, context=ctx, with_baselines=False)
    assert plan.status == "optimal" and plan.transfer_per_hour > 0
    assert "egress" in why_prices_do_not_scale(base)
    scenario = apply_variants(base, [PriceChange(200)])
    assert relate(BasePlan(base, plan), scenario) is None
    hot = pipeline_solve(scenario, context=ctx, with_baselines=False, reuse=Reuse(base=BasePlan(base, plan)))
    cold = pipeline_solve(scenario, context=ctx, with_baselines=False)
    assert not _proven(hot)
    _same(hot, cold)
    assert cold.comparable_cost != pytest.approx(3 * plan.comparable_cost, rel=1e-6)  # scaling would be wrong


@pytest.mark.parametrize("change", [
    {"objective": {"kind": "cost", "budget_per_hour": 1000.0}},
    {"owned": [{"location": "owned:us-east-dc1", "shape": "1xL4", "count": 1, "capex_usd": 8000.0, "amortisation_years": 4,
                "power_usd_per_hour": 0.1}]},
])
def test_components_that_do_not_scale_refuse_the_price_relation(tiny: dict[str, Any],
                                                                 change: dict[str, Any]) -> None:
    base = Scenario.from_dict({**copy.deepcopy(tiny), **change})
    assert why_prices_do_not_scale(base)
    plan = replace(pipeline_solve(Scenario.from_dict(tiny), with_baselines=False), scenario=base.to_dict())
    assert relate(BasePlan(base, plan), apply_variants(base, [PriceChange(-20)])) is None


@pytest.mark.slow
def test_coral_core_what_ifs_proven_by_relation_match_cold_solves() -> None:
    """Through the public interface: ``api.what_if`` answers prices −20 % from the base plan at once (with its
    baselines) and a dropped GPU type the plan does not use (the baselines are then solved); both cost what cold
    solves cost, and a dropped GPU type the plan uses and SLOs × 0.8 are solved from the base optimum as a bound."""
    scenario = api.load_preset_scenario("coral-core")
    base = api.solve(scenario, cache=False)
    assert base.status == "optimal"
    catalog = {s.split("x", 1)[1] for s in (c.shape for c in base.capacity)}
    unused = sorted(catalog - _gpus(base))[0]
    used = sorted(_gpus(base))[0]
    variants = [PriceChange(-20), DropGpu(unused), DropGpu(used), SloScale(0.8)]
    results = api.what_if(scenario, variants)
    prices = results["prices -20 %"]
    assert _proven(prices) and set(prices.timings) == {"relation_seconds", "total_seconds"}  # no step ran
    for tightened in (f"without {used}", "SLOs ×0.8"):  # solved, from the base optimum as a bound
        assert not _proven(results[tightened])
        assert results[tightened].stats["anytime_bound"] >= base.comparable_cost * (1 - REL)
    for variant in variants:
        _same(results[label(variant)], api.solve(apply_variants(scenario, [variant]), cache=False))


def test_a_slider_position_is_proven_from_the_plan_it_is_given(tiny: dict[str, Any]) -> None:
    """``api.solve_near`` (the What-if page's sliders) relates the position to a base PlanResult it is given (its
    scenario travels in the result); given only the base's columns, it solves."""
    base = _scenario(tiny, 2)
    plan = api.solve(base, with_baselines=False, cache=False)
    position = apply_variants(base, [PriceChange(-30)])
    near = api.solve_near(position, plan, with_baselines=False)
    assert _proven(near) and "prices × 0.7" in near.message
    columns = api.solve_near(position, api.warm_columns(plan), with_baselines=False)
    assert not _proven(columns)
    _same(near, columns)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_scarcer_variant_the_base_plan_still_fits_is_proven(tiny: dict[str, Any], seed: int) -> None:
    """Availability × f < 1: proven when every node the base plan uses is still offered (the capacity table shows
    the variant's nodes), solved when one is not; either way the cold answer."""
    ctx = api.engine_context()
    base = _scenario(tiny, seed)
    plan = pipeline_solve(base, context=ctx, with_baselines=False)
    used = {(c.region, c.shape): c.used for c in plan.capacity if c.used > 0}
    fits = max(n / next(c.available for c in plan.capacity if (c.region, c.shape) == key)
               for key, n in used.items())  # the smallest factor that keeps every used node (up to rounding)
    for factor, proven in ((min(1.0, fits + 0.05) if fits < 0.95 else 1.0, True), (max(fits - 0.3, 0.01), False)):
        if factor >= 1.0:
            continue  # the plan uses every node of a shape: no scarcer variant fits
        scenario = apply_variants(base, [AvailabilityScale(factor)])
        hot = pipeline_solve(scenario, context=ctx, with_baselines=False, reuse=Reuse(base=BasePlan(base, plan)))
        cold = pipeline_solve(scenario, context=ctx, with_baselines=False)
        _same(hot, cold)
        assert _proven(hot) is proven, factor
        if proven:
            assert "still fits availability" in hot.message
            assert {(c.region, c.shape): c.available for c in hot.capacity} == \
                {(c.region, c.shape): c.available for c in cold.capacity if (c.region, c.shape) in
                 {(h.region, h.shape) for h in hot.capacity}}


def test_a_relation_answer_is_cached_and_chains(tiny: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer proven by relation is stored in the result cache like a solved one, so it can be the base of the
    next what-if: prices −20 % from the base, then prices −30 % from that answer (found by its scenario, as a
    slider's job finds its base) is proven again, at the cold cost; ``api.nearest_base`` picks, among plans
    nearest first, the first that proves a variant, else the nearest."""
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "on")
    base = _scenario(tiny, 1)
    plan = api.solve(base, with_baselines=False)
    cheaper = apply_variants(base, [PriceChange(-20)])
    first = api.solve_near(cheaper, plan, with_baselines=False)
    assert _proven(first)
    cached = api.cached_plan(cheaper)
    assert cached is not None and cached.comparable_cost == pytest.approx(first.comparable_cost, rel=REL)
    cheapest = apply_variants(base, [PriceChange(-30)])
    more = apply_variants(base, [PriceChange(-30), DropGpu(sorted({"L4", "L40S", "A10G", "H100"} - _gpus(plan))[0])])
    assert api.nearest_base(cheapest, [cached, plan]) is cached  # both prove it: the nearest first
    assert api.nearest_base(more, [plan, cached]) is plan  # two changes from either: none proves it, the nearest
    second = api.solve_near(cheapest, cached, with_baselines=False)
    assert _proven(second) and "prices × 0.875" in second.message
    _same(second, pipeline_solve(cheapest, context=api.engine_context(), with_baselines=False))


def test_proven_at_once_names_the_relations_that_need_no_solve(tiny: dict[str, Any]) -> None:
    """``api.proven_at_once`` (the sliders wait for such a position instead of polling): prices × f and an unused
    GPU dropped are answered by the base plan itself, and ``solve_near`` proves them so; a demand change, tighter
    SLOs, a scarcer availability (it may not fit) and a base that is not a proven optimum are not counted."""
    base = _scenario(tiny, 2)
    plan = api.solve(base, with_baselines=False, cache=False)
    unused = sorted({"L4", "L40S", "A10G", "H100"} - _gpus(plan))
    quick = [apply_variants(base, [PriceChange(-30)])] + [apply_variants(base, [DropGpu(g)]) for g in unused[:1]]
    for variant in quick:
        assert api.proven_at_once(variant, plan), variant.name
        assert _proven(api.solve_near(variant, plan, with_baselines=False))
    slow = [apply_variants(base, api.slider_variants(demand=2.0)), apply_variants(base, [SloScale(0.8)]),
            apply_variants(base, [AvailabilityScale(0.5)])]
    for variant in slow:
        assert not api.proven_at_once(variant, plan)
    unproven = replace(plan, status="feasible")
    assert not api.proven_at_once(quick[0], unproven)
