"""One node benchmarked like ``vllm bench serve``: a closed loop of clients (:func:`benchmark`) or an open loop
of given requests (:func:`replay`), on the simulator's aggregated engine; what ``planning.simulate.validation``
runs the published measurements with. Split from ``run.py`` (plans and topologies) along its use case."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np

from planning.catalog.schema import parse_shape
from planning.errors import PlanningError, quote
from planning.perf.engines import EngineMemory, RouterBatching
from planning.perf.model import MAX_TOKENS, PerfModel
from planning.perf.serving import SCHEDULING
from planning.result import NodeBox, StagePlan
from planning.simulate.engine import DecodeEngine, Requests
from planning.simulate.loop import Sim
from planning.simulate.metrics import BenchmarkResult
from planning.simulate.routing import ModelRoutes, Router
from planning.simulate.steps import InstanceModel, benchmark_engine_defaults

MAX_CONCURRENCY = 65_536  # closed-loop clients
MAX_BENCH_REQUESTS = 1_000_000  # requests of one closed-loop run


class NodeOptions(TypedDict, total=False):
    """The benchmarked node and its engine, given as keywords to :func:`benchmark` and :func:`replay`."""

    count: int  # GPUs in the node (default 1)
    tp: int | None  # tensor-parallel degree (default: all GPUs when valid)
    dtype: str | None  # weight dtype (default the model's)
    chunk_tokens: int | None  # the engine's step token budget (default: vLLM V1's for the GPU)
    max_seqs: int | None  # its sequence cap (default: vLLM V1's for the GPU)
    scheduling: str  # "chunked" (default) or "prefill-first"
    kv_policy: str  # "grow" (default) or "reserve"
    memory: EngineMemory | None  # the engine's memory reservation (default: the planner's engine)
    router: RouterBatching | None  # a prefill-first engine's admission rule (default: at the next step)


@dataclass(frozen=True)
class BenchNode:
    """:class:`NodeOptions` with their defaults filled in."""

    count: int = 1
    tp: int | None = None
    dtype: str | None = None
    chunk_tokens: int | None = None
    max_seqs: int | None = None
    scheduling: str = "chunked"
    kv_policy: str = "grow"
    memory: EngineMemory | None = None
    router: RouterBatching | None = None


def _node_engine(perf: PerfModel, model: str, gpu: str, node: BenchNode, input_len: float,
                 output_len: float) -> tuple[Sim, Requests, DecodeEngine, InstanceModel, int]:
    """One node's aggregated engine for a benchmark-style run: (sim, requests, engine, instance model, chunk)."""
    if node.scheduling not in SCHEDULING:
        raise PlanningError("scheduling", f"unknown scheduling {node.scheduling!r}.",
                            f"use one of {list(SCHEDULING)}.")
    spec = perf.model(model)
    perf.gpu(gpu)
    count = node.count
    default_chunk, default_seqs = benchmark_engine_defaults(perf, gpu)
    chunk = node.chunk_tokens or default_chunk
    seqs = node.max_seqs or default_seqs
    tp = node.tp
    if tp is None:
        opts = perf.tp_options(spec, count)
        if not opts:
            raise PlanningError("count", f"{spec.id} has no tensor-parallel degree for {count} GPUs.", "use 1, 2, 4 or 8.")
        tp = max(opts)
    shape = f"{count}x{gpu}"
    parse_shape(shape)
    stages = (StagePlan(spec.layers, 0, spec.layers, (NodeBox(shape, gpu, count, 1.0),)),)
    im = InstanceModel(perf, spec, stages, "aggregated", 1e6, input_len, output_len, max_seqs_per_copy=seqs,
                       max_step_tokens=chunk, dtype=node.dtype, tp=tp, memory=node.memory)
    req = Requests.empty(0)
    sim = Sim([], req)
    eng = DecodeEngine(sim, im, shape, True, chunk, prefill_first=node.scheduling == "prefill-first",
                       kv_policy=node.kv_policy, router=node.router)
    sim.routes = [ModelRoutes(Router([eng], [1.0], "proportional"), None)]
    return sim, req, eng, im, chunk


def _bench_result(req: Requests, im: InstanceModel, model: str, gpu: str, node: BenchNode, sizes: tuple[int, int],
                  concurrency: int, wall: float) -> BenchmarkResult:
    """Statistics of a benchmark-style run over its finished requests (token counts per request); ``sizes`` is
    the (input, output) length the result states."""
    count, dtype = node.count, node.dtype
    input_len, output_len = sizes
    arrival = np.array(req.arrival)
    first = np.array(req.t_first)
    done = np.array(req.t_done)
    out = np.array(req.out, dtype=float)
    inp = np.array(req.inp, dtype=float)
    ok = np.isfinite(done) & ~np.array(req.dropped)
    if not ok.any():
        raise PlanningError("input_len", f"no request fits the KV cache of {count}x{gpu} for {model}.",
                            "use shorter requests or a larger node.")
    ttft = (first - arrival)[ok] * 1e3
    dec = (done - first)[ok] * 1e3
    per_req = dec / np.maximum(out[ok] - 1, 1)
    span = float(done[ok].max() - arrival.min())
    n = int(ok.sum())
    gen = float(out[ok].sum())
    prec = im.stage_copies[0][0]
    return BenchmarkResult(
        model=model, gpu=gpu, count=count, tp=prec.tp, dtype=dtype or im.spec.dtype or "bf16", input_len=input_len,
        output_len=output_len, concurrency=concurrency, requests=n, ttft_ms_mean=float(ttft.mean()),
        ttft_ms_p50=float(np.percentile(ttft, 50)), ttft_ms_p90=float(np.percentile(ttft, 90)),
        ttft_ms_p99=float(np.percentile(ttft, 99)),
        itl_ms_mean=float(dec.sum() / max(gen - n, 1.0)), itl_ms_p90=float(np.percentile(per_req, 90)),
        tpot_ms_mean=float(per_req.mean()), tpot_ms_p50=float(np.percentile(per_req, 50)),
        e2e_latency_ms_mean=float(((done - arrival)[ok] * 1e3).mean()),
        output_tokens_per_s=gen / span, total_tokens_per_s=(gen + float(inp[ok].sum())) / span,
        requests_per_s=n / span, wall_s=time.perf_counter() - wall,
    )


def _check_ranges(values: Sequence[tuple[str, int, int]]) -> None:
    """Refuse a (name, value, top) whose value is outside [1, top], naming it."""
    for name, v, top in values:
        if not (1 <= v <= top):
            raise PlanningError(name, f"{quote(v)} is not in [1, {top:,}].", f"use {name} between 1 and {top:,}.")


def benchmark(model: str, gpu: str, *, input_len: int, output_len: int, concurrency: int, requests: int | None = None,
              perf: PerfModel | None = None, **options: Unpack[NodeOptions]) -> BenchmarkResult:
    """Closed loop on one node (aggregated engine): ``concurrency`` clients, each sending its next request when the
    previous one finishes, like ``vllm bench serve --max-concurrency``.

    Parameters
    ----------
    model, gpu: catalog ids. count: GPUs in the node. tp: tensor-parallel degree (default: all GPUs when valid).
    dtype: weight dtype. input_len, output_len: tokens per request. concurrency: clients.
    requests: requests in the run (default max(10 × concurrency, 64)).
    chunk_tokens, max_seqs: the engine's step token budget and sequence cap (default: vLLM V1's for the GPU).
    scheduling: ``"chunked"`` (prompt chunks ride in the decode steps) or ``"prefill-first"`` (whole prompts run
        as steps of their own that stall the decodes: vLLM before 0.6, TGI 2).
    kv_policy: ``"grow"`` (default: vLLM's incremental KV allocation with preemption by recomputation) or
        ``"reserve"`` (each request's whole footprint reserved at admission; see ``DecodeEngine``).
    memory: the engine's memory reservation (default: the planner's engine, vLLM V1; ``perf.engines``).
    router: a prefill-first engine's rule for letting waiting prompts in (TGI 2's router holds them behind the
        decodes: ``perf.engines.router_batching``; None: at the next step).

    Returns
    -------
    BenchmarkResult (means, p90s, throughputs) over all requests of the run.

    Raises
    ------
    PlanningError / UnknownIdError: bad ids, sizes, or a model that does not fit the node.
    """
    node = BenchNode(**options)
    _check_ranges((("input_len", input_len, MAX_TOKENS), ("output_len", output_len, MAX_TOKENS),
                   ("concurrency", concurrency, MAX_CONCURRENCY), ("count", node.count, 64),
                   ("requests", requests if requests is not None else 1, MAX_BENCH_REQUESTS)))
    perf = perf or PerfModel()
    wall = time.perf_counter()
    sim, req, _eng, im, _chunk = _node_engine(perf, model, gpu, node, input_len, output_len)
    total = requests if requests is not None else max(10 * concurrency, 64)
    issued = [0]

    # a prefill-first engine (vLLM v0, TGI 2) schedules its next step as soon as one ends, before a client that got
    # its last token in that step has sent its next request: the request waits for that step (``Sim.arrive_after``)
    send = sim.arrive_after if node.scheduling == "prefill-first" else sim.arrive

    def next_request(sim: Sim, t: float, _r: int) -> None:
        if issued[0] < total:
            issued[0] += 1
            send(t, req.add(t, input_len, output_len, 0))

    sim.on_finish = next_request
    first_wave = min(concurrency, total)
    # Without chunked prefill, clients that start together stay in lockstep (their prompts batch into one long step
    # and they finish together); real clients drift apart, so they start spread over one batch-1 request.
    spread = im.prefill_s(1, input_len) + (output_len - 1) * im.decode_cycle_s(1, float(input_len)) \
        if node.scheduling == "prefill-first" else 0.0
    wave = []
    for i in range(first_wave):
        issued[0] += 1
        t0 = spread * i / first_wave
        wave.append(req.add(t0, input_len, output_len, 0))
    sim.run(wave)
    return _bench_result(req, im, model, gpu, node, (input_len, output_len), concurrency, wall)


def replay(model: str, gpu: str, *, arrival_s: Sequence[float] | np.ndarray, input_lens: Sequence[int] | np.ndarray,
           output_lens: Sequence[int] | np.ndarray, perf: PerfModel | None = None,
           **options: Unpack[NodeOptions]) -> BenchmarkResult:
    """Open loop on one node: the given requests arrive at their times, like ``vllm bench serve`` with a finite
    prompt set at a request rate (all at 0: ``--request-rate inf``). Throughputs are over the whole run, first
    arrival to last completion, as the benchmark reports them (so a drain of long requests counts).

    Parameters
    ----------
    arrival_s, input_lens, output_lens: one entry per request (seconds, tokens). Other parameters as ``benchmark``.

    Returns
    -------
    BenchmarkResult with ``concurrency`` 0 (open loop) and the mean request sizes (rounded).

    Raises
    ------
    PlanningError / UnknownIdError: bad ids, mismatched or out-of-range arrays, a model that does not fit.
    """
    t = np.asarray(arrival_s, dtype=float)
    inp = np.asarray(input_lens, dtype=np.int64)
    out = np.asarray(output_lens, dtype=np.int64)
    if not (t.ndim == inp.ndim == out.ndim == 1 and len(t) == len(inp) == len(out)):
        raise PlanningError("arrival_s", "arrival times, input and output lengths differ in shape.",
                            "give one arrival time, input length and output length per request.")
    if not (1 <= len(t) <= MAX_BENCH_REQUESTS):
        raise PlanningError("arrival_s", f"{len(t):,} requests.", f"give 1 to {MAX_BENCH_REQUESTS:,} requests.")
    if not (np.isfinite(t).all() and (t >= 0).all()):
        raise PlanningError("arrival_s", "has a negative or non-finite time.", "use times >= 0 in seconds.")
    for name, arr in (("input_lens", inp), ("output_lens", out)):
        if not ((arr >= 1).all() and (arr <= MAX_TOKENS).all()):
            raise PlanningError(name, f"has a length outside [1, {MAX_TOKENS:,}].", "use positive token counts.")
    perf = perf or PerfModel()
    wall = time.perf_counter()
    mean_in, mean_out = float(inp.mean()), float(out.mean())
    node = BenchNode(**options)
    sim, req, _eng, im, _chunk = _node_engine(perf, model, gpu, node, mean_in, mean_out)
    order = np.argsort(t, kind="stable")
    ids = [req.add(float(t[j]), int(inp[j]), int(out[j]), 0) for j in order]
    sim.run(ids)
    return _bench_result(req, im, model, gpu, node, (round(mean_in), round(mean_out)), 0, wall)
