"""Per-model demand profiles for sharing: weights, SLO-bounded KV pool, compute load per GPU type (perf model).

For a model with mean rate r (req/s), burstiness b (peak/mean), mean prompt I and output O tokens, TTFT SLO
s_p and TPOT SLO s_d (s), on one GPU of type g:

* weights W = the checkpoint's bytes (a fine-tune loads its own copy: variants share architecture, not weights);
* KV pool K = N · kv(I + O), with N = max(1, the 99th percentile of a Poisson count of mean b·r·R): R = s_p +
  O·s_d is the longest a request that meets its SLOs stays resident, b·r·R the mean number resident at the peak
  rate (Little's law), and kv(n) the KV bytes of an n-token sequence (sliding-window layers capped at their
  window). The percentile, not the mean, because a request that finds its model's pool full waits for a whole
  residence R, which misses any TTFT SLO shorter than R (``KV_POOL_QUANTILE``);
* compute load u_g = r·e_p + r·O·t_d / B (prefill share + decode share): e_p = perf-model prefill time of one
  request, t_d = decode step time at the batch B = max(1, ⌈r·R⌉) the model runs at (co-located models do not
  batch together: each reads its own weights, so their step times add). u_g is the fraction of the GPU's time
  the model needs at its mean rate; bursts are absorbed by the KV pool (sized at the peak) and the queue
  (see :func:`node_attainment`). A model whose prefill or decode step misses its SLO on g, or whose W + K
  exceeds g's usable memory, cannot run on g.
* the SLO-weighted rate of Prism's KVPR, d = r / s_p (Sec. 6.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from planning.catalog.schema import Catalog, ModelSpec
from planning.errors import PlanningError
from planning.scenario import ModelRequest

if TYPE_CHECKING:
    from planning.perf import PerfModel

DEFAULT_TTFT_S = 10.0  # a model without a TTFT SLO: prefill must still finish in 10 s (as planning.groups)


@dataclass(frozen=True)
class GpuProfile:
    """What one model needs on one GPU type at its mean rate: prefill and decode shares of the GPU's time
    (``load`` = their sum), prefill time of one request and decode step at its batch (ms)."""

    gpu: str
    prefill_load: float
    decode_load: float
    prefill_ms: float
    decode_step_ms: float
    batch: int

    @property
    def load(self) -> float:
        return self.prefill_load + self.decode_load


@dataclass(frozen=True)
class ModelProfile:
    """A model's sharing profile (module docstring): memory in GB, rates in req/s, per-GPU compute."""

    id: str
    base: str
    rate_rps: float
    burstiness: float
    input_len: float
    output_len: float
    ttft_s: float
    tpot_s: float | None
    weights_gb: float
    kv_pool_gb: float
    kv_gb_per_request: float
    weighted_rate: float
    gpus: Mapping[str, GpuProfile]

    @property
    def memory_gb(self) -> float:
        return self.weights_gb + self.kv_pool_gb


def kv_bytes(spec: ModelSpec, tokens: float, kv_dtype_bytes: float = 2.0) -> float:
    """KV-cache bytes of one sequence of ``tokens`` tokens (sliding-window layers hold at most their window)."""
    kinds = [k.lower() for k in spec.layer_types] if spec.layer_types and spec.sliding_window else []
    n_sliding = sum(k == "sliding" for k in kinds)
    n_full = spec.layers - n_sliding
    per_layer_token = 2.0 * spec.num_kv_heads * spec.head_dim * kv_dtype_bytes
    window = float(spec.sliding_window or tokens)
    return per_layer_token * (n_full * tokens + n_sliding * min(tokens, window))


def usable_memory_gb(perf: PerfModel, gpu: str) -> float:
    """GPU memory (GB) a shared node can give to weights + KV: the planner's engine budget of the driver-reported
    memory less the overhead it counts inside it (``perf.engines.planner_memory``)."""
    from planning.perf.engines import planner_memory

    memory = planner_memory(perf.calibration.settings)
    return (memory.budget(perf.gpu(gpu).memory_bytes) - memory.overhead_bytes) / 1e9


def perf_with_specs(perf: PerfModel, specs: Mapping[str, ModelSpec]) -> PerfModel:
    """A PerfModel whose catalog also holds the scenario's custom architectures (by their spec id)."""
    from planning.perf import PerfModel

    catalog: Catalog = perf.catalog
    extra = {s.id: s for s in specs.values() if s.id not in catalog.models}
    if not extra:
        return perf
    return PerfModel(catalog=replace(catalog, models={**catalog.models, **extra}), calibration=perf.calibration,
                     profiles=perf.profiles)


# The KV pool holds the 99th percentile of a Poisson number of concurrent requests at the peak rate, not their
# mean (Little's law): with the mean, rare bursty models with a 1 s TTFT got pools of 1.66 requests and the
# request-level simulation (simulate.py) found them at 61–93 % attainment on `long-tail`; with the 99th
# percentile every model is ≥ 99.3 % (docs/sharing.md). None restores the mean.
KV_POOL_QUANTILE: float | None = 0.99


def pool_requests(mean_concurrency: float, quantile: float | None = None) -> float:
    """Requests a model's KV pool holds: the mean concurrency at the peak rate (Little's law, at least 1), or,
    with ``quantile`` q, the q-quantile of a Poisson number of concurrent requests with that mean."""
    q = KV_POOL_QUANTILE if quantile is None else quantile
    if q is None:
        return max(1.0, mean_concurrency)
    return max(1.0, float(poisson_quantile(q, max(mean_concurrency, 1e-12))))


def poisson_quantile(q: float, mu: float) -> int:
    """The smallest k with P(N ≤ k) ≥ ``q`` for N ~ Poisson(``mu``) (scipy.stats.poisson.ppf, which costs a
    cold solve with sharing ~0.7 CPU-s of imports). The pmf runs from ⌊mu − 40·√mu⌋ (the mass below is < 1e-300,
    so the sum starts there without underflow) by the ratio pmf(k)/pmf(k − 1) = mu/k, in logs."""
    if not 0.0 < q < 1.0:
        raise PlanningError("quantile", f"{q} is not in (0, 1).", "use e.g. 0.99.")
    if not mu > 0.0:
        return 0
    sd = math.sqrt(mu)
    k0 = max(0, int(mu - 40.0 * sd - 10.0))
    k = np.arange(k0, int(mu + 40.0 * sd + 50.0) + 1, dtype=float)
    logp = k0 * math.log(mu) - mu - math.lgamma(k0 + 1.0) + np.concatenate([[0.0], np.cumsum(np.log(mu / k[1:]))])
    cdf = np.cumsum(np.exp(logp))
    hit = np.flatnonzero(cdf >= q)
    return int(k[hit[0]]) if hit.size else int(k[-1])


def model_profile(req: ModelRequest, spec: ModelSpec, perf: PerfModel, gpus: Sequence[str]) -> ModelProfile:
    """The sharing profile of one model on the given single-GPU types (module docstring).

    Parameters
    ----------
    req:
        The scenario's model entry (rate, burstiness, sizes, SLOs).
    spec:
        Its architecture (a variant's base architecture).
    perf:
        A ``planning.perf.PerfModel`` whose catalog holds ``spec.id`` (see :func:`perf_with_specs`).
    gpus:
        GPU ids of the single-GPU node types that may host shared models.

    Returns
    -------
    ModelProfile; ``gpus`` maps only the GPU types the model can run on.
    """
    d = req.demand
    rate, burst = float(d.rate_rps), float(d.burstiness)
    inp, out = max(1.0, float(d.input_len)), max(0.0, float(d.output_len))
    ttft_s = (req.slo.prefill_ms or DEFAULT_TTFT_S * 1e3) / 1e3
    tpot_s = req.slo.decode_ms / 1e3 if req.slo.decode_ms else None
    residence = ttft_s + out * (tpot_s if tpot_s is not None else 0.1)
    concurrent = pool_requests(burst * rate * residence)
    per_req = kv_bytes(spec, inp + out) / 1e9
    weights = spec.weight_bytes() / 1e9
    kv_pool = concurrent * per_req
    batch = max(1, math.ceil(rate * residence))
    out_gpus: dict[str, GpuProfile] = {}
    for gpu in gpus:
        if weights + kv_pool > usable_memory_gb(perf, gpu):
            continue
        try:
            pre = perf.estimate(spec.id, gpu, 1, batch=1, input_len=round(inp), output_len=0)
            dec = perf.estimate(spec.id, gpu, 1, batch=batch, input_len=round(inp), output_len=round(out))
        except PlanningError:
            continue
        if pre.prefill_ms > ttft_s * 1e3 or (tpot_s is not None and dec.decode_step_ms > tpot_s * 1e3):
            continue
        out_gpus[gpu] = GpuProfile(gpu, rate * pre.prefill_ms / 1e3, rate * out * dec.decode_step_ms / 1e3 / batch,
                                   pre.prefill_ms, dec.decode_step_ms, batch)
    return ModelProfile(
        id=req.id, base=req.base or spec.id, rate_rps=rate, burstiness=burst, input_len=inp, output_len=out,
        ttft_s=ttft_s, tpot_s=tpot_s, weights_gb=weights, kv_pool_gb=kv_pool, kv_gb_per_request=per_req,
        weighted_rate=rate / ttft_s, gpus=out_gpus,
    )


def node_attainment(profiles: Sequence[ModelProfile], gpu: str) -> dict[str, float]:
    """Analytic TTFT attainment per model on one shared GPU (a stand-in until the request-level simulator).

    Prefills of all co-located models form one queue (Prism's GPU-level queue); decode steps take a share
    ρ_d = Σ decode loads of the GPU, so a prefill runs 1/(1 − ρ_d) slower. The prefill queue then has
    utilisation ρ = ρ_p / (1 − ρ_d) (ρ_p = Σ r_m e_m) and mean service ē = (Σ r_m e_m / Λ) / (1 − ρ_d) with
    Λ = Σ r_m. With M/M/1 waiting times P(W > t) = ρ·exp(−(1 − ρ)·t / ē), a request of model m is on time
    when W ≤ s_m − e_m / (1 − ρ_d). Bursts are taken into account by evaluating at the mean rate times
    √b̄ (b̄ the rate-weighted mean burstiness): a middle ground between the mean and every burst at once.
    ρ ≥ 1 gives 0.

    Returns
    -------
    dict model id → estimated fraction of requests meeting the TTFT SLO.
    """
    lam = sum(p.rate_rps for p in profiles)
    burst = math.sqrt(sum(p.rate_rps * p.burstiness for p in profiles) / lam) if lam > 0 else 1.0
    rho_d = burst * sum(p.gpus[gpu].decode_load for p in profiles)
    rho_p = burst * sum(p.gpus[gpu].prefill_load for p in profiles)
    out: dict[str, float] = {}
    for p in profiles:
        if rho_d >= 1.0:
            out[p.id] = 0.0
            continue
        stretch = 1.0 / (1.0 - rho_d)
        rho = rho_p * stretch
        slack = p.ttft_s - p.gpus[gpu].prefill_ms / 1e3 * stretch
        if rho >= 1.0 or slack < 0:
            out[p.id] = 0.0
        elif rho <= 0:
            out[p.id] = 1.0
        else:
            mean_service = rho_p / lam * stretch
            out[p.id] = 1.0 - rho * math.exp(-(1.0 - rho) * slack / mean_service)
    return out
