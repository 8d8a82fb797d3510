"""Demand over time: per model a rate and request sizes per epoch, from a trace, an epoch table or a diurnal curve.

Every source ends as a :class:`DemandSeries` on one epoch grid (epoch ``e`` covers hours
``[start + e·h, start + (e+1)·h)``). Request sizes are kept two ways:

- ``input_len`` / ``output_len`` per epoch (rate-weighted means), which set the epoch's token demand
  (prompt tok/s = rate × input_len, output tok/s = rate × output_len);
- optionally a request-size **histogram** with buckets fixed over the whole horizon (Mélange Sec. 5.4.1:
  input-length × output-length ranges; each bucket's sizes are the means of the trace's requests in it) and a
  rate per bucket per epoch. Fixed buckets keep the template libraries identical across epochs.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from planning.errors import PlanningError
from planning.traces import Trace, parse_trace

MAX_TABLE_BYTES = 5_000_000
MAX_EPOCHS = 24 * 7 * 6  # a week of 10-minute epochs
# Mélange (Sec. 6.1, Fig. 5) uses 10 input-length ranges × 6 output-length ranges; the edges here are the
# same counts on a doubling scale (the paper's exact edges are only drawn in its figure).
INPUT_EDGES = (0, 25, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, math.inf)
OUTPUT_EDGES = (0, 25, 100, 250, 500, 1000, math.inf)
# how a series' absolute level is set (planning.timeline.matching): its shape at the scenario's rate as the peak
# or as the mean, or the series' own numbers; the words say which on the page, in the CLI summary and the docs
DEMAND_MATCHES = {"peak": "the series' shape with its busiest epoch at the scenario's rate, at the scenario's "
                          "request sizes",
                  "mean": "the series' shape with its mean rate over the horizon at the scenario's rate, at the "
                          "scenario's request sizes",
                  "absolute": "the series' own rates and request sizes (the scenario's demand is not used)"}


@dataclass(frozen=True)
class DemandSeries:
    """One model's demand per epoch.

    Attributes
    ----------
    model:
        Catalog model id.
    epoch_hours:
        Epoch length in hours.
    rate_rps, input_len, output_len:
        Per-epoch request rate (req/s) and rate-weighted mean request sizes (tokens); equal lengths.
    buckets:
        Fixed request-size buckets ``(input_len, output_len)`` (empty = no histogram).
    bucket_rates:
        ``(n_epochs, n_buckets)`` request rate per bucket (sums to ``rate_rps`` per epoch).
    source:
        Where the series came from (file and format, or the curve's parameters).
    """

    model: str
    epoch_hours: float
    rate_rps: tuple[float, ...]
    input_len: tuple[float, ...]
    output_len: tuple[float, ...]
    buckets: tuple[tuple[float, float], ...] = ()
    bucket_rates: tuple[tuple[float, ...], ...] = ()
    source: str = ""
    start_hour: float = 0.0
    labels: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.rate_rps)
        if n == 0:
            raise PlanningError(f"demand.{self.model}", "has no epochs.", "give at least one epoch of demand.")
        if n > MAX_EPOCHS:
            raise PlanningError(f"demand.{self.model}", f"has {n} epochs (limit {MAX_EPOCHS}).",
                                "use longer epochs or a shorter horizon.")
        if len(self.input_len) != n or len(self.output_len) != n:
            raise PlanningError(f"demand.{self.model}", "rate and size columns differ in length.", "one row per epoch.")
        if self.bucket_rates and len(self.bucket_rates) != n:
            raise PlanningError(f"demand.{self.model}", "histogram rates differ in length from the epochs.",
                                "one histogram row per epoch.")
        if not self.epoch_hours > 0:
            raise PlanningError("epoch", f"must be > 0 hours, got {self.epoch_hours}.", "e.g. --epoch 1h.")

    def __len__(self) -> int:
        return len(self.rate_rps)

    @property
    def peak_rate(self) -> float:
        return max(self.rate_rps)

    def scaled(self, k: float) -> DemandSeries:
        """The same shape and sizes at ``k`` times the rate."""
        if not (k >= 0 and math.isfinite(k)):
            raise PlanningError("rate_scale", f"must be a finite number ≥ 0, got {k!r}.", "e.g. --rate-scale 2.")
        return DemandSeries(self.model, self.epoch_hours, tuple(r * k for r in self.rate_rps), self.input_len,
                            self.output_len, self.buckets, tuple(tuple(x * k for x in row) for row in self.bucket_rates),
                            self.source + (f" × {k:g}" if k != 1 else ""), self.start_hour, self.labels)

    def design_sizes(self) -> tuple[float, float]:
        """Rate-weighted mean (input, output) over the horizon: the request size the libraries are built for."""
        if len(set(self.input_len)) == 1 and len(set(self.output_len)) == 1:  # exact: same libraries as api.solve
            return float(self.input_len[0]), float(self.output_len[0])
        w = np.asarray(self.rate_rps)
        if w.sum() <= 0:
            return float(np.mean(self.input_len)), float(np.mean(self.output_len))
        return float(np.average(self.input_len, weights=w)), float(np.average(self.output_len, weights=w))


# ------------------------------------------------------------------------------------------------- helpers
def parse_duration_hours(text: str | float) -> float:
    """``"1h"``, ``"30m"``, ``"90s"``, ``"1d"`` or a number of hours → hours.

    Raises
    ------
    PlanningError
        For anything else or a non-positive length.
    """
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*", str(text).lower())
        if not m:
            raise PlanningError("epoch", f"{text!r} is not a duration.", "write e.g. 1h, 30m, 15m or 1d.")
        value = float(m.group(1)) * {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0, "": 1.0}[m.group(2)]
    if not (value > 0 and math.isfinite(value)):
        raise PlanningError("epoch", f"must be a positive duration, got {text!r}.", "write e.g. 1h.")
    if value < 1 / 60:
        raise PlanningError("epoch", f"{text!r} is shorter than a minute.", "use epochs of at least 1m.")
    return value


def _bucket_index(values: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    return np.clip(np.searchsorted(np.asarray(edges[1:-1]), values, side="right"), 0, len(edges) - 2)


def from_trace(model: str, trace: Trace, epoch_hours: float, *, histogram: bool = False) -> DemandSeries:
    """Aggregate a request trace into epochs: rate = requests / epoch length, rate-weighted sizes, and
    (``histogram``) Mélange-style size buckets fixed over the trace.

    Raises
    ------
    PlanningError
        An empty trace or one shorter than a tenth of an epoch.
    """
    if len(trace) == 0:
        raise PlanningError(f"demand.{model}", "the trace has no requests.", "give a trace with requests.")
    span_h = max(trace.duration_s / 3600, 1e-9)
    if span_h < 0.1 * epoch_hours:
        raise PlanningError("epoch", f"{epoch_hours:g} h is longer than ten times the trace ({span_h * 60:.1f} min).",
                            "use shorter epochs, e.g. --epoch 10m, or a longer trace.")
    n = max(1, math.ceil(span_h / epoch_hours - 1e-9))
    epoch = np.minimum((trace.arrival_s / 3600 / epoch_hours).astype(np.int64), n - 1)
    seconds = epoch_hours * 3600
    counts = np.bincount(epoch, minlength=n).astype(float)
    # the last epoch may be cut short by the trace's end: its rate is over the covered time
    covered = np.full(n, seconds)
    covered[-1] = max(trace.duration_s - (n - 1) * seconds, min(seconds, 1.0))
    rate = counts / covered
    inp = trace.input_tokens.astype(float)
    out = trace.output_tokens.astype(float)
    sum_in = np.bincount(epoch, weights=inp, minlength=n)
    sum_out = np.bincount(epoch, weights=out, minlength=n)
    mean_in = np.where(counts > 0, sum_in / np.maximum(counts, 1), float(inp.mean()))
    mean_out = np.where(counts > 0, sum_out / np.maximum(counts, 1), float(out.mean()))
    buckets: tuple[tuple[float, float], ...] = ()
    bucket_rates: tuple[tuple[float, ...], ...] = ()
    if histogram:
        bi = _bucket_index(inp, INPUT_EDGES) * (len(OUTPUT_EDGES) - 1) + _bucket_index(out, OUTPUT_EDGES)
        used = np.unique(bi)
        col = {int(b): k for k, b in enumerate(used)}
        cols = np.array([col[int(b)] for b in bi])
        buckets = tuple((float(max(1.0, inp[cols == k].mean())), float(max(1.0, out[cols == k].mean())))
                        for k in range(len(used)))
        mat = np.zeros((n, len(used)))
        np.add.at(mat, (epoch, cols), 1.0)
        mat /= covered[:, None]
        bucket_rates = tuple(tuple(float(x) for x in row) for row in mat)
    return DemandSeries(model, epoch_hours, tuple(float(x) for x in rate), tuple(float(max(1.0, x)) for x in mean_in),
                        tuple(float(max(1.0, x)) for x in mean_out), buckets, bucket_rates,
                        source=f"{trace.source}: {len(trace)} requests over {span_h * 60:.0f} min")


def _hours(value: str, row: int, origin: datetime | None) -> tuple[float, datetime | None]:
    text = value.strip()
    try:
        return float(text), origin
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PlanningError(f"epoch_start (row {row})", f"{text!r} is neither hours nor an ISO 8601 time.",
                            "write hours from the start (0, 1, 2, …) or 2024-05-13T09:00:00.") from None
    origin = origin or stamp
    return (stamp - origin).total_seconds() / 3600, origin


def parse_epoch_table(model: str, text: str, epoch_hours: float, *, source: str = "table") -> DemandSeries:
    """``epoch_start,rate_rps,input_len,output_len`` rows (a step function of time) resampled onto epochs of
    ``epoch_hours``: each epoch's rate is the time average over it, sizes are rate-weighted.

    ``epoch_start`` is hours from the start or an ISO 8601 time; the last row lasts as long as the spacing
    of the previous two rows (one epoch for a single row). Extra columns (e.g. ``source``) are ignored.

    Raises
    ------
    PlanningError
        Missing columns, bad numbers (naming the row), unsorted or duplicate starts.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_TABLE_BYTES:
        raise PlanningError(source, f"is larger than {MAX_TABLE_BYTES // 1_000_000} MB.", "give one row per epoch.")
    reader = csv.DictReader(io.StringIO(text))
    need = ("epoch_start", "rate_rps", "input_len", "output_len")
    if reader.fieldnames is None or any(c not in reader.fieldnames for c in need):
        raise PlanningError(source, f"needs the columns {', '.join(need)}; found {reader.fieldnames}.",
                            "write the header epoch_start,rate_rps,input_len,output_len.")
    starts: list[float] = []
    rows: list[tuple[float, float, float]] = []
    origin: datetime | None = None
    for i, r in enumerate(reader, start=2):
        if not any((v or "").strip() for v in r.values() if isinstance(v, str)):
            continue
        h, origin = _hours(r["epoch_start"] or "", i, origin)
        vals = []
        for col, lo in (("rate_rps", 0.0), ("input_len", 1.0), ("output_len", 1.0)):
            try:
                v = float((r[col] or "").strip())
            except ValueError:
                raise PlanningError(f"{source}:{col} (row {i})", f"{r[col]!r} is not a number.", "write a plain number.") from None
            if not math.isfinite(v) or v < lo:
                raise PlanningError(f"{source}:{col} (row {i})", f"must be a finite number ≥ {lo:g}, got {v}.",
                                    f"use a value ≥ {lo:g}.")
            vals.append(v)
        starts.append(h)
        rows.append((vals[0], vals[1], vals[2]))
    if not rows:
        raise PlanningError(source, "has no rows.", "add one row per epoch.")
    s = np.asarray(starts)
    if np.any(np.diff(s) <= 0):
        raise PlanningError(f"{source}:epoch_start", "is not strictly increasing.", "sort the rows and remove duplicates.")
    step = float(s[-1] - s[-2]) if len(s) > 1 else epoch_hours
    ends = np.append(s[1:], s[-1] + step)
    rate = np.array([r[0] for r in rows])
    inp = np.array([r[1] for r in rows])
    out = np.array([r[2] for r in rows])
    t0, t1 = float(s[0]), float(ends[-1])
    n = max(1, math.ceil((t1 - t0) / epoch_hours - 1e-9))
    if n > MAX_EPOCHS:
        raise PlanningError("epoch", f"{n} epochs of {epoch_hours:g} h (limit {MAX_EPOCHS}).", "use longer epochs.")
    out_rate, out_in, out_out = [], [], []
    for e in range(n):
        a, b = t0 + e * epoch_hours, min(t0 + (e + 1) * epoch_hours, t1)
        overlap = np.clip(np.minimum(ends, b) - np.maximum(s, a), 0, None)
        w = overlap * rate
        out_rate.append(float(w.sum() / max(b - a, 1e-12)))
        out_in.append(float(np.average(inp, weights=w)) if w.sum() > 0 else float(np.average(inp, weights=overlap + 1e-12)))
        out_out.append(float(np.average(out, weights=w)) if w.sum() > 0 else float(np.average(out, weights=overlap + 1e-12)))
    labels = tuple(f"{t0 + e * epoch_hours:g}h" for e in range(n))
    return DemandSeries(model, epoch_hours, tuple(out_rate), tuple(out_in), tuple(out_out), source=source,
                        start_hour=t0, labels=labels)


def diurnal(model: str, shape: Sequence[float], peak_rps: float, input_len: float, output_len: float,
            epoch_hours: float = 1.0, *, days: int = 1, source: str = "diurnal curve") -> DemandSeries:
    """A daily curve: ``shape`` gives relative load at evenly spaced times of one day (e.g. 24 hourly values),
    scaled so its maximum is ``peak_rps``; repeated ``days`` times and resampled onto epochs.

    Raises
    ------
    PlanningError
        An empty or negative shape, or a non-positive peak.
    """
    arr = np.asarray([float(x) for x in shape])
    if arr.size == 0 or np.any(~np.isfinite(arr)) or np.any(arr < 0) or arr.max() <= 0:
        raise PlanningError("shape", "must be non-negative numbers with a positive maximum.", "e.g. 24 hourly values.")
    if not (peak_rps >= 0 and math.isfinite(peak_rps)):
        raise PlanningError("peak_rps", f"must be ≥ 0, got {peak_rps!r}.", "give the peak request rate.")
    if days < 1:
        raise PlanningError("days", f"must be ≥ 1, got {days}.", "give a whole number of days.")
    step = 24.0 / arr.size
    lines = ["epoch_start,rate_rps,input_len,output_len"]
    for d in range(days):
        for i, v in enumerate(arr):
            lines.append(f"{d * 24 + i * step!r},{float(peak_rps * v / arr.max())!r},{float(input_len)!r},"
                         f"{float(output_len)!r}")
    series = parse_epoch_table(model, "\n".join(lines), epoch_hours, source=source)
    return series


def load_demand(model: str, path: str | Path, epoch_hours: float, *, histogram: bool = False) -> DemandSeries:
    """Read a demand file: an epoch table (header starts with ``epoch_start``) or a request trace (Azure CSV,
    Mooncake JSONL/CSV, plain ``arrival_s,input_tokens,output_tokens``; see :mod:`planning.traces`).

    Raises
    ------
    PlanningError
        Missing file, unreadable or invalid content (naming the row and column).
    """
    p = Path(path)
    if not p.is_file():
        raise PlanningError(f"--demand {model}", f"file {str(p)!r} does not exist.", "check the path.")
    from planning.traces import read_trace

    head = p.open("rb").read(4096).decode("utf-8-sig", errors="replace").lstrip()
    if head.lower().startswith("epoch_start"):
        if p.stat().st_size > MAX_TABLE_BYTES:
            raise PlanningError(p.name, f"is larger than {MAX_TABLE_BYTES // 1_000_000} MB.", "give one row per epoch.")
        return parse_epoch_table(model, p.read_text(encoding="utf-8-sig"), epoch_hours, source=p.name)
    return from_trace(model, read_trace(p), epoch_hours, histogram=histogram)


def parse_demand_text(model: str, text: str, epoch_hours: float, *, name: str = "upload",
                      histogram: bool = False) -> DemandSeries:
    """Like :func:`load_demand` for text already in memory (uploads)."""
    if text.lstrip("\ufeff \n\r\t").lower().startswith("epoch_start"):
        return parse_epoch_table(model, text, epoch_hours, source=name)
    return from_trace(model, parse_trace(text, source=name), epoch_hours, histogram=histogram)


def align(series: Sequence[DemandSeries]) -> int:
    """Check that every series has the same epoch length; return the horizon (the longest series, in epochs).

    Shorter series are extended by :func:`epoch_rates` holding their last epoch.

    Raises
    ------
    PlanningError
        Different epoch lengths or duplicate models.
    """
    if not series:
        raise PlanningError("demand", "no demand series given.", "pass --demand MODEL=FILE at least once.")
    models = [s.model for s in series]
    dup = next((m for m in models if models.count(m) > 1), None)
    if dup:
        raise PlanningError("demand", f"{dup!r} is given twice.", "give one demand file per model.")
    lengths = {s.epoch_hours for s in series}
    if len(lengths) > 1:
        raise PlanningError("epoch", f"series have different epoch lengths {sorted(lengths)}.", "use one --epoch.")
    return max(len(s) for s in series)


def at(series: DemandSeries, e: int) -> int:
    """Index of epoch ``e`` in ``series`` (shorter series hold their last epoch)."""
    return min(e, len(series) - 1)
