"""Owned and reserved capacity in a plan: used first when cheaper at the margin, idle capacity reported and paid,
and every side of a comparison (plan, baselines, variants) counting the committed cost the same way."""

from __future__ import annotations

from typing import Any

import pytest

from planning.result import savings_pct
from planning.scenario import Scenario


def _hour(small: dict[str, Any], **changes: Any) -> Scenario:
    """The small scenario as one design hour (no profile, no reservation to size)."""
    d = {**small, "reservations": [], **changes}
    d.pop("finance", None)
    return Scenario.from_dict(d)


def _owned(count: int = 2, power: float = 0.3) -> list[dict[str, Any]]:
    # an owned site beside the cloud region, with 1xL40S nodes: $500 per node-month of capex and ops
    return [{"location": "owned:us-east-dc", "shape": "1xL40S", "count": count, "capex_usd": 12_000 * count,
             "amortisation_years": 2, "power_usd_per_hour": power, "ops_usd_per_hour": 0.1}]


def test_held_reservations_are_used_first_and_paid_whatever_is_used(small: dict[str, Any]) -> None:
    from planning.api import solve

    held = [{"region": "aws:us-east-2", "shape": "1xL40S", "count": 1, "status": "held", "upfront_usd": 0,
             "hourly_usd": 1.2}]
    plain = solve(_hour(small))
    with_res = solve(_hour(small, reservations=held))
    assert plain.has_plan and with_res.has_plan
    used = {(c.region, c.shape): c.used for c in with_res.capacity}
    assert used[("aws:us-east-2/reserved", "1xL40S")] == 1  # free at the margin: used before on-demand
    assert with_res.committed_per_hour == pytest.approx(1.2)
    # the held node replaces an on-demand 1xL40S ($1.861/h) for $1.20/h: the bill is that much lower
    assert with_res.comparable_cost == pytest.approx(plain.comparable_cost - 1.861 + 1.2, abs=0.02)
    kinds = with_res.cost_by_pricing_kind
    assert kinds["reserved"] == pytest.approx(1.2)
    assert sum(kinds.values()) + with_res.transfer_per_hour == pytest.approx(with_res.comparable_cost)


def test_idle_owned_capacity_is_paid_reported_and_never_a_saving(small: dict[str, Any]) -> None:
    """Owned nodes whose power costs more than renting idle: the plan pays their fixed cost anyway, reports them
    idle, and neither the plan nor any baseline looks cheaper for owning them."""
    from planning.api import solve

    plain = solve(_hour(small))
    owning = solve(_hour(small, owned=_owned(power=50.0)))  # power so dear that no owned node serves
    assert plain.has_plan and owning.has_plan
    fixed = owning.committed_per_hour
    assert fixed > 0
    idle = owning.finance["idle"]
    assert [(r["kind"], r["held"], r["used"], r["idle"]) for r in idle] == [("owned", 2, 0, 2)]
    assert idle[0]["idle_usd_per_hour"] == pytest.approx(fixed)
    # the idle pool costs exactly its fixed cost on top of the same plan: never a saving
    assert owning.comparable_cost == pytest.approx(plain.comparable_cost + fixed, rel=1e-9)
    assert owning.comparable_cost > plain.comparable_cost
    by_name = {b.name: b for b in plain.baselines}
    for b in owning.baselines:  # every baseline counts the same fixed cost: same gap to the plan in $/h
        if b.ran and b.feasible and by_name.get(b.name) is not None and by_name[b.name].feasible:
            assert b.cost_per_hour == pytest.approx(by_name[b.name].cost_per_hour + fixed, rel=1e-9)
            assert owning.savings_vs(b) == pytest.approx(
                savings_pct(owning.comparable_cost, b.cost_per_hour), rel=1e-9)
            assert b.cost_per_hour - owning.comparable_cost == pytest.approx(
                by_name[b.name].cost_per_hour - plain.comparable_cost, abs=1e-6)


def test_cheap_owned_nodes_serve_and_the_kinds_add_up(small: dict[str, Any]) -> None:
    from planning.api import solve

    owning = solve(_hour(small, owned=_owned(count=4, power=0.05)))
    assert owning.has_plan
    used = {(c.region, c.shape): c.used for c in owning.capacity}
    assert used[("owned:us-east-dc", "1xL40S")] > 0
    kinds = owning.cost_by_pricing_kind
    assert set(kinds) == {"owned", "reserved", "on_demand", "spot"}
    # owned = fixed for every node + power for the serving ones
    n = used[("owned:us-east-dc", "1xL40S")]
    assert kinds["owned"] == pytest.approx(owning.committed_per_hour + 0.05 * n)
    assert sum(kinds.values()) + owning.transfer_per_hour == pytest.approx(owning.comparable_cost)
    for line in owning.baselines:  # a baseline's cost never drops below the committed cost it carries
        if line.ran and line.feasible:
            assert line.cost_per_hour >= owning.committed_per_hour


def test_what_if_variants_count_the_committed_cost_on_every_row(small: dict[str, Any]) -> None:
    from planning.api import apply_variants, comparison_frame, make_variant, solve

    base = _hour(small, owned=_owned(power=50.0))
    results = {"base": solve(base), "demand ×2": solve(apply_variants(base, [make_variant("demand", k=2.0)]))}
    fixed = results["base"].committed_per_hour
    assert fixed > 0 and results["demand ×2"].committed_per_hour == pytest.approx(fixed)
    frame = comparison_frame(results)
    ran = frame[frame["cost_per_hour"].notna()]
    assert len(ran) >= 4
    assert (ran["cost_per_hour"] >= fixed - 1e-9).all()  # plan and baseline rows alike carry the owned pool


def test_horizon_comparisons_count_owned_and_held_capacity_like_the_plan(small: dict[str, Any]) -> None:
    """The sizing's horizon totals (chosen commitments, all on-demand, all reserved) carry the same owned and held
    costs, and "all on-demand" is exactly its epochs planned alone as design hours through ``api.solve`` (whose
    comparable cost counts the owned pool's fixed cost and the held reservation's fee): Σ_e w_e · comparable_e."""
    from dataclasses import replace

    from planning.api import solve
    from planning.finance.commitments import epochs_of

    held = {"region": "aws:us-east-2", "shape": "1xL4", "count": 1, "status": "held", "upfront_usd": 0,
            "hourly_usd": 0.5}
    scenario = Scenario.from_dict({**small, "owned": _owned(count=1, power=0.2),
                                   "reservations": [*small["reservations"], held]})
    result = solve(scenario)
    fin = result.finance
    assert result.has_plan and fin["sizing"]["status"] == "optimal"
    on_demand = fin["comparisons"]["all on-demand"]
    assert on_demand["status"] == "optimal"
    # the owned pool and the held reservation are in the design hour's committed cost (what every total carries)
    assert result.committed_per_hour > 0.5
    # "all on-demand" is what its epochs cost as design hours, planned alone through the public API
    total = 0.0
    for epoch in epochs_of(scenario):
        models = tuple(replace(m, demand=replace(m.demand, rate_rps=m.demand.rate_rps * epoch.factor[m.id]))
                       for m in scenario.models)
        hour = replace(scenario, models=models, finance=replace(scenario.finance, profile=None),
                       reservations=tuple(r for r in scenario.reservations if r.status == "held"),
                       options=replace(scenario.options, K=0.0))
        planned = solve(hour, with_baselines=False)
        assert planned.has_plan
        total += epoch.hours * planned.comparable_cost
    assert on_demand["total_usd"] == pytest.approx(total, rel=1e-6)
    # the chosen commitments never cost more than all on-demand, which is one of their options (R = 0)
    assert fin["sizing"]["total_usd"] <= on_demand["total_usd"] * (1 + 1e-9)
