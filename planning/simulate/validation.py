"""Simulated vs published serving benchmarks: closed loops at a concurrency (data/validation/closed_loop.csv) and
finite open-loop runs of N prompts at a request rate (data/validation/bursts.csv); error per source."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planning.errors import PlanningError
from planning.perf.engines import EngineSetup, published_engine
from planning.perf.model import PerfModel
from planning.perf.validation import in_flight
from planning.simulate.bench import benchmark, replay
from planning.simulate.metrics import BenchmarkResult

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


def _checked_rows(path: Path | None, default: Path, columns: tuple[str, ...]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(file name, line, row) of a validation CSV whose header is exactly ``columns`` and whose quantities are
    known; raises PlanningError on a missing file, another header, too many rows or an unknown quantity."""
    p = Path(path) if path is not None else default
    if not p.is_file():
        raise PlanningError("validation", f"{p} does not exist.", f"restore data/validation/{default.name}.")
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != columns:
            raise PlanningError(f"{p.name}.header", f"columns {reader.fieldnames} differ from the schema.",
                                f"use exactly: {','.join(columns)}.")
        for i, row in enumerate(reader, start=2):
            if i > MAX_ROWS:
                raise PlanningError(p.name, f"has more than {MAX_ROWS} rows.", "split the file.")
            if row["quantity"] not in _FIELDS:
                raise PlanningError(f"{p.name}:{i}.quantity", f"unknown quantity {row['quantity']!r}.",
                                    f"use one of {', '.join(_FIELDS)}.")
            yield p.name, i, row


def _field(rec: Mapping[Any, Any]) -> str:
    """The BenchmarkResult field a published row measured: its quantity's mean, or p50 when its notes say median."""
    mean_field, median_field = _FIELDS[str(rec["quantity"])]
    return median_field if "median" in str(rec["notes"]).lower() else mean_field


def _engine(perf: PerfModel, rec: Mapping[Any, Any]) -> EngineSetup:
    """The engine as a published row ran it: its default scheduling, batch limits and memory reservation for its
    version (and the settings its notes state)."""
    return published_engine(perf, str(rec["engine"]), str(rec["engine_version"]), str(rec["gpu"]),
                            int(str(rec["tp"])), str(rec["notes"]))


def _engine_kwargs(eng: EngineSetup) -> dict[str, Any]:
    """``benchmark``/``replay`` keyword arguments that run ``eng``: an engine that reserves a request's whole KV at
    admission (TensorRT-LLM) runs the ``reserve`` KV policy, the others vLLM's ``grow``."""
    return {"chunk_tokens": eng.max_batched_tokens, "max_seqs": eng.max_num_seqs, "scheduling": eng.scheduling,
            "memory": eng.memory, "kv_policy": "reserve" if eng.memory.hold == "reserve" else "grow",
            "router": eng.router}


def _with_errors(frame: pd.DataFrame, predicted: list[float]) -> pd.DataFrame:
    """``frame`` with ``predicted`` and ``rel_error`` = predicted / published − 1 columns."""
    out = frame.copy()
    out["predicted"] = predicted
    out["rel_error"] = out["predicted"] / out["value"] - 1.0
    return out


def load_closed_loop(path: Path | None = None) -> pd.DataFrame:
    """The published closed-loop points (shared validation schema), one measured number per row.

    Raises
    ------
    PlanningError: a missing file, a wrong header, or a row with an unknown quantity or a non-number.
    """
    rows = []
    for name, i, row in _checked_rows(path, CLOSED_LOOP_PATH, COLUMNS):
        try:
            for key in ("n_gpus", "tp", "input_len", "output_len", "concurrency"):
                row[key] = int(row[key])
            row["value"] = float(row["value"])
        except ValueError:
            raise PlanningError(f"{name}:{i}", "has a non-numeric size or value.", "write plain numbers.") from None
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
        size["concurrency"] = in_flight(notes) or size["concurrency"]  # the occupancy the run actually had
        # the run's length when the publication states it: one wave of the clients, or N requests per level
        per_level = re.search(r"(\d+) requests per level", notes)
        requests = size["concurrency"] if "one wave" in notes else int(per_level.group(1)) if per_level else None
        # the engine as the publication ran it: its default scheduling, batch limits and memory for its version
        gpu = str(rec["gpu"])
        eng = _engine(perf, rec)
        key = (str(rec["model"]), gpu, str(rec["dtype"]), requests, eng, *size.values())
        if key not in runs:
            runs[key] = benchmark(str(rec["model"]), gpu, count=size["n_gpus"], tp=size["tp"],
                                  dtype=str(rec["dtype"]), input_len=size["input_len"],
                                  output_len=size["output_len"], concurrency=size["concurrency"],
                                  requests=requests, perf=perf, **_engine_kwargs(eng))
        predicted.append(float(getattr(runs[key], _field(rec))))
    return _with_errors(frame, predicted)


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


BURSTS_PATH = CLOSED_LOOP_PATH.with_name("bursts.csv")
LENGTH_MIX_PATH = CLOSED_LOOP_PATH.with_name("length_mixes.csv")
BURST_COLUMNS = ("id", "source", "reference", "engine", "engine_version", "model", "gpu", "n_gpus", "tp", "dtype",
                 "prompts", "request_rate", "length_mix", "input_len", "output_len", "quantity", "value", "unit",
                 "notes")
BURST_SEEDS = 5  # simulated runs per row (length and arrival draws); the prediction is their median
_MIX_GRID = np.linspace(0.0, 100.0, 20_001)  # percentiles on which a mix's inverse CDF is tabulated


def load_bursts(path: Path | None = None) -> pd.DataFrame:
    """The published finite open-loop runs (``vllm bench serve`` with N prompts at a request rate), one number per
    row.

    Raises
    ------
    PlanningError: a missing file, a wrong header, or a row with an unknown quantity, a bad size or rate.
    """
    rows = []
    for name, i, row in _checked_rows(path, BURSTS_PATH, BURST_COLUMNS):
        try:
            parsed: dict[str, object] = dict(row)
            for key in ("n_gpus", "tp", "prompts"):
                parsed[key] = int(row[key])
            for key in ("input_len", "output_len", "value"):
                parsed[key] = float(row[key])
            rate = math.inf if row["request_rate"] == "inf" else float(row["request_rate"])
            prompts = int(row["prompts"])
        except ValueError:
            raise PlanningError(f"{name}:{i}", "has a non-numeric size, rate or value.",
                                "write plain numbers (request_rate may be inf).") from None
        if not (1 <= prompts <= 100_000) or not rate > 0:
            raise PlanningError(f"{name}:{i}.prompts", "needs 1 to 100,000 prompts at a positive rate.",
                                "fix prompts / request_rate.")
        if not all(0 < float(row[k]) <= 1e6 for k in ("input_len", "output_len")):
            raise PlanningError(f"{name}:{i}.input_len", "mean lengths must be positive token counts.",
                                "fix input_len / output_len.")
        parsed["request_rate"] = rate
        rows.append(parsed)
    return pd.DataFrame(rows, columns=list(BURST_COLUMNS))


def load_length_mix(name: str, path: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The inverse CDFs (token counts on ``_MIX_GRID`` percentiles) of a named request-length mix: (input, output).

    Raises
    ------
    PlanningError: a missing file, or a mix without increasing input and output percentiles from 0 to 100.
    """
    p = Path(path) if path is not None else LENGTH_MIX_PATH
    if not p.is_file():
        raise PlanningError("length_mix", f"{p} does not exist.", "restore data/validation/length_mixes.csv.")
    frame = pd.read_csv(p)
    sides = []
    for side in ("input", "output"):
        g = frame[(frame["mix"] == name) & (frame["side"] == side)].sort_values("percentile")
        pct, tok = g["percentile"].to_numpy(float), g["tokens"].to_numpy(float)
        if len(g) < 2 or pct[0] != 0.0 or pct[-1] != 100.0 or (np.diff(pct) <= 0).any() or (np.diff(tok) < 0).any():
            raise PlanningError(f"length_mix.{name}.{side}", "needs non-decreasing tokens at percentiles 0 to 100.",
                                f"list {side} percentiles 0..100 for mix {name!r} in {p.name}.")
        sides.append(np.interp(_MIX_GRID, pct, tok))
    return sides[0], sides[1]


def sample_lengths(inverse_cdf: np.ndarray, mean: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` token counts drawn from a mix's inverse CDF, scaled so the mix has mean ``mean`` (at least 1 each)."""
    scaled = inverse_cdf * (mean / float(inverse_cdf.mean()))
    draws = np.interp(rng.uniform(0.0, 100.0, n), _MIX_GRID, scaled)
    return np.maximum(1, np.rint(draws)).astype(np.int64)


def burst_errors(path: Path | None = None, perf: PerfModel | None = None, seeds: int = BURST_SEEDS) -> pd.DataFrame:
    """Every published finite run next to the simulator's replay of its protocol: the same number of prompts at
    the same rate (Poisson gaps; all at 0 for ``inf``), lengths drawn from the row's length mix scaled to its
    means, the engine's default scheduling and limits for its version, vLLM's incremental KV allocation. The
    prediction is the median over ``seeds`` draws.

    Returns
    -------
    The rows with ``predicted`` and ``rel_error`` = predicted / published − 1 columns.
    """
    frame = load_bursts(path)
    perf = perf or PerfModel()
    mixes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    runs: dict[tuple[object, ...], list[BenchmarkResult]] = {}
    predicted = []
    for rec in frame.to_dict("records"):
        gpu = str(rec["gpu"])
        eng = _engine(perf, rec)
        mix = str(rec["length_mix"])
        if mix not in mixes:
            mixes[mix] = load_length_mix(mix)
        n, rate = int(str(rec["prompts"])), float(str(rec["request_rate"]))
        mean_in, mean_out = float(str(rec["input_len"])), float(str(rec["output_len"]))
        key = (str(rec["model"]), gpu, int(str(rec["n_gpus"])), int(str(rec["tp"])), str(rec["dtype"]), n, rate, mix,
               mean_in, mean_out, eng)
        if key not in runs:
            results = []
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                inp = sample_lengths(mixes[mix][0], mean_in, n, rng)
                out = sample_lengths(mixes[mix][1], mean_out, n, rng)
                gaps = rng.exponential(1.0 / rate, n) if math.isfinite(rate) else np.zeros(n)
                arrival = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
                results.append(replay(str(rec["model"]), gpu, count=int(str(rec["n_gpus"])), tp=int(str(rec["tp"])),
                                      dtype=str(rec["dtype"]), arrival_s=arrival, input_lens=inp, output_lens=out,
                                      perf=perf, **_engine_kwargs(eng)))
            runs[key] = results
        field = _field(rec)
        predicted.append(float(np.median([getattr(r, field) for r in runs[key]])))
    return _with_errors(frame, predicted)
