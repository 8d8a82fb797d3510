"""Pricing pools: how a node is paid for, read from its region key, and the commitment and spot-risk facts.

Region keys (one convention for offers, plans, bills and the simulator):

=========================  ============  =====================================================================
key                        kind          price the allocation sees (the marginal $/node-hour)
=========================  ============  =====================================================================
``cloud:region``           on_demand     the catalog's on-demand price
``cloud:region/spot``      spot          the spot price, plus the expected on-demand replacement (see finance)
``cloud:region/reserved``  reserved      0: a held reservation is paid every hour of its term, used or not
``owned:site``             owned         the power a serving node draws; capex and operations are fixed
=========================  ============  =====================================================================

The pools of one site (``site_of``) are one network: a model's prefill on on-demand nodes and its decode on
reserved nodes of the same region pay no egress and no WAN delay (``planning.transfer``).

Facts restated with their sources (catalog layer, read like ``data/egress.csv``): ``data/reservations.csv``
(per cloud, term and payment option: the discount off on-demand and the share paid upfront) and
``data/spot_interruptions.csv`` (per cloud, region and GPU, ``*`` = any: the share of spot nodes interrupted in
a month). A monthly share f becomes a rate per node-hour q = −ln(1 − f) / 730 (interruptions of one node as a
Poisson process, 730 h a month).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from planning.catalog.load import DATA_DIR, read_table
from planning.catalog.schema import ReservationTerms, SpotInterruption
from planning.errors import PlanningError, quote

KINDS = ("owned", "reserved", "on_demand", "spot")
"""Pricing kinds, in the order bills list them."""
SPOT_SUFFIX = "/spot"
RESERVED_SUFFIX = "/reserved"
OWNED_CLOUD = "owned"
HOURS_PER_YEAR = 8760.0
HOURS_PER_MONTH = 730.0
PAYMENTS = ("no_upfront", "partial_upfront", "all_upfront")


def kind_of(region: str) -> str:
    """The pricing kind of a region key (see the module table)."""
    if region.endswith(SPOT_SUFFIX):
        return "spot"
    if region.endswith(RESERVED_SUFFIX):
        return "reserved"
    if region.partition(":")[0] == OWNED_CLOUD:
        return "owned"
    return "on_demand"


def site_of(region: str) -> str:
    """The physical site of a region key: the key without its pool suffix."""
    for suffix in (SPOT_SUFFIX, RESERVED_SUFFIX):
        if region.endswith(suffix):
            return region[: -len(suffix)]
    return region


def cloud_of(region: str) -> str:
    """``aws``, ``gcp``, … or ``owned``."""
    return region.partition(":")[0]


def pool_region(site: str, kind: str) -> str:
    """The region key of ``site``'s pool of ``kind`` (``on_demand`` and ``owned`` are the site itself)."""
    if kind == "spot":
        return site + SPOT_SUFFIX
    if kind == "reserved":
        return site + RESERVED_SUFFIX
    return site


def hourly_rate(per_month: float) -> float:
    """Interruptions per node-hour from the share of nodes interrupted in a month: −ln(1 − f) / 730."""
    if per_month >= 1:
        return math.inf
    return -math.log1p(-per_month) / HOURS_PER_MONTH


@dataclass(frozen=True)
class Terms:
    """One node's reservation price: ``upfront_usd`` once for the term and ``hourly_usd`` every hour of it."""

    term_years: float
    upfront_usd: float
    hourly_usd: float
    payment: str
    source: str
    quality: str = "given"

    @property
    def term_hours(self) -> float:
        return self.term_years * HOURS_PER_YEAR

    @property
    def effective_hourly(self) -> float:
        """Upfront spread over the term plus the hourly fee: what one reserved node costs per hour of the term."""
        return self.upfront_usd / self.term_hours + self.hourly_usd


@functools.lru_cache(maxsize=4)
def _tables(data_dir: Path) -> tuple[dict[str, ReservationTerms], dict[str, SpotInterruption]]:
    return (read_table(data_dir / "reservations.csv", "reservations"),
            read_table(data_dir / "spot_interruptions.csv", "spot_interruptions"))


def published_terms(cloud: str, term_years: float, payment: str, on_demand_usd: float, *, field: str = "reservation",
                    data_dir: Path | None = None) -> Terms:
    """A node's reservation price from ``data/reservations.csv``: the term's on-demand cost × (1 − discount), of
    which ``upfront_share`` is paid upfront and the rest hourly.

    Raises
    ------
    PlanningError
        No row for (cloud, term, payment): names the field and the rows there are.
    """
    table, _ = _tables(Path(data_dir) if data_dir is not None else DATA_DIR)
    key = f"{cloud}:{term_years:g}:{payment}"
    row = table.get(key)
    if row is None:
        known = ", ".join(f"{r.cloud} {r.term_years} y {r.payment}" for r in table.values())
        raise PlanningError(field, f"no published reservation price for {quote(cloud)}, {term_years:g} year(s), "
                            f"{quote(payment)} (data/reservations.csv).",
                            f"give upfront_usd and hourly_usd yourself, or use one of: {known}.")
    hours = term_years * HOURS_PER_YEAR
    total = on_demand_usd * (1.0 - row.discount) * hours
    return Terms(term_years, total * row.upfront_share, total * (1.0 - row.upfront_share) / hours, payment,
                 f"{row.discount:.0%} off on-demand {on_demand_usd:g} $/h: {row.source} ({row.as_of})", row.quality)


@dataclass(frozen=True)
class SpotRisk:
    """How often a spot node of one (region, GPU) is interrupted: monthly share, rate per node-hour, provenance."""

    per_month: float
    band: str
    quality: str
    source: str

    @property
    def per_hour(self) -> float:
        return hourly_rate(self.per_month)


def spot_risk(region: str, gpu: str, data_dir: Path | None = None) -> SpotRisk:
    """The interruption rate of spot nodes with ``gpu`` in ``region`` (its site's cloud and region), the most
    specific row of ``data/spot_interruptions.csv`` first: (cloud, region, gpu), (cloud, *, gpu),
    (cloud, region, *), (cloud, *, *).

    Raises
    ------
    PlanningError
        The cloud has no row at all.
    """
    _, table = _tables(Path(data_dir) if data_dir is not None else DATA_DIR)
    site = site_of(region)
    cloud, _sep, name = site.partition(":")
    for key in (f"{cloud}:{name}:{gpu}", f"{cloud}:*:{gpu}", f"{cloud}:{name}:*", f"{cloud}:*:*"):
        row = table.get(key)
        if row is not None:
            return SpotRisk(row.per_month, row.band, row.quality, f"{row.source} ({row.as_of})")
    raise PlanningError("spot.interruptions", f"no interruption rate for spot nodes in {quote(site)} "
                        "(data/spot_interruptions.csv has no row for this cloud).",
                        f"add spot.interruptions: [{{region: {site}, per_month: 0.1, source: ...}}] to the scenario.")
