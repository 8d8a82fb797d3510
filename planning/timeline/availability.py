"""Availability over time (node counts per (region, shape) per epoch) and spot offers with a preemption risk.

Availability series are read by :func:`planning.catalog.availability.load_availability_series` (timestamps as
ISO times or hours; ``region`` + ``shape`` or ``config_id``; ``nodes``) and applied as a step function: an
epoch gets, per (region, shape), the last value at or before its start (before the first row: the scenario's
own count). An optional ``pricing`` column (``on_demand`` | ``spot``) puts a row on the spot offer.

Spot (see docs/timeline.md): a spot node of price p_s is preempted at rate q per node-hour and a replacement
takes τ hours to start (node start-up + weight loading), during which the node is paid but serves nothing.
So a spot node serves a fraction 1 − q·τ of the hours it is paid for, and one useful spot node-hour costs
p_s / (1 − q·τ): the planner prices spot offers at that **risk-adjusted price** (cost), and counts each
spot node's throughput in full but reports the expected shortfall q·τ × (share of throughput on spot) as the
epoch's ``spot_expected_loss`` (capacity). Spot offers sit in a region ``"{region}/spot"`` so the same shape
can be bought both ways; their shapes are the on-demand ones, so libraries are shared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from planning.catalog.schema import Catalog
from planning.errors import PlanningError
from planning.scenario import AvailabilityOverride, OfferSpec, Scenario

SPOT_SUFFIX = "/spot"


@dataclass(frozen=True)
class SpotOptions:
    """Spot offers next to on-demand ones.

    ``preemption_per_hour`` q (expected preemptions per node-hour), ``restart_hours`` τ (time until a
    replacement serves), ``availability_scale`` spot nodes per on-demand node when no series gives spot counts.
    """

    enabled: bool = False
    preemption_per_hour: float = 0.05
    restart_hours: float = 0.25
    availability_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("preemption_per_hour", "restart_hours", "availability_scale"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise PlanningError(f"spot.{name}", f"must be a finite number ≥ 0, got {v!r}.", "e.g. 0.05.")
        if self.preemption_per_hour * self.restart_hours >= 1:
            raise PlanningError("spot.preemption_per_hour", "q·τ ≥ 1: a spot node would never serve.",
                                "lower the preemption rate or the restart time.")

    @property
    def uptime(self) -> float:
        """Fraction of paid spot node-hours that serve: 1 − q·τ."""
        return 1.0 - self.preemption_per_hour * self.restart_hours


def is_spot(region: str) -> bool:
    return region.endswith(SPOT_SUFFIX)


@dataclass(frozen=True)
class AvailabilitySeries:
    """Per epoch, node counts that replace the scenario's for some (region, shape) (spot regions included)."""

    epochs: tuple[Mapping[tuple[str, str], int], ...]
    source: str = ""

    def at(self, e: int) -> Mapping[tuple[str, str], int]:
        if not self.epochs:
            return {}
        return self.epochs[min(e, len(self.epochs) - 1)]


def load_series(path: str | Path, n_epochs: int, epoch_hours: float, start_hour: float = 0.0) -> AvailabilitySeries:
    """Read an availability CSV and sample it at each epoch start (step function).

    Raises
    ------
    PlanningError
        As :func:`planning.catalog.availability.load_availability_series`, plus a bad ``pricing`` value.
    """
    from planning.catalog.availability import load_availability_series

    p = Path(path)
    frame = load_availability_series(p)
    pricing = pl.Series("pricing", ["on_demand"] * frame.height)
    header = pl.read_csv(p, n_rows=0).columns
    if "pricing" in header:
        raw = pl.read_csv(p, infer_schema_length=0)
        col = raw["pricing"].fill_null("on_demand").str.strip_chars()
        bad = ~col.is_in(["on_demand", "spot", ""])
        if bad.any():
            line = int(bad.arg_true()[0]) + 2
            raise PlanningError(f"{p.name}:pricing", f"line {line}: {col[line - 2]!r} is not on_demand or spot.",
                                "write on_demand or spot.")
        # the loader sorts rows by time (stably); order the raw column the same way
        text = raw["timestamp"].str.strip_chars()
        key = text.cast(pl.Float64, strict=False)
        if key.null_count():
            key = text.str.to_datetime(strict=False, time_zone="UTC").dt.epoch("ms").cast(pl.Float64)
        pricing = pl.DataFrame({"k": key, "p": col}).with_row_index().sort("k", maintain_order=True)["p"]
    frame = frame.with_columns(pricing.alias("pricing"))
    ts = frame["timestamp"]
    if ts.dtype == pl.Float64:
        hours = ts.to_list()
    else:
        first = ts.min()
        hours = [(t - first).total_seconds() / 3600 for t in ts.to_list()]
    rows = list(zip(hours, frame["region"].to_list(), frame["shape"].to_list(), frame["nodes"].to_list(),
                    frame["pricing"].to_list() if "pricing" in frame.columns else ["on_demand"] * frame.height,
                    strict=True))
    rows.sort(key=lambda r: r[0])
    epochs: list[dict[tuple[str, str], int]] = []
    for e in range(n_epochs):
        t = start_hour + e * epoch_hours
        current: dict[tuple[str, str], int] = {}
        for h, region, shape, nodes, price in rows:
            if h > t + 1e-9:
                break
            current[(region + SPOT_SUFFIX if price == "spot" else region, shape)] = int(nodes)
        epochs.append(current)
    return AvailabilitySeries(tuple(epochs), source=p.name)


def spot_offers(scenario: Scenario, spot: SpotOptions, catalog: Catalog) -> tuple[OfferSpec, ...]:
    """Spot offers (risk-adjusted price p_s / (1 − q·τ)) for every (region, shape) the scenario buys on demand
    that has a catalog spot price; availability = on-demand count × ``spot.availability_scale``."""
    if not spot.enabled:
        return ()
    from planning.catalog.availability import cheapest_configs
    from planning.offers import resolve_offers

    on_demand = resolve_offers(replace(scenario, offers=tuple(o for o in scenario.offers if not is_spot(o.region))),
                               catalog)
    spot_rows = cheapest_configs(catalog, "spot")
    out = []
    for o in on_demand:
        cfg = spot_rows.get((o.region, o.shape))
        if cfg is None or cfg.price_spot is None:
            continue
        price = float(cfg.price_spot) / spot.uptime
        out.append(OfferSpec(region=o.region + SPOT_SUFFIX, shape=o.shape, price_per_hour=price / scenario.price_scale,
                             available=math.floor(o.available * spot.availability_scale / max(scenario.availability_scale, 1e-12)),
                             source=f"{cfg.source}; spot {cfg.price_spot:g} $/h / (1 − q·τ = {spot.uptime:.3f})"))
    return tuple(out)


def with_availability(scenario: Scenario, counts: Mapping[tuple[str, str], int],
                      known: Sequence[tuple[str, str]]) -> Scenario:
    """``scenario`` with the epoch's node counts as availability overrides (only for offers it has)."""
    have = set(known)
    extra = tuple(AvailabilityOverride(region=r, shape=s, nodes=int(n)) for (r, s), n in sorted(counts.items())
                  if (r, s) in have)
    keep = tuple(a for a in scenario.availability_overrides if (a.region, a.shape) not in {(x.region, x.shape) for x in extra})
    return replace(scenario, availability_overrides=keep + extra)
