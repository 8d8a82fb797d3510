"""A ``trtllm-bench`` dataset run as TensorRT-LLM's PyTorch executor schedules it (issue 42; docs/perf-model.md
Sec. 7, "A trtllm-bench run in waves").

The closed form (``serving.serving_point``) is the steady state of a stream of requests. ``trtllm-bench throughput``
is not a stream: it queues its whole dataset at once (``BenchSchedule.requests`` requests of the same lengths), so
the engine admits as many as its KV cache holds (the closed form's batch), prefills them, decodes them together,
and they finish together: the run is a sequence of *waves*. A wave of B sequences of I / O tokens takes
⌈B·I / T⌉ prefill steps of the token budget T (per rank under attention DP) and O decode-only steps of B sequences
(the context grows from I to I + O and a step is linear in it, so the mean I + O/2 is exact). Two parts of the
executor shape those steps:

- **CUDA-graph padding.** A decode-only step replays the CUDA graph of the next captured batch size at or above
  B (``BenchSchedule.graph_sizes`` up to the engine's min(max_batch_size, max_num_tokens), that cap added), filled
  with one-token dummy requests (TensorRT-LLM's ``model_engine._get_padded_batch``); under attention DP every rank
  first takes the largest rank's batch. The token-parallel work of a layer (``roofline.dense_time``: GEMMs or
  experts, element-wise, LM head, all-reduce or all-gather) runs at the padded batch, attention at the real one.
  Above the largest captured size the step runs eagerly, unpadded.
- **The overlap scheduler.** The host's work of a step (scheduling, stop checks, responses: the model's per-step
  ``step_ms``) runs while the GPU runs the next step, so a step takes max(GPU time, host time), not their sum.

Throughput = N·O / Σ over the waves (prefill steps + O decode steps).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from planning.perf.curves import graphed
from planning.perf.engines import BenchSchedule
from planning.perf.results import Workload
from planning.perf.roofline import EngineCopy, NodeEngine, dense_time
from planning.perf.serving import step_time


def captured_sizes(sizes: Sequence[int], cap: float) -> tuple[float, ...]:
    """The CUDA-graph batch sizes an engine captures: the configured ones up to ``cap`` (its
    min(max_batch_size, max_num_tokens)), and ``cap`` itself when it is not one of them."""
    kept = [float(s) for s in sorted(sizes) if s <= cap]
    if not kept or kept[-1] != float(cap):
        kept.append(float(cap))
    return tuple(kept)


def padded_batch(batch: float, sizes: Sequence[float], tp: int, attention_dp: bool) -> float:
    """The batch a decode-only step of ``batch`` sequences runs its token-parallel work at: the next captured size
    at or above it (per rank under attention DP, where the ranks share the largest rank's ⌈batch / tp⌉); the batch
    itself above the largest captured size (an eager step)."""
    per = math.ceil(batch / tp) if attention_dp else batch
    if per > sizes[-1]:
        return float(batch)
    size = sizes[bisect.bisect_left(sizes, per)]
    return float(size * tp if attention_dp else size)


def overlapped(step_s: float, host_s: float) -> float:
    """A step whose host work (``host_s``, included in ``step_s``) overlaps the GPU's next step: the longer of the
    two, not their sum."""
    return max(step_s - host_s, host_s)


def wave_seconds(eng: EngineCopy, batch: float, wl: Workload, budget: float, sizes: Sequence[float],
                 host_s: float | None) -> float:
    """Seconds of one wave of ``batch`` sequences of ``wl``'s lengths: its prefill steps of at most ``budget`` prompt
    tokens, then ``wl.output_len`` decode-only steps padded to ``sizes``; ``host_s``: the per-step host work the
    overlap scheduler hides (None: charged in full, no overlap)."""
    inp, out = float(wl.input_len), max(float(wl.output_len), 1.0)
    steps = math.ceil(batch * inp / budget)
    chunk = batch * inp / steps
    t_pre = float(step_time(eng, np.zeros(1), inp, np.array([chunk]), inp)[0])
    t_dec = float(step_time(eng, np.array([batch]), inp + out / 2.0, np.zeros(1), inp)[0])
    pad = padded_batch(batch, sizes, eng.tp, eng.arch.attention_dp)
    if pad > batch:
        work = dense_time(eng.dev, eng.arch, eng.prec, eng.tp, np.array([pad, batch]), np.array([pad, batch]))
        t_dec += eng.arch.layers * float(work[0] - work[1])
    if host_s is not None:
        t_pre, t_dec = overlapped(t_pre, host_s), overlapped(t_dec, host_s)
    return steps * t_pre + out * t_dec


def bench_throughput(node: NodeEngine, wl: Workload, batch: float, schedule: BenchSchedule) -> float:
    """Output tokens/s of ``node`` running ``schedule``'s dataset in waves of ``batch`` sequences per engine copy
    (the closed form's memory-limited batch; module docstring)."""
    settings = node.settings
    dev = graphed(node.dev, settings)
    eng = node.copy(dev)
    budget = float(settings.max_batched_tokens) * (node.tp if node.arch.attention_dp else 1)
    sizes = captured_sizes(schedule.graph_sizes, min(settings.max_num_seqs, settings.max_batched_tokens))
    host_s = dev.cal.step_ms * 1e-3 if schedule.overlap else None
    requests = schedule.requests / node.dp
    full, rest = divmod(requests, batch)
    total = full * wave_seconds(eng, batch, wl, budget, sizes, host_s)
    if rest > 0.5:
        total += wave_seconds(eng, rest, wl, budget, sizes, host_s)
    return requests * max(float(wl.output_len), 1.0) / total * node.dp
