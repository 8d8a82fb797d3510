"""Vectorized roofline cost of one transformer layer (GEMMs, attention, MoE, all-reduce) on one node.

Every time is ``kernel latency + max(FLOPs / (eff_c * peak), bytes / (eff_b * bandwidth))`` per operator
(the roofline of LLM-Viewer / LLMFabric Sec. 3.3), evaluated with numpy over arrays of batch sizes.
Units inside this module: seconds, bytes, FLOP/s. The math is written out in docs/perf-model.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from planning.catalog.schema import GPU, ModelSpec
from planning.errors import PlanningError
from planning.perf.calibration import GlobalSettings, GpuCalibration

if TYPE_CHECKING:
    from planning.perf.allreduce import AllReduceCurve
    from planning.perf.moe import MoeBinding

ArrayLike = np.ndarray | float

ACT_BYTES = 2.0  # activations and KV cache are BF16/FP16 in every mode modelled here
KV_BYTES = 2.0
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8.0}
# Kernels per layer besides GEMMs and attention (which count their own): rope, 2 fused add+norm, activation.
ELEMENTWISE_KERNELS = 4
ATTN_TILE = 64.0  # query rows per flash-attention decode tile (GQA groups are padded to it)
PREFILL_Q_TILE = 16.0  # prompt rows are padded to this granularity in prefill attention
MOE_EXTRA_KERNELS = 2  # top-k/softmax, token permute/unpermute (router and the two expert GEMMs count their own)


@dataclass(frozen=True)
class Device:
    """One GPU type with its spec numbers and fitted efficiencies (what every formula reads)."""

    gpu_id: str
    memory_bytes: float  # as the driver reports it (GPU.memory_bytes)
    bw: float  # HBM bytes/s
    bf16_flops: float  # dense FLOP/s
    fp8_flops: float | None
    link_bw: float  # intra-node bytes/s per direction
    cal: GpuCalibration
    p2p: bool = True  # GPUs of a node reach each other directly (else collectives go through host memory)
    # The engine writes a GEMM's FP8 input from the kernel before it (norm, attention, activation, MoE permutation):
    # no separate quantization kernel (TensorRT-LLM; engines.fuses_activation_quant, docs/perf-model.md Sec. 1).
    fused_quant: bool = False
    # Measured MoE expert kernels of this GPU and engine (planning.perf.moe); None: the roofline expert term.
    moe: MoeBinding | None = field(default=None, compare=False, repr=False)
    # Measured all-reduce of this GPU under the engine (planning.perf.allreduce); None: the fitted ring below.
    allreduce: AllReduceCurve | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_specs(cls, gpu: GPU, cal: GpuCalibration, moe: MoeBinding | None = None,
                   fused_quant: bool = False, allreduce: AllReduceCurve | None = None) -> Device:
        return cls(
            gpu_id=gpu.id, memory_bytes=gpu.memory_bytes, bw=gpu.hbm_bw_gbps * 1e9, bf16_flops=gpu.bf16_tflops * 1e12,
            fp8_flops=gpu.fp8_tflops * 1e12 if gpu.fp8_tflops else None, link_bw=gpu.intra_link_gbps * 1e9, cal=cal,
            p2p=gpu.p2p, moe=moe, fused_quant=fused_quant, allreduce=allreduce,
        )


@dataclass(frozen=True)
class Precision:
    """Bytes per weight (dense and expert) and the tensor-core rate the GEMMs run at."""

    name: str
    dense_bytes: float
    expert_bytes: float
    compute: str  # "bf16" | "fp8"
    kv_bytes: float = KV_BYTES  # bytes per cached K/V element (FP8 checkpoints carry an FP8 KV cache)

    @property
    def expert_compute(self) -> str:
        """Tensor-core rate of the expert GEMMs (weight-only MXFP4 dequantizes to BF16 in registers)."""
        return self.compute


def resolve_precision(model: ModelSpec, dtype: str | None, gpu: GPU) -> Precision:
    """Weight storage and compute rate for ``dtype`` (default: the model's own) on ``gpu``.

    Parameters
    ----------
    model: the architecture (its ``dtype`` is the default).
    dtype: ``"bf16"``, ``"fp16"``, ``"fp8"`` or ``"mxfp4"``; ``None`` = model default.
    gpu: the GPU type (FP8 needs FP8 tensor cores).

    Returns
    -------
    The precision. MXFP4 (gpt-oss) stores expert weights in 4.25 bits and the rest in BF16, and computes
    in BF16 (weight-only quantization; no FP4 tensor cores on the catalog's GPUs).

    Raises
    ------
    PlanningError: unknown dtype, or FP8 on a GPU without FP8 tensor cores.
    """
    name = (dtype or model.dtype or "bf16").lower()
    if name not in WEIGHT_BYTES:
        raise PlanningError("dtype", f"unknown dtype {name!r}.", "use bf16, fp16, fp8 or mxfp4.")
    if name == "fp8":
        if gpu.fp8_tflops is None:
            raise PlanningError("dtype", f"GPU {gpu.id} has no FP8 tensor cores.",
                                "use dtype bf16, or a GPU with FP8 tensor cores (Hopper or Ada generation).")
        # FP8 KV cache: ModelOpt exports declare it (hf_quant_config kv_cache_quant_algo, hf_ptq.py default fp8),
        # TensorRT-LLM sets it with --quantization FP8; the sources per validation row: docs/perf-model.md Sec. 7.
        return Precision("fp8", 1.0, 1.0, "fp8", kv_bytes=1.0)
    if name == "mxfp4":
        return Precision("mxfp4", 2.0, WEIGHT_BYTES["mxfp4"], "bf16")
    return Precision(name, 2.0, 2.0, "bf16")


@dataclass(frozen=True)
class LayerArch:
    """Per-layer sizes derived from a ModelSpec (one decoder layer; embeddings amortized over layers)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    experts: int
    active: int
    moe_inter: int
    window: int | None
    vocab: int
    tie_embeddings: bool
    full_in_window: np.ndarray  # (L,) most full-attention layers in any run of j consecutive layers
    # Attention data parallelism (TensorRT-LLM ``enable_attention_dp``): each of the tp GPUs runs attention for its
    # own 1/tp of the sequences with all heads (no KV-head replication, attention weights replicated); the MLP/MoE
    # runs tensor parallel over all tokens, gathered before it and scattered after (one all-reduce's volume).
    attention_dp: bool = False

    @classmethod
    def from_spec(cls, m: ModelSpec) -> LayerArch:
        kinds = [k.lower() for k in m.layer_types] if m.layer_types else []
        if not kinds or m.sliding_window is None:
            kinds = ["full"] * m.layers
        if len(kinds) != m.layers:
            raise PlanningError(f"models.{m.id}.layer_types", f"has {len(kinds)} entries for {m.layers} layers.",
                                "list one kind per layer or leave it empty.")
        is_full = np.array([k != "sliding" for k in kinds], dtype=float)
        cs = np.concatenate([[0.0], np.cumsum(is_full)])
        most = np.array([np.max(cs[j:] - cs[:-j]) for j in range(1, m.layers + 1)])
        return cls(
            layers=m.layers, hidden=m.hidden_size, heads=m.num_heads, kv_heads=m.num_kv_heads, head_dim=m.head_dim,
            inter=m.intermediate_size, experts=m.experts_total, active=m.experts_active,
            moe_inter=m.moe_intermediate_size, window=m.sliding_window if m.sliding_window else None,
            vocab=m.vocab_size, tie_embeddings=m.tie_embeddings, full_in_window=most,
        )

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    def attn_params(self) -> float:
        return float(self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim
                     * self.hidden)

    def expert_params(self) -> float:
        """Parameters of ONE expert (gate, up, down)."""
        return 3.0 * self.hidden * self.moe_inter

    def dense_mlp_params(self) -> float:
        return 0.0 if self.is_moe else 3.0 * self.hidden * self.inter

    def embed_params_per_layer(self) -> float:
        """Embedding + LM head, spread evenly over the layers (documented simplification)."""
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2) / self.layers

    def weight_bytes_per_layer(self, p: Precision) -> float:
        """Bytes of one layer's weights (all experts) incl. its share of embeddings (BF16)."""
        dense = (self.attn_params() + self.dense_mlp_params()) * p.dense_bytes
        experts = self.experts * self.expert_params() * p.expert_bytes + self.experts * self.hidden * 2.0
        return dense + experts + self.embed_params_per_layer() * 2.0

    def weight_bytes_per_gpu(self, p: Precision, tp: int) -> float:
        """Bytes of one layer's weights on each of ``tp`` GPUs. Under attention DP the attention weights and the
        embedding and LM head are whole on every GPU (TensorRT-LLM builds them without a tensor-parallel mapping
        when ``enable_attention_dp`` is set: ``Qwen3MoEModel.embed_tokens``, and the LM head unless
        ``enable_lm_head_tp_in_adp``, off by default); only the experts (and a dense MLP) are split."""
        total = self.weight_bytes_per_layer(p)
        if not self.attention_dp:
            return total / tp
        whole = self.attn_params() * p.dense_bytes + self.embed_params_per_layer() * 2.0
        return whole + (total - whole) / tp

    def kv_per_gpu(self, tp: int) -> float:
        """KV heads' worth of cache per GPU per token of the node: split, replicated when tp > kv heads; under
        attention DP each GPU keeps all heads of 1/tp of the sequences (kv_heads / tp, never replicated)."""
        return self.kv_heads / tp if self.attention_dp else kv_heads_per_gpu(self.kv_heads, tp)

    def kv_bytes_per_token(self, tp: int, kv_bytes: float = KV_BYTES) -> float:
        """KV cache bytes per token per layer per GPU (KV heads replicate when tp > kv heads)."""
        return 2.0 * self.kv_per_gpu(tp) * self.head_dim * kv_bytes


@dataclass(frozen=True)
class EngineCopy:
    """One engine copy's kernels: the GPU type (with its calibration), the layer sizes, the weight precision and the
    tensor-parallel degree the layers are split over (what every layer time reads)."""

    dev: Device
    arch: LayerArch
    prec: Precision
    tp: int


@dataclass(frozen=True)
class NodeEngine:
    """A node's engine: ``dp`` data-parallel copies of a ``tp``-GPU engine of ``arch`` at ``prec`` on ``dev``, run
    with the engine ``settings`` (token budget, max sequences, memory utilisation)."""

    arch: LayerArch
    dev: Device
    prec: Precision
    settings: GlobalSettings
    tp: int
    dp: int

    def copy(self, dev: Device | None = None) -> EngineCopy:
        """The kernels of one copy (``dev``: the device as the phase runs it, e.g. CUDA-graphed; default own)."""
        return EngineCopy(self.dev if dev is None else dev, self.arch, self.prec, self.tp)


def kv_heads_per_gpu(kv_heads: int, tp: int) -> float:
    return max(1.0, kv_heads / tp)


def valid_tp(arch: LayerArch, tp: int) -> bool:
    """vLLM's rule: attention heads split evenly, and KV heads split or replicate evenly."""
    return arch.heads % tp == 0 and (arch.kv_heads % tp == 0 or tp % arch.kv_heads == 0)


def roof(dev: Device, flops: ArrayLike, nbytes: ArrayLike, compute: str = "bf16", attn: bool = False) -> np.ndarray:
    """max(compute time, memory time) in seconds for one kernel, without its fixed latency."""
    if attn:
        peak = dev.bf16_flops * dev.cal.eff_attn
    elif compute == "fp8":
        if dev.fp8_flops is None:
            raise PlanningError("dtype", f"GPU {dev.gpu_id} has no FP8 tensor cores.", "use bf16.")
        peak = dev.fp8_flops * dev.cal.eff_compute_fp8
    else:
        peak = dev.bf16_flops * dev.cal.eff_compute_bf16
    return np.maximum(np.asarray(flops, dtype=float) / peak, np.asarray(nbytes, dtype=float) / (dev.bw * dev.cal.eff_bw))


def gemm_time(dev: Device, m: ArrayLike, n: ArrayLike, k: ArrayLike, wbytes: float, compute: str = "bf16") -> np.ndarray:
    """Y[m,n] = X[m,k] W[k,n]: kernel latency + roofline (weights at ``wbytes``, activations BF16)."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    flops = 2.0 * m * n * k
    nbytes = k * n * wbytes + (m * k + m * n) * ACT_BYTES
    t = dev.cal.kernel_us * 1e-6 + roof(dev, flops, nbytes, compute)
    if compute == "fp8":
        t = t + quant_time(dev, m, k)
    return t


def quant_time(dev: Device, rows: ArrayLike, k: ArrayLike) -> np.ndarray:
    """Dynamic per-token FP8 quantization of the GEMM input: one memory-bound kernel reading X (BF16), writing X8.

    Explicit and small: ~3 bytes per input element plus one kernel latency; zero where the engine fuses it into the
    preceding kernel (``dev.fused_quant``: TensorRT-LLM's fused add + norm + quantize, attention output, activation).
    """
    r, kk = np.asarray(rows, dtype=float), np.asarray(k, dtype=float)
    if dev.fused_quant:
        return np.zeros(np.broadcast(r, kk).shape)
    return quant_kernel_time(dev, r, kk)


def quant_kernel_time(dev: Device, rows: ArrayLike, k: ArrayLike) -> np.ndarray:
    """One stand-alone FP8 quantization kernel over ``rows`` × ``k`` BF16 elements (3 bytes each) and its latency."""
    r, kk = np.asarray(rows, dtype=float), np.asarray(k, dtype=float)
    return dev.cal.kernel_us * 1e-6 + r * kk * (ACT_BYTES + 1.0) / (dev.bw * dev.cal.eff_bw)


def moe_input_quant_time(dev: Device, tokens: ArrayLike, hidden: float, active: float) -> np.ndarray:
    """FP8 quantization before the expert GEMMs: vLLM quantizes the ``tokens`` × top-k permuted rows; TensorRT-LLM
    (``dev.fused_quant``) quantizes the ``tokens`` rows once before its fused MoE (the permutation copies FP8 and
    the activation writes the second GEMM's FP8 input)."""
    t = np.asarray(tokens, dtype=float)
    return quant_kernel_time(dev, t if dev.fused_quant else t * active, hidden)


def causal_pairs(q_len: ArrayLike, window: int | None) -> np.ndarray:
    """Query-key pairs of causal attention over a prompt of ``q_len`` tokens (window caps each row)."""
    q = np.asarray(q_len, dtype=float)
    full = q * (q + 1.0) / 2.0
    if window is None:
        return full
    w = float(window)
    return np.where(q <= w, full, w * (w + 1.0) / 2.0 + (q - w) * w)


def attention_prefill_time(dev: Device, batch: ArrayLike, q_len: ArrayLike, heads: float, kv_heads: float,
                           head_dim: int, window: int | None = None) -> np.ndarray:
    """Causal flash attention of ``batch`` prompts of ``q_len`` tokens, heads already divided by tp."""
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    # Flash attention works on tiles of ATTN_TILE query rows: a short prompt still costs a whole tile.
    q_tiles = np.ceil(q / PREFILL_Q_TILE) * PREFILL_Q_TILE
    # Each query row also pays a fixed per-tile cost worth ``attn_tile_tokens`` keys (softmax epilogue, loads).
    flops = 4.0 * head_dim * heads * b * (causal_pairs(q_tiles, window) + q_tiles * dev.cal.attn_tile_tokens)
    nbytes = b * q * head_dim * (2.0 * heads + 2.0 * kv_heads) * ACT_BYTES
    return dev.cal.attn_us * 1e-6 + roof(dev, flops, nbytes, attn=True)


def attention_decode_time(dev: Device, batch: ArrayLike, context: ArrayLike, heads: float, kv_heads: float,
                          head_dim: int, window: int | None = None, kv_bytes: float = KV_BYTES) -> np.ndarray:
    """One decode step of attention: each of ``batch`` sequences reads its KV cache of ``context`` tokens."""
    b = np.asarray(batch, dtype=float)
    c = np.asarray(context, dtype=float)
    if window is not None:
        c = np.minimum(c, float(window))
    # GQA packs the query heads of one KV head into the rows of one tile, padded to ATTN_TILE rows.
    rows = np.maximum(heads / kv_heads, ATTN_TILE) * kv_heads
    flops = 4.0 * head_dim * rows * b * (c + dev.cal.attn_tile_tokens)
    nbytes = b * c * 2.0 * kv_heads * head_dim * kv_bytes + b * 2.0 * heads * head_dim * ACT_BYTES
    return dev.cal.attn_us * 1e-6 + roof(dev, flops, nbytes, attn=True)


def allreduce_time(dev: Device, nbytes: ArrayLike, n: int) -> np.ndarray:
    """One all-reduce of ``nbytes`` over ``n`` GPUs of one node.

    A GPU whose all-reduce is measured (``dev.allreduce``: NCCL, or the engine's own where measured) reads the
    measured table (planning.perf.allreduce). GPUs without peer-to-peer (GeForce cards, the A10G/L4 VMs of AWS)
    exchange through host memory (NCCL's shared-memory transport): every ring step is a copy to a host buffer and a
    read back over PCIe, at the host path's bus bandwidth ``ar_host_gbps`` (measured on the aiconfigurator L40S box
    where NCCL routes through host memory). Other GPUs (no measured table) run the ring fitted on their own data:
    latency + 2(n-1)/n * bytes / (link * ``ar_eff``). docs/perf-model.md Sec. 1.
    """
    size = np.asarray(nbytes, dtype=float)
    if n <= 1:
        return np.zeros_like(size)
    if dev.p2p and dev.allreduce is not None:
        return dev.allreduce.seconds(size, n)
    latency = dev.cal.ar_latency_us * 1e-6 * (1.0 + (n - 2) / 4.0)
    if dev.p2p:
        link = dev.link_bw * dev.cal.ar_eff * (2.0 / n) ** dev.cal.ar_scaling
    else:
        link = dev.cal.ar_host_gbps * 1e9
    return latency + 2.0 * (n - 1) / n * size / link


def expected_experts_touched(tokens: ArrayLike, experts: int, active: int) -> np.ndarray:
    """Distinct experts a batch of ``tokens`` routes to (uniform routing): E(1-(1-k/E)^N) <= min(E, N k)."""
    t = np.asarray(tokens, dtype=float)
    return experts * (1.0 - np.power(1.0 - active / experts, t))


def moe_roofline_time(dev: Device, arch: LayerArch, p: Precision, tp: int, tokens: np.ndarray) -> np.ndarray:
    """Roofline of one MoE layer's experts when no kernel is measured for any GPU (a model without kernel tables):
    FLOPs of the active experts, bytes of the experts touched, permutation kernels, FP8 input quantization."""
    touched = expected_experts_touched(tokens, arch.experts, arch.active)
    flops = 2.0 * tokens * arch.active * arch.expert_params() / tp
    nbytes = (touched * arch.expert_params() * p.expert_bytes / tp
              + tokens * arch.active * (2.0 * arch.hidden + 3.0 * arch.moe_inter / tp) * ACT_BYTES)
    t = 2 * dev.cal.kernel_us * 1e-6 + roof(dev, flops, nbytes, p.expert_compute)
    if p.expert_compute == "fp8":  # activation quantization before the grouped GEMMs
        t = t + moe_input_quant_time(dev, tokens, arch.hidden, arch.active)
    return np.asarray(t, dtype=float)


def dense_time(dev: Device, arch: LayerArch, p: Precision, tp: int, tokens: ArrayLike, lm_rows: ArrayLike) -> np.ndarray:
    """Seconds of one layer's token-parallel work (GEMMs or experts, element-wise, LM-head share, all-reduces).

    Parameters
    ----------
    dev, arch, p, tp: GPU type, layer sizes, precision, tensor-parallel degree.
    tokens: tokens in the step (array); every token goes through every weight of the layer.
    lm_rows: sequences that sample a token in the step (the LM head runs on their last position only).

    Returns
    -------
    Time in seconds, broadcast over the inputs (attention is not included).
    """
    tokens = np.asarray(tokens, dtype=float)
    h, hd = arch.hidden, arch.head_dim
    heads, kvh = arch.heads / tp, arch.kv_per_gpu(tp)
    wb = p.dense_bytes
    if arch.attention_dp:  # each GPU: its 1/tp of the tokens through the whole QKV and O weights
        t = gemm_time(dev, tokens / tp, (arch.heads + 2 * arch.kv_heads) * hd, h, wb, p.compute)
        t = t + gemm_time(dev, tokens / tp, h, arch.heads * hd, wb, p.compute)
    else:
        t = gemm_time(dev, tokens, (heads + 2 * kvh) * hd, h, wb, p.compute)  # QKV
        t = t + gemm_time(dev, tokens, h, heads * hd, wb, p.compute)  # O
    if arch.is_moe:
        t = t + gemm_time(dev, tokens, arch.experts, h, 2.0, "bf16")  # router (replicated)
        if dev.moe is not None:  # measured fused kernel: permutation, grouped GEMMs, activation (and FP8 quant)
            t = t + dev.moe.seconds(dev, arch, p, tp, tokens)
            inter_act, kernels = 0.0, ELEMENTWISE_KERNELS - 1
        else:
            t = t + moe_roofline_time(dev, arch, p, tp, tokens)
            inter_act, kernels = arch.active * arch.moe_inter / tp, ELEMENTWISE_KERNELS + MOE_EXTRA_KERNELS
    else:
        inter = arch.inter / tp
        t = t + gemm_time(dev, tokens, 2 * inter, h, wb, p.compute)  # gate+up
        t = t + gemm_time(dev, tokens, h, inter, wb, p.compute)  # down
        inter_act = inter
        kernels = ELEMENTWISE_KERNELS
    # Element-wise kernels (norms, residual adds, rope, activation): memory bound, plus their latency.
    elem_bytes = tokens * ACT_BYTES * (10.0 * h + 2.0 * (heads + 2 * kvh) * hd + 3.0 * inter_act)
    t = t + kernels * dev.cal.kernel_us * 1e-6 + elem_bytes / (dev.bw * dev.cal.eff_bw)
    # LM head on the last position of each sequence, spread evenly over the layers like its weights.
    t = t + gemm_time(dev, lm_rows, arch.vocab / tp, h, 2.0, "bf16") / arch.layers
    # Two all-reduces per layer (after attention and after the MLP) when tensor parallel; under attention DP an
    # all-gather before the MLP and a reduce-scatter after it, together one all-reduce's traffic.
    t = t + (1.0 if arch.attention_dp else 2.0) * allreduce_time(dev, tokens * h * ACT_BYTES, tp)
    return np.asarray(t, dtype=float)


def layer_time(eng: EngineCopy, batch: ArrayLike, q_len: ArrayLike, context: ArrayLike, sliding: bool,
               phase: str) -> np.ndarray:
    """Seconds for one decoder layer on a node of ``tp`` GPUs (tensor parallel) for one forward step.

    Parameters
    ----------
    eng: the GPU type with its calibration, per-layer sizes, weight precision / compute rate and tensor-parallel
        degree (GPUs the layer is split over).
    batch: sequences in the step (array).
    q_len: new tokens per sequence (prompt length for prefill, 1 for decode).
    context: tokens already cached per sequence (decode) - ignored for prefill.
    sliding: whether this layer uses sliding-window attention (``arch.window``).
    phase: ``"prefill"`` or ``"decode"``.

    Returns
    -------
    Time in seconds, broadcast over the inputs.
    """
    dev, arch, p, tp = eng.dev, eng.arch, eng.prec, eng.tp
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    heads, kvh = arch.heads / tp, arch.kv_per_gpu(tp)
    window = arch.window if sliding else None
    t = dense_time(dev, arch, p, tp, b * q, b)
    if phase == "prefill":
        t = t + attention_prefill_time(dev, b, q, heads, kvh, arch.head_dim, window)
    else:
        t = t + attention_decode_time(dev, b, context, heads, kvh, arch.head_dim, window, p.kv_bytes)
    return np.asarray(t, dtype=float)


def mixed_layer_time(eng: EngineCopy, n_decode: ArrayLike, context: ArrayLike, prefill_tokens: ArrayLike,
                     prompt_len: float, sliding: bool) -> np.ndarray:
    """One layer of a continuous-batching step: ``n_decode`` running sequences plus a chunk of prompt tokens.

    Parameters
    ----------
    eng: GPU type, layer sizes, precision, tensor-parallel degree.
    n_decode: sequences generating one token each (array), reading ``context`` cached tokens.
    context: mean cached tokens per decoding sequence.
    prefill_tokens: prompt tokens prefilled in the same step (chunked prefill shares the step).
    prompt_len: prompt length of the requests being prefilled (their attention is causal over it).
    sliding: sliding-window layer.

    Returns
    -------
    Seconds (array): the GEMMs run once over all tokens of the step, attention per kind.
    """
    dev, arch, p, tp = eng.dev, eng.arch, eng.prec, eng.tp
    d = np.asarray(n_decode, dtype=float)
    pt = np.asarray(prefill_tokens, dtype=float)
    heads, kvh = arch.heads / tp, arch.kv_per_gpu(tp)
    window = arch.window if sliding else None
    seqs = pt / max(prompt_len, 1.0)
    t = dense_time(dev, arch, p, tp, d + pt, d)
    t = t + attention_decode_time(dev, d, context, heads, kvh, arch.head_dim, window, p.kv_bytes)
    t = t + np.where(pt > 0, attention_prefill_time(dev, seqs, prompt_len, heads, kvh, arch.head_dim, window), 0.0)
    return np.asarray(t, dtype=float)
