"""Physical checks of a measured point before it corrects anything: no faster than the hardware allows (the roofline
bound at 100 % of the GPU's peak bandwidth and FLOPs) and self-consistent (Little's law in a closed loop).

Bounds, for a node of n GPUs of HBM bandwidth B and dense peak F at the run's dtype, a model of P active parameters
and W bytes of weights, prompts of I tokens, c clients:
  ITL  ≥ W / (n B)                  every decode step reads the weights once
  TTFT ≥ 2 P I / (n F)              a prompt's FLOPs at peak
  output tok/s ≤ min(c / ITL_min, n F / (2 P))
A closed loop of c clients completes c requests per mean end-to-end latency E = TTFT + (O − 1) TPOT, so its output
tok/s ≈ c O / E: more than 1.25× that contradicts the latencies (units off, or two runs mixed); less than 1/20 of
it means the latencies are too short by that much (seconds written as milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass

from planning.catalog.schema import Catalog
from planning.errors import PlanningError
from planning.measurements.schema import Measurement

SLACK = 0.9  # a measurement may reach 1/0.9 of the bound's speed (spec sheets round; clocks boost)
LITTLE_HIGH = 1.25
LITTLE_LOW = 1 / 20


@dataclass(frozen=True)
class Bounds:
    """The fastest a node can be: ITL and TTFT floors (ms) and the output-token ceiling (tok/s)."""

    itl_ms: float
    ttft_ms: float
    output_tokens_per_s: float


def bounds(m: Measurement, catalog: Catalog) -> Bounds:
    """The roofline bounds of ``m``'s node for its model, dtype and load."""
    spec = catalog.models[m.model]
    gpu = catalog.gpus[m.gpu]
    active_share = spec.params_active / spec.params_total if spec.params_total else 1.0
    weights = spec.weight_bytes(m.dtype if m.dtype in ("bf16", "fp16", "fp8", "mxfp4") else None) * active_share
    peak = (gpu.fp8_tflops if m.dtype in ("fp8", "mxfp4") and gpu.fp8_tflops else gpu.bf16_tflops) * 1e12
    flops_per_token = 2.0 * spec.params_active
    itl_s = weights / (m.count * gpu.hbm_bw_gbps * 1e9)
    ttft_s = flops_per_token * m.input_len / (m.count * peak)
    clients = m.concurrency if m.concurrency is not None else float("inf")
    tput = min(clients / itl_s, m.count * peak / flops_per_token)
    return Bounds(itl_s * 1e3, ttft_s * 1e3, tput)


def _cause(m: Measurement) -> str:
    return (f"check that it ran on {m.count}x{m.gpu} at TP {m.tp} with {m.model} in {m.dtype} (a quantized "
            "checkpoint or more GPUs would explain it); pass the right --gpu, --count, --tp or --dtype.")


def check_physical(m: Measurement, catalog: Catalog) -> None:
    """Refuse a point faster than the roofline allows, naming the point, the field and the likely cause.

    Raises
    ------
    PlanningError: the first field beyond its bound.
    """
    b = bounds(m, catalog)
    floors = (("itl_ms_mean", b.itl_ms), ("itl_ms_p50", b.itl_ms), ("tpot_ms_mean", b.itl_ms),
              ("tpot_ms_p50", b.itl_ms), ("ttft_ms_mean", b.ttft_ms), ("ttft_ms_p50", b.ttft_ms))
    for name, floor in floors:
        v = getattr(m, name)
        if v is not None and v < SLACK * floor:
            raise PlanningError(f"{m.label}.{name}", f"{v:.3g} ms is faster than the hardware allows "
                                f"(roofline bound {floor:.3g} ms).", _cause(m))
    if m.output_tokens_per_s is not None and m.output_tokens_per_s * SLACK > b.output_tokens_per_s:
        raise PlanningError(f"{m.label}.output_tokens_per_s", f"{m.output_tokens_per_s:.4g} tok/s is more than the "
                            f"hardware allows (roofline bound {b.output_tokens_per_s:.4g} tok/s).", _cause(m))


def check_consistent(m: Measurement) -> None:
    """Refuse a closed-loop point whose throughput contradicts its latencies (Little's law).

    Raises
    ------
    PlanningError: naming the point, the ratio and the likely cause.
    """
    ttft = m.ttft_ms_mean
    tpot = m.tpot_ms_mean if m.tpot_ms_mean is not None else m.itl_ms_mean
    if m.concurrency is None or ttft is None or tpot is None or m.output_tokens_per_s is None:
        return
    e2e_s = (ttft + max(m.output_len - 1.0, 0.0) * tpot) / 1e3
    little = m.concurrency * m.output_len / e2e_s
    ratio = m.output_tokens_per_s / little
    if ratio > LITTLE_HIGH:
        raise PlanningError(f"{m.label}.output_tokens_per_s", f"{m.output_tokens_per_s:.4g} tok/s is {ratio:.3g}× what "
                            f"{m.concurrency} clients at these latencies can receive ({little:.4g} tok/s).",
                            "the latencies are too long (microseconds read as ms?), or the concurrency or lengths "
                            "are wrong; fix the file or the --concurrency/lengths.")
    if ratio < LITTLE_LOW:
        raise PlanningError(f"{m.label}.ttft_ms_mean", f"the latencies imply {little:.4g} tok/s but "
                            f"{m.output_tokens_per_s:.4g} tok/s were measured ({1 / ratio:.3g}× less).",
                            "the latencies are probably in seconds, not ms (× 1000), or the concurrency is wrong.")


def check_point(m: Measurement, catalog: Catalog) -> None:
    """Both checks: physical bound, then self-consistency."""
    check_physical(m, catalog)
    check_consistent(m)
