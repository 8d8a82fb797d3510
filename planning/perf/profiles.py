"""Measured profile tables (documented CSV format) that override the model where they have points."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from planning.catalog.schema import ModelSpec
from planning.errors import PlanningError, UnknownIdError, quote
from planning.perf.roofline import EngineCopy, layer_time, resolve_precision
from planning.safeio import read_text

if TYPE_CHECKING:
    from planning.catalog.schema import Catalog
    from planning.perf.model import PerfModel, Workload

MAX_PROFILE_BYTES = 5_000_000
REQUIRED_COLUMNS = ("model_id", "gpu_id", "count", "tp", "phase", "batch", "input_len", "context_len", "layers",
                    "time_ms", "source", "as_of")
OPTIONAL_COLUMNS = ("dtype",)


@dataclass(frozen=True)
class ProfilePoint:
    """One measured forward step.

    prefill: ``time_ms`` = prefill of ``batch`` prompts of ``input_len`` tokens through ``layers`` layers;
    decode: ``time_ms`` = one decode step of ``batch`` sequences with ``context_len`` cached tokens each.
    ``layers`` = 0 means the whole model (one engine step, overheads included).
    """

    model_id: str
    gpu_id: str
    count: int
    tp: int
    phase: str
    batch: int
    input_len: int
    context_len: int
    layers: int
    time_ms: float
    dtype: str
    source: str
    as_of: str


@dataclass(frozen=True)
class ProfileSet:
    """Validated profile points, grouped by (model, gpu, count, tp, phase)."""

    points: tuple[ProfilePoint, ...]
    path: str

    def fingerprint(self) -> str:
        return hashlib.sha256(repr(self.points).encode()).hexdigest()[:16]

    def select(self, model_id: str, gpu_id: str, count: int, tp: int, phase: str) -> list[ProfilePoint]:
        return [p for p in self.points if (p.model_id, p.gpu_id, p.count, p.tp, p.phase)
                == (model_id, gpu_id, count, tp, phase)]

    def correction(self, pm: PerfModel, model: ModelSpec, gpu_id: str, count: int, tp: int, phase: str,
                   wl: Workload, batches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Multiplicative correction of the model's layer times at ``batches`` from measured points.

        For each point the ratio measured / modelled (same batch, lengths, layers) is formed; the ratio is
        interpolated linearly in log(batch) and held constant beyond the measured range. A batch inside
        the measured range is reported as measured.

        Returns
        -------
        (factor, measured) arrays shaped like ``batches``.
        """
        gpu = pm.gpu(gpu_id)
        prec = resolve_precision(model, None, gpu)
        pts = [p for p in self.select(model.id, gpu_id, count, tp, phase) if p.dtype in ("", prec.name)]
        ones = np.ones(batches.shape)
        if not pts:
            return ones, np.zeros(batches.shape, dtype=bool)
        dev = pm.device(gpu_id)
        arch = pm._layer_arch(model)
        L = arch.layers
        nf = float(arch.full_in_window[-1])
        ratios: dict[int, list[float]] = {}
        for p in pts:
            q = p.input_len if phase == "prefill" else 1
            ctx = 0 if phase == "prefill" else p.context_len
            eng = EngineCopy(dev, arch, prec, tp)
            tf = float(layer_time(eng, p.batch, q, ctx, False, phase))
            ts = float(layer_time(eng, p.batch, q, ctx, True, phase)) if arch.window else tf
            per_layer = (nf * tf + (L - nf) * ts) / L
            layers = p.layers or L
            pred = layers * per_layer + (dev.cal.step_ms * 1e-3 if p.layers == 0 else 0.0)
            ratios.setdefault(p.batch, []).append(p.time_ms * 1e-3 / pred)
        xs = np.log(np.array(sorted(ratios), dtype=float))
        ys = np.array([math.exp(float(np.mean(np.log(ratios[b])))) for b in sorted(ratios)])
        lb = np.log(batches.astype(float))
        factor = np.interp(lb, xs, ys)
        measured = (lb >= xs[0] - 1e-9) & (lb <= xs[-1] + 1e-9)
        return factor, measured


MAX_PROFILE_ROWS = 100_000
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
# Largest accepted value per column, with the reason shown in the error.
_COLUMN_MAX = {
    "count": (64, "GPUs in one node"),
    "tp": (64, "tensor-parallel degree within one node"),
    "batch": (1_000_000, "requests in one batch"),
    "input_len": (10_000_000, "tokens in a prompt (above any context window)"),
    "context_len": (10_000_000, "cached tokens per sequence (above any context window)"),
    "layers": (1024, "layers of a model"),
    "time_ms": (1e7, "milliseconds for one step"),
}
DTYPES = ("", "bf16", "fp16", "fp8", "mxfp4")


def _field(name: str, row_no: int, column: str, value: str | None, kind: type, minimum: float = 0.0) -> float:
    where = f"{name}:{row_no}:{column}"
    text = (value or "").strip()
    if not _NUMBER.fullmatch(text):
        raise PlanningError(where, f"{quote(value)} is not a number.",
                            f"write {column} as a plain number with ASCII digits (row {row_no}, column {column}).")
    number = float(text)
    maximum, why = _COLUMN_MAX.get(column, (1e12, "a profile value"))
    if not math.isfinite(number) or number < minimum or number > maximum or (kind is int and number != int(number)):
        want = "a whole number" if kind is int else "a number"
        raise PlanningError(where, f"{quote(value)} is out of range.",
                            f"write {want} between {minimum:g} and {maximum:g} ({why}).")
    return number


def _text_cell(name: str, row_no: int, column: str, value: str | None, *, required: bool = True) -> str:
    text = (value or "").strip()
    if required and not text:
        raise PlanningError(f"{name}:{row_no}:{column}", "is empty.", f"fill in {column} (every row names its source).")
    if len(text) > 2000:
        raise PlanningError(f"{name}:{row_no}:{column}", f"is {len(text):,} characters long: {quote(text, 60)}.",
                            "shorten it to at most 2,000 characters.")
    return text


def load_profiles(path: Path | str, *, catalog: Catalog | None = None) -> ProfileSet:
    """Read and validate a measured-profile CSV (format in docs/perf-model.md and sample_profiles/README.md).

    Parameters
    ----------
    path:
        The CSV file (at most 5 MB, UTF-8; a BOM is allowed).
    catalog:
        Catalog whose model and GPU ids the rows must use (default: the shipped catalog).

    Returns
    -------
    ProfileSet.

    Raises
    ------
    PlanningError: a missing path, a directory, a file too large or not UTF-8 (Latin-1 is named with its line),
        missing/duplicate/unknown columns, ragged rows, non-numeric or out-of-range values, unknown phase or
        dtype, tp not dividing count, a time outside (0, 10^7) ms, or a model/GPU id not in the catalog (with the
        closest ids); each names the file, row and column.
    """
    path = Path(path)
    name = quote(path.name, 80, bare=True)
    text = read_text(path, field="profiles", max_bytes=MAX_PROFILE_BYTES, what="profile CSV")
    if catalog is None:
        from planning.catalog import load_catalog

        catalog = load_catalog()
    known_models, known_gpus = sorted(catalog.models), sorted(catalog.gpus)
    reader = csv.reader(io.StringIO(text, newline=""))
    points: list[ProfilePoint] = []
    try:
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise PlanningError(name, f"missing columns {missing}.", f"columns are {list(REQUIRED_COLUMNS)}.")
        allowed = set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS)
        unknown = [c for c in header if c not in allowed]
        if unknown:
            raise PlanningError(f"{name}:1", f"unknown column {quote(unknown[0], 60)}.",
                                f"use only {', '.join((*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS))}.")
        dup = next((c for c in header if header.count(c) > 1), None)
        if dup:
            raise PlanningError(f"{name}:1", f"column {quote(dup, 60)} appears twice.", "keep one of them.")
        for cells in reader:
            row_no = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(points) >= MAX_PROFILE_ROWS:
                raise PlanningError(name, f"has more than {MAX_PROFILE_ROWS:,} rows.", "keep the points you need.")
            if len(cells) != len(header):
                raise PlanningError(f"{name}:{row_no}", f"has {len(cells)} fields, the header has {len(header)}.",
                                    "give every row one value per column (quote values that contain commas).")
            points.append(_parse_row(name, row_no, dict(zip(header, cells, strict=True)), known_models, known_gpus))
    except csv.Error as exc:
        raise PlanningError(f"{name}:{reader.line_num}", f"is not valid CSV ({quote(str(exc), 120, bare=True)}).",
                            "fix the quoting on that line.") from None
    if not points:
        raise PlanningError(name, "has no rows.", "add at least one measured point.")
    return ProfileSet(points=tuple(points), path=str(path))


def _parse_row(name: str, row_no: int, row: dict[str, str], known_models: list[str],
               known_gpus: list[str]) -> ProfilePoint:
    phase = row["phase"].strip().lower()
    if phase not in ("prefill", "decode"):
        raise PlanningError(f"{name}:{row_no}:phase", f"{quote(row['phase'])} is not a phase.",
                            "use prefill or decode.")
    count = int(_field(name, row_no, "count", row["count"], int, 1))
    tp = int(_field(name, row_no, "tp", row["tp"], int, 1))
    if count % tp:
        raise PlanningError(f"{name}:{row_no}:tp", f"tp={tp} does not divide count={count}.",
                            "use a tp that divides the GPU count.")
    time_ms = _field(name, row_no, "time_ms", row["time_ms"], float, 0.0)
    if not 0 < time_ms < 1e7:
        raise PlanningError(f"{name}:{row_no}:time_ms", f"{time_ms} ms is out of range.",
                            "times are milliseconds in (0, 10^7).")
    layers_text = row["layers"].strip().lower()
    layers = 0 if layers_text in ("", "all") else int(_field(name, row_no, "layers", layers_text, int, 1))
    dtype = (row.get("dtype") or "").strip().lower()
    if dtype not in DTYPES:
        raise PlanningError(f"{name}:{row_no}:dtype", f"{quote(row.get('dtype'))} is not a dtype.",
                            f"use one of {', '.join(d for d in DTYPES if d)} or leave it empty.")
    point = ProfilePoint(
        model_id=_text_cell(name, row_no, "model_id", row["model_id"]),
        gpu_id=_text_cell(name, row_no, "gpu_id", row["gpu_id"]), count=count, tp=tp, phase=phase,
        batch=int(_field(name, row_no, "batch", row["batch"], int, 1)),
        input_len=int(_field(name, row_no, "input_len", row["input_len"], int, 1 if phase == "prefill" else 0)),
        context_len=int(_field(name, row_no, "context_len", row["context_len"] or "0", int, 0)),
        layers=layers, time_ms=time_ms, dtype=dtype,
        source=_text_cell(name, row_no, "source", row["source"]),
        as_of=_text_cell(name, row_no, "as_of", row["as_of"]),
    )
    if point.model_id not in known_models:
        raise UnknownIdError(f"{name}:{row_no}:model_id", point.model_id, known_models)
    if point.gpu_id not in known_gpus:
        raise UnknownIdError(f"{name}:{row_no}:gpu_id", point.gpu_id, known_gpus)
    return point
