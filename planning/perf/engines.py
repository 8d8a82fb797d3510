"""What a serving engine runs with by default, by engine and version: step scheduling and batch limits.

A published benchmark ran an engine at its defaults unless it says otherwise, so validating the model against it
needs those defaults (``perf.validation``, the simulator's benchmark mode). A plan's engines get the planner's
limits instead: ``planning export`` writes them as flags.

- **Scheduling.** vLLM before 0.6 and TGI before 3 run waiting prompts as steps of their own (no chunked prefill by
  default); vLLM V1, SGLang, TensorRT-LLM and NIM chunk prompts into the decode steps. An unstated version is taken
  as the current engine.
- **vLLM limits** (``max_num_batched_tokens``, ``max_num_seqs``). V1 (0.8 on, ``EngineArgs.get_batch_defaults`` of
  the OpenAI server): 8,192 / 1,024 on GPUs with at least 70 GiB that are not A100s (larger steps lowered A100
  throughput, vLLM PR 17885), else 2,048 / 256. V0 (before 0.8): 256 sequences; without chunked prefill the step
  budget is the model length (the planner's 8,192 here), with it 2,048.
- **TGI** admits at most 128 concurrent requests (the router's ``max_concurrent_requests`` default).
- **TGI's router holds new prompts behind the decodes** (TGI 2.x, :class:`RouterBatching`): while a batch decodes,
  the waiting prompts join it (one prefill step that stalls the decodes) only once they are at least
  ``waiting_served_ratio`` (0.3) of the running batch, or ``max_waiting_tokens`` (20) decode steps have passed since
  the last prefill (``router/src/infer.rs`` ``batching_task`` and ``queue.rs`` ``next_batch`` at v2.0.4; defaults in
  ``launcher/src/main.rs``). vLLM before 0.6 runs a waiting prompt at the next step.
- TensorRT-LLM, NIM, SGLang and unknown engines: the planner's limits (their benchmark tools size the batch to
  the memory, as the model does).

**Memory** (:class:`EngineMemory`, docs/perf-model.md Sec. 2): how much of each GPU an engine gives its KV cache.
Every engine starts from the memory the driver reports (``GPU.memory_bytes``) but reserves it its own way:

- **vLLM** (V0 and V1): ``gpu_memory_utilization`` (0.9) of the *whole card* is its budget; weights, the profiled
  activation peak of one step of ``max_num_batched_tokens`` and the non-torch memory it measures (CUDA context and
  NCCL buffers, ~0.4 GiB: vLLM 0.6.4's log "non_torch_memory takes 0.39GiB", issue 11251) come out of it and the
  rest is KV cache (``Worker.determine_available_memory``). CUDA graphs are captured after the KV cache is
  allocated and live in the remaining 10 % (vLLM 0.21+ estimates them inside the budget and raised the default to
  0.92 to keep the same KV, PR 30515). A running sequence holds the KV of its tokens so far.
- **TensorRT-LLM**: ``KvCacheConfig.free_gpu_memory_fraction`` (0.9 by default; the perf overviews ran 0.95) of
  the memory *left free after* the weights, the activation buffers of ``max_num_tokens`` and the runtime. Its
  default capacity scheduler is ``GUARANTEED_NO_EVICT``: a request is admitted only with KV blocks for its whole
  prompt + output, so a running sequence holds I + O tokens, not I + O/2.
- **SGLang**: ``mem_fraction_static`` of the whole card holds weights and the KV pool; activations and CUDA graphs
  live in the rest. The default depends on GPU memory and TP (``ServerArgs``: (memory − reserved) / memory with
  reserved 2.8 + TP/10 GiB below 35 GiB, 9.5 + TP/2 GiB below 90 GiB, 12 + TP/2 GiB below 160 GiB; before that
  rule 0.88 / 0.87 / 0.85 / 0.81 at TP 1 / 2 / 4 / 8).
- **TGI** (2.x): ``--cuda-memory-fraction`` (1.0) of the card; after a warm-up prefill of
  ``max_batch_prefill_tokens`` it gives 95 % of what is free to the KV cache ("leave 5% for some wiggle room",
  ``FlashCausalLM.warmup``).

**FP8 activation quantization** (:func:`fuses_activation_quant`, docs/perf-model.md Sec. 1): TensorRT-LLM writes
each FP8 GEMM's input from the kernel before it (the fused residual-add + RMSNorm + quantize, the attention output,
the gated activation, the MoE input permutation), so no separate quantization kernel runs; vLLM (and engines not
known to fuse it) runs one per GEMM input.

The planner's own engine is vLLM V1 at the calibrated ``gpu_memory_utilization`` (:func:`planner_memory`);
``planning export`` writes that value as ``--gpu-memory-utilization`` so a deployment sizes the KV cache the plan
counts on.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from planning.perf.calibration import GlobalSettings
from planning.perf.roofline import resolve_precision

if TYPE_CHECKING:
    from planning.perf.model import PerfModel

GIB = 2.0**30
VLLM_LARGE_GPU_GIB = 70.0  # vLLM V1's larger batch defaults need >= 70 GiB and not an A100
VLLM_SMALL = (2048, 256)  # vLLM V1 below that, and V0's sequence cap
TGI_MAX_CONCURRENT = 128


def parse_version(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``"0.4.3 (docker ...)"`` or ``"v2.0.4"``; None when unstated."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def scheduling_of(engine: str, version: str) -> str:
    """The engine's default step scheduling: ``"prefill-first"`` for vLLM before 0.6 and TGI before 3 (no chunked
    prefill by default), else ``"chunked"`` (vLLM V1, SGLang, TensorRT-LLM, NIM; and an unstated version)."""
    v = parse_version(version)
    if v is None:
        return "chunked"
    if engine == "vllm" and v < (0, 6):
        return "prefill-first"
    if engine == "tgi" and v[0] < 3:
        return "prefill-first"
    return "chunked"


def vllm_v1_limits(gpu_id: str, memory_bytes: float, settings: GlobalSettings) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of ``vllm serve`` (V1) on this GPU by default (``memory_bytes``: the
    driver's total, which vLLM reads); the large tier is the planner's engine setting, so a calibrated setting
    carries over."""
    tokens, seqs = int(settings.max_batched_tokens), int(settings.max_num_seqs)
    large = memory_bytes >= VLLM_LARGE_GPU_GIB * GIB and not gpu_id.upper().startswith("A100")
    return (tokens, seqs) if large else (min(tokens, VLLM_SMALL[0]), min(seqs, VLLM_SMALL[1]))


def engine_limits(engine: str, version: str, gpu_id: str, memory_bytes: float,
                  settings: GlobalSettings) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the engine ran with by default (module docstring); ``memory_bytes``
    is the GPU's driver-reported total."""
    tokens, seqs = int(settings.max_batched_tokens), int(settings.max_num_seqs)
    v = parse_version(version)
    if engine == "vllm":
        if v is None or v >= (0, 8):
            return vllm_v1_limits(gpu_id, memory_bytes, settings)
        if scheduling_of(engine, version) == "prefill-first":
            return tokens, min(seqs, VLLM_SMALL[1])
        return min(tokens, VLLM_SMALL[0]), min(seqs, VLLM_SMALL[1])
    if engine == "tgi":
        return tokens, min(seqs, TGI_MAX_CONCURRENT)
    return tokens, seqs


@dataclass(frozen=True)
class EngineMemory:
    """How one engine sizes its KV cache on each GPU (module docstring).

    ``of``: ``"card"`` (the budget is ``fraction`` of the whole card; weights, the activation workspace when
    ``activations_inside`` and ``overhead_gib`` come out of it) or ``"free"`` (``fraction`` of what is free after
    weights, activations and ``overhead_gib``). ``hold``: KV tokens a running sequence holds, ``"grow"`` (its tokens
    so far: I + O/2 on average) or ``"reserve"`` (its whole I + O from admission). ``flag``: the engine option that
    sets ``fraction``.
    """

    engine: str
    of: str
    fraction: float
    overhead_gib: float
    activations_inside: bool
    hold: str
    flag: str
    source: str

    @property
    def overhead_bytes(self) -> float:
        return self.overhead_gib * GIB

    def budget(self, capacity: float) -> float:
        """Bytes per GPU that weights (+ activations, overhead) and the *KV-equivalent* bytes must fit in: the
        card's ``fraction`` for ``"card"`` engines, the whole card for ``"free"`` ones (whose KV bytes count
        ``1 / fraction`` each, :attr:`kv_scale`)."""
        return self.fraction * capacity if self.of == "card" else capacity

    @property
    def kv_scale(self) -> float:
        """Memory one byte of KV cache takes from the budget: 1, or 1 / fraction where the engine keeps
        ``1 - fraction`` of the free memory back (``"free"``)."""
        return 1.0 if self.of == "card" else 1.0 / self.fraction

    def fixed_bytes(self, activations: np.ndarray | float) -> np.ndarray:
        """Non-weight, non-KV bytes per GPU counted against :meth:`budget` (activation workspace and overhead)."""
        act = np.asarray(activations, dtype=float) if self.activations_inside else np.zeros_like(
            np.asarray(activations, dtype=float))
        return np.asarray(act + self.overhead_bytes, dtype=float)

    def kv_bytes(self, capacity: float, weights: float, activations: float) -> float:
        """KV cache bytes per GPU the engine allocates (never negative)."""
        free = self.budget(capacity) - weights - float(self.fixed_bytes(activations))
        return max(0.0, free / self.kv_scale)

    def kv_tokens(self, input_len: float, output_len: float) -> float:
        """KV tokens one running sequence of mean size (I, O) holds on average."""
        return input_len + (output_len if self.hold == "reserve" else output_len / 2.0)


FUSED_QUANT_ENGINES = ("trtllm", "nim-trtllm")  # TensorRT-LLM, and NIM on its TensorRT-LLM backend


def fuses_activation_quant(engine: str | None) -> bool:
    """Whether ``engine`` quantizes FP8 GEMM inputs inside the preceding kernel (module docstring): TensorRT-LLM's
    fused norm/activation/attention epilogues. The planner's vLLM and unknown engines run a kernel per input."""
    return (engine or "").lower() in FUSED_QUANT_ENGINES


VLLM_NON_TORCH_GIB = 0.4  # CUDA context + NCCL/cuBLAS workspaces vLLM counts (0.39 GiB in vLLM 0.6.4's log)
TRTLLM_RUNTIME_GIB = 0.5  # CUDA context + runtime/decoder buffers taken before the free fraction
SGLANG_CONTEXT_GIB = 0.4  # CUDA context, inside mem_fraction_static (measured free memory after load)
TGI_CONTEXT_GIB = 0.4


def planner_memory(settings: GlobalSettings) -> EngineMemory:
    """The planner's own engine (what ``planning export`` deploys): vLLM V1 with ``--gpu-memory-utilization``
    set to the calibrated ``gpu_memory_utilization``."""
    return EngineMemory("vllm", "card", float(settings.gpu_memory_utilization), float(settings.engine_overhead_gib),
                        True, "grow", "--gpu-memory-utilization",
                        "planner: vLLM V1 gpu_memory_utilization (data/calibration.csv)")


def sglang_mem_fraction(memory_bytes: float, tp: int, version: str = "") -> float:
    """SGLang's default ``mem_fraction_static`` on a GPU of ``memory_bytes`` at tensor parallel ``tp`` (module
    docstring; versions before 0.4.7 used the TP-only rule)."""
    v = parse_version(version)
    if v is not None and v < (0, 4):
        return 0.88 if tp < 2 else 0.87 if tp < 4 else 0.85 if tp < 8 else 0.81
    gib = memory_bytes / GIB
    reserved = (2.8 + tp / 10) if gib < 35 else (9.5 + tp / 2) if gib < 90 else (12 + tp / 2) if gib < 160 else 32.0
    return round((gib - reserved) / gib, 3)


def engine_memory(engine: str, version: str, settings: GlobalSettings, memory_bytes: float = 0.0, tp: int = 1,
                  free_fraction: float | None = None) -> EngineMemory:
    """The memory reservation ``engine`` ``version`` runs with by default (module docstring).

    ``free_fraction``: a TensorRT-LLM ``kv_cache_free_gpu_mem_fraction`` the run states (None: the default 0.9).
    vLLM (every version) and unknown engines reserve like the planner's engine.
    """
    if engine in ("trtllm", "nim-trtllm"):
        frac = free_fraction if free_fraction is not None else 0.9
        return EngineMemory(engine, "free", frac, TRTLLM_RUNTIME_GIB, True, "reserve", "--kv_cache_free_gpu_mem_fraction",
                            "TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction (default 0.9); capacity scheduler "
                            "GUARANTEED_NO_EVICT")
    if engine == "tgi":
        return EngineMemory(engine, "free", 0.95, TGI_CONTEXT_GIB, True, "grow", "--cuda-memory-fraction",
                            "TGI 2.x FlashCausalLM.warmup: 95 % of the memory free after a warm-up prefill")
    if engine == "sglang":
        frac = sglang_mem_fraction(memory_bytes, tp, version)
        return EngineMemory(engine, "card", frac, SGLANG_CONTEXT_GIB, False, "grow", "--mem-fraction-static",
                            "SGLang ServerArgs mem_fraction_static default")
    if engine == "vllm":
        return EngineMemory("vllm", "card", 0.9, VLLM_NON_TORCH_GIB, True, "grow", "--gpu-memory-utilization",
                            "vLLM EngineArgs gpu_memory_utilization default 0.9")
    return planner_memory(settings)


@dataclass(frozen=True)
class RouterBatching:
    """When waiting prompts may join a running batch (TGI 2.x's router, module docstring): once they number at least
    ``waiting_served_ratio`` × the running batch, or after ``max_waiting_tokens`` decode steps since the last
    prefill (the router's counter starts at 1 after a prefill, so the prefill comes after ``max_waiting_tokens - 1``
    decode steps)."""

    waiting_served_ratio: float = 0.3
    max_waiting_tokens: int = 20
    source: str = "TGI v2.0.4 router/src/infer.rs batching_task, router/src/queue.rs next_batch; launcher defaults"

    def min_waiting(self, running: float) -> int:
        """Waiting prompts that open the gate while ``running`` sequences decode (0: any waiting prompt does)."""
        return math.floor(running * self.waiting_served_ratio)

    @property
    def max_decode_steps(self) -> int:
        """Decode steps after a prefill before waiting prompts are let in whatever their number."""
        return max(1, int(self.max_waiting_tokens) - 1)


def router_batching(engine: str, version: str) -> RouterBatching | None:
    """The prompt-admission rule of ``engine`` ``version`` beyond its scheduling: TGI before 3 holds new prompts
    behind the decodes (:class:`RouterBatching`); None for engines that take a waiting prompt at the next step."""
    v = parse_version(version)
    if engine == "tgi" and v is not None and v[0] < 3:
        return RouterBatching()
    return None


# TensorRT-LLM 1.0's performance overview (perf-overview.md @ 00f3768): its trtllm-bench datasets, ``$num_requests``
# per (input, output) length (every request of the same lengths), and the CUDA-graph batch sizes of its
# ``llm_options.yml`` (``cuda_graph_config``: ``enable_padding: true``), for the dense and the MoE runs alike.
OVERVIEW_REQUESTS: dict[tuple[int, int], int] = {
    (128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000,
    (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000,
}
OVERVIEW_GRAPH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
PYTORCH_BACKEND_FROM = (0, 19)  # the overview: "Starting with v0.19, testing was performed using the PyTorch backend"


@dataclass(frozen=True)
class BenchSchedule:
    """How ``trtllm-bench throughput`` on TensorRT-LLM's PyTorch backend runs a published dataset
    (``planning.perf.waves``): all ``requests`` queued at once, decode-only steps replayed as CUDA graphs padded to
    the next of ``graph_sizes`` (below the engine's ``min(max_batch_size, max_num_tokens)``), and the host's work of
    a step (scheduling, stop checks, responses) overlapped with the GPU's next step (the PyTorch executor's overlap
    scheduler, on by default: TensorRT-LLM docs, ``features/overlap-scheduler``)."""

    requests: int
    graph_sizes: tuple[int, ...] = OVERVIEW_GRAPH_SIZES
    overlap: bool = True


def bench_schedule(engine: str, version: str, notes: str, input_len: float, output_len: float) -> BenchSchedule | None:
    """The :class:`BenchSchedule` of a published ``trtllm-bench`` run on the PyTorch backend (TensorRT-LLM 0.19 on)
    whose dataset size the overview states for these lengths; None for every other run (their steady state is the
    closed form's)."""
    v = parse_version(version)
    if engine != "trtllm" or "trtllm-bench" not in notes or v is None or v < PYTORCH_BACKEND_FROM:
        return None
    requests = OVERVIEW_REQUESTS.get((round(input_len), round(output_len)))
    return BenchSchedule(requests) if requests else None


@dataclass(frozen=True)
class EngineSetup:
    """A published run's engine as the model evaluates it: step scheduling, batch limits, memory reservation and
    (TGI 2) the router's rule for letting prompts in."""

    scheduling: str
    max_batched_tokens: int
    max_num_seqs: int
    memory: EngineMemory
    router: RouterBatching | None = None
    attention_dp: bool = False  # the run states TensorRT-LLM's attention data parallelism (roofline.LayerArch)
    bench: BenchSchedule | None = None  # a trtllm-bench dataset run on the PyTorch backend (planning.perf.waves)


_FREE_FRACTION = re.compile(r"kv_cache_free_gpu_mem_fraction (0?\.\d+)")


def stated_free_fraction(notes: str) -> float | None:
    """The ``kv_cache_free_gpu_mem_fraction`` a published TensorRT-LLM run states in its notes, if any."""
    m = _FREE_FRACTION.search(notes or "")
    return float(m.group(1)) if m else None


def trtllm_bench_limits(params: float, weight_bytes: float, kv_bytes_per_token: float, n_gpus: int,
                        memory_bytes: float, input_len: float, output_len: float,
                        fraction: float = 0.95) -> tuple[int, int]:
    """(max_num_tokens, max_batch_size) ``trtllm-bench`` picks when a run does not set them
    (``tensorrt_llm/bench/build/tuning.py``: ``calc_engine_setting`` and ``finetune_setting``): the requests of
    length I + O its KV estimate holds, capped at 4096, rounded up to a 32/128/256 step (at least 64); tokens =
    batch × (1 + I/O), capped at 32768, rounded up to a 256/512/1024 step (at least 2048).

    ``params``: parameters; ``weight_bytes``: bytes per parameter as served; ``kv_bytes_per_token``: KV bytes of one
    token over all layers with TensorRT-LLM's replicated KV heads (at least one per GPU); ``memory_bytes``: one GPU's.
    """
    gib = 2.0**30
    engine_size = params / 1e9 * weight_bytes  # the tool's "GB" of weights
    available = memory_bytes / gib * n_gpus - engine_size
    kv_requests = max(available * fraction / (kv_bytes_per_token / gib) / max(input_len + output_len, 1.0), 1.0)
    raw_bs = min(kv_requests, 4096.0)
    raw_tokens = min(raw_bs * (1.0 + input_len / max(output_len, 1.0)), 32768.0)
    bs = _round_up(raw_bs, ((256.0, 32), (1024.0, 128), (math.inf, 256)), 64)
    tokens = _round_up(raw_tokens, ((4096.0, 256), (8192.0, 512), (math.inf, 1024)), 2048)
    return tokens, bs


def _round_up(value: float, tiers: tuple[tuple[float, int], ...], floor: int) -> int:
    """``value`` rounded up to the step of the first tier whose bound it is below, at least ``floor``."""
    step = next(s for bound, s in tiers if value < bound)
    return max(floor, step * math.ceil(value / step))


@dataclass(frozen=True)
class BenchRun:
    """The run a published row measured (what a ``trtllm-bench`` run sizes its batch limits from): the model, its
    dtype (None: the model's own), the GPUs and the request sizes."""

    model_id: str
    dtype: str | None = None
    n_gpus: int = 1
    input_len: float = 0.0
    output_len: float = 0.0


def published_engine(perf: PerfModel, engine: str, version: str, gpu_id: str, tp: int = 1,
                     notes: str = "", *, run: BenchRun | None = None) -> EngineSetup:
    """Scheduling, batch limits and memory reservation of a published run of ``engine`` ``version`` on ``gpu_id``
    at tensor parallel ``tp`` (``notes``: the run's stated settings, e.g. a TensorRT-LLM free-memory fraction):
    what validation runs the closed form and the simulator with. A ``trtllm-bench`` run (its notes say so) of
    ``run.model_id`` at ``run.dtype`` on ``run.n_gpus`` with requests of ``run.input_len`` / ``run.output_len`` gets
    the batch limits that tool derives (:func:`trtllm_bench_limits`)."""
    settings = perf.calibration.settings
    memory_bytes = perf.gpu(gpu_id).memory_bytes
    tokens, seqs = engine_limits(engine, version, gpu_id, memory_bytes, settings)
    memory = engine_memory(engine, version, settings, memory_bytes, tp, stated_free_fraction(notes))
    attention_dp = engine == "trtllm" and "attention DP" in notes
    if engine == "trtllm" and "trtllm-bench" in notes and run is not None:
        spec = perf.model(run.model_id)
        fp8 = (run.dtype or spec.dtype or "").lower() == "fp8"
        heads = spec.num_kv_heads if attention_dp else max(tp, spec.num_kv_heads)  # KV heads replicate under TP only
        # The KV element the estimate's attention reads (``resolve_precision``): one rule for capacity and step.
        kv_element = resolve_precision(spec, run.dtype, perf.gpu(gpu_id)).kv_bytes
        kv_tok = 2.0 * spec.layers * heads * spec.head_dim * kv_element
        tokens, seqs = trtllm_bench_limits(spec.params_total, 1.0 if fp8 else 2.0, kv_tok, run.n_gpus, memory_bytes,
                                           run.input_len, run.output_len, memory.fraction)
    bench = bench_schedule(engine, version, notes, run.input_len, run.output_len) if run is not None else None
    return EngineSetup(scheduling_of(engine, version), tokens, seqs, memory, router_batching(engine, version),
                       attention_dp, bench)
