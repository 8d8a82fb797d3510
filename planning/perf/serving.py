"""Aggregated serving of one node: continuous batching with chunked prefill, the answer max-throughput runs report.

Model (docs/perf-model.md, "Serving throughput"). One engine copy (tp GPUs) runs steps; in steady state with B
sequences decoding, every step carries B decode tokens plus the prefill share of the requests that replace the
finished ones, P = B * I / O prompt tokens (I, O: mean input/output tokens). The GEMMs run once over the B + P
tokens of the step; attention is paid per kind (decode over the mean context I + O/2, prefill causal over I):

    t(B) = sum over layers of mixed_layer_time(B, P) + step overhead        (TPOT = t(B))
    output tokens/s = dp * B / t(B)                                         (dp copies in the node)
    TTFT(B) = (ceil(I / (T - B)) + 1/2) * t_chunk                           (T = max_batched_tokens)

subject to B + P <= T (prefill keeps up), B <= max_num_seqs, memory (weights + B (I + O/2) KV tokens (I + O for an
engine that reserves a request's whole KV at admission) + workspace of T tokens + overhead <= the engine's budget)
and the optional TTFT/TPOT SLOs. The peak is the best feasible B. A closed loop of
C clients (benchmarks at a fixed concurrency) runs B = C: TPOT = t(C) with the prefill share of the other C - 1,
TTFT from a chunked prefill next to C - 1 decodes, and output tokens/s = C * O / (TTFT + (O - 1) * TPOT).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from planning.errors import PlanningError
from planning.perf.curves import graphed, workspace_bytes
from planning.perf.engines import EngineMemory, RouterBatching, planner_memory
from planning.perf.results import ServingPoint, Workload
from planning.perf.roofline import ACT_BYTES, EngineCopy, NodeEngine, mixed_layer_time
from planning.perf.tables import kv_room


def _grid(max_seqs: int) -> np.ndarray:
    dense = np.arange(1, min(64, max_seqs) + 1, dtype=float)
    sparse = np.round(np.geomspace(64, max(64, max_seqs), 96)) if max_seqs > 64 else np.zeros(0)
    return np.unique(np.concatenate([dense, sparse[sparse <= max_seqs]]))


def _token_grid(cap: float) -> np.ndarray:
    """Step token budgets to search: 64, 80, … (steps of 16, the simulator's resolution) to 1024, then geometric to
    ``cap`` (and ``cap`` itself)."""
    cap = max(64.0, float(cap))
    fine = np.arange(64.0, min(cap, 1024.0) + 1.0, 16.0)
    coarse = np.round(np.geomspace(1024.0, cap, 48)) if cap > 1024.0 else np.zeros(0)
    return np.unique(np.concatenate([fine, coarse, [cap]]))


def _step_time(eng: EngineCopy, n_decode: np.ndarray, context: float, prefill_tokens: np.ndarray,
               prompt_len: float) -> np.ndarray:
    nf = float(eng.arch.full_in_window[-1])
    ns = eng.arch.layers - nf
    t = nf * mixed_layer_time(eng, n_decode, context, prefill_tokens, prompt_len, False)
    if ns > 0:
        t = t + ns * mixed_layer_time(eng, n_decode, context, prefill_tokens, prompt_len, True)
    return np.asarray(t + eng.dev.cal.step_ms * 1e-3, dtype=float)


def step_time(eng: EngineCopy, n_decode: np.ndarray, context: float, prefill_tokens: np.ndarray,
              prompt_len: float) -> np.ndarray:
    """Seconds of one engine step of the whole model: ``n_decode`` sequences at ``context`` cached tokens and
    ``prefill_tokens`` prompt tokens of ``prompt_len``-token prompts, plus the per-step overhead ``step_ms`` (what
    every closed form here times; ``planning.perf.waves`` times a trtllm-bench run's steps with it)."""
    return _step_time(eng, n_decode, context, prefill_tokens, prompt_len)


SCHEDULING = ("chunked", "prefill-first")


@dataclass(frozen=True)
class StepSetup:
    """How one engine copy runs its steps (:func:`_times`): its kernels, the decodes' mean context ``ctx``, the prompt
    length ``inp``, the step token budget, the scheduling, a prefill-first engine's ``router`` and whether the load
    is a ``closed_loop`` of clients."""

    eng: EngineCopy
    ctx: float
    inp: float
    budget: float
    scheduling: str
    router: RouterBatching | None = None
    closed_loop: bool = False


@dataclass(frozen=True)
class ServingQuery:
    """What a serving point is asked (:func:`serving_point`): the optional SLOs, a closed loop of ``concurrency``
    clients or an open loop at ``request_rate``, the engine's ``scheduling``, its ``memory`` reservation and a
    prefill-first engine's ``router``."""

    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    concurrency: int | None = None
    scheduling: str = "chunked"
    memory: EngineMemory | None = None
    request_rate: float | None = None
    router: RouterBatching | None = None


def _times(run: StepSetup, b: np.ndarray, share: np.ndarray, others: np.ndarray) -> dict[str, np.ndarray]:
    """Step times of one engine copy with ``b`` sequences decoding and ``share`` prompt tokens per step on average.

    Prompts arrive whole, so the prompt tokens come in lumps: a chunked engine carries a chunk of
    c = min(I, T - B) tokens in a share q = min(1, share / c) of its steps and none in the others, and the mean step
    (the TPOT) is q t(B, c) + (1 - q) t(B, 0); a step is convex in its tokens (memory-bound, then compute-bound),
    so this exceeds t(B, share) once a lump crosses the ridge. ``t_dec``: a decode-only step; ``t_p``: a step with
    a chunk (``busy`` share of the time); ``t_own``: one prompt's own chunked prefill beside ``others`` decodes.
    Prefill-first: ``t_pre``, one prefill step of ``k`` prompts between decode steps. With a ``router`` that holds
    prompts behind the decodes (TGI 2), the gate stays closed for n decode steps after a prefill: until the waiting
    prompts number ``min_waiting(B)`` (n = that / the arrivals per step) or for ``max_decode_steps``, whichever is
    first (n = 0 when any waiting prompt opens it). A prompt that arrives while it is closed waits n/2 steps on average;
    one that finds it open (no prompt came during the last n steps: the gate reopens and waits idle, e^{-a n}/a steps
    on average) goes at the next step. The prefill then takes every prompt that waited, k = max(1, a n). ``gate``:
    the mean wait (seconds). In a ``closed_loop`` of clients with equal requests the gate groups them: prompts that
    go in together finish together and come back together, and a group smaller than ``min_waiting`` waits for the
    next forced prefill and merges with the prompts held there, so in steady state every group opens the gate by its
    own number, k = max(1, ⌊r (B − k)⌋) ≈ r B / (1 + r) prompts at once, and waits for nothing but the step in
    progress.
    """
    eng, ctx, inp, budget, router = run.eng, run.ctx, run.inp, run.budget, run.router
    scheduling, closed_loop = run.scheduling, run.closed_loop
    zeros = np.zeros_like(b)
    t_dec = _step_time(eng, b, ctx, zeros, inp)
    if scheduling == "prefill-first":
        # Prompts are not chunked: each waiting batch of prompts is a step of its own, between decode steps.
        per_step = share / inp  # new prompts per decode step (the B/O requests that replace finished ones)
        closed = np.zeros_like(b)
        k_max = max(1.0, math.floor(max(budget, inp) / inp))
        if router is not None and closed_loop:  # groups that open the gate by their number (docstring)
            r = router.waiting_served_ratio
            k = np.clip(np.floor(r * b / (1.0 + r)), 1.0, k_max)
        else:
            if router is not None:
                need = np.floor(b * router.waiting_served_ratio)
                with np.errstate(divide="ignore", invalid="ignore"):
                    fill = np.where(per_step > 0, need / per_step, np.inf)
                closed = np.where(need >= 1, np.minimum(fill, float(router.max_decode_steps)), 0.0)
            k = np.clip(np.maximum(per_step, per_step * closed), 1.0, k_max)  # prompts per prefill step
        t_pre = _step_time(eng, zeros, ctx, k * inp, inp)
        t = t_dec + per_step * t_pre / k
        parts = {"t": t, "t_dec": t_dec, "t_pre": t_pre, "k": k, "busy": per_step * t_pre / k / t}
        if router is not None:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                idle = np.where(per_step > 0, np.exp(-per_step * closed) / per_step, np.inf)
                share_closed = np.where(closed > 0, closed / (closed + idle), 0.0)
            parts["gate"] = share_closed * closed / 2.0 * t
        return parts
    chunk = np.minimum(inp, np.maximum(budget - b, 1.0))
    lump = np.maximum(chunk, np.minimum(share, np.maximum(budget - b, 0.0)))
    q = np.minimum(1.0, share / chunk)
    t_p = _step_time(eng, b, ctx, lump, inp)
    t = q * t_p + (1.0 - q) * t_dec
    own_chunk = np.maximum(budget - others, 1.0)
    t_own = np.ceil(inp / own_chunk) * _step_time(eng, others, ctx, np.minimum(own_chunk, inp), inp)
    return {"t": t, "t_dec": t_dec, "t_p": t_p, "t_own": t_own, "lump": lump, "busy": q * t_p / t}


def _ttft(parts: dict[str, np.ndarray], inp: float, lam: np.ndarray, alone: bool) -> np.ndarray:
    """Mean TTFT at a prompt arrival rate ``lam`` per copy (prompts/s): the rest of the step in progress, the wait
    for prompt work ahead, and the prompt's own prefill (docs/perf-model.md Sec. 3b, "TTFT under load").

    A random arrival lands in a prompt-carrying step with probability ``busy`` (the time share of such steps) and
    waits half of it, else half a decode step. The prompt work ahead is a single server (M/D/1): each prompt adds
    D = I (t_p - t_dec) / lump to the steps, its tokens' share of the lumps' extra time (prefill-first:
    D = t_pre / k of a batched prefill step), ρ = λ D, wait ρ D / (2 (1 - ρ)). A lone client (``alone``) finds the
    engine idle: its TTFT is its own prefill.
    """
    if "gate" in parts:  # a router that holds prompts (TGI 2): they wait for the gate, then go in one prefill
        if alone:
            return np.asarray(parts["t_pre"], dtype=float)
        busy = np.clip(parts["busy"], 0.0, 1.0)
        residual = busy * parts["t_pre"] / 2.0 + (1.0 - busy) * parts["t_dec"] / 2.0
        return np.asarray(parts["gate"] + residual + parts["t_pre"], dtype=float)
    if "t_pre" in parts:
        own = parts["t_pre"]
        service = parts["t_pre"] / parts["k"]
        busy_step = parts["t_pre"]
    else:
        own = parts["t_own"]
        service = inp * np.maximum(parts["t_p"] - parts["t_dec"], 0.0) / parts["lump"]
        busy_step = parts["t_p"]
    if alone:
        return np.asarray(own, dtype=float)
    rho = np.clip(lam * service, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1.0, rho * service / (2.0 * (1.0 - rho)), np.inf)
    busy = np.clip(parts["busy"], 0.0, 1.0)
    residual = busy * busy_step / 2.0 + (1.0 - busy) * parts["t_dec"] / 2.0
    return np.asarray(own + residual + wait, dtype=float)


SATURATION_ITERATIONS = 60


@dataclass(frozen=True)
class _Run:
    """One serving evaluation's engine: its step times, request sizes, limits and memory per GPU (bytes)."""

    times: Callable[[np.ndarray, np.ndarray, np.ndarray], dict[str, np.ndarray]]
    inp: float
    out: float
    tp: int
    dp: int
    max_seqs: int
    budget: float
    scheduling: str
    fixed: float
    kv_seq: float
    cap: float


def serving_point(node: NodeEngine, wl: Workload, query: ServingQuery | None = None) -> ServingPoint | None:
    """Peak sustainable aggregated serving of one node of ``dp`` copies of a ``tp``-GPU engine.

    Parameters
    ----------
    node: layer sizes, GPU, precision, engine settings (token budget, max sequences, memory), tensor-parallel degree
        and data-parallel copies in the node.
    wl: mean input/output tokens per request.
    query (default: the unconstrained open-loop peak of the planner's engine):
      ttft_slo_ms, tpot_slo_ms: optional latency SLOs the operating point must meet (None: unconstrained peak). The
        TTFT is the one under the point's own load (queueing for the prompt budget included, :func:`_ttft`).
      concurrency: closed loop of this many clients over the whole node instead of the open-loop peak.
      scheduling: ``"chunked"`` (default; prompt chunks ride in the decode steps: vLLM V1, SGLang, TensorRT-LLM) or
        ``"prefill-first"`` (engines without chunked prefill, e.g. vLLM <= 0.5 and TGI 2 by default: waiting prompts
        run as a step of their own that stalls every decode). Prefill-first, with B decoding and B/O new prompts
        per decode step: TPOT = t_dec(B) + (B/O) · t_pre(k)/k (k = max(1, B/O) prompts per prefill step);
        closed loops use the other B - 1 clients' prompts.
      memory: the engine's memory reservation (default the planner's engine); its ``hold`` sets the KV a running
        sequence holds (I + O/2 when it grows a token at a time, I + O when reserved at admission).
      request_rate: evaluate an open loop at this many requests/s over the node (Poisson arrivals) instead of the
        peak: the batch is what Little's law keeps running at that rate, TTFT and TPOT are the latencies under
        that load, ``limited_by`` is ``"request_rate"``. None when the node cannot sustain the rate.
      router: a prefill-first engine's rule for letting waiting prompts in (TGI 2's router,
        ``engines.RouterBatching``; None: at the next step).

    Returns
    -------
    The operating point, or None when nothing fits (weights alone exceed memory, or no batch meets the SLOs).
    """
    q = query if query is not None else ServingQuery()
    if q.scheduling not in SCHEDULING:
        raise PlanningError("scheduling", f"unknown scheduling {q.scheduling!r}.", f"use one of {list(SCHEDULING)}.")
    settings = node.settings
    inp, out = float(wl.input_len), max(float(wl.output_len), 1.0)
    budget = float(settings.max_batched_tokens)
    dev = graphed(node.dev, settings)
    gate = q.router if q.scheduling == "prefill-first" else None
    steps = StepSetup(node.copy(dev), inp + out / 2.0, inp, budget, q.scheduling, gate, q.concurrency is not None)

    def times(b: np.ndarray, share: np.ndarray, others: np.ndarray) -> dict[str, np.ndarray]:
        return _times(steps, b, share, others)

    # Memory per GPU at a batch, against the engine's budget (KV bytes at its kv_scale).
    memory = q.memory if q.memory is not None else planner_memory(settings)
    arch, tp = node.arch, node.tp
    kv_tok = arch.kv_bytes_per_token(tp, node.prec.kv_bytes) * memory.kv_scale
    nf = float(arch.full_in_window[-1])
    ns = arch.layers - nf
    held = memory.kv_tokens(inp, out)
    kv_seq = kv_tok * (nf * held + ns * min(held, float(arch.window or held)))
    weights = arch.layers * arch.weight_bytes_per_gpu(node.prec, tp)
    fixed = weights + float(memory.fixed_bytes(workspace_bytes(arch, settings, tp, budget)))
    run = _Run(times, inp, out, tp, node.dp, int(settings.max_num_seqs), budget, q.scheduling, fixed, kv_seq,
               memory.budget(dev.memory_bytes))
    if q.request_rate is not None:
        return _at_rate(run, float(q.request_rate), q)
    if q.concurrency is not None:
        # the inner point of an over-full closed loop runs on the graphed device with the resolved memory
        return _closed_loop(run, q, replace(node, dev=dev), wl, memory)
    return _peak(run, q)


def _closed_loop(run: _Run, q: ServingQuery, node: NodeEngine, wl: Workload,
                 memory: EngineMemory) -> ServingPoint | None:
    """``serving_point`` for a closed loop of ``q.concurrency`` clients (module docstring)."""
    concurrency = q.concurrency if q.concurrency is not None else 0
    inp, out, dp, tp, cap = run.inp, run.out, run.dp, run.tp, run.cap
    per_copy = max(1.0, concurrency / dp)
    b = np.array([per_copy])
    prefill_share = (b - 1.0) * inp / out
    parts = run.times(b, prefill_share, np.maximum(b - 1.0, 0.0))
    t = parts["t"]
    alone = concurrency <= dp
    ttft = _ttft(parts, inp, np.zeros_like(b), alone)
    for _ in range(8):  # the clients' prompt rate depends on their TTFT (closed loop)
        ttft = _ttft(parts, inp, b / (ttft + (out - 1.0) * t), alone)
    mem = run.fixed + b * run.kv_seq
    if not mem[0] <= cap:
        # More clients than KV cache: the engine runs the sequences that fit and queues the rest.
        fit = int((cap - run.fixed) // run.kv_seq) if cap > run.fixed else 0
        if fit < 1:
            return None
        inner = serving_point(node, wl, ServingQuery(q.ttft_slo_ms, q.tpot_slo_ms, fit * dp, q.scheduling, memory,
                                                     router=q.router))
        if inner is None:
            return None
        wait_s = (concurrency - fit * dp) / inner.max_requests_per_s
        return replace(inner, ttft_ms=inner.ttft_ms + wait_s * 1e3, concurrency=int(concurrency),
                       limited_by="memory")
    out_rate = float(concurrency * out / (ttft[0] + (out - 1.0) * t[0]))
    return ServingPoint(
        max_output_tokens_per_s=out_rate, max_requests_per_s=out_rate / out, batch=int(concurrency),
        ttft_ms=float(ttft[0] * 1e3), tpot_ms=float(t[0] * 1e3), memory_gb=float(mem[0] * tp * dp / 1e9),
        capacity_gb=float(cap) * tp * dp / 1e9, limited_by="concurrency", ttft_slo_ms=q.ttft_slo_ms,
        tpot_slo_ms=q.tpot_slo_ms, concurrency=int(concurrency))


def _peak(run: _Run, q: ServingQuery) -> ServingPoint | None:
    """``serving_point``'s open-loop peak: the best feasible batch on the grid and what limits the next one."""
    inp, out, dp, tp, cap = run.inp, run.out, run.dp, run.tp, run.cap
    b = _grid(run.max_seqs)
    prefill_share = b * inp / out
    parts = run.times(b, prefill_share, b)
    t = parts["t"]
    ttft = _ttft(parts, inp, b / (out * t), False)
    mem = run.fixed + b * run.kv_seq
    checks = {
        "memory": mem <= cap,
        "token_budget": b + (prefill_share if run.scheduling == "chunked" else 0.0) <= run.budget,
        "tpot": t * 1e3 <= (q.tpot_slo_ms if q.tpot_slo_ms is not None else math.inf),
        "ttft": ttft * 1e3 <= (q.ttft_slo_ms if q.ttft_slo_ms is not None else math.inf),
    }
    ok = np.logical_and.reduce(list(checks.values()))
    if not ok.any():
        return None
    thr = np.where(ok, b / t, 0.0)
    i = int(np.argmax(thr))
    if i + 1 >= b.size:
        limited = "max_num_seqs"
    else:
        failing = [name for name, c in checks.items() if not c[i + 1]]
        limited = failing[0] if failing else "throughput"
    out_rate = float(thr[i] * dp)
    return ServingPoint(
        max_output_tokens_per_s=out_rate, max_requests_per_s=out_rate / out, batch=int(b[i]) * dp,
        ttft_ms=float(ttft[i] * 1e3), tpot_ms=float(t[i] * 1e3), memory_gb=float(mem[i] * tp * dp / 1e9),
        capacity_gb=float(cap) * tp * dp / 1e9, limited_by=limited, ttft_slo_ms=q.ttft_slo_ms,
        tpot_slo_ms=q.tpot_slo_ms)


def _at_rate(run: _Run, rate: float, q: ServingQuery) -> ServingPoint | None:
    """Open loop at ``rate`` requests/s over the node (``serving_point``'s ``request_rate``): the fixed point of
    B = λ (TTFT(B) + (O - 1) TPOT(B)) per copy, with λ I prompt tokens per second riding in the steps. None when
    there is none within the engine's limits (the rate exceeds what the node sustains)."""
    if not (rate > 0 and math.isfinite(rate)):
        raise PlanningError("request_rate", f"{rate} requests/s.", "give a positive rate.")
    times, inp, out, dp, tp, cap = run.times, run.inp, run.out, run.dp, run.tp, run.cap
    ttft_slo_ms, tpot_slo_ms = q.ttft_slo_ms, q.tpot_slo_ms
    lam = np.array([rate / dp])
    b = np.array([1.0])
    t = times(b, np.zeros(1), b)["t"]
    ttft = np.zeros(1)
    for _ in range(SATURATION_ITERATIONS):
        share = lam * inp * t  # prompt tokens per step at this rate
        parts = times(b, share, b)
        t = parts["t"]
        ttft = _ttft(parts, inp, lam, False)
        new_b = lam * (ttft + (out - 1.0) * t)
        if not np.isfinite(new_b[0]) or new_b[0] > run.max_seqs or run.fixed + new_b[0] * run.kv_seq > cap \
                or (run.scheduling == "chunked" and new_b[0] + share[0] > run.budget):
            return None
        if abs(new_b[0] - b[0]) <= 1e-3 * max(b[0], 1.0):
            b = new_b
            break
        b = np.maximum(0.5 * (b + new_b), 1e-3)
    else:
        return None
    ok_slo = (ttft_slo_ms is None or ttft[0] * 1e3 <= ttft_slo_ms) and (tpot_slo_ms is None or t[0] * 1e3 <= tpot_slo_ms)
    if not ok_slo:
        return None
    mem = run.fixed + b[0] * run.kv_seq
    return ServingPoint(
        max_output_tokens_per_s=rate * out, max_requests_per_s=rate, batch=round(float(b[0]) * dp),
        ttft_ms=float(ttft[0] * 1e3), tpot_ms=float(t[0] * 1e3), memory_gb=float(mem * tp * dp / 1e9),
        capacity_gb=float(cap) * tp * dp / 1e9, limited_by="request_rate", ttft_slo_ms=ttft_slo_ms,
        tpot_slo_ms=tpot_slo_ms, request_rate=rate)


def serving_stage_table(node: NodeEngine, wl: Workload, tpot_budget: np.ndarray, ttft_slo_ms: float | None,
                        net_gbps: float, stages: np.ndarray, kv_sigmas: float = 0.0) -> np.ndarray:
    """Aggregated T̂: requests/s of one node holding j layers as one of S pipeline stages, shape (S, L)
    (:func:`serving_stage_entries`, best batch per entry)."""
    vals, _b, _t, _tokens = serving_stage_entries(node, wl, tpot_budget, ttft_slo_ms, net_gbps, stages, kv_sigmas)
    return np.asarray(vals.max(axis=2), dtype=float)


def serving_stage_entries(node: NodeEngine, wl: Workload, tpot_budget: np.ndarray, ttft_slo_ms: float | None,
                          net_gbps: float, stages: np.ndarray,
                          kv_sigmas: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Aggregated T̂ per batch: (requests/s (S, L, B) where feasible else 0, batches (B,), mean step seconds
    (S, L, B), step token budget T(S, j) (S, L)) of one node holding j layers as one of S pipeline stages.

    The stage runs the continuous-batching step of the module docstring over its j layers: t(j, B) = j layers of
    mixed_layer_time + step overhead + activation send (S > 1), the prompt tokens in whole chunks (a share of the
    steps carries a chunk, the others none: ``_times``); requests/s = dp * B / (O * t). Feasible when
    t <= tpot_budget[S] (the TPOT SLO split over the stages), B + P <= T(S, j) (the SLO-sized step token budget: the
    largest prompt chunk whose step on the j layers fits tpot_budget[S], 64 tokens to the engine setting), the stage's
    memory (j layers of weights and of S micro-batches of B sequences' KV cache at I + O tokens + workspace + overhead
    within the planner's engine budget)
    fits, and the pipeline TTFT S * (ceil(I / (T - B)) + 1/2) * t_chunk(j, B) meets ``ttft_slo_ms``. ``kv_sigmas``: KV room for
    ``kv_sigmas`` standard deviations of the running count (``tables.kv_room``, the decode tables' rule).
    """
    arch, prec, settings, tp, dp = node.arch, node.prec, node.settings, node.tp, node.dp
    inp, out = float(wl.input_len), max(float(wl.output_len), 1.0)
    budget = float(settings.max_batched_tokens)
    dev = graphed(node.dev, settings)
    eng = node.copy(dev)
    b = _grid(int(settings.max_num_seqs))
    share = b * inp / out
    ctx = inp + out / 2.0
    t_full = mixed_layer_time(eng, b, ctx, np.minimum(share, np.maximum(budget - b, 0.0)), inp, False)
    t_slide = (mixed_layer_time(eng, b, ctx, np.minimum(share, np.maximum(budget - b, 0.0)), inp, True)
               if arch.window else t_full)
    j = np.arange(1, arch.layers + 1, dtype=float)
    nf = arch.full_in_window
    ns = j - nf
    step = dev.cal.step_ms * 1e-3
    run = nf[:, None] * t_full[None, :] + ns[:, None] * t_slide[None, :] + step  # (L, B) at the mean prompt share
    d_full = mixed_layer_time(eng, b, ctx, np.zeros_like(b), inp, False)
    d_slide = mixed_layer_time(eng, b, ctx, np.zeros_like(b), inp, True) if arch.window else d_full
    run_dec = nf[:, None] * d_full[None, :] + ns[:, None] * d_slide[None, :] + step  # (L, B) decode-only steps
    # The engine's per-step token budget, as the simulator runs it and a deployment of the plan sets it
    # (Sarathi-Serve's rule, simulate.steps.InstanceModel.step_token_budget): the largest prompt chunk whose step on
    # the stage fits the stage's TPOT budget, at least 64 tokens, at most the engine setting. Decodes and prompt
    # chunks share it, so the mean prompt share must fit beside the decodes and a prompt takes ceil(I / (T - B))
    # steps. (Assuming the engine setting instead let a plan promise TTFTs that its SLO-sized steps cannot keep.)
    tgrid = _token_grid(budget)
    p_full = mixed_layer_time(eng, np.zeros_like(tgrid), ctx, tgrid, inp, False)
    p_slide = mixed_layer_time(eng, np.zeros_like(tgrid), ctx, tgrid, inp, True) if arch.window else p_full
    pre = nf[:, None] * p_full[None, :] + ns[:, None] * p_slide[None, :] + step  # (L, T)
    fits = pre[None, :, :] <= tpot_budget[:, None, None]  # (S, L, T): step time grows with the tokens
    n_fit = fits.sum(axis=2)
    tokens = np.where(n_fit > 0, tgrid[np.maximum(n_fit - 1, 0)], tgrid[0])[:, :, None]  # (S, L, 1)
    chunk = np.maximum(tokens - b[None, None, :], 1.0)  # (S, L, B) prompt tokens per step beside B - 1 decodes
    c_tok = np.minimum(chunk, inp)
    # A chunk step's layer time depends on (S, j) only through the token budget, which takes few distinct values:
    # evaluate it once per distinct budget (U, B) and gather, not over all (S, L, B) entries (a third of a cold
    # sharing solve's CPU went here).
    levels, which = np.unique(tokens[:, :, 0], return_inverse=True)
    u_tok = np.minimum(np.maximum(levels[:, None] - b[None, :], 1.0), inp)  # (U, B)
    u_dec = np.maximum(b - 1.0, 0.0)[None, :]
    u_full = mixed_layer_time(eng, u_dec, ctx, u_tok, inp, False)
    u_slide = mixed_layer_time(eng, u_dec, ctx, u_tok, inp, True) if arch.window else u_full
    which = which.reshape(tokens.shape[:2])
    c_full, c_slide = u_full[which], u_slide[which]  # (S, L, B)
    steps = np.ceil(inp / chunk) + 0.5
    run_chunk = nf[None, :, None] * c_full + ns[None, :, None] * c_slide + step  # (S, L, B)
    memory = planner_memory(settings)
    kv_tok = arch.kv_bytes_per_token(tp, prec.kv_bytes) * memory.kv_scale
    # Planning sizes a sequence's KV at its full length (input + output), as the decode tables do: an engine
    # that admits a request must be able to keep it to its last token without preemption. Each node of an
    # S-stage pipeline holds the KV of S micro-batches in flight.
    held = inp + out
    kv_full = b * held * kv_tok
    kv_slide = b * min(held, float(arch.window or held)) * kv_tok
    fixed = float(memory.fixed_bytes(workspace_bytes(arch, settings, tp, budget)))
    kv = nf[:, None] * kv_full[None, :] + ns[:, None] * kv_slide[None, :]  # (L, B)
    # Activation send to the next stage: every token of the step (decode + prefill share) crosses the network.
    hop = settings.network_latency_ms * 1e-3 + (b + share) * arch.hidden * ACT_BYTES / (net_gbps * 1e9 / 8)
    send = np.where(stages[:, None] > 1, hop[None, :], 0.0)  # (S, B)
    # Prompts arrive whole: a share q = P / c of the steps carries a chunk of c = min(I, T - B) tokens and the rest
    # none; the mean step is q t(B, c) + (1 - q) t(B, 0), above t(B, P) where the chunk crosses the ridge (serving's
    # _times). Where the mean share fills a chunk (q >= 1) the steps carry it continuously.
    q = share[None, None, :] / c_tok
    lumpy = np.where(q < 1.0, q * run_chunk + (1.0 - q) * run_dec[None, :, :], run[None, :, :])
    t = lumpy + send[:, None, :]  # (S, L, B)
    held_batches = kv_room(stages, b, t, kv_sigmas)  # (S, L, B): S micro-batches + room for their fluctuation
    mem = (j[:, None] * arch.weight_bytes_per_gpu(prec, tp) + fixed)[None, :, :] + held_batches * kv[None, :, :]
    ok_lb = (mem <= memory.budget(dev.memory_bytes)) & ((b + share)[None, None, :] <= tokens)  # (S, L, B)
    # Each stage: half a step for the one in progress, then the prompt's own chunks; and, under the load the instance
    # is planned at (aggregated_max_load of this rate), the wait for the prompt work ahead (serving's _ttft: M/D/1 on
    # the chunks' extra step time).
    ttft = stages[:, None, None] * steps * (run_chunk + send[:, None, :])
    lam = settings.aggregated_max_load * b[None, None, :] / (out * t)  # prompts/s per copy
    step_p = np.where(q < 1.0, run_chunk, run[None, :, :])  # a step carrying prompt tokens ...
    lump_tokens = np.where(q < 1.0, c_tok, np.maximum(share[None, None, :], 1.0))  # ... and how many
    service = inp * np.maximum(step_p - run_dec[None, :, :], 0.0) / lump_tokens
    rho = np.clip(lam * service, 0.0, 0.999)
    ttft = ttft + rho * service / (2.0 * (1.0 - rho))
    ok = ok_lb & (t <= tpot_budget[:, None, None])
    if ttft_slo_ms is not None:
        ok &= ttft * 1e3 * settings.prefill_headroom <= ttft_slo_ms
    return (np.asarray(np.where(ok, dp * b[None, None, :] / (out * t), 0.0), dtype=float), b, t,
            np.asarray(tokens[:, :, 0], dtype=float))
