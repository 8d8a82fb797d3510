"""Prices as fresh as the user's SkyPilot: the catalog CSVs SkyPilot keeps on its users' machines
(``~/.sky/catalogs/<version>/<cloud>/vms.csv``) into a user price layer, ``$PLANNING_HOME/catalog/node_configs.csv``,
which the catalog loads over the shipped rows (``load_catalog(overrides_dir=...)``).

Only prices move: a shipped node config ``cloud:region:instance_type`` takes the on-demand ``Price`` and the lowest
``SpotPrice`` over the availability zones of the same instance type in the same region, with ``as_of`` = the file's
date and ``source`` naming the file. Rows the shipped catalog builds by hand (GCP VMs whose GPUs are priced apart,
Runpod's one "us" region, estimated hosts) are left as shipped; the answer says how many.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from planning.errors import PlanningError, quote
from planning.safeio import read_text

MAX_VMS_BYTES = 64 * 1024 * 1024
MAX_FILES = 32
STALE_DAYS = 30
MAX_PRICE = 1000.0  # $/h of one node
LAYER_NAME = "node_configs.csv"
VMS_COLUMNS = ("InstanceType", "Price", "SpotPrice", "Region")


def price_layer_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """``<home>/catalog``; home = ``$PLANNING_HOME`` or ``~/.cache/planning``."""
    base = Path(home) if home is not None else Path(os.environ.get("PLANNING_HOME") or Path.home() / ".cache" / "planning")
    return base.expanduser() / "catalog"


def user_overrides() -> Path | None:
    """The user's price layer folder when it holds a file, else None (what ``default_context`` loads over data/)."""
    folder = price_layer_dir()
    return folder if (folder / LAYER_NAME).is_file() else None


@dataclass(frozen=True)
class PriceRefresh:
    """What a refresh read: the layer's rows, counts, and warnings (stale files, clouds not refreshed)."""

    rows: tuple[dict[str, str], ...]
    changed: int
    unchanged: int
    kept: int  # shipped rows of the refreshed clouds the files do not price directly
    warnings: tuple[str, ...]


def _price(text: str, where: str) -> float | None:
    if not text.strip():
        return None
    try:
        v = float(text)
    except ValueError:
        raise PlanningError(where, f"{quote(text)} is not a price.", "use SkyPilot's catalog file as written.") from None
    if not (math.isfinite(v) and 0 < v <= MAX_PRICE):
        raise PlanningError(where, f"{quote(text)} is not a price in (0, {MAX_PRICE:g}] $/h.",
                            "use SkyPilot's catalog file as written (fetch it again with `sky check`).")
    return v


def read_vms(path: Path) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(region, instance type) → (on-demand, lowest spot over zones) of one SkyPilot ``vms.csv``.

    Raises
    ------
    PlanningError: an oversized or unreadable file, a missing column, a price out of range.
    """
    text = read_text(path, field=str(path), max_bytes=MAX_VMS_BYTES, what="SkyPilot catalog")
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in VMS_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise PlanningError(f"{path.name}.header", f"lacks column {missing[0]!r}.",
                            "give SkyPilot's catalog folder (~/.sky/catalogs/<version>), whose <cloud>/vms.csv "
                            "files have InstanceType, Price, SpotPrice and Region.")
    out: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for i, row in enumerate(reader, start=2):
        key = (row["Region"] or "", row["InstanceType"] or "")
        od = _price(row["Price"] or "", f"{path.name}:{i}.Price")
        spot = _price(row["SpotPrice"] or "", f"{path.name}:{i}.SpotPrice")
        old_od, old_spot = out.get(key, (None, None))
        out[key] = (od if old_od is None else old_od if od is None else min(od, old_od),
                    spot if old_spot is None else old_spot if spot is None else min(spot, old_spot))
    return out


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def refresh_rows(shipped: list[dict[str, str]], catalogs: Mapping[str, Path],
                 today: dt.date | None = None) -> PriceRefresh:
    """The price layer of ``shipped`` node-config rows under the ``catalogs`` (cloud → vms.csv)."""
    today = today or dt.datetime.now(dt.UTC).date()
    rows: list[dict[str, str]] = []
    changed = unchanged = kept = 0
    warnings: list[str] = []
    for cloud, path in sorted(catalogs.items()):
        as_of = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date()
        age = (today - as_of).days
        if age > STALE_DAYS:
            warnings.append(f"{cloud}: {path} is {age} days old (as of {as_of}); run `sky check` or "
                            "`sky show-gpus` to refresh SkyPilot's catalog, then refresh again.")
        prices = read_vms(path)
        for row in (r for r in shipped if r["cloud"] == cloud):
            od, spot = prices.get((row["region"], row["instance_type"]), (None, None))
            if od is None:
                kept += 1
                continue
            new = {**row, "price_on_demand": _fmt(od), "price_spot": _fmt(spot), "as_of": as_of.isoformat(),
                   "source": f"SkyPilot catalog {path} (user price layer, planning prices refresh)"}
            same = float(row["price_on_demand"]) == od and (row["price_spot"] or None) == (_fmt(spot) or None)
            unchanged += same
            changed += not same
            rows.append(new)
    return PriceRefresh(tuple(rows), changed, unchanged, kept, tuple(warnings))


def find_catalogs(folder: Path) -> dict[str, Path]:
    """cloud → ``vms.csv`` under ``folder`` (``~/.sky/catalogs/<version>`` or one cloud's folder).

    Raises
    ------
    PlanningError: no ``vms.csv`` found, or more than ``MAX_FILES``.
    """
    if not folder.is_dir():
        raise PlanningError("--skypilot-catalog", f"{folder} is not a folder.",
                            "give SkyPilot's catalog folder, e.g. ~/.sky/catalogs/v8.")
    found = sorted(folder.glob("*/vms.csv")) or ([folder / "vms.csv"] if (folder / "vms.csv").is_file() else [])
    if not found:
        raise PlanningError("--skypilot-catalog", f"{folder} holds no <cloud>/vms.csv.",
                            "give SkyPilot's catalog folder, e.g. ~/.sky/catalogs/v8 (run `sky check` first).")
    if len(found) > MAX_FILES:
        raise PlanningError("--skypilot-catalog", f"{folder} holds {len(found)} vms.csv files.",
                            f"give one catalog version's folder (at most {MAX_FILES} clouds).")
    return {p.parent.name.lower(): p for p in found}


def write_layer(refresh: PriceRefresh, columns: list[str], home: str | os.PathLike[str] | None = None) -> Path:
    """Write the layer atomically (temp file in the folder, fsync, rename); returns its path."""
    folder = price_layer_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(refresh.rows)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".node_configs.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(buf.getvalue())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / LAYER_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return folder / LAYER_NAME


def refresh_prices(folder: str | os.PathLike[str], home: str | os.PathLike[str] | None = None,
                   data_dir: Path | None = None, today: dt.date | None = None) -> tuple[PriceRefresh, Path]:
    """Read SkyPilot's catalog under ``folder`` into the user price layer; returns what was read and the layer."""
    from planning.catalog.load import DATA_DIR

    shipped_path = (data_dir or DATA_DIR) / LAYER_NAME
    with shipped_path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        shipped = list(reader)
        columns = list(reader.fieldnames or [])
    refresh = refresh_rows(shipped, find_catalogs(Path(folder).expanduser()), today)
    if not refresh.rows:
        raise PlanningError("--skypilot-catalog", "no shipped node config matches a row of these files.",
                            "give SkyPilot's catalog folder of the clouds the catalog covers (aws, azure, lambda, …).")
    return refresh, write_layer(refresh, columns, home)


def price_age_days(as_of: str, today: dt.date) -> int | None:
    """Days from a price's ``as_of`` (ISO date) to ``today``; None when it has no date (a scenario's own offer)."""
    try:
        return (today - dt.date.fromisoformat(str(as_of)[:10])).days
    except ValueError:
        return None


def price_age_text(as_of: str, today: dt.date) -> str:
    """``as_of`` with its age, flagged when older than :data:`STALE_DAYS` (``2026-10-01 (58 days, stale)``)."""
    days = price_age_days(as_of, today)
    if days is None:
        return as_of or "—"
    return f"{as_of} ({days} day{'' if days == 1 else 's'}{', stale' if days > STALE_DAYS else ''})"


def stale_price_warning(as_ofs: Iterable[str], today: dt.date) -> str:
    """One warning when any of the prices dated ``as_ofs`` is older than :data:`STALE_DAYS` ('' when none is)."""
    ages = [d for a in as_ofs if (d := price_age_days(a, today)) is not None]
    old = [d for d in ages if d > STALE_DAYS]
    if not old:
        return ""
    return (f"{len(old)} of {len(ages)} prices are older than {STALE_DAYS} days (the oldest {max(old)} days): "
            "prices move; refresh them with `planning prices refresh --skypilot-catalog ~/.sky/catalogs/v8` or "
            "check the providers' price pages before you rent.")
