"""A plan without baselines that no plan can meet, answered from the LP over every template
(``pricing.ColumnLP.shortfall``, ``allocate.ondemand_short``): the proof against the exact ILP over every template
of the seeded instances, the cap argument that makes it a proof, the answer's words, and the pipeline's two paths
agreeing on the status."""

from __future__ import annotations

import copy
import json
import re

import pytest

from planning.allocate import pricing
from planning.allocate.ondemand import OnDemandOptions, allocate_on_demand
from planning.allocate.pricing import solve_lp
from planning.pipeline import solve as pipeline_solve
from planning.scenario import Scenario
from planning.whatif import AvailabilityScale, DemandScale, apply_variants

from .conftest import TINY
from .test_on_demand import _instance, _resolved, library_optimum

SEEDS = range(60)


def _lp(seed: int) -> pricing.PricingResult:
    priced, offers = _instance(seed)
    resolved = _resolved(priced, offers)
    shapes = priced[0].space.shapes
    pr, _lp = solve_lp(priced, resolved.price_matrix(shapes), resolved.availability_matrix(shapes),
                       resolved.scenario.options.K)
    return pr


def test_a_proven_shortfall_is_an_infeasible_ilp_over_every_template() -> None:
    proven = 0
    for seed in SEEDS:
        pr = _lp(seed)
        if pr.feasible:
            continue
        assert pr.shortfall is not None and pr.shortfall.proven, seed  # converged with demand uncovered: a proof
        assert library_optimum(seed).status == "infeasible", seed  # the oracle: every template, one joint ILP
        proven += 1
    assert proven >= 10, proven  # 22 of the 60 seeded instances have no plan


def test_uncovered_demand_is_no_proof_when_a_plan_could_cost_more_than_the_slack(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a slack cheaper than any column (big-M tiny), the LP leaves demand uncovered on instances that have a
    plan: the cap argument (z > every plan's cost) must then refuse to call it a proof."""
    monkeypatch.setattr(pricing, "BIG_M_FACTOR", 1e-9)
    checked = 0
    for seed in range(12):
        if library_optimum(seed).status != "optimal":
            continue
        pr = _lp(seed)
        if pr.shortfall is None:
            continue
        assert not pr.shortfall.proven, seed
        checked += 1
    assert checked >= 3, checked


def test_the_answer_is_infeasible_with_the_binding_offers_only_when_asked() -> None:
    answered = 0
    for seed in (2, 6, 9, 14):
        priced, offers = _instance(seed)
        assert allocate_on_demand(priced, _resolved(priced, offers)) is None  # the library path decides
        priced, offers = _instance(seed)
        plan = allocate_on_demand(priced, _resolved(priced, offers), options=OnDemandOptions(answer_short=True))
        assert plan is not None and plan.certified and plan.alloc.status == "infeasible" and not plan.alloc.has_plan
        said = plan.alloc.messages[-1]
        assert said.startswith("Capacity binds: no plan meets all demand") and "Fix: raise availability" in said
        assert plan.pricing.shortfall is not None and plan.pricing.shortfall.short
        # the cheapest top-up over the LP's templates (as the library path words it), with nodes short per offer
        assert re.search(r"needs about [\d,]+ more nodes than available .*: r[12] \w+ \+[\d,]+ nodes \(\d+ available\)",
                         said), said
        assert len(plan.sets) == len(priced) and all(len(ts) for ts in plan.sets)
        answered += 1
    assert answered == 4


@pytest.mark.parametrize(("availability", "demand"), [(0.02, 20.0), (0.1, 100.0)])
def test_a_slider_position_and_the_full_plan_agree_there_is_no_plan(availability: float, demand: float) -> None:
    scenario = apply_variants(Scenario.from_dict(copy.deepcopy(TINY)),
                              [AvailabilityScale(availability), DemandScale(demand)])
    said: list[str] = []
    lean = pipeline_solve(scenario, with_baselines=False, progress=lambda _f, message: said.append(message))
    full = pipeline_solve(scenario, with_baselines=True)
    assert lean.status == full.status == "infeasible"
    assert lean.stats.get("proven_short") == 1.0 and not full.stats.get("proven_short")
    assert lean.message.startswith("No plan: the available nodes cannot serve all demand")
    assert any(d.startswith("Capacity binds: no plan meets all demand") for d in lean.diagnostics)
    assert full.message.startswith("No plan: see diagnostics")  # the library path's per-model fractions
    assert "ILP: no plan meets all demand (proven by the LP over every template)" in said
    assert not any("allocation found" in m for m in said), said  # the progress never claims a plan it lacks
    json.dumps(lean.to_dict(), allow_nan=False)  # a job's result is plain JSON (the browser's slider reads it)
