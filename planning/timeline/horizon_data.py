"""The multi-epoch allocation MILP's data (``planning.timeline.horizon``, whose docstring has the formulation):
the problem, its answer and the arrays its master LP and pricing share."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class HorizonGroup:
    """One (model, phase) group: template rows over the global shapes (``usage[i, k]``), throughput, keys."""

    id: str
    model: str
    phase: str
    usage: np.ndarray
    throughput: np.ndarray
    keys: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class HorizonProblem:
    """The MILP's data (module docstring). ``available[e, r, k]``, ``demand[e, g]``, ``prices[r, k]`` (NaN where
    not sold); ``running`` maps (group, row, region index) → ν′; ``links`` pairs (prefill, decode) group indices."""

    groups: tuple[HorizonGroup, ...]
    regions: tuple[str, ...]
    shapes: tuple[str, ...]
    prices: np.ndarray
    available: np.ndarray
    demand: np.ndarray
    hours: float
    K: float
    running: Mapping[tuple[int, int, int], int] = field(default_factory=dict)
    links: tuple[tuple[int, int], ...] = ()

    @property
    def epochs(self) -> int:
        return int(self.demand.shape[0])


@dataclass(frozen=True)
class HorizonPlan:
    """The answer: per epoch the instances (group, row, region) → ν, the total cost, the proof."""

    status: str  # optimal | feasible | infeasible | time_limit
    counts: tuple[Mapping[tuple[int, int, int], int], ...]
    value: float
    bound: float
    gap: float | None
    lp_slack: bool = False  # the LP needs slack: some epoch's demand cannot be met
    stats: Mapping[str, float] = field(default_factory=dict)

    @property
    def has_plan(self) -> bool:
        return math.isfinite(self.value)


# ---------------------------------------------------------------------------------------------- arrays
@dataclass
class HorizonData:
    """The problem's arrays the master LP and the pricing share: per group the cost of every (template, region)
    pair and its effective throughput per epoch, the cardinality bounds, the links and the largest cost."""

    p: HorizonProblem
    cost: list[np.ndarray]  # per group (n, R): c_j $/h, inf where not sold
    t_eff: list[np.ndarray]  # per group (n, E): min(T, D_eg)
    card: np.ndarray  # (E, G)
    link_of: dict[int, tuple[int, int]]  # group -> (link index, 0 prefill | 1 decode)
    max_cost: float

    @classmethod
    def build(cls, p: HorizonProblem) -> HorizonData:
        offered = ~np.isnan(p.prices)
        price0 = np.nan_to_num(p.prices, nan=0.0)
        cost, t_eff = [], []
        card = np.zeros((p.epochs, len(p.groups)))
        for gi, g in enumerate(p.groups):
            u = g.usage.astype(float)
            c = u @ price0.T
            c[(u > 0) @ (~offered).T] = np.inf
            c[g.throughput <= 0, :] = np.inf
            cost.append(c)
            t_eff.append(np.minimum(g.throughput[:, None], np.maximum(p.demand[:, gi][None, :], 0.0)))
            tmax = float(g.throughput.max()) if g.throughput.size else 0.0
            card[:, gi] = np.where(p.demand[:, gi] > 0, np.ceil(p.demand[:, gi] / max(tmax, 1e-12) - 1e-9), 0.0)
        link_of = {}
        if len(p.regions) > 1:
            for li, (gp, gd) in enumerate(p.links):
                link_of[gp], link_of[gd] = (li, 0), (li, 1)
        finite = [float(c[np.isfinite(c)].max()) for c in cost if np.isfinite(c).any()]
        return cls(p, cost, t_eff, card, link_of, max(finite, default=1.0) * max(p.hours, 1e-9) * (1 + p.K))


def min_subarray(b: np.ndarray) -> np.ndarray:
    """min over contiguous [s, f] of Σ_{e=s}^{f} b[..., e] (the last axis), vectorised: C_f − max(0, C_0 … C_{f−1})
    minimised over f, with C the prefix sums."""
    csum = np.cumsum(b, axis=-1)
    prev = np.concatenate([np.zeros((*b.shape[:-1], 1)), csum[..., :-1]], axis=-1)
    return (csum - np.maximum.accumulate(prev, axis=-1)).min(axis=-1)
