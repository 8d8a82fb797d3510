"""Tensor-parallel all-reduce from measured tables (data/allreduce.csv), per GPU and the engine's all-reduce.

One all-reduce's time over the GPUs of one node is read from the measured table of the GPU (NCCL's nccl-tests, or
the engine's own all-reduce where it is measured: TensorRT-LLM's custom all-reduce on the A100), interpolated in log
space over message bytes and over the GPUs in the group. Outside the measured sizes it is physical: below the
smallest, the latency floor plus size over the bandwidth of the smallest measured points; above the largest,
linear in size at the bandwidth of the largest measured points. A group size outside the measured ones scales the
nearest by the ring's 2(n-1)/n traffic. docs/perf-model.md Sec. 1.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planning.errors import PlanningError
from planning.perf.datafile import read_table

DEFAULT_ALLREDUCE_PATH = Path(__file__).resolve().parents[2] / "data" / "allreduce.csv"
COLUMNS = ("gpu", "engine", "tp", "bytes", "latency_us", "source")
MAX_FILE_BYTES = 1_000_000
NCCL = "nccl"
# Engines whose all-reduce is their own kernel (where measured): TensorRT-LLM, and NIM on its TensorRT-LLM backend.
OWN_ALLREDUCE = {"trtllm": "trtllm", "nim-trtllm": "trtllm"}
EDGE_POINTS = 3  # measured points the extrapolations are fitted on, at each end


def allreduce_engine(engine: str) -> str:
    """The all-reduce implementation ``engine`` runs for tensor parallelism (NCCL unless it has its own)."""
    return OWN_ALLREDUCE.get(engine.lower(), NCCL)


@dataclass(frozen=True)
class SizeCurve:
    """One measured curve over message bytes (one GPU, engine and group size), with its two extrapolations."""

    log_bytes: np.ndarray
    log_s: np.ndarray
    floor_s: float  # latency floor: intercept of the line through the smallest measured points
    low_slope: float  # seconds per byte of those points
    top_slope: float  # seconds per byte of the largest measured points (bandwidth-bound)

    @classmethod
    def fit(cls, nbytes: np.ndarray, seconds: np.ndarray) -> SizeCurve:
        b, s = nbytes[:EDGE_POINTS], seconds[:EDGE_POINTS]
        low = max(float(np.polyfit(b, s, 1)[0]), 0.0) if len(b) > 1 else 0.0
        low = min(low, float(s[0] / b[0]))  # the floor stays >= 0
        top_b, top_s = nbytes[-EDGE_POINTS:], seconds[-EDGE_POINTS:]
        top = float(np.polyfit(top_b, top_s, 1)[0]) if len(top_b) > 1 else float(top_s[-1] / top_b[-1])
        top = max(top, float(top_s[-1] / top_b[-1]) * 0.5)  # never flatter than half the largest point's mean rate
        return cls(np.log(nbytes), np.log(seconds), float(s[0] - low * b[0]), low, top)

    def seconds(self, nbytes: np.ndarray) -> np.ndarray:
        b = np.maximum(nbytes, 1.0)
        lo_b, hi_b = float(np.exp(self.log_bytes[0])), float(np.exp(self.log_bytes[-1]))
        inside = np.exp(np.interp(np.log(b), self.log_bytes, self.log_s))
        below = self.floor_s + self.low_slope * b
        above = float(np.exp(self.log_s[-1])) + self.top_slope * (b - hi_b)
        return np.where(b < lo_b, below, np.where(b > hi_b, above, inside))


@dataclass(frozen=True)
class AllReduceCurve:
    """The measured all-reduce of one (GPU, engine): a size curve per measured group size."""

    gpu: str
    engine: str
    by_tp: dict[int, SizeCurve]
    source: str

    def seconds(self, nbytes: np.ndarray, n: int) -> np.ndarray:
        """Time of one all-reduce of ``nbytes`` over ``n`` GPUs (log-linear in n between measured group sizes)."""
        size = np.asarray(nbytes, dtype=float)
        tps = sorted(self.by_tp)
        if n in self.by_tp:
            return self.by_tp[n].seconds(size)
        if tps[0] < n < tps[-1]:
            lo = max(t for t in tps if t < n)
            hi = min(t for t in tps if t > n)
            w = (np.log(n) - np.log(lo)) / (np.log(hi) - np.log(lo))
            return np.exp((1 - w) * np.log(self.by_tp[lo].seconds(size)) + w * np.log(self.by_tp[hi].seconds(size)))
        near = tps[0] if n < tps[0] else tps[-1]
        ring = (2.0 * (n - 1) / n) / (2.0 * (near - 1) / near)
        return self.by_tp[near].seconds(size) * ring

    def describe(self) -> str:
        return f"{self.engine} all-reduce measured on {self.gpu} (TP {', '.join(map(str, sorted(self.by_tp)))})"


class AllReduceTables:
    """The measured all-reduce curves, indexed by (GPU, engine)."""

    def __init__(self, curves: list[AllReduceCurve], fingerprint: str) -> None:
        self.curves = {(c.gpu, c.engine): c for c in curves}
        self.fingerprint = fingerprint

    def curve(self, gpu: str, engine: str) -> AllReduceCurve | None:
        """The engine's own all-reduce on ``gpu`` where measured, else NCCL's there; None: the GPU is not measured."""
        own = allreduce_engine(engine)
        return self.curves.get((gpu, own)) or self.curves.get((gpu, NCCL))


_CACHE: dict[str, AllReduceTables] = {}


Points = dict[tuple[str, str], dict[int, list[tuple[float, float]]]]


def _parse(rows: list[dict[str, str]], name: str) -> tuple[Points, dict[tuple[str, str], str]]:
    """The measured points per (GPU, engine) and group size, and each curve's source."""
    points: Points = {}
    sources: dict[tuple[str, str], str] = {}
    for row_no, row in enumerate(rows, start=2):
        try:
            tp, nbytes, us = int(row["tp"]), float(row["bytes"]), float(row["latency_us"])
        except ValueError:
            raise PlanningError(f"{name}:{row_no}", "has a non-numeric tp, size or latency.",
                                "write integers for tp and bytes, a decimal for latency_us.") from None
        if tp < 2 or not nbytes >= 1 or not us > 0:
            raise PlanningError(f"{name}:{row_no}", "has tp < 2, bytes < 1 or latency_us <= 0.",
                                "an all-reduce spans >= 2 GPUs, moves >= 1 byte and takes > 0 us.")
        points.setdefault((row["gpu"], row["engine"]), {}).setdefault(tp, []).append((nbytes, us * 1e-6))
        sources[(row["gpu"], row["engine"])] = row["source"]
    return points, sources


def load_allreduce(path: Path | None = None) -> AllReduceTables:
    """Read data/allreduce.csv (written by ``make calibrate``, tools/calibrate_allreduce.py); cached per path.

    Raises
    ------
    PlanningError: missing file or column, a non-numeric or out-of-range value (naming row and column).
    """
    path = Path(path) if path is not None else DEFAULT_ALLREDUCE_PATH
    key = str(path.resolve())
    if key in _CACHE:
        return _CACHE[key]
    text, rows = read_table(path, field="allreduce", what="all-reduce table", columns=COLUMNS,
                            max_bytes=MAX_FILE_BYTES, fix="run make calibrate (tools/calibrate_allreduce.py).")
    points, sources = _parse(rows, path.name)
    curves = []
    for (gpu, engine), by_tp in sorted(points.items()):
        fitted = {}
        for tp, pts in by_tp.items():
            pts.sort()
            fitted[tp] = SizeCurve.fit(np.array([b for b, _ in pts]), np.array([s for _, s in pts]))
        curves.append(AllReduceCurve(gpu, engine, fitted, sources[(gpu, engine)]))
    tables = AllReduceTables(curves, hashlib.sha256(text.encode()).hexdigest()[:16])
    _CACHE[key] = tables
    return tables
