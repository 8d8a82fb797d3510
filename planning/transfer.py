"""Cross-region KV transfer facts: egress $/GB per cloud (data/egress.csv) and WAN latency/bandwidth (data/wan.csv).

Catalog layer: read-only facts with provenance, no planning. A region key is ``cloud:region``; its continent is
read from the region name (``us-``/``northamerica-``/``eastus``… → north-america, ``eu-``/``europe-`` → europe,
``ap-``/``asia-`` → asia; ``runpod:us`` and ``lambda:us-*`` → north-america; anything else is its own continent,
so an unknown region is priced and delayed as "other continent", the conservative side).

Price of moving bytes from ``src`` to ``dst``: within one cloud, its inter-region $/GB; across clouds, the
sender's internet egress $/GB (the receiving cloud charges no ingress); between two pricing pools of one region
(``planning.pools``: on-demand, spot, reserved nodes of ``aws:us-east-2``) nothing. A cloud missing from the table is an
error that names the file.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from planning.catalog.load import DATA_DIR, read_table
from planning.catalog.schema import EgressPrice, WanLink
from planning.errors import PlanningError, quote
from planning.pools import site_of

_CONTINENT_PREFIXES = (
    (("us-", "us", "northamerica-", "eastus", "westus", "centralus", "northcentralus", "southcentralus",
      "westcentralus", "canada", "ca-"), "north-america"),
    (("eu-", "europe-", "westeurope", "northeurope", "uk", "france", "germany"), "europe"),
    (("ap-", "asia-", "japan", "korea", "australia", "southeastasia", "eastasia"), "asia"),
)


@dataclass(frozen=True)
class Transfer:
    """Moving KV caches from ``src`` to ``dst``: price, one-way latency, per-transfer bandwidth and provenance."""

    src: str
    dst: str
    usd_per_gb: float
    one_way_s: float
    gbps: float
    source: str

    def seconds(self, nbytes: float) -> float:
        """One request's hand-off over the WAN: the one-way latency plus ``nbytes`` at ``gbps``."""
        return self.one_way_s + nbytes / (self.gbps * 1e9 / 8.0)


def continent(region: str) -> str:
    """The continent of a region key (``cloud:region``, pool suffixes ignored); an unknown region is its own
    continent (an owned site ``owned:us-…`` is read like a cloud region)."""
    _cloud, _sep, name = site_of(region).partition(":")
    name = name.lower()
    for prefixes, where in _CONTINENT_PREFIXES:
        if any(name == p or name.startswith(p) for p in prefixes):
            return where
    return f"unknown:{region}"


@functools.lru_cache(maxsize=4)
def _tables(data_dir: Path) -> tuple[dict[str, EgressPrice], dict[str, WanLink]]:
    egress = read_table(data_dir / "egress.csv", "egress")
    wan = read_table(data_dir / "wan.csv", "wan")
    for scope in ("same-continent", "other-continent"):
        if scope not in wan:
            raise PlanningError("wan.csv", f"no row for scope {quote(scope)}.", "add it (see data/README.md).")
    return egress, wan


def transfer(src: str, dst: str, data_dir: Path | None = None) -> Transfer:
    """Price, latency and bandwidth of sending KV caches from region ``src`` to region ``dst`` (``cloud:region``).

    Raises
    ------
    PlanningError
        The sending cloud has no row in ``data/egress.csv``, or a table is malformed.
    """
    egress, wan = _tables(Path(data_dir) if data_dir is not None else DATA_DIR)
    if site_of(src) == site_of(dst):  # two pricing pools of one region (planning.pools): one network
        return Transfer(src, dst, 0.0, 0.0, math.inf, "same site: the pools of one region share its network")
    src_cloud, dst_cloud = src.partition(":")[0], dst.partition(":")[0]
    if src_cloud not in egress:
        raise PlanningError("egress.csv", f"no egress price for cloud {quote(src_cloud)} (region {quote(src)}).",
                            f"add a row for it; known clouds: {', '.join(sorted(egress))}.")
    price = egress[src_cloud]
    usd = price.inter_region_usd_per_gb if src_cloud == dst_cloud else price.internet_usd_per_gb
    scope = "same-continent" if continent(src) == continent(dst) else "other-continent"
    link = wan[scope]
    return Transfer(src, dst, usd, link.one_way_ms * 1e-3, link.gbps,
                    f"egress: {price.source} ({price.as_of}); WAN ({scope}): {link.quality} {link.source} ({link.as_of})")
