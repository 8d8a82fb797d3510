"""Resolve a scenario's regions, shapes, prices and availability against the catalog into purchasable offers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planning.catalog.schema import Catalog, parse_shape, shape_key
from planning.errors import PlanningError, UnknownIdError
from planning.scenario import Scenario


@dataclass(frozen=True)
class ResolvedOffer:
    """One (region, shape) that can be bought: the cheapest matching catalog row, or an explicit offer."""

    region: str
    shape: str
    gpu: str
    gpu_count: int
    price_per_hour: float
    available: int
    instance_type: str
    config_id: str
    quality: str
    source: str
    as_of: str
    overridden: bool = False


def resolve_offers(scenario: Scenario, catalog: Catalog) -> list[ResolvedOffer]:
    """All offers the scenario may buy, sorted by (region, shape).

    Catalog rows in ``scenario.regions`` whose shape is in ``scenario.shapes`` (all shapes when empty) and
    whose GPU is not excluded; price on-demand or spot (rows without a spot price are skipped under spot
    pricing), times ``price_scale``; availability from the catalog's illustrative counts times
    ``availability_scale`` (rounded down), then per-(region, shape) overrides. Explicit ``offers`` replace
    catalog rows for their (region, shape).

    Raises
    ------
    PlanningError
        Unknown regions, shapes or GPUs, naming the closest ids.
    """
    known_regions = {c.region_key for c in catalog.configs.values()}
    explicit_regions = {o.region for o in scenario.offers}
    for i, region in enumerate(scenario.regions):
        if region not in known_regions and region not in explicit_regions:
            raise UnknownIdError(f"regions[{i}]", region, known_regions)
    for i, shape in enumerate(scenario.shapes):
        _, gpu = parse_shape(shape, f"shapes[{i}]")
        if gpu not in catalog.gpus:
            raise UnknownIdError(f"shapes[{i}]", gpu, catalog.gpus)
    for i, gpu in enumerate(scenario.exclude_gpus):
        if gpu not in catalog.gpus:
            raise UnknownIdError(f"exclude_gpus[{i}]", gpu, catalog.gpus)

    wanted_shapes = set(scenario.shapes)
    excluded = set(scenario.exclude_gpus)
    best: dict[tuple[str, str], ResolvedOffer] = {}
    for cfg in catalog.configs.values():
        if cfg.region_key not in scenario.regions or cfg.gpu_id in excluded:
            continue
        shape = shape_key(cfg.gpu_id, cfg.gpu_count)
        if wanted_shapes and shape not in wanted_shapes:
            continue
        price = cfg.price_on_demand if scenario.pricing == "on_demand" else cfg.price_spot
        if price is None:
            continue
        avail = catalog.availability.get(cfg.id)
        nodes = avail.nodes if avail is not None else 0
        offer = ResolvedOffer(
            region=cfg.region_key, shape=shape, gpu=cfg.gpu_id, gpu_count=cfg.gpu_count,
            price_per_hour=price * scenario.price_scale,
            available=math.floor(nodes * scenario.availability_scale + 1e-9),
            instance_type=cfg.instance_type, config_id=cfg.id, quality=cfg.quality,
            source=cfg.source, as_of=cfg.as_of, overridden=cfg.id in catalog.overridden,
        )
        key = (offer.region, shape)
        if key not in best or offer.price_per_hour < best[key].price_per_hour:
            best[key] = offer

    for i, o in enumerate(scenario.offers):
        count, gpu = parse_shape(o.shape, f"offers[{i}].shape")
        if gpu not in catalog.gpus:
            raise UnknownIdError(f"offers[{i}].shape", gpu, catalog.gpus)
        if gpu in excluded:
            best.pop((o.region, o.shape), None)
            continue
        best[(o.region, o.shape)] = ResolvedOffer(
            region=o.region, shape=o.shape, gpu=gpu, gpu_count=count,
            price_per_hour=o.price_per_hour * scenario.price_scale,
            available=math.floor(o.available * scenario.availability_scale + 1e-9),
            instance_type="(scenario offer)", config_id=f"{o.region}:{o.shape}", quality="hypothetical",
            source=o.source, as_of="", overridden=True,
        )

    for i, ov in enumerate(scenario.availability_overrides):
        key = (ov.region, ov.shape)
        if key not in best:
            raise PlanningError(f"availability_overrides[{i}]", f"no offer for {ov.shape} in {ov.region}.",
                                "override only (region, shape) pairs the scenario can buy.")
        old = best[key]
        best[key] = ResolvedOffer(**{**old.__dict__, "available": ov.nodes, "overridden": True})

    if not best:
        raise PlanningError("regions", "no node configuration can be bought with these regions/shapes/pricing.",
                            "add regions or shapes, switch pricing to on_demand, or give explicit offers.")
    return [best[k] for k in sorted(best)]
