"""Fit the perf model's physical corrections to the user's end-to-end measurements through the simulator.

Formulation. For one setting k = (model, GPU, count, TP, engine) with measured points i ∈ M_k and quantities
q ∈ {TTFT, ITL (else TPOT), output tok/s} measured at i, the simulator's benchmark mode (``simulate.bench.benchmark``
for a closed loop of c clients, ``simulate.bench.replay`` for Poisson arrivals at a rate) predicts ŷ_iq(x) under the
corrections x = (ln a_p, ln a_d, s):
  a_p  multiplies the GPU's compute efficiency (prefill rate),  a_p · eff_compute ≤ 1,
  a_d  multiplies its memory-bandwidth efficiency (decode rate), a_d · eff_bw ≤ 1,
  s    adds to its per-step overhead (ms),                      step_ms + s ≥ 0.
  minimize  mean_iq ρ(ln(ŷ_iq(x) / y_iq))  +  λ (x₁² + x₂² + (x₃ / 10 ms)²)   over the free corrections F,
  ρ(r) = σ² ln(1 + (r/σ)²)  (Cauchy, σ = 0.10: the model's typical error on runs it never saw)
(λ = 0.05: a correction must buy more than its own size in fit, so few points stay near the model)
by Nelder–Mead on the box (the simulator is piecewise in x); the corrections outside F stay 0.
Robust: a point missed by r ≫ σ pulls with a bounded force (ρ' ≤ σ), so one run the simulator cannot reproduce
(a client that saturated, a TTFT the API server inflated under load) does not drag a rate the other points hold.
Identified: with two or more measured loads, a correction is free only when the quantity that measures it is
measured at two loads or more — the prefill rate by TTFT, the decode rate and step overhead by ITL / TPOT or
output tok/s — so every correction is one some other point can contradict (which the leave-one-out checks); a
single load fits what it measures.
The error of a point set is the median of |ŷ/y − 1| over its (point, quantity) pairs; the leave-one-out error
refits without each point and predicts it. A setting's corrections are *trusted* (used by plans) only when their
leave-one-out error beats the model's error before: a fit that only explains its own points changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planning.measurements.schema import Measurement
from planning.perf.calibration import Calibration
from planning.perf.engines import published_engine
from planning.perf.model import PerfModel
from planning.simulate.bench import benchmark, replay
from planning.simulate.metrics import BenchmarkResult

RIDGE = 0.05
ROBUST_SCALE = 0.10  # σ of the Cauchy loss: the perf model's median error on published runs it never saw (10-12 %)
STEP_SCALE_MS = 10.0  # the ridge counts 10 ms of step overhead like a factor e
MAX_SIM_REQUESTS = 400  # a point's simulated run (the measured count when smaller): enough for stable means
OPEN_LOOP_SEED = 0
QUANTITIES = ("ttft_ms", "itl_ms", "output_tokens_per_s")


@dataclass(frozen=True)
class Corrections:
    """Factors on the GPU's compute (prefill) and bandwidth (decode) efficiency, and ms added to each step."""

    prefill: float = 1.0
    decode: float = 1.0
    step_ms: float = 0.0

    @property
    def is_identity(self) -> bool:
        return self.prefill == 1.0 and self.decode == 1.0 and self.step_ms == 0.0


def corrected_perf(perf: PerfModel, gpu: str, c: Corrections) -> PerfModel:
    """A perf model whose ``gpu`` calibration carries ``c`` (efficiencies capped at 1, step overhead ≥ 0)."""
    if c.is_identity:
        return perf
    cal = perf.gpu_calibration(gpu)
    fixed = replace(cal, eff_compute_bf16=min(1.0, cal.eff_compute_bf16 * c.prefill),
                    eff_compute_fp8=min(1.0, cal.eff_compute_fp8 * c.prefill),
                    eff_bw=min(1.0, cal.eff_bw * c.decode), step_ms=max(0.0, cal.step_ms + c.step_ms),
                    provenance="measured", source=f"{cal.source}; corrected by your measurements")
    calib = Calibration(gpus={**perf.calibration.gpus, gpu: fixed}, settings=perf.calibration.settings,
                        as_of=perf.calibration.as_of, path=perf.calibration.path)
    return PerfModel(catalog=perf.catalog, calibration=calib, profiles=perf.profiles, bands=perf.bands)


def measured(m: Measurement, q: str) -> float | None:
    """The measured value of quantity ``q`` (ITL falls back to TPOT, the mean to the median)."""
    if q == "ttft_ms":
        return m.ttft_ms_mean if m.ttft_ms_mean is not None else m.ttft_ms_p50
    if q == "itl_ms":
        for v in (m.itl_ms_mean, m.tpot_ms_mean, m.itl_ms_p50, m.tpot_ms_p50):
            if v is not None:
                return v
        return None
    return m.output_tokens_per_s


def predicted(r: BenchmarkResult, q: str) -> float:
    """The simulated value of quantity ``q``."""
    return {"ttft_ms": r.ttft_ms_mean, "itl_ms": r.itl_ms_mean, "output_tokens_per_s": r.output_tokens_per_s}[q]


def simulate_point(m: Measurement, perf: PerfModel) -> BenchmarkResult:
    """The simulator's run of ``m``'s setup and load, with the engine defaults of its engine and version: a
    closed loop (of ``m.in_flight`` clients when stated: :func:`_occupancy`) or Poisson arrivals at the rate."""
    if m.concurrency is not None and m.in_flight is not None:
        return _occupancy(m, m.in_flight, perf)
    eng = published_engine(perf, m.engine, m.engine_version, m.gpu, m.tp)
    kw: dict[str, Any] = {"chunk_tokens": eng.max_batched_tokens, "max_seqs": eng.max_num_seqs, "scheduling": eng.scheduling,
          "memory": eng.memory, "kv_policy": "reserve" if eng.memory.hold == "reserve" else "grow",
          "router": eng.router}
    n = min(m.requests or MAX_SIM_REQUESTS, MAX_SIM_REQUESTS)
    common: dict[str, Any] = {"count": m.count, "tp": m.tp, "dtype": m.dtype, "perf": perf, **kw}
    inp, out = max(1, round(m.input_len)), max(1, round(m.output_len))
    if m.concurrency is not None:
        n = max(n, m.concurrency)
        return benchmark(m.model, m.gpu, input_len=inp, output_len=out, concurrency=m.concurrency, requests=n,
                         **common)
    rate = m.request_rate or math.inf
    rng = np.random.default_rng(OPEN_LOOP_SEED)
    arrivals = np.zeros(n) if math.isinf(rate) else np.cumsum(rng.exponential(1.0 / rate, n))
    return replay(m.model, m.gpu, arrival_s=arrivals, input_lens=np.full(n, inp), output_lens=np.full(n, out),
                  **common)


def _occupancy(m: Measurement, in_flight: float, perf: PerfModel) -> BenchmarkResult:
    """A closed loop that kept ``in_flight`` requests busy on average over its run (Little's law on its own rate
    and latencies, ramp-up and drain included), not its ``concurrency`` clients. A simulated closed loop of n
    clients and the same requests has its own drain, so its time-averaged occupancy L(n) = requests/s × mean
    end-to-end latency is below n; the run is the pair of closed loops whose L(n) ≤ L < L(n + 1) (n + 1 at most
    the clients), weighted by where L falls between them. The mean quantities are interpolated; the rest are
    the lower loop's."""
    runs: dict[int, BenchmarkResult] = {}

    def run(n: int) -> BenchmarkResult:
        if n not in runs:
            runs[n] = simulate_point(replace(m, concurrency=n, in_flight=None), perf)
        return runs[n]

    def busy(n: int) -> float:
        return run(n).requests_per_s * run(n).e2e_latency_ms_mean / 1e3

    top = m.concurrency or 1
    n = max(1, min(top - 1, math.floor(in_flight)))
    if top > 1:  # first guess from the drain of the loop at L, then walk to the bracket
        n = max(1, min(top - 1, math.floor(in_flight * n / max(busy(n), 1e-9))))
        while n > 1 and busy(n) > in_flight:
            n -= 1
        while n + 1 < top and busy(n + 1) <= in_flight:
            n += 1
    if n + 1 > top:
        return run(n)
    lo, hi = busy(n), busy(n + 1)
    w = min(1.0, max(0.0, (in_flight - lo) / (hi - lo))) if hi > lo else 0.0
    low, high = run(n), run(n + 1)
    mixed = {f: (1.0 - w) * getattr(low, f) + w * getattr(high, f) for f in
             ("ttft_ms_mean", "itl_ms_mean", "tpot_ms_mean", "e2e_latency_ms_mean", "output_tokens_per_s",
              "total_tokens_per_s", "requests_per_s")}
    return replace(low, **mixed)


@dataclass(frozen=True)
class PointError:
    """One measured quantity of one point beside the simulator's value."""

    point: Measurement
    quantity: str
    measured: float
    predicted: float

    @property
    def rel_error(self) -> float:
        return self.predicted / self.measured - 1.0


def point_errors(points: Sequence[Measurement], perf: PerfModel, c: Corrections = Corrections()) -> list[PointError]:
    """Every measured quantity of ``points`` beside the simulator under corrections ``c``."""
    out = []
    for m in points:
        run = simulate_point(m, corrected_perf(perf, m.gpu, c))
        for q in QUANTITIES:
            y = measured(m, q)
            if y is not None:
                out.append(PointError(m, q, y, predicted(run, q)))
    return out


def median_error(errors: Iterable[PointError]) -> float:
    """Median |predicted / measured − 1| (NaN for no points)."""
    vals = [abs(e.rel_error) for e in errors]
    return float(np.median(vals)) if vals else math.nan


def _from_x(x: Sequence[float] | np.ndarray) -> Corrections:
    return Corrections(prefill=math.exp(x[0]), decode=math.exp(x[1]), step_ms=float(x[2]))


def free_corrections(points: Sequence[Measurement]) -> tuple[bool, bool, bool]:
    """Which of (prefill, decode, step) ``points`` identify: with two or more loads, the prefill rate needs TTFT
    measured at two loads, the decode rate and step overhead ITL / TPOT or output tok/s at two; one load fits
    what it measures (see the module's formulation)."""
    def loads(quantities: tuple[str, ...]) -> int:
        return len({(m.concurrency, m.request_rate, m.input_len, m.output_len) for m in points
                    if any(measured(m, q) is not None for q in quantities)})

    need = 2 if loads(QUANTITIES) >= 2 else 1
    decode = loads(("itl_ms", "output_tokens_per_s")) >= need
    return loads(("ttft_ms",)) >= need, decode, decode


def robust_loss(log_ratio: float) -> float:
    """ρ(r) = σ² ln(1 + (r/σ)²): r² near 0, growing only with ln r beyond σ (:data:`ROBUST_SCALE`)."""
    return ROBUST_SCALE ** 2 * math.log1p((log_ratio / ROBUST_SCALE) ** 2)


def fit_corrections(points: Sequence[Measurement], perf: PerfModel, max_evals: int = 90) -> Corrections:
    """The corrections that make the simulator reproduce ``points`` (one setting), by the formulation above."""
    from scipy.optimize import minimize

    if not points:
        return Corrections()
    cal = perf.gpu_calibration(points[0].gpu)
    free = [i for i, f in enumerate(free_corrections(points)) if f]
    if not free:
        return Corrections()
    lo = np.array([-3.0, -3.0, -cal.step_ms])
    hi = np.array([math.log(1.0 / min(cal.eff_compute_bf16, cal.eff_compute_fp8)), math.log(1.0 / cal.eff_bw),
                   1000.0])

    def full(z: np.ndarray) -> np.ndarray:  # the free corrections in place, the others 0, inside the box
        x = np.zeros(3)
        x[free] = z
        return np.clip(x, lo, hi)

    def loss(z: np.ndarray) -> float:
        x = full(z)
        errs = point_errors(points, perf, _from_x(x))
        data = float(np.mean([robust_loss(math.log(e.predicted / e.measured)) for e in errs]))
        return data + RIDGE * float(x[0] ** 2 + x[1] ** 2 + (x[2] / STEP_SCALE_MS) ** 2)

    first_step = np.array([-0.3, -0.3, 3.0])[free]
    simplex = np.vstack([np.zeros(len(free)), np.diag(first_step)])
    res = minimize(loss, np.zeros(len(free)), method="Nelder-Mead",
                   options={"maxfev": max_evals, "xatol": 1e-3, "fatol": 1e-6, "initial_simplex": simplex})
    return _from_x(full(res.x))


@dataclass(frozen=True)
class SettingFit:
    """The fit of one setting: corrections, errors on its points before and after, and leave-one-out."""

    key: tuple[str, str, int, int, str]
    corrections: Corrections
    before: tuple[PointError, ...]
    after: tuple[PointError, ...]
    loo_error: float  # median error of each point predicted by the fit on the others (NaN with one point)
    sources: tuple[str, ...]
    free: tuple[bool, bool, bool] = (True, True, True)  # (prefill, decode, step) the points identify

    @property
    def fitted(self) -> tuple[str, ...]:
        """The corrections the fit was free to move (:func:`free_corrections`); the others keep the model's."""
        return tuple(n for n, f in zip(("prefill", "decode", "step"), self.free, strict=True) if f)

    @property
    def error_before(self) -> float:
        return median_error(self.before)

    @property
    def trusted(self) -> bool:
        """Whether the corrections predict points they were not fitted on better than the model does: the
        leave-one-out error beats the error before (one point: the fit's own error does)."""
        ref = self.loo_error if not math.isnan(self.loo_error) else self.error_after
        return ref < self.error_before

    @property
    def error_after(self) -> float:
        return median_error(self.after)


def leave_one_out(points: Sequence[Measurement], perf: PerfModel, max_evals: int = 90) -> float:
    """Median error of each point under the corrections fitted on the other points (NaN below two points)."""
    if len(points) < 2:
        return math.nan
    errs: list[PointError] = []
    for i, m in enumerate(points):
        c = fit_corrections([p for j, p in enumerate(points) if j != i], perf, max_evals)
        errs += point_errors([m], perf, c)
    return median_error(errs)


def fit_setting(points: Sequence[Measurement], perf: PerfModel, *, loo: bool = True, max_evals: int = 90) -> SettingFit:
    """Corrections for one setting's points with errors before/after (and leave-one-out when ``loo``)."""
    c = fit_corrections(points, perf, max_evals)
    return SettingFit(key=points[0].key, corrections=c, before=tuple(point_errors(points, perf)),
                      after=tuple(point_errors(points, perf, c)),
                      loo_error=leave_one_out(points, perf, max_evals) if loo else math.nan,
                      sources=tuple(sorted({m.file or m.source for m in points})), free=free_corrections(points))


def by_setting(points: Iterable[Measurement]) -> dict[tuple[str, str, int, int, str], list[Measurement]]:
    """Points grouped by (model, GPU, count, TP, engine), in first-seen order."""
    out: dict[tuple[str, str, int, int, str], list[Measurement]] = {}
    for m in points:
        out.setdefault(m.key, []).append(m)
    return out
