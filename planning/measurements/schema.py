"""One measured serving benchmark point in the project's own schema, with its bounds and the field it came from."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from planning.errors import PlanningError, quote

ENGINES = ("vllm", "sglang", "trtllm", "tgi", "nim-trtllm", "other")
DTYPES = ("bf16", "fp16", "fp8", "mxfp4")
MAX_COUNT = 64  # GPUs in one node
MAX_TOKENS = 16_777_216  # one request's tokens (perf.model.MAX_TOKENS)
MAX_CONCURRENCY = 65_536  # closed-loop clients (simulate.run.MAX_CONCURRENCY)
MAX_RATE = 1e5  # requests per second offered to one instance
MAX_REQUESTS = 1_000_000
# Latencies in milliseconds: an inter-token latency below 0.1 ms or a TTFT below 0.5 ms is no GPU's step (the file
# holds seconds); above these tops the file holds microseconds, or the run was broken.
LATENCY_BOUNDS_MS = {"ttft": (0.5, 3_600_000.0), "itl": (0.1, 10_000.0), "tpot": (0.1, 10_000.0)}
MAX_OUTPUT_TOKENS_PER_S = 1e7
MAX_REQUESTS_PER_S = 1e5

LATENCY_FIELDS = ("ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_mean", "itl_ms_p50", "itl_ms_p99",
                  "tpot_ms_mean", "tpot_ms_p50", "tpot_ms_p99")

MEASURED_BAND = "measured (yours)"  # the band of plans, templates and instances on your trusted fits


@dataclass(frozen=True)
class Measurement:
    """One benchmark run of one node: setup, workload, measured statistics and where it came from.

    ``concurrency`` set: a closed loop of that many clients (``vllm bench serve --max-concurrency``, GuideLLM
    ``concurrent``); else ``request_rate`` requests/s (Poisson; ``math.inf`` = every prompt at once). Latencies in
    ms, None where the file does not say. ``source`` names the tool (``vllm-bench-serve``, ``guidellm``, ``csv``);
    ``file`` the file it was read from and ``instance`` the plan instance it measured (``validate-plan``), if any.
    """

    model: str
    gpu: str
    count: int
    tp: int
    engine: str
    engine_version: str
    dtype: str
    input_len: float
    output_len: float
    concurrency: int | None
    request_rate: float | None
    requests: int | None
    # a closed loop's mean requests in flight (Little's law: req/s × (TTFT + output × ITL)) when its clients kept
    # fewer busy than ``concurrency`` (llmperf's waves); the fit simulates that occupancy (``fit.simulate_point``)
    in_flight: float | None = None
    ttft_ms_mean: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    itl_ms_mean: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    tpot_ms_mean: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p99: float | None = None
    output_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    slo_attainment: float | None = None  # share of requests within the run's SLOs (vLLM --goodput)
    source: str = "csv"
    date: str = ""
    file: str = ""
    instance: str = ""
    # per request (``vllm bench serve --save-detailed``), successful requests only: TTFT, and TPOT as the mean of
    # the request's inter-token latencies (None for a one-token output); never stored, read again from the file
    ttft_ms_each: tuple[float, ...] = field(default=(), repr=False, compare=False)
    tpot_ms_each: tuple[float | None, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        check_measurement(self)

    @property
    def key(self) -> tuple[str, str, int, int, str]:
        """(model, GPU, count, TP, engine): the setting one set of corrections is fitted for."""
        return (self.model, self.gpu, self.count, self.tp, self.engine)

    @property
    def label(self) -> str:
        """A short name of the point for messages: file and load."""
        load = f"concurrency {self.concurrency}" if self.concurrency else f"rate {self.request_rate:g} req/s"
        return f"{self.file or self.source} ({self.model} on {self.count}x{self.gpu} TP{self.tp}, {load})"

    def as_row(self) -> dict[str, Any]:
        """The stored row (CSV columns of :data:`COLUMNS`)."""
        return {k: v for k, v in asdict(self).items() if k in COLUMNS}

    def slo_shares(self, ttft_ms: float | None, tpot_ms: float | None) -> tuple[float, float, float] | None:
        """Shares of the measured requests within the TTFT SLO, the TPOT SLO and both (an SLO not given is met);
        None when the file has no per-request latencies."""
        if not self.ttft_ms_each:
            return None
        ttft_ok = [not ttft_ms or t <= ttft_ms for t in self.ttft_ms_each]
        tpot_ok = [not tpot_ms or t is None or t <= tpot_ms for t in self.tpot_ms_each]
        n = len(ttft_ok)
        return sum(ttft_ok) / n, sum(tpot_ok) / n, sum(a and b for a, b in zip(ttft_ok, tpot_ok, strict=True)) / n


PER_REQUEST = ("ttft_ms_each", "tpot_ms_each")
FILE_KEYS = {"ttft_ms_each": "ttfts", "tpot_ms_each": "itls"}  # vLLM --save-detailed's keys they are read from
COLUMNS = tuple(f.name for f in fields(Measurement) if f.name not in PER_REQUEST)
REQUIRED = ("model", "gpu", "count", "tp", "input_len", "output_len")


def _where(m: Measurement, name: str) -> str:
    return f"{m.file}:{name}" if m.file else name


def _check_number(m: Measurement, name: str, lo: float, hi: float, fix: str, *, allow_inf: bool = False) -> None:
    v = getattr(m, name)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        raise PlanningError(_where(m, name), f"{quote(v)} is not a number.", fix)
    if allow_inf and v == math.inf:
        return
    if not (lo <= v <= hi):
        raise PlanningError(_where(m, name), f"{quote(v)} is outside [{lo:g}, {hi:g}].", fix)


def _check_latency(m: Measurement, name: str) -> None:
    v = getattr(m, name)
    if v is None:
        return
    lo, hi = LATENCY_BOUNDS_MS[name.split("_")[0]]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise PlanningError(_where(m, name), f"{quote(v)} is not a finite number of milliseconds.",
                            "write the latency in ms as a plain number.")
    if v <= 0:
        raise PlanningError(_where(m, name), f"{quote(v)} ms is not a positive latency.",
                            "a latency is > 0 ms; check the file was written by the benchmark, not edited.")
    if v < lo:
        raise PlanningError(_where(m, name), f"{v:g} ms is below any GPU's step time: the value is probably in "
                            "seconds.", "convert to milliseconds (× 1000).")
    if v > hi:
        raise PlanningError(_where(m, name), f"{v:g} ms is above {hi:g} ms: the value is probably in "
                            "microseconds, or the run failed.", "convert to milliseconds (÷ 1000), or rerun.")


def check_measurement(m: Measurement) -> None:
    """Refuse a point whose fields are out of range, naming the field and the fix.

    Raises
    ------
    PlanningError: the first bad field (units off by 1000, negative or non-finite values, absurd rates).
    """
    for name in ("model", "gpu", "engine", "engine_version", "dtype", "source", "date", "file", "instance"):
        if not isinstance(getattr(m, name), str):
            raise PlanningError(_where(m, name), f"{quote(getattr(m, name))} is not text.", "write a plain string.")
    for name in ("model", "gpu"):
        if not getattr(m, name):
            raise PlanningError(_where(m, name), "is not stated.",
                                f"pass --{name} (or a sidecar YAML with {name}:) for this file.")
    if m.engine not in ENGINES:
        raise PlanningError(_where(m, "engine"), f"unknown engine {quote(m.engine)}.", f"use one of {', '.join(ENGINES)}.")
    if m.dtype not in DTYPES:
        raise PlanningError(_where(m, "dtype"), f"unknown dtype {quote(m.dtype)}.", f"use one of {', '.join(DTYPES)}.")
    _check_number(m, "count", 1, MAX_COUNT, "pass --count, the GPUs of the node (1 to 64).")
    _check_number(m, "tp", 1, MAX_COUNT, "pass --tp, the tensor-parallel degree (1 to the GPU count).")
    if m.tp > m.count or m.count % m.tp:
        raise PlanningError(_where(m, "tp"), f"TP {m.tp} does not divide {m.count} GPUs.",
                            "pass the --tp the engine ran with (a divisor of --count).")
    for name in ("input_len", "output_len"):
        _check_number(m, name, 1, MAX_TOKENS, f"give the mean {name.replace('_', ' ')} in tokens (≥ 1).")
    _check_number(m, "concurrency", 1, MAX_CONCURRENCY, f"give the clients of the closed loop (1 to {MAX_CONCURRENCY:,}).")
    _check_number(m, "request_rate", 1e-6, MAX_RATE, f"give the request rate in req/s (at most {MAX_RATE:g}) or inf.",
                  allow_inf=True)
    _check_number(m, "requests", 1, MAX_REQUESTS, f"give the completed requests (1 to {MAX_REQUESTS:,}).")
    if m.concurrency is None and m.request_rate is None:
        raise PlanningError(_where(m, "concurrency"), "neither a concurrency nor a request rate is stated.",
                            "add the closed loop's clients (concurrency) or the request rate (req/s).")
    for name in LATENCY_FIELDS:
        _check_latency(m, name)
    _check_number(m, "output_tokens_per_s", 1e-6, MAX_OUTPUT_TOKENS_PER_S, "give output tokens per second (> 0).")
    _check_number(m, "requests_per_s", 1e-9, MAX_REQUESTS_PER_S, "give completed requests per second (> 0).")
    _check_number(m, "slo_attainment", 0.0, 1.0, "give the share of requests within the SLOs, in [0, 1].")
    _check_in_flight(m)
    _check_per_request(m)
    if all(getattr(m, n) is None for n in (*LATENCY_FIELDS, "output_tokens_per_s", "requests_per_s")):
        raise PlanningError(_where(m, "ttft_ms_mean"), "states no measured latency or throughput.",
                            "give at least one of TTFT, ITL, TPOT or output tokens/s.")


def _check_in_flight(m: Measurement) -> None:
    """A closed loop's mean occupancy: at least one request and at most its clients."""
    _check_number(m, "in_flight", 1.0, MAX_CONCURRENCY, "give the mean requests in flight (≥ 1), or leave it empty.")
    if m.in_flight is None:
        return
    if m.concurrency is None:
        raise PlanningError(_where(m, "in_flight"), "is a closed loop's occupancy, but no concurrency is stated.",
                            "state the clients as the concurrency, or leave in_flight empty for a rate.")
    if m.in_flight > m.concurrency:
        raise PlanningError(_where(m, "in_flight"), f"{m.in_flight:g} requests in flight with {m.concurrency} "
                            "clients.", "give at most the clients (Little's law on the run's own rate and latencies).")


def _check_per_request(m: Measurement) -> None:
    """Per-request latencies: one TPOT per TTFT, each a finite number of ms ≥ 0."""
    if len(m.tpot_ms_each) != len(m.ttft_ms_each):
        raise PlanningError(_where(m, "itls"), f"{len(m.tpot_ms_each)} requests' inter-token latencies for "
                            f"{len(m.ttft_ms_each)} TTFTs.", "use the file as vLLM wrote it (one list per request).")
    for name in PER_REQUEST:
        for v in getattr(m, name):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
                                  or v < 0):
                raise PlanningError(_where(m, FILE_KEYS[name]), f"holds {quote(v)}, not a latency.",
                                    "use the file as vLLM wrote it (seconds, ≥ 0).")
