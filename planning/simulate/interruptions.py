"""Spot interruptions replayed in a simulation run: seeded down windows per spot instance, and routers around them.

Every instance copy whose region is a spot pool (``{region}/spot``, planning.pools) is interrupted at the rate of
its nodes: each node at q per node-hour (``SimConfig.interruptions``, from the plan's ``finance.spot.rates``), so
an instance of n nodes stops at n·q per hour (a Poisson process, drawn from ``SimConfig.seed``). It is then down
for ``recovery_s`` (the replacement's start-up and weight loading): the routers send no new request to it and
pick among the instances that are up (by the same weights; the least-loaded one for least-loaded routing). What
it holds finishes (AWS gives two minutes' notice before it reclaims a spot node; a vLLM engine drains within it).
When every instance of a model's first router (prefill or aggregated) is down, an arriving request waits until
the first of them serves again; a decode hand-off with every decode instance down goes to one of them (the
hand-off is not delayed: the decode side is optimistic).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from planning.simulate.engine import WAKE, Engine
from planning.simulate.loop import Sim
from planning.simulate.routing import ModelRoutes, Router

SPOT_SUFFIX = "/spot"


def down_windows(engines: Sequence[tuple[Engine, int, str]], rates: Mapping[str, float], recovery_s: float,
                 duration_s: float, seed: int) -> dict[Engine, list[tuple[float, float]]]:
    """Per spot engine (engine, nodes, region): its down windows [t, t + recovery_s) over the run, drawn from a
    Poisson process of rate nodes × q / 3600 per second (``rates[region]`` = q per node-hour)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 26]))
    out: dict[Engine, list[tuple[float, float]]] = {}
    for eng, nodes, region in engines:
        q = float(rates.get(region, 0.0))
        if not region.endswith(SPOT_SUFFIX) or q <= 0 or nodes <= 0:
            continue
        per_s = nodes * q / 3600.0
        t, windows = 0.0, []
        while True:
            t += float(rng.exponential(1.0 / per_s))
            if t >= duration_s:
                break
            windows.append((t, t + recovery_s))
            t += recovery_s  # a replacement is not interrupted before it serves
        if windows:
            out[eng] = windows
    return out


class _Wait:
    """Stands for an engine that is down: enqueueing schedules the request into it when it serves again."""

    def __init__(self, sim: Sim, engine: Engine, until: float) -> None:
        self.sim, self.engine, self.until = sim, engine, until

    def load(self) -> float:
        return self.engine.load()

    def enqueue(self, t: float, r: int, *args: object) -> None:
        self.sim.push(max(t, self.until), WAKE, self, (r, args))

    def on_wake(self, t: float, payload: tuple[int, tuple[object, ...]]) -> None:
        r, args = payload
        self.engine.enqueue(t, r, *args)  # type: ignore[attr-defined]


class InterruptibleRouter(Router):
    """A router that skips engines inside a down window at the simulation's current time."""

    sim: Sim
    down: Mapping[Engine, list[tuple[float, float]]]
    can_wait: bool

    @classmethod
    def wrap(cls, router: Router, sim: Sim, down: Mapping[Engine, list[tuple[float, float]]],
             can_wait: bool = False) -> Router:
        if not any(e in down for e in router.engines):
            return router
        router.__class__ = cls
        out: InterruptibleRouter = router  # type: ignore[assignment]
        out.sim, out.down, out.can_wait = sim, down, can_wait
        return out

    def _window(self, engine: Engine) -> tuple[float, float] | None:
        t = self.sim.now
        return next(((a, b) for a, b in self.down.get(engine, ()) if a <= t < b), None)

    def _is_down(self, engine: Engine) -> bool:
        return self._window(engine) is not None

    def pick(self, inp: int = 0, out: int = 0) -> Engine:
        chosen = super().pick(inp, out)
        if not self._is_down(chosen):
            return chosen
        up = [i for i, e in enumerate(self.engines) if not self._is_down(e)]
        if not up:  # nothing is up: an arrival waits for the first replacement to serve
            if not self.can_wait:
                return chosen
            ends = [(win[1], i) for i, e in enumerate(self.engines) if (win := self._window(e)) is not None]
            until, i = min(ends)
            return _Wait(self.sim, self.engines[i], until)  # type: ignore[return-value]
        w = self._weights_for(inp, out).weights
        if self.policy == "least-loaded":
            best = min(up, key=lambda i: (self.engines[i].load() / w[i] if w[i] > 0 else math.inf, i))
        else:
            best = max(up, key=lambda i: (w[i], -i))
        return self.engines[best]


def apply(sim: Sim, routes: Sequence[ModelRoutes], down: Mapping[Engine, list[tuple[float, float]]]) -> None:
    """Route around the down windows: every router of ``routes`` that holds a spot engine skips it while down."""
    if not down:
        return
    for r in routes:
        if r.first is not None:
            r.first = InterruptibleRouter.wrap(r.first, sim, down, can_wait=True)
        if r.decode is not None:
            r.decode = InterruptibleRouter.wrap(r.decode, sim, down)
        for eng, router in list(r.local.items()):
            r.local[eng] = InterruptibleRouter.wrap(router, sim, down)
        for eng, (routers, weights) in list(r.spread.items()):
            r.spread[eng] = ([InterruptibleRouter.wrap(x, sim, down) for x in routers], weights)
