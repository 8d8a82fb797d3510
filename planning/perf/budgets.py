"""Time and memory budgets of the planner's rules: one request's KV cache, its hand-off to a disaggregated decode
instance, and the per-phase cycle budget a stage table is held to (docs/perf-model.md Sec. 3)."""

from __future__ import annotations

import math

from planning.catalog.schema import ModelSpec
from planning.perf.calibration import GlobalSettings
from planning.perf.roofline import KV_BYTES, LayerArch, Precision


def kv_request_bytes(arch: LayerArch, kv_bytes: float, input_len: float) -> float:
    """Bytes of one request's whole KV cache after its prefill: ``input_len`` tokens on every full-attention
    layer (window-capped on sliding-window layers), all KV heads, ``kv_bytes`` per element."""
    n_full = float(arch.full_in_window[-1])
    window = float(arch.window) if arch.window else math.inf
    tokens = n_full * input_len + (arch.layers - n_full) * min(input_len, window)
    return tokens * arch.kv_bytes_per_token(1, kv_bytes)


def kv_element_bytes(model: ModelSpec) -> float:
    """Bytes per cached K/V element of ``model`` at its own dtype (FP8 checkpoints carry an FP8 KV cache, as in
    ``roofline.resolve_precision``; everything else 16-bit)."""
    return 1.0 if (model.dtype or "bf16").lower() == "fp8" else KV_BYTES


def handoff_s(arch: LayerArch, prec: Precision, net_gbps: float, input_len: float, settings: GlobalSettings) -> float:
    """Seconds to send one request's whole KV cache (``input_len`` tokens, all layers and KV heads) to a
    disaggregated decode instance over ``net_gbps``: the network latency plus bytes / bandwidth."""
    nbytes = kv_request_bytes(arch, prec.kv_bytes, input_len)
    return settings.network_latency_ms * 1e-3 + nbytes / (net_gbps * 1e9 / 8.0)


def decode_cycle_budget_s(tpot_ms: float, output_len: float, handoff: float, headroom: float) -> float:
    """Longest decode cycle (all stages) that keeps a disaggregated request's mean TPOT within ``tpot_ms``.

    TPOT counts from the first token (made by the prefill instance) to the last, over ``O - 1`` gaps. The
    decode side spends the KV hand-off, on average one cycle waiting for the next step boundary (one step
    behind at worst, half on average; the full cycle is budgeted) and ``O - 1`` cycles:
    ``t_KV + O·C <= (O - 1)·TPOT``, so ``C <= ((O - 1)·TPOT - t_KV) / O``, then divided by ``headroom``.
    With ``O <= 1`` there is no gap to protect and the cycle is ``TPOT / headroom``. Never negative.
    """
    tpot_s = tpot_ms * 1e-3
    if output_len <= 1.0:
        return tpot_s / headroom
    return max(((output_len - 1.0) * tpot_s - handoff) / output_len, 0.0) / headroom


def cycle_budget_s(settings: GlobalSettings, phase: str, slo_ms: float, output_len: float = 0.0,
                   handoff: float = 0.0) -> float:
    """The time budget of one batch through all S stages (a stage gets ``/ S``), the planner's rule per phase:
    prefill ``TTFT / prefill_headroom``; aggregated ``TPOT / aggregated_headroom``; disaggregated decode
    :func:`decode_cycle_budget_s` with the KV hand-off ``handoff`` (seconds, :func:`handoff_s`)."""
    if phase == "prefill":
        return slo_ms * 1e-3 / settings.prefill_headroom
    if phase == "aggregated":
        return slo_ms * 1e-3 / settings.aggregated_headroom
    return decode_cycle_budget_s(slo_ms, output_len, handoff, settings.decode_headroom)
