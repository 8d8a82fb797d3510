"""Simulation results: latency percentiles, SLO attainment, goodput, queueing, utilisation, KV pressure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

CDF_POINTS = 101  # quantiles 0, 1, ..., 100 % kept per model for CDF figures


@dataclass(frozen=True)
class Percentiles:
    """p50/p90/p99 and mean of one latency in ms (NaN when there is no sample)."""

    p50: float
    p90: float
    p99: float
    mean: float

    @classmethod
    def of(cls, values_ms: np.ndarray) -> Percentiles:
        v = values_ms[np.isfinite(values_ms)]
        if v.size == 0:
            return cls(float("nan"), float("nan"), float("nan"), float("nan"))
        p50, p90, p99 = np.percentile(v, [50, 90, 99])
        return cls(float(p50), float(p90), float(p99), float(v.mean()))


@dataclass(frozen=True)
class ModelSim:
    """One model: prefill side (TTFT, its queueing) and decode side (TPOT, its queueing), attainment, goodput."""

    model: str
    requests: int
    finished: int
    dropped: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    queue_prefill_ms: Percentiles  # arrival → prefill start (aggregated: → admission)
    queue_decode_ms: Percentiles  # first token → decode admission (disaggregated only)
    attainment: float  # share of requests within both targets (unfinished and dropped count as misses)
    attainment_ttft: float
    attainment_tpot: float
    goodput_tokens_per_s: float  # output tokens/s of requests within both targets
    goodput_rps: float
    output_tokens_per_s: float
    ttft_cdf_ms: tuple[float, ...] = ()  # CDF_POINTS quantiles
    tpot_cdf_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class InstanceSim:
    """One serving instance: requests it served, busy share of the run, KV-cache fill (mean and peak)."""

    name: str
    model: str
    phase: str
    template_id: str
    region: str
    requests: int
    utilisation: float
    kv_mean: float
    kv_peak: float
    tokens_out: int = 0  # tokens generated here (prefill instances: the first token of each request)
    peak_batch: int = 0
    mean_batch: float = 0.0  # time-averaged running sequences (decode and aggregated instances)


@dataclass(frozen=True)
class SimResult:
    """A whole run: per model, per instance, overall attainment and goodput, and how it was run."""

    models: tuple[ModelSim, ...]
    instances: tuple[InstanceSim, ...]
    duration_s: float
    requests: int
    attainment: float
    goodput_tokens_per_s: float
    arrivals: str
    rate_scale: float
    seed: int
    router: str
    wall_s: float
    events: int
    finish_events: int = 0  # equals ``requests`` when every request finished (or dropped) exactly once
    notes: tuple[str, ...] = field(default_factory=tuple)
    interruptions: int = 0  # spot interruptions replayed (SimConfig.interruptions)
    down_instance_s: float = 0.0  # instance-seconds the interrupted spot instances were down

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN kept as float NaN; ``json.dumps`` writes it as NaN)."""
        return asdict(self)

    def model(self, model_id: str) -> ModelSim:
        for m in self.models:
            if m.model == model_id:
                return m
        raise KeyError(model_id)

    def saturated(self, utilisation: float = 0.95, kv: float = 0.98) -> tuple[InstanceSim, ...]:
        """Prefill instances busy ≥ ``utilisation`` of the run, and any instance whose KV cache filled to ≥ ``kv``.

        A decode or aggregated engine steps whenever it has a running sequence, so its busy share says little;
        its limit shows as KV pressure (and as TPOT).
        """
        return tuple(i for i in self.instances
                     if (i.phase == "prefill" and i.utilisation >= utilisation) or i.kv_peak >= kv)

    def bottlenecks(self, target: float = 0.99) -> tuple[dict[str, Any], ...]:
        """For each model below ``target`` attainment: the phase that misses more often and that phase's most
        loaded instance (highest of busy share and KV peak) — where to look first."""
        out = []
        for m in self.models:
            if not m.requests or m.attainment >= target:
                continue
            phase = "prefill" if m.attainment_ttft < m.attainment_tpot else "decode"
            cands = [i for i in self.instances if i.model == m.model and i.phase in (phase, "aggregated")]
            worst = max(cands, key=lambda i: max(i.utilisation, i.kv_peak), default=None)
            out.append({"model": m.model, "attainment": m.attainment, "phase": phase,
                        "instance": worst.name if worst else None,
                        "utilisation": worst.utilisation if worst else None,
                        "kv_peak": worst.kv_peak if worst else None})
        return tuple(out)


@dataclass(frozen=True)
class HeadroomResult:
    """Highest uniform demand scale with attainment ≥ target (bisection over simulated runs)."""

    scale: float
    target: float
    evaluations: tuple[tuple[float, float], ...]  # (scale, attainment) in the order run

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BenchmarkResult:
    """A closed-loop single-node run, named like published serving benchmarks."""

    model: str
    gpu: str
    count: int
    tp: int
    dtype: str
    input_len: int
    output_len: int
    concurrency: int
    requests: int
    ttft_ms_mean: float
    ttft_ms_p50: float
    ttft_ms_p90: float
    ttft_ms_p99: float
    itl_ms_mean: float  # token-weighted: total decode time / tokens after the first
    itl_ms_p90: float  # p90 of per-request mean inter-token latency
    tpot_ms_mean: float  # mean over requests of their mean inter-token latency
    tpot_ms_p50: float
    e2e_latency_ms_mean: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RequestTimes:
    """The simulator's per-request record as arrays (times in seconds, one entry per request)."""

    arrival: np.ndarray
    out: np.ndarray  # output tokens
    t_start: np.ndarray  # prefill start
    t_first: np.ndarray  # first token
    t_dec_admit: np.ndarray  # admitted to a decode engine
    t_done: np.ndarray
    dropped: np.ndarray  # bool

    @classmethod
    def of(cls, req: Any) -> RequestTimes:
        """From a ``planning.simulate.engine.Requests`` (its lists)."""
        return cls(np.array(req.arrival, dtype=float), np.array(req.out, dtype=float),
                   np.array(req.t_start, dtype=float), np.array(req.t_first, dtype=float),
                   np.array(req.t_dec_admit, dtype=float), np.array(req.t_done, dtype=float),
                   np.array(req.dropped, dtype=bool))

    def select(self, mask: np.ndarray) -> RequestTimes:
        """The requests where ``mask`` holds."""
        return RequestTimes(self.arrival[mask], self.out[mask], self.t_start[mask], self.t_first[mask],
                            self.t_dec_admit[mask], self.t_done[mask], self.dropped[mask])


def model_metrics(model_id: str, slo_ttft_ms: float | None, slo_tpot_ms: float | None, times: RequestTimes,
                  window_s: float) -> ModelSim:
    """Metrics of one model's requests."""
    arrival, out, t_first, t_done, dropped = times.arrival, times.out, times.t_first, times.t_done, times.dropped
    t_start, t_dec_admit = times.t_start, times.t_dec_admit
    n = len(arrival)
    ttft = (t_first - arrival) * 1e3
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (t_done - t_first) * 1e3 / np.maximum(out - 1, 1), 0.0)
    e2e = (t_done - arrival) * 1e3
    done = np.isfinite(t_done) & ~dropped
    ok_ttft = done & (ttft <= slo_ttft_ms if slo_ttft_ms is not None else True)
    ok_tpot = done & (tpot <= slo_tpot_ms if slo_tpot_ms is not None else True)
    ok = ok_ttft & ok_tpot
    window = max(window_s, 1e-9)

    def share(mask: np.ndarray) -> float:
        return float(mask.sum() / n) if n else float("nan")

    def cdf(values: np.ndarray) -> tuple[float, ...]:
        v = values[done & np.isfinite(values)]
        return tuple(float(x) for x in np.percentile(v, np.linspace(0, 100, CDF_POINTS))) if v.size else ()

    return ModelSim(
        model=model_id, requests=n, finished=int(done.sum()), dropped=int(dropped.sum()),
        slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
        ttft_ms=Percentiles.of(np.where(done, ttft, np.nan)), tpot_ms=Percentiles.of(np.where(done, tpot, np.nan)),
        e2e_ms=Percentiles.of(np.where(done, e2e, np.nan)),
        queue_prefill_ms=Percentiles.of((t_start - arrival) * 1e3),
        queue_decode_ms=Percentiles.of((t_dec_admit - t_first) * 1e3),
        attainment=share(ok), attainment_ttft=share(ok_ttft), attainment_tpot=share(ok_tpot),
        goodput_tokens_per_s=float(out[ok].sum() / window), goodput_rps=float(ok.sum() / window),
        output_tokens_per_s=float(out[done].sum() / window),
        ttft_cdf_ms=cdf(ttft), tpot_cdf_ms=cdf(tpot),
    )
