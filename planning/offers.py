"""Resolve a scenario's regions, shapes, prices and availability against the catalog into purchasable offers.

Besides the catalog's on-demand (or spot) rows, a scenario's finance inputs become offers in pricing pools
(``planning.pools``): owned pools at their site (marginal price = power per serving node-hour), held
reservations in ``{region}/reserved`` (marginal price 0: paid whether used or not) and, with ``spot.enabled``,
every on-demand (region, shape) with a spot price also in ``{region}/spot`` at its expected cost per node-hour.
Reservations with ``status: decide`` are candidates, not capacity: ``planning.finance`` sizes them and plans
with the sizes as held.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from planning.catalog.schema import Catalog, NodeConfig, parse_shape, shape_key
from planning.errors import PlanningError, UnknownIdError, quote
from planning.pools import Terms, cloud_of, pool_region, published_terms
from planning.scenario import Reservation, Scenario


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
    kind: str = "on_demand"  # pricing pool (planning.pools.KINDS)
    fixed_per_node_hour: float = 0.0  # owned: amortised capex + ops; held reserved: the term's effective hourly
    list_price: float = 0.0  # spot: the spot price before interruptions; reserved: the on-demand price it replaces
    interruption_per_hour: float = 0.0  # spot: interruptions per node-hour (q)


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
            kind="on_demand" if scenario.pricing == "on_demand" else "spot", list_price=price * scenario.price_scale,
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

    if scenario.has_finance:
        best.update(pool_offers(scenario, catalog, best))
    if not best:
        raise PlanningError("regions", "no node configuration can be bought with these regions/shapes/pricing.",
                            "add regions or shapes, switch pricing to on_demand, or give explicit offers.")
    return [best[k] for k in sorted(best)]


def pool_offers(scenario: Scenario, catalog: Catalog,
                cloud: Mapping[tuple[str, str], ResolvedOffer]) -> dict[tuple[str, str], ResolvedOffer]:
    """The offers of the scenario's pricing pools, keyed (region, shape): owned pools, held reservations (summed
    per (region, shape)) and, with ``spot.enabled``, a spot pool beside every on-demand offer ``cloud`` holds
    that has a catalog spot price (same node count; expected cost per node-hour, ``planning.finance.risk``).

    Raises
    ------
    PlanningError
        An owned pool or reservation of an unknown GPU, a reservation in a region the scenario does not list or of
        a shape no catalog row sells there, or two owned pools of one shape at one site.
    """
    from planning.catalog.availability import cheapest_configs
    from planning.finance.risk import spot_price

    out: dict[tuple[str, str], ResolvedOffer] = {}
    for i, pool in enumerate(scenario.owned):
        count, gpu = parse_shape(pool.shape, f"owned[{i}].shape")
        if gpu not in catalog.gpus:
            raise UnknownIdError(f"owned[{i}].shape", gpu, catalog.gpus)
        key = (pool.location, pool.shape)
        if key in out:
            raise PlanningError(f"owned[{i}]", f"a second pool of {pool.shape} at {pool.location}.",
                                "merge the two pools into one (add their counts and capex).")
        out[key] = ResolvedOffer(
            region=pool.location, shape=pool.shape, gpu=gpu, gpu_count=count, price_per_hour=pool.power_usd_per_hour,
            available=pool.count, instance_type=f"(owned{': ' + pool.name if pool.name else ''})",
            config_id=f"{pool.location}:{pool.shape}", quality="ok", source=pool.source, as_of="", overridden=True,
            kind="owned", fixed_per_node_hour=pool.fixed_per_node_hour)
    on_demand_rows = cheapest_configs(catalog, "on_demand")
    held: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for i, res in enumerate(scenario.reservations):
        row = _reservable(scenario, catalog, on_demand_rows, i)
        terms = reservation_terms(res, row.price_on_demand * scenario.price_scale, f"reservations[{i}]",
                                  scenario.price_scale)  # priced?
        if res.status != "held":
            continue
        held.setdefault((res.region, res.shape), []).append((int(res.count or 0), terms.effective_hourly))
    for (region, shape), parts in held.items():
        count, gpu = parse_shape(shape)
        nodes = sum(n for n, _ in parts)
        row = on_demand_rows[(region, shape)]
        out[(pool_region(region, "reserved"), shape)] = ResolvedOffer(
            region=pool_region(region, "reserved"), shape=shape, gpu=gpu, gpu_count=count, price_per_hour=0.0,
            available=nodes, instance_type=f"{row.instance_type} (reserved)", config_id=row.id, quality=row.quality,
            source="scenario reservations", as_of=row.as_of, overridden=True, kind="reserved",
            fixed_per_node_hour=sum(n * h for n, h in parts) / nodes if nodes else 0.0,
            list_price=row.price_on_demand * scenario.price_scale)
    if scenario.spot.enabled:
        spot_rows = cheapest_configs(catalog, "spot")
        for (region, shape), offer in cloud.items():
            cfg = spot_rows.get((region, shape))
            if offer.kind != "on_demand" or cfg is None or cfg.price_spot is None:
                continue
            listed = cfg.price_spot * scenario.price_scale
            expected, q = spot_price(scenario, region, offer.gpu, listed, offer.price_per_hour)
            out[(pool_region(region, "spot"), shape)] = ResolvedOffer(
                **{**offer.__dict__, "region": pool_region(region, "spot"), "price_per_hour": expected,
                   "instance_type": f"{cfg.instance_type} (spot)", "config_id": cfg.id, "kind": "spot",
                   "list_price": listed, "interruption_per_hour": q, "overridden": True})
    return out


def _reservable(scenario: Scenario, catalog: Catalog, rows: Mapping[tuple[str, str], NodeConfig], i: int) -> NodeConfig:
    """The catalog row a reservation applies to (its region and shape sold on demand), or a clear error."""
    res = scenario.reservations[i]
    _, gpu = parse_shape(res.shape, f"reservations[{i}].shape")
    if gpu not in catalog.gpus:
        raise UnknownIdError(f"reservations[{i}].shape", gpu, catalog.gpus)
    if scenario.shapes and res.shape not in scenario.shapes:
        raise PlanningError(f"reservations[{i}].shape", f"{res.shape} is not in the scenario's shapes.",
                            f"add {res.shape} to shapes, or reserve one of {', '.join(scenario.shapes)}.")
    if res.region not in scenario.regions:
        raise PlanningError(f"reservations[{i}].region", f"{quote(res.region)} is not in the scenario's regions.",
                            f"add it to regions, or reserve in one of {', '.join(scenario.regions) or '(none)'}.")
    row = rows.get((res.region, res.shape))
    if row is None:
        sold = sorted(s for r, s in rows if r == res.region)
        raise PlanningError(f"reservations[{i}].shape", f"no catalog node config sells {res.shape} in {res.region}, "
                            "so it cannot be reserved there.",
                            f"reserve a shape sold there: {', '.join(sold[:12]) or '(none)'}.")
    return row


def reservation_terms(res: Reservation, on_demand_usd: float, field: str, scale: float = 1.0) -> Terms:
    """A reservation's price per node: as given (× ``scale``, the scenario's price_scale), or the cloud's published
    discount (``data/reservations.csv``) off ``on_demand_usd`` (already scaled)."""
    if res.upfront_usd is not None and res.hourly_usd is not None:  # given prices follow price_scale too
        return Terms(res.term_years, float(res.upfront_usd) * scale, float(res.hourly_usd) * scale, res.payment,
                     res.source or "scenario")
    return published_terms(cloud_of(res.region), res.term_years, res.payment, on_demand_usd, field=field)
