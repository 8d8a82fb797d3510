"""The sizing's first lower bound (:mod:`planning.finance.sizing`, step 1): the pool-priced single-period
relaxation of the two-stage model over every template (Lagrangian relaxation of the pool rows at prices μ), its
LP and cover bounds, and the constant C(μ) every Lagrangian bound subtracts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planning.allocate.reduce import (
    ColumnBlock,
    LagrangianBound,
    LpSides,
    Market,
    Reduction,
    lagrangian_bound,
    lp_reduction,
)
from planning.context import CancelToken, time_left
from planning.finance.commitments import Candidate, Epoch, epoch_id, epoch_shape, horizon_problem
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

COVER_LIMIT_S = 30.0  # per cover ILP: a safety net (they finish in well under a second); a relaxation whose
# cover bounds took this long may have been stopped by it (``Relaxation.clocked``: the sizing's answer is flagged)


def _blocks(sets: Sequence[TemplateSet], epochs: Sequence[Epoch]) -> tuple[list[ColumnBlock], list[tuple[int, int]]]:
    blocks, where = [], []
    for e in range(len(epochs)):
        for si, ts in enumerate(sets):
            blocks.append(ColumnBlock(epoch_id(ts.group.id, e), tuple(epoch_shape(s, e) for s in ts.shapes),
                                      ts.usage, ts.throughput[:, 0]))
            where.append((si, e))
    return blocks, where


def pool_constant(mu: Mapping[tuple[str, str, int], float], held: Mapping[tuple[str, str], int],
                  candidates: Sequence[Candidate], hours: float) -> float:
    """C(μ) = Σ μ·H − Σ_j min(0, a_j − Σ_e μ_{p(j)e})·cap_j (the relaxation's value minus C is a lower bound)."""
    c = sum(v * held.get((pool, shape), 0) for (pool, shape, _e), v in mu.items())
    for cand in candidates:
        paid = sum(v for (pool, shape, _e), v in mu.items() if (pool, shape) == (cand.pool, cand.shape))
        c -= min(0.0, cand.effective_hourly * hours - paid) * cand.max_count
    return c


@dataclass
class Relaxation:
    red: Reduction
    lag: LagrangianBound
    blocks: list[ColumnBlock]
    where: list[tuple[int, int]]
    demand: list[float]
    constant: float

    @property
    def clocked(self) -> bool:
        """True when the wall clock may have stopped a cover ILP (its bound, and the columns kept, then depend
        on the machine's speed)."""
        return float(self.lag.seconds) >= COVER_LIMIT_S

    @property
    def bound(self) -> float:
        return float(self.lag.z_lb) - self.constant

    def masks(self, target: float) -> dict[tuple[int, int], np.ndarray]:
        keep = self.red.select(self.lag.thresholds(self.red, self.demand, target + self.constant), self.blocks)
        return {w: m for w, m in zip(self.where, keep, strict=True)}


def relaxation(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
               candidates: Sequence[Candidate], mu: Mapping[tuple[str, str, int], float],
               drop_kinds: Sequence[str], cancel: CancelToken | None) -> Relaxation | None:
    """The pool-priced single-period relaxation over every template (module docstring), with its LP and
    Lagrangian cover bounds (``planning.allocate.reduce``: links, pool flows and the spot cap included)."""
    relaxed = horizon_problem(resolved, sets, epochs, candidates, masks={}, drop_kinds=drop_kinds, pool_prices=mu)
    all_blocks, all_where = _blocks(sets, epochs)
    # every shape of every block, sold or not (a shape no pool sells, e.g. with on-demand dropped, is not offered:
    # the templates using it get no column; dropping their whole block instead would drop its demand too)
    shapes = sorted({o.shape for o in relaxed.offers} | {s for b in all_blocks for s in b.shapes})
    regions = sorted({o.region for o in relaxed.offers})
    index = {s: k for k, s in enumerate(shapes)}
    r_index = {r: i for i, r in enumerate(regions)}
    prices = np.full((len(regions), len(shapes)), np.nan)
    available = np.zeros((len(regions), len(shapes)))
    for o in relaxed.offers:
        prices[r_index[o.region], index[o.shape]] = o.price_per_hour
        available[r_index[o.region], index[o.shape]] = o.available
    blocks, where = all_blocks, all_where
    demand = {q.group: q.rate for q in relaxed.classes}
    group_of = {q.id: q.group for q in relaxed.classes}
    links = [tuple(group_of[q] for q in link) for link in relaxed.links]
    first = {link[0]: li for li, link in enumerate(relaxed.links)}
    flows = {(first[tp.sender], tp.src, tp.dst): tp.usd_per_hour for tp in relaxed.transfers if tp.sender in first}
    red = lp_reduction(blocks, Market(index, regions, prices, available), demand, 0.0,
                       LpSides(spot_cap=relaxed.spot_cap, spot_regions=relaxed.spot_regions, links=links,
                               transfers=flows), cancel=cancel)
    if not red.feasible_lp:
        return None
    d = [demand.get(b.group, 0.0) for b in blocks]
    lag = lagrangian_bound(red, d, min(COVER_LIMIT_S, time_left(cancel, COVER_LIMIT_S)),
                           budget_s=time_left(cancel, math.inf))
    held = {(o.region, o.shape): o.available for o in resolved.offers}
    hours = sum(ep.hours for ep in epochs)
    return Relaxation(red, lag, blocks, where, d, pool_constant(mu, held, candidates, hours))


def uniform_prices(epochs: Sequence[Epoch], candidates: Sequence[Candidate]) -> dict[tuple[str, str, int], float]:
    """μ: each pool's cheapest candidate's effective hourly price in every epoch (× w_e): Σ_e μ = min_j a_j."""
    out: dict[tuple[str, str, int], float] = {}
    for c in candidates:
        for e, ep in enumerate(epochs):
            key = (c.pool, c.shape, e)
            out[key] = min(out.get(key, math.inf), c.effective_hourly * ep.hours)
    return out
