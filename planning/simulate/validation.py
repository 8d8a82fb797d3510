"""Simulated vs published closed-loop serving benchmarks (data/validation/closed_loop.csv): error per source."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pandas as pd

from planning.errors import PlanningError
from planning.perf.engines import engine_limits, scheduling_of
from planning.perf.model import PerfModel
from planning.simulate.metrics import BenchmarkResult
from planning.simulate.run import benchmark

CLOSED_LOOP_PATH = Path(__file__).resolve().parents[2] / "data" / "validation" / "closed_loop.csv"
COLUMNS = ("id", "source", "reference", "engine", "engine_version", "model", "gpu", "n_gpus", "tp", "pp", "dtype",
           "input_len", "output_len", "concurrency", "batch", "quantity", "value", "unit", "notes")
# quantity -> BenchmarkResult field (mean statistic; a row whose notes say "median" uses the p50 field)
_FIELDS = {"ttft_ms": ("ttft_ms_mean", "ttft_ms_p50"), "itl_ms": ("itl_ms_mean", "itl_ms_mean"),
           "tpot_ms": ("tpot_ms_mean", "tpot_ms_p50"), "e2e_latency_ms": ("e2e_latency_ms_mean", "e2e_latency_ms_mean"),
           "output_tokens_per_s": ("output_tokens_per_s", "output_tokens_per_s"),
           "total_tokens_per_s": ("total_tokens_per_s", "total_tokens_per_s"),
           "requests_per_s": ("requests_per_s", "requests_per_s")}
MAX_ROWS = 10_000


def load_closed_loop(path: Path | None = None) -> pd.DataFrame:
    """The published closed-loop points (shared validation schema), one measured number per row.

    Raises
    ------
    PlanningError: a missing file, a wrong header, or a row with an unknown quantity or a non-number.
    """
    p = Path(path) if path is not None else CLOSED_LOOP_PATH
    if not p.is_file():
        raise PlanningError("validation", f"{p} does not exist.", "restore data/validation/closed_loop.csv.")
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise PlanningError(f"{p.name}.header", f"columns {reader.fieldnames} differ from the schema.",
                                f"use exactly: {','.join(COLUMNS)}.")
        rows = []
        for i, row in enumerate(reader, start=2):
            if i > MAX_ROWS:
                raise PlanningError(p.name, f"has more than {MAX_ROWS} rows.", "split the file.")
            if row["quantity"] not in _FIELDS:
                raise PlanningError(f"{p.name}:{i}.quantity", f"unknown quantity {row['quantity']!r}.",
                                    f"use one of {', '.join(_FIELDS)}.")
            try:
                for key in ("n_gpus", "tp", "input_len", "output_len", "concurrency"):
                    row[key] = int(row[key])
                row["value"] = float(row["value"])
            except ValueError:
                raise PlanningError(f"{p.name}:{i}", "has a non-numeric size or value.", "write plain numbers.") from None
            rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def closed_loop_errors(path: Path | None = None, perf: PerfModel | None = None) -> pd.DataFrame:
    """Every published point next to the simulator's closed-loop run of the same setup.

    Returns
    -------
    The points with ``predicted`` and ``rel_error`` = predicted / published − 1 columns.
    """
    frame = load_closed_loop(path)
    perf = perf or PerfModel()
    runs: dict[tuple[object, ...], BenchmarkResult] = {}
    predicted = []
    for rec in frame.to_dict("records"):
        notes = str(rec["notes"])
        size = {k: int(str(rec[k])) for k in ("n_gpus", "tp", "input_len", "output_len", "concurrency")}
        # the run's length when the publication states it: one wave of the clients, or N requests per level
        per_level = re.search(r"(\d+) requests per level", notes)
        requests = size["concurrency"] if "one wave" in notes else int(per_level.group(1)) if per_level else None
        # the engine as the publication ran it: its default scheduling and batch limits for its version
        engine, version, gpu = str(rec["engine"]), str(rec["engine_version"]), str(rec["gpu"])
        scheduling = scheduling_of(engine, version)
        tokens, seqs = engine_limits(engine, version, gpu, perf.gpu(gpu).memory_gb, perf.calibration.settings)
        key = (str(rec["model"]), gpu, str(rec["dtype"]), requests, scheduling, tokens, seqs, *size.values())
        if key not in runs:
            runs[key] = benchmark(str(rec["model"]), gpu, count=size["n_gpus"], tp=size["tp"],
                                  dtype=str(rec["dtype"]), input_len=size["input_len"],
                                  output_len=size["output_len"], concurrency=size["concurrency"],
                                  requests=requests, chunk_tokens=tokens, max_seqs=seqs, scheduling=scheduling,
                                  perf=perf)
        mean_field, median_field = _FIELDS[str(rec["quantity"])]
        field = median_field if "median" in notes.lower() else mean_field
        predicted.append(float(getattr(runs[key], field)))
    out = frame.copy()
    out["predicted"] = predicted
    out["rel_error"] = out["predicted"] / out["value"] - 1.0
    return out


def error_summary(errors: pd.DataFrame) -> pd.DataFrame:
    """Median absolute relative error (and count, median signed error) per source and quantity, and overall."""
    rows = []
    for (source, quantity), g in errors.groupby(["source", "quantity"]):
        rows.append({"source": source, "quantity": quantity, "points": len(g),
                     "median_abs_error": float(g["rel_error"].abs().median()),
                     "median_signed_error": float(g["rel_error"].median())})
    for source, g in errors.groupby("source"):
        rows.append({"source": source, "quantity": "all", "points": len(g),
                     "median_abs_error": float(g["rel_error"].abs().median()),
                     "median_signed_error": float(g["rel_error"].median())})
    rows.append({"source": "all", "quantity": "all", "points": len(errors),
                 "median_abs_error": float(errors["rel_error"].abs().median()) if len(errors) else math.nan,
                 "median_signed_error": float(errors["rel_error"].median()) if len(errors) else math.nan})
    return pd.DataFrame(rows)
