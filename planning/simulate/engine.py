"""Discrete-event engines: continuous batching, chunked prefill, KV admission, the P→D hand-off.

The event loop is ``loop.Sim`` and the routers ``routing``; this module holds the requests' columns and the
engines (prefill, decode/aggregated) that the loop drives.

Events live in one heap ``(time, seq, kind, engine, payload)``; open-loop arrivals are merged from a sorted array.
An engine advances at *step* granularity, and a run of identical decode steps (same batch, no arrival, no
finish) is one event: the decode engine "leaps" to the next finishing sequence, and a new sequence cuts the leap
at the next step boundary. So the cost is O(requests · log), never per token.

Request life (disaggregated): arrive → router picks a prefill instance → waits for a batch (FIFO, token budget,
KV admission) → batch runs through the pipeline stages → first token (TTFT) → router picks a decode instance →
waits for KV space there → KV sent over the network → joins the running batch at the next step → one token per
decode cycle → done. Aggregated: arrive → admitted when its whole KV footprint fits → prompt prefilled in chunks
inside mixed steps (decodes first, then prompt tokens up to the step budget) → decodes in the same engine.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planning.errors import PlanningError
from planning.perf.engines import RouterBatching
from planning.simulate.steps import InstanceModel

if TYPE_CHECKING:
    from planning.simulate.loop import Sim

WAKE, PREFILL_DONE, KV_DONE, ARRIVE = 0, 1, 2, 3  # ARRIVE: a request queued as an event (after the engines' step)
KV_POLICIES = ("reserve", "grow")
KV_WATERMARK = 0.01  # grow policy: admission leaves this share of the KV cache free (vLLM's watermark)


@dataclass
class Requests:
    """Per-request inputs and results as plain lists (fast scalar access); times in seconds."""

    arrival: list[float]
    inp: list[int]
    out: list[int]
    model: list[int]
    t_start: list[float]  # prefill starts (aggregated: admission)
    t_first: list[float]  # first token
    t_dec_admit: list[float]  # decode admission (disaggregated)
    t_done: list[float]
    dropped: list[bool]

    @classmethod
    def empty(cls, n: int = 0) -> Requests:
        nan = math.nan
        return cls([nan] * n, [0] * n, [0] * n, [0] * n, [nan] * n, [nan] * n, [nan] * n, [nan] * n, [False] * n)

    def add(self, arrival: float, inp: int, out: int, model: int) -> int:
        self.arrival.append(arrival)
        self.inp.append(inp)
        self.out.append(out)
        self.model.append(model)
        for col in (self.t_start, self.t_first, self.t_dec_admit, self.t_done):
            col.append(math.nan)
        self.dropped.append(False)
        return len(self.arrival) - 1


def through_stages(t: float, times: Sequence[tuple[float, float]], stage_free: list[float],
                   stage_busy: list[float]) -> float:
    """A step entering a tandem of stages at ``t`` (per stage: busy seconds, send to the next): each stage serves
    steps FIFO, so the step starts on a stage when it arrives there and the stage is free. Updates the stages'
    free times and busy totals; returns when the step leaves the last stage."""
    ready = t
    for s, (busy, send) in enumerate(times):
        start = max(ready, stage_free[s])
        finish = start + busy
        stage_free[s] = finish
        stage_busy[s] += busy
        ready = finish + send
    return ready


def take_chunk(queue: deque[list[int]], room: int) -> tuple[list[tuple[int, bool]], int]:
    """Prompt tokens FIFO from ``queue`` (items ``[request, tokens left]``) up to ``room``: the step's chunk as
    ``(request, prompt completes)`` pairs and its token count; completed prompts leave the queue."""
    chunk: list[tuple[int, bool]] = []
    tokens = 0
    for item in queue:
        if room <= 0:
            break
        take = min(room, item[1])
        item[1] -= take
        room -= take
        tokens += take
        chunk.append((item[0], item[1] == 0))
    while queue and queue[0][1] == 0:
        queue.popleft()
    return chunk, tokens


class Engine:
    """Common bookkeeping: KV reservations with their time integral, busy time, identity."""

    def __init__(self, sim: Sim, im: InstanceModel, name: str, phase: str) -> None:
        self.sim = sim
        self.im = im
        self.name = name
        self.phase = phase
        self.kv_full = 0.0
        self.kv_slide = 0.0
        self.kv_frac = 0.0
        self.kv_peak = 0.0
        self.kv_area = 0.0
        self.kv_t = 0.0
        self.busy_s = 0.0
        self.served = 0
        self.tokens_out = 0  # tokens generated here (first tokens for prefill engines)
        self.seq_seconds = 0.0  # ∫ running sequences dt (decode engines): mean batch = seq_seconds / horizon
        self.peak_batch = 0  # most sequences in one step (prefill: prompts; decode: running)
        self.waiting: deque[int] = deque()

    def _kv_set(self, t: float, full: float, slide: float, frac: float) -> None:
        self.kv_area += self.kv_frac * (t - self.kv_t)
        self.kv_t = t
        if full < 1e-9:
            full = slide = frac = 0.0
        self.kv_full = full
        self.kv_slide = slide
        self.kv_frac = frac
        if frac > self.kv_peak:
            self.kv_peak = frac

    def _kv_change(self, t: float, full: float, slide: float) -> None:
        f, s = self.kv_full + full, self.kv_slide + slide
        self._kv_set(t, f, s, self.im.kv_fraction(f, s))

    def reserve(self, t: float, tokens: float, limit: float = 1.0) -> bool:
        """Reserve KV for ``tokens``; False (nothing reserved) when the fill would pass ``limit``."""
        window = self.im.kv_window
        f = self.kv_full + tokens
        s = self.kv_slide + (tokens if tokens < window else window)
        frac = self.im.kv_fraction(f, s)
        if frac > limit:
            return False
        self._kv_set(t, f, s, frac)
        return True

    def release(self, t: float, tokens: float) -> None:
        window = self.im.kv_window
        self._kv_change(t, -tokens, -(tokens if tokens < window else window))

    def load(self) -> float:
        raise NotImplementedError

    def _admit_next(self, t: float) -> int | None:
        """The head of the waiting queue, its whole KV footprint reserved; None while it does not fit. A request
        larger than the empty cache can never run: it leaves the queue through ``_cannot_fit``."""
        req = self.sim.req
        while self.waiting:
            r = self.waiting[0]
            if self.reserve(t, req.inp[r] + req.out[r]):
                return self.waiting.popleft()
            if self.kv_full != 0.0:
                return None
            self.waiting.popleft()
            self._cannot_fit(t, r)
        return None

    def _cannot_fit(self, t: float, r: int) -> None:
        self.sim.drop(t, r)

    def _finish(self, t: float, r: int) -> None:
        """Request ``r`` produced its last token: record it, free its KV."""
        req = self.sim.req
        req.t_done[r] = t
        self.served += 1
        self.release(t, self._footprint(r))
        self.sim.finished(t, r)

    def _footprint(self, r: int) -> float:
        """KV tokens request ``r`` holds when it finishes: its whole reservation (prompt + output)."""
        return float(self.sim.req.inp[r] + self.sim.req.out[r])


class PrefillEngine(Engine):
    """Disaggregated prefill instance: FIFO batches of whole prompts through a tandem of pipeline stages.

    At most ``S`` batches are in flight (vLLM's virtual engines: a pipeline of S stages schedules a new batch
    when one of its S slots has finished), so a slow later stage makes the next batches wait and grow instead of
    piling small batches into the pipeline.
    """

    def __init__(self, sim: Sim, im: InstanceModel, name: str, token_budget: int) -> None:
        super().__init__(sim, im, name, "prefill")
        self.budget = token_budget
        self.stage_free = [0.0] * im.n_stages
        self.stage_busy = [0.0] * im.n_stages
        self.wake_pending = False
        self.queued_tokens = 0
        self.in_flight = 0

    def load(self) -> float:
        return self.queued_tokens + (self.budget if self.wake_pending else 0)

    def enqueue(self, t: float, r: int) -> None:
        self.waiting.append(r)
        self.queued_tokens += self.sim.req.inp[r]
        self.try_start(t)

    def try_start(self, t: float) -> None:
        if self.wake_pending or not self.waiting or self.in_flight >= self.im.n_stages:
            return
        req = self.sim.req
        batch: list[int] = []
        tokens = 0
        while self.waiting:
            r = self.waiting[0]
            n = req.inp[r]
            if batch and tokens + n > self.budget:
                break
            if not self.reserve(t, n):
                if not batch and self.kv_full == 0.0:  # larger than the whole KV budget: can never run
                    self.waiting.popleft()
                    self.queued_tokens -= n
                    self.sim.drop(t, r)
                    continue
                break
            self.waiting.popleft()
            self.queued_tokens -= n
            batch.append(r)
            tokens += n
        if not batch:
            return  # blocked on KV: a release retries
        for r in batch:
            req.t_start[r] = t
        times = self.im.prefill_stage_s(len(batch), tokens)
        through_stages(t, times, self.stage_free, self.stage_busy)
        self.busy_s += times[0][0]
        self.served += len(batch)
        self.tokens_out += len(batch)
        self.peak_batch = max(self.peak_batch, len(batch))
        self.wake_pending = True
        self.in_flight += 1
        self.sim.push(self.stage_free[0], WAKE, self, None)
        self.sim.push(self.stage_free[-1], PREFILL_DONE, self, batch)

    def batch_done(self, t: float) -> None:
        """A batch left the last stage: its virtual-engine slot is free."""
        self.in_flight -= 1
        self.try_start(t)

    def on_wake(self, t: float, _payload: object) -> None:
        self.wake_pending = False
        self.try_start(t)

    def kv_released(self, t: float, r: int) -> None:
        self.release(t, self.sim.req.inp[r])
        self.try_start(t)


class DecodeEngine(Engine):
    """Continuous batching with KV admission. ``aggregated``: also prefills prompts in chunks (mixed steps).

    ``prefill_first`` (aggregated engines without chunked prefill, e.g. vLLM before 0.6, TGI 2): waiting prompts run
    whole, up to ``chunk_tokens`` of them (at least one), as a step of their own that stalls every decode.
    ``kv_policy``: ``"reserve"`` (default) reserves a request's whole KV footprint (prompt + output) at admission;
    ``"grow"`` (aggregated engines of models without sliding-window layers) is vLLM's: admit when the prompt's KV
    fits below a 1 % watermark, grow one token per sequence and step, and when the cache is full preempt the most
    recently admitted sequence, which frees its KV and later recomputes its prompt and generated tokens as one
    prompt.
    """

    def __init__(self, sim: Sim, im: InstanceModel, name: str, aggregated: bool, chunk_tokens: int,
                 prefill_first: bool = False, kv_policy: str = "reserve", router: RouterBatching | None = None) -> None:
        super().__init__(sim, im, name, "aggregated" if aggregated else "decode")
        # prefill-first engines whose router holds waiting prompts behind the decodes (TGI 2): the prompts go in only
        # once they are router.min_waiting(b) or router.max_decode_steps decode steps have passed since the last prefill
        self.router = router if prefill_first and aggregated else None
        self.last_prefill = -(10**9)  # decode step count at the last prompt step
        if kv_policy not in KV_POLICIES:
            raise PlanningError("kv_policy", f"unknown KV policy {kv_policy!r}.", f"use one of {list(KV_POLICIES)}.")
        self.aggregated = aggregated
        self.prefill_first = prefill_first and aggregated
        # "grow" (aggregated engines): admit on the prompt's KV, grow a token per step, preempt the latest admitted
        # sequence by recomputation when the cache is full (vLLM's policy); "reserve": the whole footprint up front
        # (models with sliding-window layers keep "reserve": a window caps what a sequence holds in those layers,
        # which per-step growth over the batch does not track)
        self.grow = kv_policy == "grow" and aggregated and math.isinf(im.kv_window)
        self.base: dict[int, int] = {}  # grow: request -> step count at which it had generated nothing
        self.resident: dict[int, None] = {}  # grow: running requests in admission order (the last is preempted)
        self.finish_at: dict[int, int] = {}  # grow: request -> its live entry in ``running`` (older ones are stale)
        self.gen_before: dict[int, int] = {}  # grow: tokens a preempted request had generated
        self.preemptions = 0
        self.pure_prefill = False  # the current step is a prefill-first prompt step (decodes wait)
        self.chunk = chunk_tokens
        self.prefill_q: deque[list[int]] = deque()  # [request, prompt tokens left]
        self.joiners: list[int] = []
        self.running: list[tuple[int, int]] = []  # heap (finish step, request)
        self.b = 0
        self.ctx_sum = 0.0
        self.steps = 0
        self.busy = False
        self.version = 0
        self.t0 = 0.0
        self.dt = 0.0
        self.m = 0  # steps planned in the current leap
        self.m_done = 0  # steps after which the current wake fires
        self.mixed: list[tuple[int, bool]] | None = None  # current mixed step: (request, prompt completes)
        self.origin: dict[int, PrefillEngine] = {}
        self.holding = 0  # disaggregated: admitted sequences not finished (KV in transfer, joining or running)

    def load(self) -> float:
        return len(self.waiting) + len(self.prefill_q) + len(self.joiners) + self.b

    def _finish(self, t: float, r: int) -> None:
        if not self.aggregated:
            self.holding -= 1
        super()._finish(t, r)

    # -- arrivals
    def enqueue(self, t: float, r: int, origin: PrefillEngine | None = None) -> None:
        if origin is not None:
            self.origin[r] = origin
        self.waiting.append(r)
        self.admit(t)

    def _cannot_fit(self, t: float, r: int) -> None:
        origin = self.origin.pop(r, None)
        if origin is not None:
            origin.kv_released(t, r)
        self.sim.drop(t, r)

    def _admit_next(self, t: float) -> int | None:
        if (self.b + len(self.prefill_q) if self.aggregated else self.holding) >= self.im.max_batch:
            return None  # max_num_seqs: a finishing sequence makes room
        if not self.grow:
            return super()._admit_next(t)
        req = self.sim.req
        while self.waiting:
            r = self.waiting[0]
            if self.reserve(t, req.inp[r] + self.gen_before.get(r, 0), 1.0 - KV_WATERMARK):
                return self.waiting.popleft()
            if self.kv_full != 0.0:
                return None
            self.waiting.popleft()
            self.gen_before.pop(r, None)
            self._cannot_fit(t, r)
        return None

    def _footprint(self, r: int) -> float:
        if not self.grow:
            return super()._footprint(r)
        self.resident.pop(r, None)
        self.base.pop(r, None)
        self.finish_at.pop(r, None)
        return float(self.sim.req.inp[r] + self.sim.req.out[r] - 1)  # the last token's KV is never written

    def _grow_steps(self) -> float:
        """Steps the running batch can grow (a token per sequence each) before the KV cache is full."""
        return self.im.kv_growth_steps(self.kv_full, self.kv_slide, self.b)

    def _make_room(self, t: float) -> None:
        """Grow policy, before a step: preempt the latest admitted sequences until the step's tokens fit."""
        req = self.sim.req
        while self.b and self._grow_steps() < 1.0:
            r = next(reversed(self.resident))
            del self.resident[r]
            self.finish_at.pop(r, None)
            gen = self.steps - self.base.pop(r)
            self.b -= 1
            self.ctx_sum -= req.inp[r] + gen
            self.release(t, req.inp[r] + gen - 1)
            if self.b == 0 and self.kv_full == 0.0:  # it had the cache to itself and still filled it: never fits
                self._cannot_fit(t, r)
                break
            self.preemptions += 1
            self.gen_before[r] = gen
            self.waiting.appendleft(r)
        if self.b == 0:
            self.ctx_sum = 0.0

    def admit(self, t: float) -> None:
        req = self.sim.req
        while (r := self._admit_next(t)) is not None:
            if self.aggregated:
                if math.isnan(req.t_start[r]):
                    req.t_start[r] = t
                self.prefill_q.append([r, max(1, req.inp[r] + self.gen_before.get(r, 0))])
                self.poke(t)
            else:
                req.t_dec_admit[r] = t
                self.holding += 1
                origin = self.origin.get(r)
                wan = self.sim.wan.get((self.sim.region.get(origin, ""), self.sim.region.get(self, ""))) \
                    if origin is not None and self.sim.wan else None
                if wan is not None:  # across regions: WAN one-way latency + KV bytes at the WAN's Gbit/s
                    handoff = wan[0] + self.im.kv_bytes(req.inp[r]) / (wan[1] * 1e9 / 8.0)
                else:
                    net = min(self.im.net_gbps, origin.im.net_gbps) if origin is not None else self.im.net_gbps
                    handoff = self.im.kv_transfer_s(req.inp[r], net)
                self.sim.push(t + handoff, KV_DONE, self, r)

    def kv_arrived(self, t: float, r: int) -> None:
        origin = self.origin.pop(r, None)
        if origin is not None:
            origin.kv_released(t, r)
        self.joiners.append(r)
        self.poke(t)

    def poke(self, t: float) -> None:
        """New work: start when idle; during a decode leap, stop it at the next step boundary. An idle prefill-first
        engine starts after the other arrivals of this instant, so prompts that arrive together run as one step
        (vLLM v0's engine loop wakes on a request and takes every request queued by then)."""
        if not self.busy:
            if self.prefill_first:
                self._begin(t, 0.0, 0)  # a step of no time: the wake at ``t`` starts the real one
                return
            self.start(t)
            return
        if self.mixed is not None:
            return
        k = max(1, math.ceil((t - self.t0) / self.dt - 1e-9)) if self.dt > 0 else 1
        if k < self.m_done:
            self.m_done = k
            self.version += 1
            self.sim.push(self.t0 + k * self.dt, WAKE, self, self.version)

    # -- steps
    def start(self, t: float) -> None:
        """At a step boundary: take in hand-offs whose KV has arrived, then plan the next step or leap."""
        im = self.im
        if self.joiners:
            joiners, self.joiners = self.joiners, []
            for r in joiners:
                self._join(t, r)
        if self.prefill_q and self.prefill_first and self._gate_open():
            self.last_prefill = self.steps
            room = 0
            for _r, left in self.prefill_q:  # whole prompts while they fit the budget, at least one
                if room and room + left > self.chunk:
                    break
                room += left
            chunk, tokens = take_chunk(self.prefill_q, room)
            self.mixed = chunk
            self.pure_prefill = True
            self._begin(t, im.prefill_s(len(chunk), tokens), 1)
            return
        if self.grow:  # the next step grows every running sequence by a token
            self._make_room(t)
        if self.prefill_q and not self.prefill_first:  # (a prefill-first engine holding its prompts decodes)
            room = self.chunk - self.b
            if room > 0:
                chunk, tokens = take_chunk(self.prefill_q, room)
                dt = im.mixed_s(len(chunk), tokens, self.b, self.ctx_sum / self.b if self.b else 0.0)
                self.mixed = chunk
                self._begin(t, dt, 1)
                return
        if self.b:
            m = max(1, self.running[0][0] - self.steps)
            kv_room = self._grow_steps() if self.grow else math.inf
            if kv_room < m:
                m = max(1, int(kv_room))
            if self.prefill_q and self.router is not None:  # held prompts: wake when the step count opens the gate
                m = max(1, min(m, self.last_prefill + self.router.max_decode_steps - self.steps))
            mid = self.ctx_sum / self.b + (m - 1) / 2.0
            self.mixed = None
            self._begin(t, im.decode_cycle_s(self.b, mid), m)
            return
        self.busy = False

    def _gate_open(self) -> bool:
        """Whether waiting prompts may run now: always without a router; with one (TGI 2), when nothing decodes,
        when they number at least ``min_waiting(b)``, or after ``max_decode_steps`` decode steps since the last
        prompt step."""
        r = self.router
        if r is None or self.b == 0:
            return True
        return len(self.prefill_q) >= r.min_waiting(self.b) or self.steps - self.last_prefill >= r.max_decode_steps

    def _begin(self, t: float, dt: float, m: int) -> None:
        self.busy = True
        self.t0 = t
        self.dt = dt
        self.m = m
        self.m_done = m
        self.version += 1
        self.sim.push(t + dt * m, WAKE, self, self.version)

    def on_wake(self, t: float, version: object) -> None:
        if version != self.version:
            return
        req = self.sim.req
        k = self.m_done
        self.busy_s += k * self.dt
        self.seq_seconds += self.b * k * self.dt
        if not self.pure_prefill:  # a prefill-first prompt step advances no decode
            self.steps += k
            self.ctx_sum += self.b * k
            self.tokens_out += self.b * k
            if self.grow and self.b:
                self._kv_change(t, float(self.b * k), float(self.b * k))
        self.pure_prefill = False
        if self.mixed is not None:
            for r, completes in self.mixed:
                if completes:
                    if math.isnan(req.t_first[r]):
                        req.t_first[r] = t
                    self.tokens_out += 1
                    self._join(t, r)
            self.mixed = None
        running = self.running
        while running and running[0][0] <= self.steps:
            step, r = heapq.heappop(running)
            if self.grow and self.finish_at.get(r) != step:
                continue  # preempted since: a stale entry
            self.b -= 1
            self.ctx_sum -= req.inp[r] + req.out[r]
            self._finish(t, r)
        if self.b == 0:
            self.ctx_sum = 0.0
        self.admit(t)
        self.start(t)

    def _join(self, t: float, r: int) -> None:
        req = self.sim.req
        gen = self.gen_before.pop(r, 0) + 1  # tokens generated with the one the prompt step just produced
        if req.out[r] <= gen:  # that was the last one
            self._finish(t, r)
            return
        self.b += 1
        self.peak_batch = max(self.peak_batch, self.b)
        self.ctx_sum += req.inp[r] + gen
        finish = self.steps + req.out[r] - gen
        heapq.heappush(self.running, (finish, r))
        if self.grow:
            self.base[r] = self.steps - gen
            self.resident[r] = None
            self.finish_at[r] = finish
