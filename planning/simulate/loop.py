"""The event loop of the simulator: one heap of (time, seq, kind, engine, payload), open-loop arrivals merged in."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

from planning.simulate.engine import ARRIVE, PREFILL_DONE, WAKE, DecodeEngine, PrefillEngine, Requests
from planning.simulate.routing import ModelRoutes


class Sim:
    """The event loop. Build engines and routes, load requests, ``run()``."""

    def __init__(self, routes: Sequence[ModelRoutes], requests: Requests,
                 on_finish: Callable[[Sim, float, int], None] | None = None) -> None:
        self.routes = list(routes)
        self.req = requests
        self.heap: list[tuple[float, int, int, object, object]] = []
        self.seq = 0
        self.on_finish = on_finish
        self.now = 0.0
        self.events = 0
        self.finish_events = 0  # conservation check: one per request
        self.region: dict[object, str] = {}  # engine -> its region
        self.wan: dict[tuple[str, str], tuple[float, float]] = {}  # (src, dst) -> (one-way s, Gbit/s) across regions

    def push(self, t: float, kind: int, target: object, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, target, payload))

    def arrive(self, t: float, r: int) -> None:
        routes = self.routes[self.req.model[r]]
        if routes.first is None:
            self.drop(t, r)
            return
        engine = routes.first.pick(self.req.inp[r], self.req.out[r])
        engine.enqueue(t, r)  # type: ignore[attr-defined]  # prefill, decode or pipelined aggregated engine

    def arrive_after(self, t: float, r: int) -> None:
        """Request ``r`` arrives at ``t`` once the event in hand is done: an engine whose step ended at ``t`` has
        already scheduled its next step, so ``r`` waits for that one to end (a closed-loop client sends its next
        request on receiving the last token, while the engine runs on without it)."""
        self.push(t, ARRIVE, None, r)

    def drop(self, t: float, r: int) -> None:
        self.req.dropped[r] = True
        self.finished(t, r)

    def finished(self, t: float, r: int) -> None:
        self.finish_events += 1
        if self.on_finish is not None:
            self.on_finish(self, t, r)

    def _prefill_done(self, t: float, engine: PrefillEngine, batch: list[int]) -> None:
        req = self.req
        engine.batch_done(t)
        for r in batch:
            req.t_first[r] = t
            routes = self.routes[req.model[r]]
            if routes.decode is None:
                engine.kv_released(t, r)
                self.drop(t, r)
                continue
            spread = routes.spread.get(engine)
            target = spread[0][spread[1].next()] if spread is not None else routes.local.get(engine, routes.decode)
            dec = target.pick(req.inp[r], req.out[r])
            assert isinstance(dec, DecodeEngine)
            dec.enqueue(t, r, engine)

    def run(self, open_order: Sequence[int] = ()) -> None:
        """Process arrivals (``open_order``: request ids sorted by arrival) and every event until none is left."""
        heap = self.heap
        arrival = self.req.arrival
        order = list(open_order)
        n = len(order)
        i = 0
        pop = heapq.heappop
        while True:
            t_next = arrival[order[i]] if i < n else math.inf
            if heap and heap[0][0] < t_next:  # an arrival goes before the events of its instant
                t, _, kind, target, payload = pop(heap)
                self.now = t
                self.events += 1
                if kind == WAKE:
                    target.on_wake(t, payload)  # type: ignore[attr-defined]
                elif kind == PREFILL_DONE:
                    self._prefill_done(t, target, payload)  # type: ignore[arg-type]
                elif kind == ARRIVE:
                    self.arrive(t, payload)  # type: ignore[arg-type]
                else:
                    target.kv_arrived(t, payload)  # type: ignore[attr-defined]
            elif i < n:
                self.now = t_next
                self.arrive(t_next, order[i])
                i += 1
            else:
                break
