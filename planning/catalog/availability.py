"""Availability: default counts per (region, shape) and a validated loader for availability time series."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from planning.catalog.schema import Catalog, NodeConfig
from planning.errors import PlanningError, UnknownIdError

if TYPE_CHECKING:  # polars is imported where a series is read: the catalog itself needs none (CLI start-up)
    import polars as pl

MAX_SERIES_BYTES = 20_000_000
"""Largest availability series file accepted."""

SERIES_COLUMNS = ("timestamp", "region", "shape", "config_id", "nodes")


def shape_availability(catalog: Catalog, region_key: str, shape: str) -> int:
    """Default node count of one shape in one region.

    Instance types of one shape draw on the same physical GPUs, so the count is the maximum over the
    region's config rows of that shape, not their sum.

    Parameters
    ----------
    catalog:
        Loaded catalog.
    region_key, shape:
        ``"aws:us-east-2"`` and ``"2xL40S"``.

    Returns
    -------
    int
        Nodes available (0 when the region does not offer the shape or has no availability row).
    """
    counts = [
        catalog.availability[c.id].nodes
        for c in catalog.configs.values()
        if c.region_key == region_key and c.shape == shape and c.id in catalog.availability
    ]
    return max(counts, default=0)


def cheapest_configs(
    catalog: Catalog, pricing: str = "on_demand", include_anomalies: bool = True
) -> dict[tuple[str, str], NodeConfig]:
    """The cheapest config row for each (region_key, shape).

    Parameters
    ----------
    catalog:
        Loaded catalog.
    pricing:
        ``"on_demand"`` or ``"spot"`` (rows without a spot price are skipped for spot).
    include_anomalies:
        Whether rows flagged ``anomaly`` may be chosen.

    Returns
    -------
    dict
        ``{(region_key, shape): NodeConfig}``.

    Raises
    ------
    PlanningError
        Unknown pricing.
    """
    if pricing not in {"on_demand", "spot"}:
        raise PlanningError("pricing", f"unknown pricing {pricing!r}.", "use on_demand or spot.")
    best: dict[tuple[str, str], NodeConfig] = {}
    for cfg in catalog.configs.values():
        if cfg.quality == "anomaly" and not include_anomalies:
            continue
        price = cfg.price_on_demand if pricing == "on_demand" else cfg.price_spot
        if price is None:
            continue
        key = (cfg.region_key, cfg.shape)
        current = best.get(key)
        current_price = None
        if current is not None:
            current_price = current.price_on_demand if pricing == "on_demand" else current.price_spot
        if current_price is None or price < current_price:
            best[key] = cfg
    return best


def _fail(path: Path, problem: str, fix: str, column: str = "") -> PlanningError:
    field = f"{path.name}:{column}" if column else path.name
    return PlanningError(field, problem, fix)


def load_availability_series(path: str | Path, catalog: Catalog | None = None) -> pl.DataFrame:
    """Load a CSV time series of available nodes.

    The file has ``timestamp`` (ISO 8601 date-time, or a number of hours from the start), ``nodes``
    (integer >= 0), and either ``config_id`` (a catalog config) or both ``region`` (``cloud:region``) and
    ``shape`` (``"4xL4"``).

    Parameters
    ----------
    path:
        CSV file (at most 20 MB).
    catalog:
        Used to resolve ``config_id`` into region and shape and to check ids (default: the shipped catalog).

    Returns
    -------
    polars.DataFrame
        Columns ``timestamp`` (datetime, or float hours), ``region``, ``shape``, ``config_id`` (null when not
        given), ``nodes`` (Int64), sorted by timestamp.

    Raises
    ------
    PlanningError
        File missing/too large, missing columns, bad values (naming the line), unknown config ids.
    """
    import polars as pl

    path = Path(path)
    raw = _read_series_csv(path)
    nodes = _series_nodes(path, raw)
    timestamps = _series_timestamps(path, raw)
    if "config_id" in raw.columns:
        config_ids, regions, shapes = _places_by_config(path, raw, catalog)
    else:
        config_ids, regions, shapes = _places_by_region_shape(path, raw)
    frame = pl.DataFrame(
        {
            "timestamp": timestamps,
            "region": regions,
            "shape": shapes,
            "config_id": config_ids,
            "nodes": nodes,
        }
    )
    return frame.sort("timestamp", maintain_order=True)


def _read_series_csv(path: Path) -> pl.DataFrame:
    """The availability CSV as text columns, its size, header and row count checked."""
    import polars as pl

    if not path.is_file():
        raise _fail(path, "is not a file.", "pass the path of an availability CSV.")
    size = path.stat().st_size
    if size > MAX_SERIES_BYTES:
        raise _fail(
            path, f"is {size} bytes, above the {MAX_SERIES_BYTES} byte limit.", "aggregate or split it."
        )
    try:
        raw = pl.read_csv(path, infer_schema_length=0)  # all strings; validated below
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as exc:
        raise _fail(
            path, f"cannot be read as CSV ({exc}).", "write a header row and comma-separated values."
        ) from None
    columns = set(raw.columns)
    for required in ("timestamp", "nodes"):
        if required not in columns:
            raise _fail(
                path, f"missing column {required!r}.", "columns: timestamp, config_id or region+shape, nodes."
            )
    if "config_id" not in columns and not {"region", "shape"} <= columns:
        raise _fail(
            path, "needs config_id, or region and shape.", "add a config_id column or region and shape."
        )
    if raw.height == 0:
        raise _fail(path, "has no rows.", "add at least one row.")
    return raw


def _series_nodes(path: Path, raw: pl.DataFrame) -> pl.Series:
    """The ``nodes`` column as Int64, every value a whole number ≥ 0 (else the first bad line is named)."""
    import polars as pl

    nodes = raw["nodes"].str.strip_chars().cast(pl.Int64, strict=False)
    bad = raw.with_row_index("line", offset=2).filter(nodes.is_null() | (nodes < 0))
    if bad.height:
        line = bad["line"][0]
        raise _fail(
            path,
            f"line {line}: nodes {bad['nodes'][0]!r} is not an integer >= 0.",
            "write a whole number.",
            "nodes",
        )
    return nodes


def _series_timestamps(path: Path, raw: pl.DataFrame) -> pl.Series:
    """Hours from the start when every timestamp is a number, else ISO 8601 date-times in UTC."""
    import polars as pl

    stamps_text = raw["timestamp"].str.strip_chars()
    hours = stamps_text.cast(pl.Float64, strict=False)
    if hours.null_count() == 0:
        return hours
    timestamps = stamps_text.str.to_datetime(strict=False, time_zone="UTC")
    if timestamps.null_count():
        line = int(timestamps.is_null().arg_true()[0]) + 2
        raise _fail(
            path,
            f"line {line}: timestamp {stamps_text[line - 2]!r} is neither ISO 8601 nor a number of hours.",
            "write 2024-05-01T12:00:00 or hours such as 1.5 (the same form on every line).",
            "timestamp",
        )
    return timestamps


def _places_by_config(
    path: Path, raw: pl.DataFrame, catalog: Catalog | None
) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(config ids, regions, shapes) of rows naming a catalog ``config_id`` (unknown ids refused)."""
    cat = catalog
    if cat is None:
        from planning.catalog.load import load_catalog

        cat = load_catalog()
    config_ids = raw["config_id"].str.strip_chars()
    for cid in config_ids.unique().to_list():
        if cid not in cat.configs:
            raise UnknownIdError(f"{path.name}:config_id", str(cid), cat.configs)
    regions = config_ids.replace_strict({k: c.region_key for k, c in cat.configs.items()}, default=None)
    shapes = config_ids.replace_strict({k: c.shape for k, c in cat.configs.items()}, default=None)
    return config_ids, regions, shapes


def _places_by_region_shape(path: Path, raw: pl.DataFrame) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(null config ids, regions, shapes) of rows naming ``region`` and ``shape`` (their forms checked)."""
    import polars as pl

    config_ids = pl.Series("config_id", [None] * raw.height, dtype=pl.String)
    regions = raw["region"].str.strip_chars()
    shapes = raw["shape"].str.strip_chars()
    bad_region = ~regions.str.contains(r"^[a-z0-9-]+:[A-Za-z0-9-]+$")
    bad_shape = ~shapes.str.contains(r"^\d+x[A-Za-z0-9-]+$")
    for column, mask, fix in (
        ("region", bad_region, "write cloud:region such as aws:us-east-2."),
        ("shape", bad_shape, "write {count}x{gpu} such as 4xL4."),
    ):
        if mask.any():
            line = int(mask.arg_true()[0]) + 2
            raise _fail(path, f"line {line}: bad {column} {raw[column][line - 2]!r}.", fix, column)
    return config_ids, regions, shapes
