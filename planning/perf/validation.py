"""The shipped validation set (data/validation/*.csv): loader, model prediction per row, fidelity metrics, bands.

Every row is one published end-to-end number (schema in data/validation/README.md). ``predict`` maps a row to the
model quantity it measures:
- ``ttft_ms`` with ``batch`` (or concurrency 1): prefill of the batch (``PerfEstimate.prefill_ms``);
  with a concurrency > 1: the closed-loop TTFT of ``PerfModel.serving(concurrency=...)``;
- ``tpot_ms`` / ``itl_ms`` / ``decode_step_ms``: decode step at batch 1 or the closed-loop TPOT at the concurrency;
- ``output_tokens_per_s`` / ``requests_per_s``: with ``batch`` a static batch (batch x output / (prefill + output x
  decode step)), with ``concurrency`` the closed loop, else the open-loop serving peak.
These data are never used to fit anything (see data/validation/README.md for how they stay disjoint from the fit).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planning.errors import PlanningError
from planning.perf.bands import ANY, QUANTITY_KIND, BandRow, dtype_class, gpu_class
from planning.perf.engines import BenchRun, published_engine
from planning.perf.model import PerfModel

DEFAULT_VALIDATION_DIR = Path(__file__).resolve().parents[2] / "data" / "validation"
COLUMNS = ("id,source,reference,engine,engine_version,model,gpu,n_gpus,tp,pp,dtype,input_len,output_len,concurrency,"
           "batch,quantity,value,unit,notes").split(",")
QUANTITIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms", "prefill_ms", "decode_step_ms", "output_tokens_per_s",
              "total_tokens_per_s", "requests_per_s")
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class ValidationPoint:
    """One published measurement."""

    id: str
    source: str
    reference: str
    engine: str
    engine_version: str
    model: str
    gpu: str
    n_gpus: int
    tp: int
    pp: int
    dtype: str
    input_len: int
    output_len: int
    concurrency: int | None
    batch: int | None
    quantity: str
    value: float
    unit: str
    notes: str
    file: str

    @property
    def kind(self) -> str:
        """Quantity kind for bands and reports: ttft, tpot or throughput."""
        return QUANTITY_KIND[self.quantity]

    @property
    def setting(self) -> tuple[object, ...]:
        """Everything but the hardware (GPU, count, dtype it runs): same setting on different GPUs = an ordering pair."""
        return (self.source, self.model, self.input_len, self.output_len, self.concurrency, self.batch,
                self.quantity)


def _int(text: str, path: Path, row: int, col: str, optional: bool = False) -> int | None:
    if text.strip() == "" and optional:
        return None
    try:
        value = int(float(text))
    except ValueError:
        raise PlanningError(f"{path.name}:{row}:{col}", f"{text!r} is not a whole number.",
                            "write a whole number" + (" or leave it empty." if optional else ".")) from None
    if value < 0:
        raise PlanningError(f"{path.name}:{row}:{col}", f"{value} is negative.", "use a number >= 0.")
    return value


SIMULATOR_FILES = ("closed_loop.csv", "bursts.csv", "length_mixes.csv")
"""Checked by ``planning.simulate`` (closed loops at a concurrency and finite open-loop runs are simulation
outputs; the length mixes are their inputs), not loaded here."""


def load_validation(directory: Path | None = None) -> list[ValidationPoint]:
    """Every row of every ``*.csv`` in ``directory`` (default ``data/validation``) except the simulator's files
    (``SIMULATOR_FILES``), validated.

    Raises
    ------
    PlanningError: a missing column, an unknown quantity, a bad number, an empty source/engine/version, or a file
        above the size limit.
    """
    d = Path(directory) if directory is not None else DEFAULT_VALIDATION_DIR
    points: list[ValidationPoint] = []
    for path in sorted(d.glob("*.csv")):
        if path.name in SIMULATOR_FILES:  # the simulator's runs to check, not the perf model's
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            raise PlanningError(path.name, f"is larger than {MAX_FILE_BYTES} bytes.", "split the file.")
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = set(COLUMNS) - set(reader.fieldnames or [])
            if missing:
                raise PlanningError(path.name, f"missing columns {sorted(missing)}.", f"use columns {','.join(COLUMNS)}.")
            for i, r in enumerate(reader, start=2):
                if r["quantity"] not in QUANTITIES:
                    raise PlanningError(f"{path.name}:{i}:quantity", f"unknown quantity {r['quantity']!r}.",
                                        f"use one of {', '.join(QUANTITIES)}.")
                for col in ("source", "engine", "engine_version", "reference"):
                    if not r[col].strip():
                        raise PlanningError(f"{path.name}:{i}:{col}", "is empty.", f"name the {col} of the number.")
                try:
                    value = float(r["value"])
                except ValueError:
                    raise PlanningError(f"{path.name}:{i}:value", f"{r['value']!r} is not a number.",
                                        "write the measured number.") from None
                if not (value > 0 and math.isfinite(value)):
                    raise PlanningError(f"{path.name}:{i}:value", f"{value} is not positive.", "write a positive number.")
                points.append(ValidationPoint(
                    id=r["id"], source=r["source"], reference=r["reference"], engine=r["engine"],
                    engine_version=r["engine_version"], model=r["model"], gpu=r["gpu"],
                    n_gpus=int(_int(r["n_gpus"], path, i, "n_gpus") or 1), tp=int(_int(r["tp"], path, i, "tp") or 1),
                    pp=int(_int(r["pp"], path, i, "pp") or 1), dtype=r["dtype"].strip().lower(),
                    input_len=int(_int(r["input_len"], path, i, "input_len") or 1),
                    output_len=int(_int(r["output_len"], path, i, "output_len") or 0),
                    concurrency=_int(r["concurrency"], path, i, "concurrency", optional=True),
                    batch=_int(r["batch"], path, i, "batch", optional=True), quantity=r["quantity"], value=value,
                    unit=r["unit"], notes=r["notes"], file=path.name))
    return points


_IN_FLIGHT = re.compile(r"(\d+(?:\.\d+)?) requests in flight on average")


def in_flight(notes: str) -> int | None:
    """The requests a run actually kept in flight, when its notes state it (Little's law on the run's own
    published rate and latencies: L = requests/s × (TTFT + output × ITL)); None otherwise. A closed-loop row is
    evaluated at that occupancy, rounded, instead of its nominal client count."""
    m = _IN_FLIGHT.search(notes or "")
    return max(1, round(float(m.group(1)))) if m else None


def predict(pm: PerfModel, p: ValidationPoint) -> float:
    """The model's number for the quantity of ``p`` (see module docstring); NaN when the model cannot run it.
    The row's engine picks the measured kernels (``PerfModel.for_engine``: TensorRT-LLM's where measured)."""
    count = p.n_gpus
    args = dict(model_id=p.model, gpu_id=p.gpu, count=count, tp=p.tp, dtype=p.dtype)
    conc = in_flight(p.notes) or p.concurrency
    out = max(p.output_len, 1)
    eng = published_engine(pm, p.engine, p.engine_version, p.gpu, p.tp, p.notes,
                           run=BenchRun(p.model, p.dtype, p.n_gpus, p.input_len, out))
    pm = pm.for_engine(p.engine, eng.attention_dp)
    if p.batch is not None or (conc == 1 and p.quantity in ("ttft_ms", "prefill_ms", "tpot_ms", "itl_ms",
                                                            "decode_step_ms")):
        b = p.batch or 1
        e = pm.estimate(p.model, p.gpu, count, p.tp, p.dtype, batch=b, input_len=p.input_len, output_len=p.output_len)
        if p.quantity in ("ttft_ms", "prefill_ms"):
            return e.prefill_ms
        if p.quantity in ("tpot_ms", "itl_ms", "decode_step_ms"):
            return e.decode_step_ms
        per_s = b * out / ((e.prefill_ms + out * e.decode_step_ms) / 1e3) * (count // p.tp)
        return per_s if p.quantity == "output_tokens_per_s" else per_s / out
    limits = (eng.max_batched_tokens, eng.max_num_seqs)
    if eng.bench is not None and conc is None and p.quantity == "output_tokens_per_s":
        # a trtllm-bench dataset run: waves, padded CUDA graphs, the overlap scheduler (planning.perf.waves)
        tput = pm.bench_throughput(p.model, p.gpu, count, p.tp, p.dtype, eng.bench, input_len=p.input_len,
                                   output_len=out, scheduling=eng.scheduling, engine_limits=limits,
                                   memory=eng.memory, router=eng.router)
        return math.nan if tput is None else tput
    sp = pm.serving(**args, input_len=p.input_len, output_len=out, concurrency=conc,  # type: ignore[arg-type]
                    scheduling=eng.scheduling, engine_limits=limits, memory=eng.memory, router=eng.router)
    if sp is None:
        return math.nan
    return {"ttft_ms": sp.ttft_ms, "prefill_ms": sp.ttft_ms, "tpot_ms": sp.tpot_ms, "itl_ms": sp.tpot_ms,
            "decode_step_ms": sp.tpot_ms, "output_tokens_per_s": sp.max_output_tokens_per_s,
            "requests_per_s": sp.max_requests_per_s,
            "total_tokens_per_s": sp.max_requests_per_s * (p.input_len + out),
            "e2e_latency_ms": sp.ttft_ms + (out - 1) * sp.tpot_ms}[p.quantity]


@dataclass(frozen=True)
class Fidelity:
    """Absolute relative errors of one group of points and its GPU-pair ordering accuracy."""

    group: str
    n: int
    median_abs_error: float  # over the points the model can run (NaN when none)
    p90_abs_error: float
    pairs: int
    ordering_accuracy: float  # NaN when the group has no pair of GPUs under the same setting
    infeasible: int = 0  # points the model calls infeasible (does not fit) although they were measured


def abs_errors(points: Sequence[ValidationPoint], predicted: Sequence[float]) -> np.ndarray:
    """|predicted / measured - 1| per point; NaN where the model calls the measured setting infeasible."""
    meas = np.array([p.value for p in points], dtype=float)
    pred = np.array(predicted, dtype=float)
    return np.asarray(np.abs(pred / meas - 1.0), dtype=float)


def ordering(points: Sequence[ValidationPoint], predicted: Sequence[float]) -> tuple[int, int]:
    """(pairs, right): pairs of rows with the same setting on different hardware; right = same order predicted."""
    pairs = right = 0
    for i in range(len(points)):
        for j in range(i + 1, len(points)):
            a, b = points[i], points[j]
            if a.setting != b.setting or (a.gpu, a.n_gpus) == (b.gpu, b.n_gpus) or a.value == b.value:
                continue
            if not (math.isfinite(predicted[i]) and math.isfinite(predicted[j])):
                continue
            pairs += 1
            right += int((a.value > b.value) == (predicted[i] > predicted[j]))
    return pairs, right


def summarize(group: str, points: Sequence[ValidationPoint], predicted: Sequence[float]) -> Fidelity:
    """Fidelity of one group of points."""
    err = abs_errors(points, predicted)
    ok = err[np.isfinite(err)]
    pairs, right = ordering(points, predicted)
    return Fidelity(group=group, n=len(points), median_abs_error=float(np.median(ok)) if ok.size else math.nan,
                    p90_abs_error=float(np.percentile(ok, 90)) if ok.size else math.nan, pairs=pairs,
                    ordering_accuracy=right / pairs if pairs else math.nan, infeasible=int(err.size - ok.size))


def band_rows(pm: PerfModel, points: Sequence[ValidationPoint], predicted: Sequence[float]) -> list[BandRow]:
    """p90/median |error| per (GPU class, dtype class, kind), per (GPU class, any, kind) and per (any, any, kind).

    Points the model calls infeasible are left out (they are reported as a count by ``summarize``).
    """
    err = abs_errors(points, predicted)
    keys = []
    for p in points:
        gc, dc = gpu_class(pm.gpu(p.gpu)), dtype_class(p.dtype)
        keys.append([(gc, dc, p.kind), (gc, ANY, p.kind), (ANY, ANY, p.kind)])
    groups: dict[tuple[str, str, str], list[float]] = {}
    for k, e in zip(keys, err, strict=True):
        if not math.isfinite(e):
            continue
        for key in k:
            groups.setdefault(key, []).append(float(e))
    return [BandRow(g, d, kind, round(float(np.percentile(v, 90)), 3), round(float(np.median(v)), 3), len(v))
            for (g, d, kind), v in sorted(groups.items())]
