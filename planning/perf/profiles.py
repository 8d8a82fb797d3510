"""Measured profile tables (documented CSV format) that override the model where they have points."""

from __future__ import annotations

import csv
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from planning.catalog.schema import ModelSpec
from planning.errors import PlanningError
from planning.perf.roofline import layer_time, resolve_precision

if TYPE_CHECKING:
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
            tf = float(layer_time(dev, arch, prec, tp, p.batch, q, ctx, False, phase))
            ts = float(layer_time(dev, arch, prec, tp, p.batch, q, ctx, True, phase)) if arch.window else tf
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


def _field(path: Path, row_no: int, column: str, value: str, kind: type, minimum: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlanningError(f"{path.name}:{row_no}:{column}", f"{value!r} is not a number.",
                            f"write {column} as a number.") from None
    if not math.isfinite(number) or number < minimum or (kind is int and number != int(number)):
        want = "a whole number" if kind is int else "a number"
        raise PlanningError(f"{path.name}:{row_no}:{column}", f"{value!r} is out of range.",
                            f"write {want} >= {minimum:g}.")
    return number


def load_profiles(path: Path | str) -> ProfileSet:
    """Read and validate a measured-profile CSV (format in docs/perf-model.md and sample_profiles/README.md).

    Parameters
    ----------
    path: the CSV file (at most 5 MB).

    Returns
    -------
    ProfileSet.

    Raises
    ------
    PlanningError: file too large, missing columns, non-numeric or out-of-range values, unknown phase,
        tp not dividing count, or a time outside (0, 10^7) ms; each names the file, row and column.
    FileNotFoundError: when the file does not exist.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_PROFILE_BYTES:
        raise PlanningError(str(path), f"is {size / 1e6:.1f} MB, above the {MAX_PROFILE_BYTES / 1e6:.0f} MB limit.",
                            "keep only the points you need (a few per batch size).")
    points: list[ProfilePoint] = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise PlanningError(path.name, f"missing columns {missing}.", f"columns are {list(REQUIRED_COLUMNS)}.")
        for row_no, row in enumerate(reader, start=2):
            phase = row["phase"].strip().lower()
            if phase not in ("prefill", "decode"):
                raise PlanningError(f"{path.name}:{row_no}:phase", f"{row['phase']!r} is not a phase.",
                                    "use prefill or decode.")
            count = int(_field(path, row_no, "count", row["count"], int, 1))
            tp = int(_field(path, row_no, "tp", row["tp"], int, 1))
            if count % tp:
                raise PlanningError(f"{path.name}:{row_no}:tp", f"tp={tp} does not divide count={count}.",
                                    "use a tp that divides the GPU count.")
            time_ms = _field(path, row_no, "time_ms", row["time_ms"], float, 0.0)
            if not 0 < time_ms < 1e7:
                raise PlanningError(f"{path.name}:{row_no}:time_ms", f"{time_ms} ms is out of range.",
                                    "times are milliseconds in (0, 10^7).")
            layers_text = row["layers"].strip().lower()
            layers = 0 if layers_text in ("", "all") else int(_field(path, row_no, "layers", layers_text, int, 1))
            points.append(ProfilePoint(
                model_id=row["model_id"].strip(), gpu_id=row["gpu_id"].strip(), count=count, tp=tp, phase=phase,
                batch=int(_field(path, row_no, "batch", row["batch"], int, 1)),
                input_len=int(_field(path, row_no, "input_len", row["input_len"], int, 1 if phase == "prefill" else 0)),
                context_len=int(_field(path, row_no, "context_len", row["context_len"] or "0", int, 0)),
                layers=layers, time_ms=time_ms, dtype=(row.get("dtype") or "").strip().lower(),
                source=row["source"].strip(), as_of=row["as_of"].strip(),
            ))
    if not points:
        raise PlanningError(path.name, "has no rows.", "add at least one measured point.")
    return ProfileSet(points=tuple(points), path=str(path))
