"""Request traces: arrival times with prompt and output token counts, read from the public trace formats.

Formats (detected from the header / first line, never from the file name alone):

- **Azure LLM inference trace** CSV (Splitwise 2023, DynamoLLM 2024): ``TIMESTAMP,ContextTokens,GeneratedTokens``
  with wall-clock timestamps ``YYYY-MM-DD hh:mm:ss.fffffff``.
- **Mooncake** JSONL (one object per line with ``timestamp`` in ms since trace start, ``input_length``,
  ``output_length``; other keys such as ``hash_ids`` are ignored), or its CSV rendering
  ``timestamp_ms,input_length,output_length``.
- A **plain** CSV ``arrival_s,input_tokens,output_tokens`` (seconds since the first request).

Every reader returns a :class:`Trace` (arrivals relative to the first request, sorted), so the simulator's
arrival process and the timeline's demand series read one shape. Files are untrusted: size and row limits,
encodings and malformed rows are reported as :class:`~planning.errors.PlanningError` naming the row and column.

Reading is streamed and bounded in memory: a file is decoded and parsed line by line (no whole-file text, no
Python object per request), rows land in typed arrays (24 bytes a request), and the caps are checked as they
are reached: :data:`MAX_TRACE_BYTES` on the file, :data:`MAX_TRACE_ROWS` requests, :data:`MAX_LINE_CHARS`
per line (a file without line breaks is refused at the first oversized line, not after reading it whole).
JSONL lines go through the bounded JSON reader (:func:`planning.safeio.load_json_line`: number length, depth,
duplicate keys refused).
"""

from __future__ import annotations

import array
import csv
import io
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import numpy as np

from planning.errors import PlanningError

MAX_TRACE_BYTES = 256 * 1024 * 1024
"""Largest trace file read (256 MiB: a week of Azure 2024 traffic is ~150 MB)."""
MAX_TRACE_ROWS = 10_000_000
"""Most requests read (240 MB of arrays; BurstGPT's largest file has 5.3 M)."""
MAX_LINE_CHARS = 1_000_000
"""Longest line read (a request row is tens of characters; a Mooncake line with its hash ids a few thousand)."""
MAX_TOKENS = 10_000_000
"""Largest token count accepted for one request (no model has a context near this)."""


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of one trace, sorted by arrival.

    Attributes
    ----------
    arrival_s:
        Arrival times in seconds since the first request (float64, non-decreasing, starts at 0).
    input_tokens, output_tokens:
        Prompt and generated tokens per request (int64, ≥ 0 and ≥ 1 respectively after reading).
    source:
        Where the trace came from (file name and format), shown next to figures derived from it.
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise PlanningError("trace", "arrival, input and output columns differ in length.",
                                "give one row per request.")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        """Time from the first to the last arrival (0 for fewer than two requests)."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0

    @property
    def mean_rate(self) -> float:
        """Requests per second over the trace's span ((n − 1) / duration; 0 when undefined)."""
        return (len(self) - 1) / self.duration_s if self.duration_s > 0 else 0.0

    def rescaled(self, rate_rps: float) -> Trace:
        """The same request mix and burstiness with inter-arrival times scaled to a mean rate of ``rate_rps``."""
        if not (rate_rps > 0 and math.isfinite(rate_rps)):
            raise PlanningError("rate", f"rate must be a positive number, got {rate_rps!r}.", "give req/s > 0.")
        if self.mean_rate <= 0:
            raise PlanningError("trace", "the trace has no time span, so it has no rate to rescale.",
                                "use a trace with at least two distinct arrival times.")
        factor = self.mean_rate / rate_rps
        return Trace(self.arrival_s * factor, self.input_tokens, self.output_tokens,
                     f"{self.source} rescaled to {rate_rps:g} req/s")

    def window(self, start_s: float, end_s: float) -> Trace:
        """Requests with ``start_s ≤ arrival < end_s`` (times kept relative to the original first request)."""
        lo, hi = np.searchsorted(self.arrival_s, [start_s, end_s], side="left")
        return Trace(self.arrival_s[lo:hi], self.input_tokens[lo:hi], self.output_tokens[lo:hi], self.source)


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _token(value: str, row: int, column: str, *, minimum: int) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlanningError(f"trace row {row}, column {column}", f"{_short(value)} is not a number.",
                            "give a whole number of tokens.") from None
    if not math.isfinite(number) or number < minimum or number > MAX_TOKENS:
        raise PlanningError(f"trace row {row}, column {column}",
                            f"{_short(value)} is outside {minimum}…{MAX_TOKENS:,} tokens.",
                            "give a whole number of tokens in that range.")
    return round(number)


def _seconds(value: str, row: int, column: str, scale: float) -> float:
    try:
        number = float(value) * scale
    except (TypeError, ValueError):
        raise PlanningError(f"trace row {row}, column {column}", f"{_short(value)} is not a number.",
                            "give a time as a number.") from None
    if not math.isfinite(number) or abs(number) > 1e10:
        raise PlanningError(f"trace row {row}, column {column}", f"{_short(value)} is not a usable time.",
                            "give a finite time.")
    return number


def _wallclock(value: str, row: int) -> float:
    text = value.strip()
    if "." in text:  # Azure writes 7 fractional digits; datetime accepts at most 6
        head, frac = text.split(".", 1)
        text = f"{head}.{frac[:6]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise PlanningError(f"trace row {row}, column TIMESTAMP", f"{_short(value)} is not a timestamp.",
                            "use 'YYYY-MM-DD hh:mm:ss.ffffff' as in the Azure trace.") from None


class _Rows:
    """Arrival times and token counts as typed arrays (8 bytes a value), capped at :data:`MAX_TRACE_ROWS`."""

    def __init__(self) -> None:
        self.arrivals = array.array("d")
        self.inputs = array.array("q")
        self.outputs = array.array("q")

    def add(self, arrival: float, inp: int, out: int) -> None:
        if len(self.arrivals) >= MAX_TRACE_ROWS:
            raise PlanningError("trace", f"holds more than {MAX_TRACE_ROWS:,} requests (the limit for one trace).",
                                "cut the trace to the window you need.")
        self.arrivals.append(arrival)
        self.inputs.append(inp)
        self.outputs.append(out)

    def trace(self, source: str) -> Trace:
        if not self.arrivals:
            raise PlanningError("trace", f"{source} holds no requests.", "give at least one request row.")
        t = np.frombuffer(self.arrivals, dtype=np.float64)
        order = np.argsort(t, kind="stable")
        t = t[order]
        t -= t[0]
        return Trace(t, np.frombuffer(self.inputs, dtype=np.int64)[order],
                     np.frombuffer(self.outputs, dtype=np.int64)[order], source)


def _lines(stream: IO[str], source: str) -> Iterator[str]:
    """Lines of ``stream``, each at most :data:`MAX_LINE_CHARS` (longer: an error naming the line)."""
    line_no = 0
    while True:
        try:
            line = stream.readline(MAX_LINE_CHARS + 1)
        except UnicodeDecodeError as exc:
            raise PlanningError("trace", f"{source} is not UTF-8 text near line {line_no + 1} (byte 0x"
                                f"{exc.object[exc.start]:02x}).", "save the trace as UTF-8 CSV or JSONL.") from None
        if not line:
            return
        line_no += 1
        if len(line) > MAX_LINE_CHARS:
            raise PlanningError(f"trace line {line_no}", f"is longer than {MAX_LINE_CHARS:,} characters.",
                                "give one request per line (CSV rows or Mooncake JSONL objects).")
        yield line


_CSV_LAYOUTS: dict[tuple[str, ...], tuple[str, str, str, str]] = {
    # header (lower-cased) -> (time column, input column, output column, kind)
    ("timestamp", "contexttokens", "generatedtokens"): ("TIMESTAMP", "ContextTokens", "GeneratedTokens", "azure"),
    ("timestamp_ms", "input_length", "output_length"): ("timestamp_ms", "input_length", "output_length", "ms"),
    ("arrival_s", "input_tokens", "output_tokens"): ("arrival_s", "input_tokens", "output_tokens", "s"),
}


def _read_csv(lines: Iterator[str], source: str) -> Trace:
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise PlanningError("trace", f"{source} is empty.", "give a header row and request rows.") from None
    except csv.Error as exc:
        raise PlanningError("trace", f"{source} has an unreadable header ({exc}).", "give a CSV header row.") from None
    key = tuple(h.strip().lower() for h in header)
    layout = _CSV_LAYOUTS.get(key[:3]) if len(key) >= 3 else None
    if layout is None:
        known = "; ".join(",".join(cols[:3]) for cols in _CSV_LAYOUTS.values())
        raise PlanningError("trace", f"{source} has header {_short(','.join(header))}, not a known trace format.",
                            f"use one of these headers: {known}.")
    t_col, in_col, out_col, kind = layout
    rows = _Rows()
    row_no = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise PlanningError(f"trace row {reader.line_num}", f"is not valid CSV ({exc}).",
                                f"give {t_col},{in_col},{out_col} on every row.") from None
        row_no = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) < 3:
            raise PlanningError(f"trace row {row_no}", f"has {len(row)} columns, expected 3.",
                                f"give {t_col},{in_col},{out_col} on every row.")
        if kind == "azure":
            arrival = _wallclock(row[0], row_no)
        else:
            arrival = _seconds(row[0], row_no, t_col, 1e-3 if kind == "ms" else 1.0)
        rows.add(arrival, _token(row[1], row_no, in_col, minimum=0), _token(row[2], row_no, out_col, minimum=0))
    return rows.trace(source)


def _read_jsonl(lines: Iterator[str], source: str) -> Trace:
    from planning.safeio import load_json_line

    rows = _Rows()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        field = f"trace line {line_no}"
        obj = load_json_line(line, field=field)
        if not isinstance(obj, dict):
            raise PlanningError(field, "is not a JSON object.", "give one JSON object per line (Mooncake JSONL).")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
        if missing:
            raise PlanningError(field, f"misses {', '.join(missing)}.",
                                "give timestamp (ms), input_length and output_length on every line.")
        rows.add(_seconds(_text(obj["timestamp"]), line_no, "timestamp", 1e-3),
                 _token(_text(obj["input_length"]), line_no, "input_length", minimum=0),
                 _token(_text(obj["output_length"]), line_no, "output_length", minimum=0))
    return rows.trace(source)


def _text(value: object) -> str:
    """A JSON value as the text the number readers parse (bools are not numbers)."""
    return "not-a-number" if isinstance(value, bool) else str(value)[:100]


def _parse(stream: IO[str], source: str) -> Trace:
    lines = _lines(stream, source)
    first = ""
    for first in lines:
        if first.strip():
            break
    rest = _chain(first, lines)
    if first.lstrip().startswith("{"):
        return _read_jsonl(rest, f"{source} (Mooncake JSONL)")
    return _read_csv(rest, source)


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    if first:
        yield first
    yield from rest


def parse_trace(text: str, *, source: str = "trace") -> Trace:
    """Parse trace text in any supported format (JSONL when the first non-blank character is ``{``)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return _parse(io.StringIO(text), source)


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file (Azure CSV, Mooncake JSONL or CSV, or plain ``arrival_s`` CSV), streamed.

    Raises
    ------
    PlanningError
        For a missing, oversized, non-UTF-8 or malformed file, naming the row and column; more than
        :data:`MAX_TRACE_ROWS` requests or a line above :data:`MAX_LINE_CHARS`.
    """
    p = Path(path)
    if not p.exists():
        raise PlanningError("trace", f"{p} does not exist.", "check the path.")
    if p.is_dir():
        raise PlanningError("trace", f"{p.name} is a directory, not a trace file.", "give a CSV or JSONL file.")
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise PlanningError("trace", f"{p.name} is {size / 2**20:.0f} MiB, above the "
                                f"{MAX_TRACE_BYTES // 2**20} MiB limit.", "cut the trace to the window you need.")
        with p.open("rb") as raw:
            bounded = io.BufferedReader(_Capped(raw, MAX_TRACE_BYTES, p.name))  # a file that grows while read
            stream = io.TextIOWrapper(bounded, encoding="utf-8-sig", newline="")
            return _parse(stream, p.name)
    except OSError as exc:
        raise PlanningError("trace", f"cannot read {p.name}: {exc.strerror or exc}.",
                            "check the path and its permissions.") from None


class _Capped(io.RawIOBase):
    """A raw reader that refuses to go past ``limit`` bytes (the size checked before opening can grow)."""

    def __init__(self, raw: IO[bytes], limit: int, name: str) -> None:
        self.raw, self.left, self.name = raw, limit, name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise PlanningError("trace", f"{self.name} grew past the {MAX_TRACE_BYTES // 2**20} MiB limit "
                                "while being read.", "cut the trace to the window you need.")
        self.left -= len(data)
        buffer[: len(data)] = data
        return len(data)
