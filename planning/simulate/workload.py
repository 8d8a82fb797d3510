"""Arrival processes: Poisson at a scenario's planned rates, a rescaled trace, or a closed loop of N clients."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planning.errors import PlanningError
from planning.scenario import ModelRequest
from planning.traces import Trace


@dataclass(frozen=True)
class OpenArrivals:
    """Requests of one model known in advance: arrival times (s) and token counts."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray


def poisson_arrivals(model: ModelRequest, duration_s: float, rate_scale: float,
                     rng: np.random.Generator) -> OpenArrivals:
    """Poisson arrivals at ``rate_scale`` × the model's planned rate over ``duration_s``.

    Request sizes are the demand's means (rounded), or drawn from its histogram buckets in proportion to their
    rates (each bucket's representative sizes).
    """
    d = model.demand
    rate = d.rate_rps * rate_scale
    if rate <= 0 or duration_s <= 0:
        return OpenArrivals(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    n = int(rng.poisson(rate * duration_s))
    times = np.sort(rng.uniform(0.0, duration_s, n))
    if d.histogram:
        p = np.array([b.rate_rps for b in d.histogram], dtype=float)
        pick = rng.choice(len(p), size=n, p=p / p.sum())
        inp = np.array([b.input_len for b in d.histogram])[pick]
        out = np.array([b.output_len for b in d.histogram])[pick]
    else:
        inp = np.full(n, d.input_len)
        out = np.full(n, d.output_len)
    return OpenArrivals(times, np.maximum(1, np.rint(inp)).astype(np.int64),
                        np.maximum(1, np.rint(out)).astype(np.int64))


def trace_arrivals(trace: Trace, rate_rps: float, duration_s: float | None, rng: np.random.Generator) -> OpenArrivals:
    """The trace rescaled to ``rate_rps`` mean, started at a seeded random offset (cyclic), cut to ``duration_s``.

    Raises
    ------
    PlanningError: an empty trace or one without a time span.
    """
    if len(trace) < 2:
        raise PlanningError("trace", "has fewer than two requests.", "use a trace with at least two requests.")
    tr = trace.rescaled(rate_rps)
    span = tr.duration_s + 1.0 / rate_rps
    if duration_s is None:
        duration_s = tr.duration_s
    offset = float(rng.uniform(0.0, span))
    reps = int(np.ceil((duration_s + offset) / span)) + 1
    times = np.concatenate([tr.arrival_s + k * span for k in range(reps)]) - offset
    inp = np.tile(tr.input_tokens, reps)
    out = np.tile(tr.output_tokens, reps)
    keep = (times >= 0) & (times < duration_s)
    return OpenArrivals(times[keep], np.maximum(1, inp[keep]).astype(np.int64),
                        np.maximum(1, out[keep]).astype(np.int64))


def merge(per_model: Sequence[OpenArrivals]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All models' requests sorted by arrival: (arrival, input, output, model index)."""
    if not per_model:
        empty = np.zeros(0)
        return empty, empty.astype(np.int64), empty.astype(np.int64), empty.astype(np.int64)
    t = np.concatenate([a.arrival_s for a in per_model])
    i = np.concatenate([a.input_tokens for a in per_model])
    o = np.concatenate([a.output_tokens for a in per_model])
    m = np.concatenate([np.full(len(a.arrival_s), k, dtype=np.int64) for k, a in enumerate(per_model)])
    order = np.argsort(t, kind="stable")
    return t[order], i[order], o[order], m[order]
