"""Offer resolution against the shipped catalog, and (model, phase) groups with their demand classes."""

from __future__ import annotations

import numpy as np
import pytest

from planning.catalog.load import load_catalog
from planning.catalog.schema import parse_shape
from planning.errors import PlanningError, UnknownIdError
from planning.groups import plan_groups
from planning.offers import resolve_offers
from planning.scenario import Scenario
from planning.templates.stages import evaluate_stages, stages_from_placement

BASE = {
    "name": "t",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL40S", "2xL40S", "1xL4"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                "demand": {"rate_rps": 2, "input_len": 500, "output_len": 100}}],
}


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog()


def test_cheapest_row_per_region_and_shape(catalog) -> None:  # type: ignore[no-untyped-def]
    offers = resolve_offers(Scenario.from_dict(BASE), catalog)
    keys = [(o.region, o.shape) for o in offers]
    assert len(keys) == len(set(keys))
    for o in offers:
        rows = [c for c in catalog.configs.values() if c.region_key == o.region and c.shape == o.shape]
        assert o.price_per_hour == pytest.approx(min(c.price_on_demand for c in rows))
    assert {o.shape for o in offers} <= set(BASE["shapes"])


def test_scales_overrides_and_explicit_offers(catalog) -> None:  # type: ignore[no-untyped-def]
    s = Scenario.from_dict({**BASE, "price_scale": 1.5, "availability_scale": 0.5})
    base = {(o.region, o.shape): o for o in resolve_offers(Scenario.from_dict(BASE), catalog)}
    for o in resolve_offers(s, catalog):
        b = base[(o.region, o.shape)]
        assert o.price_per_hour == pytest.approx(1.5 * b.price_per_hour)
        assert o.available == int(b.available * 0.5)
    s2 = Scenario.from_dict({**BASE, "offers": [{"region": "aws:us-east-2", "shape": "1xL4", "price_per_hour": 0.1,
                                                 "available": 7}]})
    got = {(o.region, o.shape): o for o in resolve_offers(s2, catalog)}
    assert got[("aws:us-east-2", "1xL4")].price_per_hour == 0.1
    assert got[("aws:us-east-2", "1xL4")].available == 7
    s3 = Scenario.from_dict({**BASE, "exclude_gpus": ["L4"]})
    assert all(o.gpu != "L4" for o in resolve_offers(s3, catalog))


def test_unknown_ids_name_the_closest(catalog) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnknownIdError) as err:
        resolve_offers(Scenario.from_dict({**BASE, "regions": ["aws:us-east-9"]}), catalog)
    assert err.value.field == "regions[0]"
    assert "aws:us-east-2" in str(err.value) or "aws:us-east-1" in str(err.value)
    with pytest.raises(UnknownIdError):
        resolve_offers(Scenario.from_dict({**BASE, "shapes": ["1xL4O"]}), catalog)
    with pytest.raises(PlanningError):
        parse_shape("L4")


def test_groups_disaggregated_units_and_histogram_classes() -> None:
    groups = plan_groups(Scenario.from_dict(BASE))
    assert [g.id for g in groups] == ["llama-3-8b/prefill", "llama-3-8b/decode"]
    assert groups[0].demand == pytest.approx(2 * 500)
    assert groups[1].demand == pytest.approx(2 * 100)
    hist = {**BASE, "mode": "aggregated", "models": [{**BASE["models"][0], "demand": {"histogram": [
        {"input_len": 100, "output_len": 10, "rate_rps": 1}, {"input_len": 1000, "output_len": 100, "rate_rps": 3}]}}]}
    (g,) = plan_groups(Scenario.from_dict(hist))
    assert g.phase == "aggregated"
    assert len(g.classes) == 2
    assert g.demand == pytest.approx(4)


def test_fixed_placement_evaluates_min_over_stages() -> None:
    shapes = ["1xL4", "1xL40S"]
    tables = np.zeros((2, 3, 4))
    tables[0, 1, :] = [40, 30, 20, 10]  # 1xL4 with 2 stages, j = 1..4
    tables[1, 1, :] = [90, 70, 50, 30]
    stages = stages_from_placement([{"layers": 3, "nodes": [1]}, {"layers": 1, "nodes": [0, 0]}], shapes)
    assert [s.layer_start for s in stages] == [0, 3]
    assert evaluate_stages(stages, tables, {s: i for i, s in enumerate(shapes)}) == pytest.approx(min(50, 80))
