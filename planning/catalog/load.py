"""Load and validate the shipped catalog (``data/``) with optional user overrides into a frozen ``Catalog``."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from planning.catalog.models import model_from_hf_config
from planning.catalog.schema import (
    GPU,
    Availability,
    Catalog,
    EgressPrice,
    ModelSpec,
    NodeConfig,
    Region,
    ReservationTerms,
    SLOPreset,
    SpotInterruption,
    WanLink,
)
from planning.errors import PlanningError, quote
from planning.safeio import load_yaml, read_text

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
"""Shipped catalog data (the repository's ``data/`` folder)."""

MAX_FILE_BYTES = 5_000_000
"""Largest catalog file accepted (shipped ones are a few tens of kB)."""

QUALITY_FLAGS = ("ok", "anomaly", "estimated", "hypothetical")
PAYMENTS = ("no_upfront", "partial_upfront", "all_upfront")
FACT_QUALITY = ("published", "typical", "estimated", "assumed")  # how firm a restated price or rate is
PARAMS_TOLERANCE = 0.03
"""Computed parameter counts must be within 3 % of the published ones."""

FILES = {
    "gpus": "gpus.csv",
    "regions": "regions.csv",
    "configs": "node_configs.csv",
    "slo_presets": "slo_presets.csv",
    "availability": "availability.csv",
    "models": "models.yaml",
}


# --------------------------------------------------------------------------------------------------------------
# Cell parsers: each returns the value or raises ValueError with the reason and the expected form.
# --------------------------------------------------------------------------------------------------------------
MAX_ID = 100  # characters of an id or key: longer is a broken file, not a name


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("is empty; give a value")
    return raw.strip()


def _ident(raw: str) -> str:
    value = _text(raw)
    if len(value) > MAX_ID:
        raise ValueError(f"is {len(value):,} characters long ({quote(value)}); keep an id under {MAX_ID}")
    return value


def _opt_text(raw: str) -> str:
    return raw.strip()


def _number(raw: str, *, minimum: float = 0.0, strict: bool = False) -> float:
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        raise ValueError(f"{quote(raw)} is not a number; write a decimal number such as 1.5") from None
    if not math.isfinite(value):
        raise ValueError(f"{quote(raw)} is not finite; write a finite number")
    if value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ValueError(f"{value:g} is out of range; it must be {bound}")
    return value


def _positive(raw: str) -> float:
    return _number(raw, strict=True)


def _non_negative(raw: str) -> float:
    return _number(raw)


def _fraction(raw: str) -> float:
    value = _number(raw)
    if value > 1:
        raise ValueError(f"{value:g} is not a fraction; write a number in 0..1 (0.3 for 30 %)")
    return value


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse_optional(raw: str) -> Any:
        return None if raw.strip() == "" else parse(raw)

    return parse_optional


def _int_range(lo: int, hi: int) -> Callable[[str], int]:
    def parse_int(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"{quote(raw)} is not an integer; write a whole number {lo}..{hi}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} is not in {lo}..{hi}; use a value in that range")
        return value

    return parse_int


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse_choice(raw: str) -> str:
        value = raw.strip()
        if value not in options:
            raise ValueError(f"{value!r} is not one of {', '.join(options)}; use one of them")
        return value

    return parse_choice


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"true", "1", "yes"}:
        return True
    if value in {"false", "0", "no"}:
        return False
    raise ValueError(f"{raw!r} is not a boolean; write true or false")


def _date(raw: str) -> str:
    value = raw.strip()
    parts = value.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or len(parts[0]) != 4:
        raise ValueError(f"{value!r} is not a date; write YYYY-MM-DD")
    return value


@dataclass(frozen=True)
class _Table:
    """How one CSV file maps onto one record type."""

    record: type
    columns: Mapping[str, Callable[[str], Any]]
    key: Callable[[dict[str, Any]], str]
    optional: frozenset[str] = frozenset()  # columns a file may leave out (read as empty cells)


_TABLES: dict[str, _Table] = {
    "gpus": _Table(
        GPU,
        {
            "id": _ident,
            "memory_gb": _positive,
            "hbm_bw_gbps": _positive,
            "bf16_tflops": _positive,
            "fp8_tflops": _optional(_positive),
            "intra_link": _text,
            "intra_link_gbps": _positive,
            "generation": _text,
            "source": _text,
            "as_of": _date,
            "memory_mib": _optional(_positive),
            "memory_source": _opt_text,
            "memory_as_of": lambda raw: _date(raw) if raw.strip() else "",
            "p2p": _optional(_boolean),
            "p2p_source": _opt_text,
        },
        lambda r: r["id"],
        frozenset({"memory_mib", "memory_source", "memory_as_of", "p2p", "p2p_source"}),
    ),
    "regions": _Table(
        Region,
        {
            "key": _ident,
            "cloud": _text,
            "region": _text,
            "display_name": _text,
            "source": _text,
            "as_of": _date,
        },
        lambda r: r["key"],
    ),
    "configs": _Table(
        NodeConfig,
        {
            "id": _ident,
            "cloud": _text,
            "region": _text,
            "instance_type": _text,
            "gpu_id": _text,
            "gpu_count": _int_range(1, 16),
            "vcpus": _optional(_int_range(1, 10_000)),
            "memory_gib": _optional(_positive),
            "price_on_demand": _positive,
            "price_spot": _optional(_positive),
            "network_gbps": _optional(_positive),
            "quality": _choice(QUALITY_FLAGS),
            "notes": _opt_text,
            "source": _text,
            "as_of": _date,
        },
        lambda r: r["id"],
    ),
    "slo_presets": _Table(
        SLOPreset,
        {
            "id": _ident,
            "model_id": _optional(_text),
            "prefill_ms": _optional(_positive),
            "decode_ms": _positive,
            "source": _text,
            "as_of": _date,
        },
        lambda r: r["id"],
    ),
    "availability": _Table(
        Availability,
        {
            "config_id": _text,
            "nodes": _int_range(0, 100_000),
            "illustrative": _boolean,
            "source": _text,
            "as_of": _date,
        },
        lambda r: r["config_id"],
    ),
    # read by planning.transfer (cross-region KV transfer), not layered into the Catalog
    "egress": _Table(
        EgressPrice,
        {
            "cloud": _ident,
            "inter_region_usd_per_gb": _non_negative,
            "internet_usd_per_gb": _non_negative,
            "source": _text,
            "as_of": _date,
        },
        lambda r: r["cloud"],
    ),
    "wan": _Table(
        WanLink,
        {
            "scope": _ident,
            "one_way_ms": _non_negative,
            "gbps": _positive,
            "quality": _choice(QUALITY_FLAGS),
            "source": _text,
            "as_of": _date,
        },
        lambda r: r["scope"],
    ),
    # read by planning.pools (commitments and spot risk), not layered into the Catalog
    "reservations": _Table(
        ReservationTerms,
        {
            "cloud": _ident,
            "term_years": _int_range(1, 10),
            "payment": _choice(PAYMENTS),
            "discount": _fraction,
            "upfront_share": _fraction,
            "quality": _choice(FACT_QUALITY),
            "source": _text,
            "as_of": _date,
        },
        lambda r: f"{r['cloud']}:{r['term_years']}:{r['payment']}",
    ),
    "spot_interruptions": _Table(
        SpotInterruption,
        {
            "cloud": _ident,
            "region": _ident,
            "gpu": _ident,
            "per_month": _fraction,
            "band": _text,
            "quality": _choice(FACT_QUALITY),
            "source": _text,
            "as_of": _date,
        },
        lambda r: f"{r['cloud']}:{r['region']}:{r['gpu']}",
    ),
}


def _read_text(path: Path) -> str:
    # bounded, UTF-8 named with line/column, BOM dropped; overrides folders come from users
    return read_text(path, field=path.name, max_bytes=MAX_FILE_BYTES, what="catalog file")


def read_table(path: Path, kind: str) -> dict[str, Any]:
    """Read one catalog CSV into records keyed by id, validating every cell.

    Parameters
    ----------
    path:
        CSV file with a header row.
    kind:
        One of ``gpus``, ``regions``, ``configs``, ``slo_presets``, ``availability``, ``egress``, ``wan``, ``reservations``, ``spot_interruptions``.

    Returns
    -------
    dict
        Records (frozen dataclasses) by id, in file order.

    Raises
    ------
    PlanningError
        Missing column, bad cell (naming file, line and column) or duplicate id.
    """
    table = _TABLES[kind]
    reader = csv.DictReader(io.StringIO(_read_text(path)))
    header = reader.fieldnames or []
    missing = [c for c in table.columns if c not in header and c not in table.optional]
    if missing:
        raise PlanningError(
            f"{path.name}:header",
            f"missing column(s) {', '.join(missing)}.",
            f"the header must contain: {','.join(table.columns)}.",
        )
    records: dict[str, Any] = {}
    for line, row in enumerate(reader, start=2):
        if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
            continue  # blank line
        if None in row:
            raise PlanningError(
                f"{path.name}:line {line}",
                f"has more cells than the header's {len(header)} columns.",
                "quote cells that contain commas.",
            )
        values: dict[str, Any] = {}
        for column, parse in table.columns.items():
            try:
                values[column] = parse(row.get(column) or "")
            except ValueError as exc:
                raise PlanningError(f"{path.name}:line {line}:{column}", f"{exc}.") from None
        if kind == "gpus":
            _check_gpu_memory(values, path, line)
        key = table.key(values)
        if key in records:
            raise PlanningError(
                f"{path.name}:line {line}:{next(iter(table.columns))}",
                f"duplicate id {key!r}.",
                "give every row a unique id (to replace a shipped row use an overrides file).",
            )
        records[key] = table.record(**values)
    return records


def _check_gpu_memory(values: dict[str, Any], path: Path, line: int) -> None:
    """A GPU row's driver-reported memory: with a reading, its source and date; without one, the marketed size is
    read as 10^9 bytes (conservative) and the row says so. ``p2p`` left empty means peer-to-peer is available."""
    if values["p2p"] is None:
        values["p2p"] = True
    if values["memory_mib"] is None:
        values["memory_source"] = values["memory_source"] or "derived: memory_gb read as 10^9 bytes (no driver reading)"
        return
    mib, gb = values["memory_mib"], values["memory_gb"]
    if not 0.8 * gb * 1e9 <= mib * 2**20 <= 1.2 * gb * 2**30:
        raise PlanningError(f"{path.name}:line {line}:memory_mib",
                            f"{mib:g} MiB does not match the marketed {gb:g} GB.",
                            "give the total nvidia-smi reports, in MiB (e.g. 81559 for an 80 GB H100).")
    for column in ("memory_source", "memory_as_of"):
        if not values[column]:
            raise PlanningError(f"{path.name}:line {line}:{column}", "is empty although memory_mib is given.",
                                "say where the driver total was read and when (YYYY-MM-DD).")


def read_models(path: Path) -> dict[str, ModelSpec]:
    """Read ``models.yaml``: a list of models, each with Hugging Face ``config`` keys and provenance.

    Parameters
    ----------
    path:
        YAML file (see ``data/README.md``).

    Returns
    -------
    dict[str, ModelSpec]
        Models by id with computed parameter counts.

    Raises
    ------
    PlanningError
        Bad structure, missing keys, or computed parameters more than 3 % from the published counts.
    """
    entries = load_yaml(_read_text(path), field=path.name, origin=path.name)
    if not isinstance(entries, list):
        raise PlanningError(path.name, "must be a list of models.", "start each model with `- id: ...`.")
    models: dict[str, ModelSpec] = {}
    for index, entry in enumerate(entries):
        where = f"{path.name}:models[{index}]"
        if not isinstance(entry, dict):
            raise PlanningError(where, "is not a mapping.", "write `- id: ...` with keys below it.")
        for key in ("id", "config", "source", "as_of"):
            if not entry.get(key):
                raise PlanningError(f"{where}.{key}", "is missing.", f"add `{key}:` to the model entry.")
        model_id = str(entry["id"])
        if model_id in models:
            raise PlanningError(f"{where}.id", f"duplicate id {model_id!r}.", "give every model a unique id.")
        try:
            _date(str(entry["as_of"]))
        except ValueError as exc:
            raise PlanningError(f"{where}.as_of", f"{exc}.") from None
        spec = model_from_hf_config(
            entry["config"],
            model_id,
            display_name=entry.get("display_name"),
            hf_repo=str(entry.get("hf_repo", "")),
            source=str(entry["source"]),
            as_of=str(entry["as_of"]),
            notes=str(entry.get("notes", "")),
        )
        _check_published(spec, entry.get("published_params") or {}, where)
        models[model_id] = spec
    return models


def _check_published(spec: ModelSpec, published: Mapping[str, Any], where: str) -> None:
    for name, computed in (("total", spec.params_total), ("active", spec.params_active)):
        raw = published.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) if not isinstance(raw, bool) else math.nan
        except (TypeError, ValueError, OverflowError):
            value = math.nan
        if not (0 < value < 1e15):
            raise PlanningError(f"{where}.published_params.{name}", f"{quote(raw)} is not a parameter count.",
                                "write the count as a number, e.g. 8.03e9, or leave it out.")
        if abs(computed - value) > PARAMS_TOLERANCE * value:
            raise PlanningError(
                f"{where}.published_params.{name}",
                f"the architecture gives {computed / 1e9:.2f}B parameters, {value / 1e9:.2f}B published.",
                "check the config keys (layers, sizes, experts) against the model's config.json.",
            )


# --------------------------------------------------------------------------------------------------------------
# Cross-file checks
# --------------------------------------------------------------------------------------------------------------
def _check_configs(
    configs: Mapping[str, NodeConfig], gpus: Mapping[str, GPU], regions: Mapping[str, Region]
) -> None:
    from planning.errors import UnknownIdError

    for cfg in configs.values():
        where = f"{FILES['configs']}:{cfg.id}"
        if cfg.gpu_id not in gpus:
            raise UnknownIdError(f"{where}:gpu_id", cfg.gpu_id, gpus)
        if regions and cfg.region_key not in regions:
            raise UnknownIdError(f"{where}:region", cfg.region_key, regions)
        expected = f"{cfg.cloud}:{cfg.region}:{cfg.instance_type}"
        if cfg.id != expected:
            raise PlanningError(
                f"{where}:id",
                f"id must be cloud:region:instance_type, here {expected!r}.",
                f"rename the row to {expected!r}.",
            )
        if cfg.price_spot is not None and cfg.price_spot > cfg.price_on_demand * 1.5 and cfg.quality == "ok":
            raise PlanningError(
                f"{where}:price_spot",
                f"spot ${cfg.price_spot}/h is far above on-demand ${cfg.price_on_demand}/h.",
                "check the prices or flag the row quality=anomaly.",
            )


def _check_regions(regions: Mapping[str, Region]) -> None:
    for region in regions.values():
        if region.key != f"{region.cloud}:{region.region}":
            raise PlanningError(
                f"{FILES['regions']}:{region.key}:key",
                "key must be cloud:region.",
                f"rename it to {region.cloud}:{region.region!r}.",
            )


def _check_slo(slos: Mapping[str, SLOPreset], models: Mapping[str, ModelSpec]) -> None:
    from planning.errors import UnknownIdError

    for slo in slos.values():
        if slo.model_id is not None and slo.model_id not in models:
            raise UnknownIdError(f"{FILES['slo_presets']}:{slo.id}:model_id", slo.model_id, models)


def _check_availability(avail: Mapping[str, Availability], configs: Mapping[str, NodeConfig]) -> None:
    from planning.errors import UnknownIdError

    for entry in avail.values():
        if entry.config_id not in configs:
            raise UnknownIdError(
                f"{FILES['availability']}:{entry.config_id}:config_id", entry.config_id, configs
            )


# --------------------------------------------------------------------------------------------------------------
# Loading with overrides
# --------------------------------------------------------------------------------------------------------------
def _load_kind(kind: str, data_dir: Path, overrides_dir: Path | None, overridden: set[str]) -> dict[str, Any]:
    name = FILES[kind]
    path = data_dir / name
    reader = read_models if kind == "models" else (lambda p: read_table(p, kind))
    records: dict[str, Any] = reader(path) if path.exists() else {}
    if overrides_dir is not None and (overrides_dir / name).exists():
        extra = reader(overrides_dir / name)
        overridden.update(extra)  # replaced and added ids alike
        records.update(extra)
    return records


def _fingerprint(*dirs: Path | None) -> tuple[tuple[str, int, int], ...]:
    stamp: list[tuple[str, int, int]] = []
    for folder in dirs:
        if folder is None:
            continue
        for name in FILES.values():
            path = folder / name
            if path.exists():
                stat = path.stat()
                stamp.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stamp)


def load_catalog(data_dir: Path | None = None, overrides_dir: Path | None = None) -> Catalog:
    """Load, validate and index the catalog; cached until a file changes.

    Parameters
    ----------
    data_dir:
        Folder with the shipped files (default: the repository's ``data/``).
    overrides_dir:
        Optional folder with user files of the same names and columns; their rows replace shipped rows with
        the same id or add new ones. Shipped files are never edited.

    Returns
    -------
    Catalog
        Frozen records by id; ``overridden`` holds the ids that came from ``overrides_dir``.

    Raises
    ------
    PlanningError
        A file, row or cross reference is invalid; the message names file, line, column and the fix.
    """
    data = Path(data_dir) if data_dir is not None else DATA_DIR
    overrides = Path(overrides_dir) if overrides_dir is not None else None
    if not (data / FILES["gpus"]).exists():
        raise PlanningError(
            "data_dir", f"{data} has no {FILES['gpus']}.", "point data_dir at the catalog folder."
        )
    if overrides is not None and not overrides.is_dir():
        raise PlanningError(
            "overrides_dir", f"{overrides} is not a folder.", "create it or pass an existing one."
        )
    return _load_cached(data, overrides, _fingerprint(data, overrides))


@lru_cache(maxsize=8)
def _load_cached(data: Path, overrides: Path | None, _stamp: tuple[tuple[str, int, int], ...]) -> Catalog:
    overridden: set[str] = set()
    gpus = _load_kind("gpus", data, overrides, overridden)
    regions = _load_kind("regions", data, overrides, overridden)
    configs = _load_kind("configs", data, overrides, overridden)
    models = _load_kind("models", data, overrides, overridden)
    slos = _load_kind("slo_presets", data, overrides, overridden)
    availability = _load_kind("availability", data, overrides, overridden)
    _check_regions(regions)
    _check_configs(configs, gpus, regions)
    _check_slo(slos, models)
    _check_availability(availability, configs)
    return Catalog(
        gpus=gpus,
        configs=configs,
        regions=regions,
        models=models,
        slo_presets=slos,
        availability=availability,
        overridden=frozenset(overridden),
    )
