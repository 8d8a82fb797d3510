"""Market comparison: per region / cloud / mixed, on-demand vs spot, like-for-like costs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning import api
from planning.compare import market_scenarios
from planning.errors import PlanningError


def test_markets_of_a_two_region_scenario() -> None:
    scenario = api.load_preset_scenario("coral-core")
    variants = market_scenarios(scenario)
    labels = [v.label for v in variants]
    assert labels[0] == "all regions (mixed optimum) · on-demand"
    assert "aws:ap-northeast-2 · spot" in labels and len(variants) == 6
    for v in variants:
        assert v.scenario.pricing == v.pricing and set(v.scenario.regions) == set(v.regions)


def test_mixed_optimum_never_costs_more_than_one_region() -> None:
    frame = api.compare_markets(api.load_preset_scenario("coral-core"))
    for pricing in ("on-demand", "spot"):
        rows = frame[frame["pricing"] == pricing]
        mixed = rows[rows["scope"] == "all"]["cost_per_hour"].iloc[0]
        singles = rows[rows["scope"] == "region"]["cost_per_hour"].dropna()
        assert len(singles) == 2 and mixed <= singles.min() + 1e-6
    ok = frame.dropna(subset=["cost_per_hour"])
    assert ((ok["cost_per_month"] - ok["cost_per_hour"] * 730).abs() <= 730 * 0.005 + 0.01).all()
    spot = frame[frame["pricing"] == "spot"]
    assert spot["note"].str.contains("reclaimed").all()


def test_bad_pricing_and_no_regions_are_clear_errors() -> None:
    scenario = api.load_preset_scenario("coral-core")
    with pytest.raises(PlanningError, match="pricing"):
        market_scenarios(scenario, pricings=("cheap",))
    with pytest.raises(PlanningError, match="regions"):
        market_scenarios(replace(scenario, regions=()))
