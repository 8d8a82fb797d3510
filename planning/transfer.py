"""Cross-region KV transfer facts: egress $/GB per cloud (data/egress.csv) and WAN latency/bandwidth (data/wan.csv).

Catalog layer: read-only facts with provenance, no planning. A region key is ``cloud:region``; its continent is
read from the region name (``us-``/``northamerica-``/``eastus``… → north-america, ``eu-``/``europe-`` → europe,
``ap-``/``asia-`` → asia; ``runpod:us`` and ``lambda:us-*`` → north-america; anything else is its own continent,
so an unknown region is priced and delayed as "other continent", the conservative side).

Price of moving bytes from ``src`` to ``dst``: within one cloud, its inter-region $/GB; across clouds, the
sender's internet egress $/GB (the receiving cloud charges no ingress). A cloud missing from the table is an
error that names the file.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from planning.errors import PlanningError, quote

DATA_DIR = Path(__file__).resolve().parents[1] / "data"

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
    """The continent of a region key (``cloud:region``); an unknown region is its own continent."""
    _cloud, _sep, name = region.partition(":")
    name = name.lower()
    for prefixes, where in _CONTINENT_PREFIXES:
        if any(name == p or name.startswith(p) for p in prefixes):
            return where
    return f"unknown:{region}"


def _read(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows, start=2):
        for c in columns:
            if not (row.get(c) or "").strip():
                raise PlanningError(f"{path.name}:{i}.{c}", "the cell is empty.", f"fill {c} (see data/README.md).")
    return rows


def _number(path: Path, line: int, column: str, raw: str, *, positive: bool = False) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise PlanningError(f"{path.name}:{line}.{column}", f"{quote(raw)} is not a number {'> 0' if positive else '>= 0'}.",
                            "write a plain decimal number.")
    return value


@functools.lru_cache(maxsize=4)
def _tables(data_dir: Path) -> tuple[dict[str, tuple[float, float, str]], dict[str, tuple[float, float, str]]]:
    egress_path, wan_path = data_dir / "egress.csv", data_dir / "wan.csv"
    egress: dict[str, tuple[float, float, str]] = {}
    for i, row in enumerate(_read(egress_path, ("cloud", "inter_region_usd_per_gb", "internet_usd_per_gb", "source", "as_of")), start=2):
        egress[row["cloud"].strip()] = (_number(egress_path, i, "inter_region_usd_per_gb", row["inter_region_usd_per_gb"]),
                                        _number(egress_path, i, "internet_usd_per_gb", row["internet_usd_per_gb"]),
                                        f"{row['source']} ({row['as_of']})")
    wan: dict[str, tuple[float, float, str]] = {}
    for i, row in enumerate(_read(wan_path, ("scope", "one_way_ms", "gbps", "source", "as_of")), start=2):
        wan[row["scope"].strip()] = (_number(wan_path, i, "one_way_ms", row["one_way_ms"]) * 1e-3,
                                     _number(wan_path, i, "gbps", row["gbps"], positive=True),
                                     f"{row.get('quality', '')} {row['source']} ({row['as_of']})".strip())
    for scope in ("same-continent", "other-continent"):
        if scope not in wan:
            raise PlanningError(wan_path.name, f"no row for scope {quote(scope)}.", "add it (see data/README.md).")
    return egress, wan


def transfer(src: str, dst: str, data_dir: Path | None = None) -> Transfer:
    """Price, latency and bandwidth of sending KV caches from region ``src`` to region ``dst`` (``cloud:region``).

    Raises
    ------
    PlanningError
        The sending cloud has no row in ``data/egress.csv``, or a table is malformed.
    """
    egress, wan = _tables(Path(data_dir) if data_dir is not None else DATA_DIR)
    src_cloud, dst_cloud = src.partition(":")[0], dst.partition(":")[0]
    if src_cloud not in egress:
        raise PlanningError("egress.csv", f"no egress price for cloud {quote(src_cloud)} (region {quote(src)}).",
                            f"add a row for it; known clouds: {', '.join(sorted(egress))}.")
    inter, internet, price_source = egress[src_cloud]
    usd = inter if src_cloud == dst_cloud else internet
    scope = "same-continent" if continent(src) == continent(dst) else "other-continent"
    one_way, gbps, wan_source = wan[scope]
    return Transfer(src, dst, usd, one_way, gbps, f"egress: {price_source}; WAN ({scope}): {wan_source}")
