"""Aggregated engine of a pipeline of S > 1 stages: S micro-batches flowing through the stages on their own.

vLLM runs a pipeline-parallel engine as S virtual engines: each schedules its own batch (its decodes plus prompt
chunks up to the token budget), and the S batches are in flight at once, one per stage. Here each micro-batch is
a unit with its own running sequences and prompt queue; a step of micro-batch ``j`` goes through the stages in
order, each stage serving the steps FIFO (``stage_free``), activations sent between stages. So a long prompt chunk
holds one stage at a time while the other micro-batches' decodes pass through the stages it has left — the
overlap a synchronous "whole-engine step" cannot show (docs/simulator.md, aggregated pipelines).

Stage times come from the same ``InstanceModel`` tables as the other engines: a decode-only step is the stage's
decode time of ``m`` sequences; a step with prompt chunks is one fused pass of the chunk and the decodes (prefill
table at ``chunk + m`` tokens) plus the decodes' attention over their context (``mixed_s``'s rule, per stage).

Events are per micro-batch step (no leaps): a pipelined instance costs O(steps) events, which stays small next to
a run's requests because a step serves every running sequence of its micro-batch.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from planning.simulate.engine import WAKE, Engine, take_chunk, through_stages
from planning.simulate.steps import InstanceModel

if TYPE_CHECKING:
    from planning.simulate.loop import Sim


class _Micro:
    """One micro-batch (vLLM virtual engine): running sequences, prompt chunks, its own step counter."""

    __slots__ = ("b", "busy", "ctx_sum", "mixed", "prefill_q", "running", "steps", "t_start")

    def __init__(self) -> None:
        self.prefill_q: deque[list[int]] = deque()  # [request, prompt tokens left]
        self.running: list[tuple[int, int]] = []  # heap (finish step, request)
        self.b = 0
        self.ctx_sum = 0.0
        self.steps = 0
        self.busy = False
        self.mixed: list[tuple[int, bool]] = []
        self.t_start = 0.0

    def load(self) -> int:
        return self.b + len(self.prefill_q)


class PipelinedEngine(Engine):
    """Aggregated continuous batching with chunked prefill over S pipeline stages, S micro-batches in flight."""

    def __init__(self, sim: Sim, im: InstanceModel, name: str, chunk_tokens: int) -> None:
        super().__init__(sim, im, name, "aggregated")
        self.chunk = chunk_tokens
        self.n = im.n_stages
        self.micro = [_Micro() for _ in range(self.n)]
        self.stage_free = [0.0] * self.n
        self.stage_busy = [0.0] * self.n
        self.b = 0  # running sequences over all micro-batches
        self.b_t = 0.0  # time of the last change of b (for seq_seconds)

    def load(self) -> float:
        return len(self.waiting) + sum(mb.load() for mb in self.micro)

    def _count(self, t: float, delta: int) -> None:
        self.seq_seconds += self.b * (t - self.b_t)
        self.b_t = t
        self.b += delta
        self.peak_batch = max(self.peak_batch, self.b)

    def enqueue(self, t: float, r: int) -> None:
        self.waiting.append(r)
        self.admit(t)

    def _admit_next(self, t: float) -> int | None:
        if self.b + sum(len(mb.prefill_q) for mb in self.micro) >= self.im.max_batch:
            return None  # max_num_seqs over the S micro-batches: a finishing sequence makes room
        return super()._admit_next(t)

    def admit(self, t: float) -> None:
        req = self.sim.req
        while (r := self._admit_next(t)) is not None:
            req.t_start[r] = t
            j = min(range(self.n), key=lambda i: (self.micro[i].load(), i))
            mb = self.micro[j]
            mb.prefill_q.append([r, max(1, req.inp[r])])
            if not mb.busy:
                self._step(t, j)

    def _step(self, t: float, j: int) -> None:
        """Start micro-batch ``j``'s next step at ``t`` (it enters the first stage when that stage is free)."""
        mb = self.micro[j]
        im = self.im
        m = mb.b
        chunk, tokens = take_chunk(mb.prefill_q, self.chunk - m)
        if not chunk and m == 0:
            mb.busy = False
            return
        ctx = mb.ctx_sum / m if m else 0.0
        times = im.stage_step_s(m, len(chunk), float(tokens), ctx)
        ready = through_stages(t, times, self.stage_free, self.stage_busy)
        self.busy_s = max(self.stage_busy)
        mb.busy = True
        mb.mixed = chunk
        mb.t_start = t
        self.sim.push(ready, WAKE, self, j)

    def on_wake(self, t: float, payload: object) -> None:
        j = int(payload)  # type: ignore[call-overload]
        mb = self.micro[j]
        req = self.sim.req
        mb.steps += 1
        self.tokens_out += mb.b
        mb.ctx_sum += mb.b
        for r, completes in mb.mixed:
            if completes:
                req.t_first[r] = t
                self.tokens_out += 1
                self._join(t, mb, r)
        mb.mixed = []
        while mb.running and mb.running[0][0] <= mb.steps:
            _, r = heapq.heappop(mb.running)
            mb.b -= 1
            mb.ctx_sum -= req.inp[r] + req.out[r]
            self._count(t, -1)
            self._finish(t, r)
        if mb.b == 0:
            mb.ctx_sum = 0.0
        self.admit(t)
        self._step(t, j)

    def _join(self, t: float, mb: _Micro, r: int) -> None:
        req = self.sim.req
        if req.out[r] <= 1:  # the first token was the only one
            self._finish(t, r)
            return
        mb.b += 1
        mb.ctx_sum += req.inp[r] + 1
        self._count(t, 1)
        heapq.heappush(mb.running, (mb.steps + req.out[r] - 1, r))

    def close(self, t: float) -> None:
        """Bring the running-sequence integral up to ``t`` (end of the run)."""
        self._count(t, 0)
