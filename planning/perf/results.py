"""Result types of the performance model: workload, memory breakdown, serving operating point, estimate."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from planning.catalog.schema import Provenance
from planning.errors import PlanningError


@dataclass(frozen=True)
class Workload:
    """Mean tokens per request: prompt (input) and generated (output)."""

    input_len: float
    output_len: float

    def __post_init__(self) -> None:
        if not (self.input_len >= 1 and math.isfinite(self.input_len)):
            raise PlanningError("workload.input_len", f"{self.input_len} is not >= 1 token.", "use a mean prompt length >= 1.")
        if not (self.output_len >= 0 and math.isfinite(self.output_len)):
            raise PlanningError("workload.output_len", f"{self.output_len} is negative.", "use a mean output length >= 0.")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of one node (all its GPUs) in GB for the whole model at the asked batch."""

    weights_gb: float
    kv_cache_gb: float
    activations_gb: float
    reserve_gb: float
    total_gb: float
    capacity_gb: float
    max_decode_batch: int  # largest decode batch whose KV cache fits (input+output tokens per sequence)


@dataclass(frozen=True)
class ServingPoint:
    """Peak sustainable aggregated serving of one node (continuous batching + chunked prefill) and where it runs.

    ``batch`` is the number of sequences decoding together (summed over data-parallel copies); ``ttft_ms`` and
    ``tpot_ms`` are the latencies at that operating point, TTFT under that point's load (the wait for the step in
    progress and for the prompts ahead, then its own chunked prefill); ``memory_gb`` is the
    node memory in use there. ``limited_by`` names what stops a larger batch: ``memory`` (KV cache),
    ``max_num_seqs``, ``token_budget`` (prefill share of the per-step token budget), ``ttft``/``tpot`` (SLO) or
    ``throughput`` (a larger batch is slower per token).
    """

    max_output_tokens_per_s: float
    max_requests_per_s: float
    batch: int
    ttft_ms: float
    tpot_ms: float
    memory_gb: float
    capacity_gb: float
    limited_by: str
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None  # open loop at this many requests/s (TTFT and TPOT under that load)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class StagePoint:
    """The operating point behind one T̂ entry: how the node of ``shape`` holding ``layers`` layers as one of
    ``stages`` pipeline stages runs (``PerfModel.stage_point``).

    ``tp`` × ``dp``: the node's split (dp engine copies of tp GPUs); ``batch``: requests per step of one copy
    (prefill: prompts; decode and aggregated: sequences of one micro-batch); ``step_s``: that step's seconds on the
    node's layers; ``step_tokens``: the aggregated step token budget T(S, j) (0 otherwise); ``throughput``: the
    entry (the node's rate, in the phase's unit); ``elasticity``: d ln step / d ln batch there (``tables.kv_room``).
    """

    tp: int
    dp: int
    batch: float
    step_s: float
    step_tokens: int
    throughput: float
    elasticity: float = 0.0


@dataclass(frozen=True)
class PerfEstimate:
    """What one node does with the whole model: times, memory fit, best throughputs, provenance, band.

    ``band`` maps each number to its relative uncertainty (p90 absolute error of the validation points of the same
    kind: GPU class, dtype class, quantity; see docs/perf-model.md) and ``band_source`` says which kind it came from.
    ``serving`` is the aggregated serving answer (None when the model does not fit).
    """

    model_id: str
    gpu_id: str
    count: int
    tp: int
    dtype: str
    batch: int
    input_len: int
    output_len: int
    prefill_ms: float
    decode_step_ms: float
    fits: bool
    memory: MemoryBreakdown
    max_prefill_tokens_per_s: float
    best_prefill_batch: int
    max_decode_tokens_per_s: float
    best_decode_batch: int
    ttft_ms: float | None
    tpot_ms: float | None
    provenance: dict[str, Provenance]
    band: dict[str, float]
    notes: tuple[str, ...] = field(default_factory=tuple)
    serving: ServingPoint | None = None
    band_source: dict[str, str] = field(default_factory=dict)
    engine: str = "vllm"  # whose measured kernels the numbers read (PerfModel.for_engine); notes say which

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (used by ``planning perf --json``)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("memory", "serving")}
        out["memory"] = {k: getattr(self.memory, k) for k in self.memory.__dataclass_fields__}
        out["serving"] = self.serving.to_dict() if self.serving is not None else None
        out["notes"] = list(self.notes)
        return out
