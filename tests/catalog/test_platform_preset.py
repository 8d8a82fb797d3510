"""The platform-100 preset (issue 29 §3) restates the catalog: every region and shape, spot prices made
risk-adjusted from the catalog's rows, 10 popular models and 90 shared variants."""

from __future__ import annotations

import re

import pytest

from planning import api
from planning.catalog.load import load_catalog
from planning.timeline import SpotOptions


def test_platform_100_covers_the_catalog_and_restates_its_spot_prices() -> None:
    scenario = api.load_preset_scenario("platform-100")
    catalog = load_catalog()
    assert len(scenario.models) == 100 and len({m.id for m in scenario.models}) == 100
    threshold = scenario.options.sharing_threshold_rps
    popular = [m for m in scenario.models if m.demand.rate_rps >= threshold]
    tail = [m for m in scenario.models if m.demand.rate_rps < threshold]
    assert len(popular) == 10 and len(tail) == 90 and scenario.options.sharing == "exact"
    assert all(m.base in catalog.models for m in tail)  # variants of catalog models
    configs = list(catalog.configs.values())
    assert set(scenario.regions) == {c.region_key for c in configs}
    assert set(scenario.shapes) == {c.shape for c in configs}
    uptime = SpotOptions().uptime
    by_id = {c.id: c for c in configs}
    assert scenario.offers
    for offer in scenario.offers:
        row = re.search(r"data/node_configs.csv (\S+):", offer.source)
        assert row, offer.source
        cfg = by_id[row.group(1)]
        assert offer.region == f"{cfg.region_key}/spot" and offer.shape == cfg.shape
        assert offer.price_per_hour == pytest.approx(cfg.price_spot / uptime, abs=1e-4)
