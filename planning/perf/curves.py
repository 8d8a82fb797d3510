"""Per-batch curves of one node option (tp, dp) for one phase: layer times, memory terms, throughput numerators.

Memory per GPU: weights + activation workspace + engine overhead + KV cache must fit the engine's budget, which
``perf.engines.EngineMemory`` derives from the memory the driver reports (the planner's engine, vLLM V1: 0.9 of the
card). The activation workspace of an engine with chunked prefill is bounded by its per-step token budget
(``max_batched_tokens``), not by batch x prompt: a step never holds more than that many tokens' activations,
whatever the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

import numpy as np

from planning.errors import PlanningError
from planning.perf.calibration import GlobalSettings
from planning.perf.engines import EngineMemory, planner_memory
from planning.perf.results import MemoryBreakdown, Workload
from planning.perf.roofline import ACT_BYTES, Device, EngineCopy, LayerArch, NodeEngine, layer_time


@dataclass(frozen=True)
class Curves:
    """Per-batch quantities of one node option (tp, dp) for one phase; arrays over the batch grid."""

    batches: np.ndarray
    tokens: np.ndarray  # throughput numerator per step (prompt tokens or output tokens)
    t_full: np.ndarray  # seconds per full-attention layer
    t_slide: np.ndarray  # seconds per sliding-window layer
    step_s: float  # fixed engine overhead per step
    transfer_s: np.ndarray  # activation send to the next stage
    w_layer: float  # weight bytes per layer per GPU
    kv_full: np.ndarray  # KV bytes per full layer per GPU, as counted against the budget (EngineMemory.kv_scale)
    kv_slide: np.ndarray
    mem_fixed: np.ndarray  # activation workspace + engine overhead per GPU counted against the budget
    reserve: float  # bytes per GPU the engine keeps outside weights, activations and KV (reporting)
    capacity: float  # the engine's budget per GPU (EngineMemory.budget of the driver-reported memory)
    workspace: float  # activation workspace bytes per GPU of one step (the largest the engine reserves)
    card: float  # the GPU's driver-reported memory, bytes
    dp: int
    measured: np.ndarray  # bool: a measured profile covers this batch


def workspace_bytes(arch: LayerArch, settings: GlobalSettings, tp: int, step_tokens: np.ndarray | float) -> np.ndarray:
    """Activation workspace per GPU for a step of ``step_tokens`` tokens, capped at the engine's token budget.

    Under attention DP (TensorRT-LLM's ``enable_attention_dp``, validation rows only) the budget is each GPU's own,
    and the MoE of every GPU runs over the tokens of all ``tp`` GPUs (gathered before it): its fused kernel holds,
    for each of their top-k expanded rows, the permuted input, the gated FC1 output, the activation and the FC2
    output ((2 h + 3 I) elements, the bytes ``roofline.moe_roofline_time`` moves per row, experts whole under expert
    parallelism). TensorRT-LLM profiles that peak with ``max_num_tokens`` on every rank before it sizes the KV cache
    (``KvCacheCreator``: the dummy requests are repeated ``tp_size`` times under attention DP), so it is reserved.
    """
    live = np.minimum(np.asarray(step_tokens, dtype=float), settings.max_batched_tokens)
    if arch.attention_dp and arch.is_moe:
        own = live * settings.activation_factor * arch.hidden * ACT_BYTES
        rows = tp * live * arch.active
        return np.asarray(own + rows * (2.0 * arch.hidden + 3.0 * arch.moe_inter) * ACT_BYTES, dtype=float)
    inter_act = (arch.active * arch.moe_inter if arch.is_moe else arch.inter) / tp
    return np.asarray(live * settings.activation_factor * (arch.hidden + inter_act) * ACT_BYTES, dtype=float)


SPREAD_ROUNDS = 8  # numerical guard: rounds of fluctuation_charged's fixed point (it settles in 2-3)
ELASTICITY_FLOOR = 1e-3  # numerical guard: a step exactly proportional to the batch needs unbounded room


def step_elasticity(batches: np.ndarray, step_s: np.ndarray) -> np.ndarray:
    """e = d ln t / d ln b of step times ``step_s`` (last axis over ``batches``), by the backward difference on the
    grid; 0 at the first point and where a time is not finite."""
    b = np.maximum(np.asarray(batches, dtype=float), 1.0)
    t = np.asarray(step_s, dtype=float)
    e = np.zeros_like(t)
    if b.size > 1:
        dlb = np.diff(np.log(b))
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.diff(np.log(t), axis=-1) / np.where(dlb > 0, dlb, np.inf)
        e[..., 1:] = np.where(np.isfinite(slope), slope, 0.0)
    return e


def fluctuation_spread(elasticity: np.ndarray | float) -> np.ndarray:
    """Variance of the running count over its mean, 1 / (1 − e) (:func:`kv_room`)."""
    return np.asarray(1.0 / np.maximum(1.0 - np.clip(elasticity, 0.0, 1.0), ELASTICITY_FLOOR), dtype=float)


def graphed(dev: Device, settings: GlobalSettings) -> Device:
    """The device as a CUDA-graph replay sees it: the CPU launch share of every kernel's latency is gone."""
    return replace(dev, cal=replace(dev.cal, kernel_us=dev.cal.kernel_us * settings.graph_kernel_factor,
                                    attn_us=dev.cal.attn_us * settings.graph_kernel_factor))


def _layer_times(eng: EngineCopy, batches: np.ndarray, q_len: float, context: float,
                 phase: str) -> tuple[np.ndarray, np.ndarray]:
    """(full-attention, sliding-window) seconds of one layer per batch."""
    t_full = layer_time(eng, batches, q_len, context, False, phase)
    return t_full, layer_time(eng, batches, q_len, context, True, phase) if eng.arch.window else t_full


def fluctuation_charged(eng: EngineCopy, batches: np.ndarray, context: float) -> Device:
    """``eng.dev`` (a planning device, ``MoeBinding.sigmas`` > 0) charging a decode batch of n sequences' MoE experts
    at n + sigmas·√(n·s), the count the engine admits (``templates.engine_plan``, the KV room of ``tables.kv_room``):
    s = 1 / (1 − e), e the elasticity of the step the tables hold, which is the charged one. The charge moves e (a
    fixed point), so s starts from the step as it runs and rises to the charged step's until it holds (s only
    grows, so the charge is never below the admission cap where the iteration settles); the whole model on one
    node stands for the step."""
    dev, arch = eng.dev, eng.arch
    if dev.moe is None:
        return dev

    def spread_of(d: Device) -> np.ndarray:
        t_full, t_slide = _layer_times(replace(eng, dev=d), batches, 1.0, context, "decode")
        n_full = float(arch.full_in_window[-1])
        step = n_full * t_full + (arch.layers - n_full) * t_slide + dev.cal.step_ms * 1e-3
        return fluctuation_spread(step_elasticity(batches, step))

    spread = spread_of(replace(dev, moe=dev.moe.running()))
    for _ in range(SPREAD_ROUNDS):
        charged = replace(dev, moe=dev.moe.with_spread(batches, spread))
        grown = np.maximum(spread, spread_of(charged))
        if np.all(grown <= spread):
            break
        spread = grown
    return replace(dev, moe=dev.moe.with_spread(batches, spread))


def reserve_bytes(dev: Device, memory: EngineMemory) -> float:
    """Bytes per GPU an engine keeps outside weights, activations and KV (the card less its budget, plus the
    overhead it counts inside the budget); for reporting."""
    return dev.memory_bytes - memory.budget(dev.memory_bytes) + memory.overhead_bytes


@dataclass(frozen=True)
class TimesMemo:
    """Per-layer step times (full, sliding) already computed, shared by the nodes that give the same ones: ``store``
    (its owner's, ``PerfModel``), this node's ``key`` in it. A node's times depend on its GPU type, tp,
    model, precision, phase, request sizes and batch grid (:func:`_step_times`), not on its data-parallel copies,
    network or memory: catalog-wide's precheck asks for 1,638 node curves of 644 distinct step times."""

    store: dict[Hashable, tuple[np.ndarray, np.ndarray]]
    key: Hashable
    kept: int
    """At most this many entries: the oldest goes when a new one comes (a long-lived process stays bounded)."""

    def get(self, compute: Callable[[], tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        hit = self.store.get(self.key)
        if hit is None:
            hit = compute()
            for a in hit:  # shared from now on
                a.flags.writeable = False
            if len(self.store) >= self.kept:
                self.store.pop(next(iter(self.store)))
            self.store[self.key] = hit
        return hit


def _step_times(node: NodeEngine, dev: Device, batches: np.ndarray, q_len: float, context: float,
                phase: str) -> tuple[np.ndarray, np.ndarray]:
    """(full-attention, sliding-window) seconds of one layer per batch on ``node``'s GPU type (``dev``, graphed for
    decode), the MoE experts charged as :func:`build_curves` says."""
    eng = node.copy(dev)
    if dev.moe is not None and dev.moe.sigmas > 0:
        # the admission-cap charge is a decode batch's: a prefill step holds the prompts it was planned with
        charged = fluctuation_charged(eng, batches, context) if phase == "decode" else replace(dev, moe=dev.moe.running())
        eng = node.copy(charged)
    return _layer_times(eng, batches, q_len, context, phase)


def build_curves(node: NodeEngine, phase: str, wl: Workload, batches: np.ndarray, net_gbps: float,
                 correction: tuple[np.ndarray, np.ndarray] | None = None,
                 memory: EngineMemory | None = None, times: TimesMemo | None = None) -> Curves:
    """Curves of one phase over ``batches`` (see module docstring for the memory terms).

    Parameters
    ----------
    node: layer sizes, GPU, precision, engine settings, tensor-parallel degree and data-parallel copies inside the
        node.
    phase: ``"prefill"`` (whole prompts of the batch in one step) or ``"decode"`` (one token per sequence).
    wl: mean request sizes.
    batches: requests per step (array).
    net_gbps: network bandwidth to the next pipeline stage.
    correction: optional (factor, measured) arrays from measured profiles.
    memory: the engine's memory reservation (default: the planner's engine, ``engines.planner_memory``).
    times: where step times computed for another node with the same ones are kept (:class:`TimesMemo`).

    Returns
    -------
    Curves.

    Raises
    ------
    PlanningError: unknown phase.
    """
    arch, dev, prec, settings, tp, dp = node.arch, node.dev, node.prec, node.settings, node.tp, node.dp
    inp, out = float(wl.input_len), float(wl.output_len)
    if phase == "prefill":
        q_len, context, tokens = inp, 0.0, batches * inp
        kv_tokens = inp
        act_tokens = batches * inp
    elif phase == "decode":
        dev = graphed(dev, settings)  # engines capture decode steps in CUDA graphs
        q_len, context, tokens = 1.0, inp + out / 2.0, batches.astype(float)
        kv_tokens = inp + out  # a sequence holds its KV until its last token
        act_tokens = batches.astype(float)
    else:
        raise PlanningError("phase", f"unknown phase {phase!r}.", "use 'prefill' or 'decode'.")
    if times is None:
        t_full, t_slide = _step_times(node, dev, batches, q_len, context, phase)
    else:
        t_full, t_slide = times.get(lambda: _step_times(node, dev, batches, q_len, context, phase))
    measured = np.zeros(batches.shape, dtype=bool)
    if correction is not None:
        factor, measured = correction
        t_full, t_slide = t_full * factor, t_slide * factor
    # Pipeline hop: the hidden state of every token of the step goes to the next node.
    transfer = settings.network_latency_ms * 1e-3 + act_tokens * arch.hidden * ACT_BYTES / (net_gbps * 1e9 / 8)
    memory = memory if memory is not None else planner_memory(settings)
    kv_tok = arch.kv_bytes_per_token(tp, prec.kv_bytes) * memory.kv_scale
    kv_full = batches * kv_tokens * kv_tok
    kv_slide = batches * min(kv_tokens, arch.window or kv_tokens) * kv_tok
    # The engine reserves its activation workspace for a full step when it starts (vLLM profiles a forward pass of
    # max_num_batched_tokens); a prefill engine batches whole prompts up to that budget, so its workspace is the
    # budget's whatever the planned batch. Decode steps carry one token per sequence.
    act = workspace_bytes(arch, settings, tp, np.full(batches.shape, float(settings.max_batched_tokens))
                          if phase == "prefill" else act_tokens)
    return Curves(
        batches=batches, tokens=np.asarray(tokens, dtype=float), t_full=t_full, t_slide=t_slide,
        step_s=dev.cal.step_ms * 1e-3, transfer_s=np.asarray(transfer, dtype=float),
        w_layer=arch.weight_bytes_per_gpu(prec, tp), kv_full=kv_full, kv_slide=kv_slide,
        mem_fixed=memory.fixed_bytes(act), reserve=reserve_bytes(dev, memory), workspace=float(np.max(act)),
        card=dev.memory_bytes,
        capacity=memory.budget(dev.memory_bytes), dp=dp, measured=measured,
    )


def memory_breakdown(pre: Curves, dec: Curves, nf: float, ns: float, layers: int, count: int, dp: int,
                     batch: int) -> tuple[MemoryBreakdown, float, float]:
    """Node memory of the whole model at one batch (from single-batch prefill and decode curves).

    Returns
    -------
    (breakdown in GB for the node, total bytes per GPU, capacity bytes per GPU). KV holds input + output tokens
    per sequence; the activation workspace is the prefill step's (capped at the token budget).
    """
    weights = layers * dec.w_layer
    kv = float(nf * dec.kv_full[0] + ns * dec.kv_slide[0])
    cap = dec.card
    act = float(pre.workspace)
    total = weights + kv + act + pre.reserve
    per_seq_kv = kv / batch
    free = cap - pre.reserve - weights - act
    max_dec_batch = int(max(0.0, free // per_seq_kv)) if per_seq_kv > 0 else 0
    memory = MemoryBreakdown(
        weights_gb=weights * count / 1e9, kv_cache_gb=kv * count / 1e9, activations_gb=act * count / 1e9,
        reserve_gb=pre.reserve * count / 1e9, total_gb=total * count / 1e9, capacity_gb=cap * count / 1e9,
        max_decode_batch=max_dec_batch * dp,
    )
    return memory, total, cap
