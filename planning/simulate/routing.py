"""Routers: how one model's requests are spread over its engines (weighted round-robin, least-loaded, per class)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planning.simulate.engine import Engine

NEAREST_CACHE = 65_536  # request sizes whose nearest class a router remembers


class Router:
    """Spreads one model's requests over its instances: smooth weighted round-robin or least-loaded.

    With ``classes`` (a histogram plan: per request class (input_len, output_len) the req/s the plan assigned to
    each engine), a request goes to the engines its class was planned on, in proportion to those rates; a request
    size the plan has no class for takes the nearest class (log distance); a class no engine was planned for falls
    back to the scalar ``weights``.
    """

    def __init__(self, engines: Sequence[Engine], weights: Sequence[float], policy: str,
                 classes: Mapping[tuple[float, float], Sequence[float]] | None = None) -> None:
        self.engines = list(engines)
        self.policy = policy
        self.base = _Weights(weights)
        self.by_class: dict[tuple[float, float], _Weights] = {}
        for key, w in (classes or {}).items():
            if sum(max(float(x), 0.0) for x in w) > 0:
                self.by_class[(float(key[0]), float(key[1]))] = _Weights(w)
        self.keys = list(self.by_class)
        self._log_keys = [(math.log(max(a, 1.0)), math.log(max(b, 1.0))) for a, b in self.keys]
        self._nearest: dict[tuple[int, int], _Weights] = {}

    def _weights_for(self, inp: int, out: int) -> _Weights:
        if not self.keys:
            return self.base
        hit = self._nearest.get((inp, out))
        if hit is None:
            exact = self.by_class.get((float(inp), float(out)))
            if exact is None:
                li, lo = math.log(max(inp, 1)), math.log(max(out, 1))
                k = min(range(len(self.keys)), key=lambda i: abs(self._log_keys[i][0] - li) + abs(self._log_keys[i][1] - lo))
                exact = self.by_class[self.keys[k]]
            if len(self._nearest) < NEAREST_CACHE:  # a trace can hold millions of distinct sizes
                self._nearest[(inp, out)] = exact
            hit = exact
        return hit

    def pick(self, inp: int = 0, out: int = 0) -> Engine:
        if len(self.engines) == 1:
            return self.engines[0]
        w = self._weights_for(inp, out)
        if self.policy == "least-loaded":
            best = min(range(len(self.engines)),
                       key=lambda i: (self.engines[i].load() / w.weights[i] if w.weights[i] > 0 else math.inf, i))
            return self.engines[best]
        return self.engines[w.next()]


class _Weights:
    """Smooth weighted round-robin state over one weight vector (all zero: equal weights)."""

    def __init__(self, weights: Sequence[float]) -> None:
        w = [max(float(x), 0.0) for x in weights]
        if sum(w) <= 0:
            w = [1.0] * len(w)
        self.weights = w
        self.total = sum(w)
        self.current = [0.0] * len(w)

    def next(self) -> int:
        cur = self.current
        for i, w in enumerate(self.weights):
            cur[i] += w
        best = max(range(len(cur)), key=cur.__getitem__)
        cur[best] -= self.total
        return best


@dataclass
class ModelRoutes:
    """The routers of one model: ``first`` takes arrivals (prefill or aggregated), ``decode`` the hand-offs.

    ``local`` maps a prefill engine to the decode router of its own region: the planner pairs a model's prefill
    and decode capacity per region (``AllocationProblem.links``), so a request's KV cache goes to a decode node
    in the region of its prefill; ``decode`` (all regions) is used only where a region has no decode engine.
    ``spread`` maps a prefill engine whose region sends some requests' KV to other regions (``options.kv_transfer:
    cross-region``) to the decode routers of the destination regions and the plan's shares, picked by smooth
    weighted round-robin.
    """

    first: Router | None
    decode: Router | None
    local: dict[Engine, Router] = field(default_factory=dict)
    spread: dict[Engine, tuple[list[Router], _Weights]] = field(default_factory=dict)
