"""The Scenario page's offers table is the engine's own offers (no second implementation to drift)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planning import api
from planning.catalog.schema import parse_shape
from planning.offers import resolve_offers
from planning.scenario import OfferSpec, Scenario


def test_offers_frame_is_resolve_offers(tiny: dict[str, Any]) -> None:
    s = Scenario.from_dict({**tiny, "shapes": [], "price_scale": 2.0})
    frame = api.offers_frame(s)
    engine = resolve_offers(replace(s, price_scale=1.0), api.engine_context().catalog)
    assert list(zip(frame["region"], frame["shape"], strict=True)) == [(o.region, o.shape) for o in engine]
    assert list(frame["price_per_hour"]) == [o.price_per_hour for o in engine]  # before the × scale


def test_offers_frame_respects_exclusions_spot_and_explicit_offers(tiny: dict[str, Any]) -> None:
    s = Scenario.from_dict({**tiny, "shapes": []})
    all_gpus = {parse_shape(x)[1] for x in api.offers_frame(s)["shape"]}
    assert "L4" in all_gpus
    without = api.offers_frame(replace(s, exclude_gpus=("L4",)))
    assert "L4" not in {parse_shape(x)[1] for x in without["shape"]}
    spot = api.offers_frame(replace(s, pricing="spot"))
    catalog = api.catalog_frames()["configs"]
    no_spot = catalog[(catalog["region_key"] == "aws:us-east-2") & catalog["price_spot"].isna()]
    spot_keys = set(zip(spot["region"], spot["shape"], strict=True))
    for shape in set(no_spot["shape"]):
        with_spot = catalog[(catalog["region_key"] == "aws:us-east-2") & (catalog["shape"] == shape)
                            & catalog["price_spot"].notna()]
        assert (("aws:us-east-2", shape) in spot_keys) == (not with_spot.empty)
    assert spot["price_per_hour"].notna().all()
    own = api.offers_frame(replace(s, offers=(OfferSpec("aws:us-east-2", "1xL4", 0.5, 3, "test"),)))
    row = own[(own["shape"] == "1xL4")].iloc[0]
    assert (row["price_per_hour"], row["available"], bool(row["override"])) == (0.5, 3, True)
