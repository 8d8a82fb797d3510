"""A pricing search for a cover ILP without availability rows: only the columns it can need are placed (issue 41).

A linked cover ILP (``linked_cover._cover_ilp``) keeps of its listed multisets only those that no other listed one
beats in some region (``linked_cover.undominated``: costs less there and serves at least as much). The plain search
(``pricing.price`` without a limit) places every candidate exactly before that mask drops most of them:
coral-extended's first what-if at demand ×2 placed 10,787 multisets, 2.0 of its 4.2 s, and the costliest of its
cover ILPs kept 116 of 1,388 columns.

Here a candidate M is dropped *before* its placement when, in every region r where it is sold, a column already
listed — placed, with its exact reduced cost within the threshold — costs less than M by a margin and serves at
least UB(M), the search's admissible bound on M's throughput (``MultisetSpace.upper_bound``, never below the
exact or corrected value). Such an M is one ``undominated`` would drop too: in every region an earlier column in
its order (cheaper) has at least M's throughput, and removing M changes no other column's prefix maximum. The
cover ILP is therefore built from the same columns, in the same order (the sets sort their rows by id), and gives
the same bound, cover and plan; only fewer multisets are placed. The margin (10⁻⁹ of the cost) keeps the order
free of rounding: ``undominated`` sums a column's cost in another order than the search does.

Candidates are taken cheapest bound first, those already placed (free) before the others, so the columns that
beat the rest are listed early. A protected multiset (the previous round's cover: the ILP's MIP start, which
``undominated`` keeps whatever beats it) is never dropped. Tested against the plain search
(``tests/engine/test_unbeaten.py``): the same columns after the mask, on seeded spaces and prices.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np

from planning.context import CancelToken, check_cancel

if TYPE_CHECKING:
    from planning.allocate.pricing import PricedGroup

BATCH = 256
"""Candidates placed per step: small, so the columns of one step beat the candidates of the next."""
MARGIN = 1e-9
"""How much cheaper (relative) a listed column must be to beat a candidate: far above the rounding of a sum of
prices, so the order ``undominated`` computes agrees."""


def price_unbeaten(pg: PricedGroup, w: np.ndarray, y_d: float, y_n: float, theta: float, per_region: bool = True,
                   protect: Collection[int] = (), cancel: CancelToken | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Columns with exact rc ≤ ``theta`` (rows, codes, regions, rc, floor), as ``pricing.price`` without a limit
    gives them, less the multisets a listed column beats in every region (module docstring); ``protect``: codes
    never dropped. ``floor`` ≤ every column's reduced cost: a dropped column costs at least its beater."""
    from planning.allocate.pricing import column_costs

    sp = pg.space
    P, _lb = sp.search(w, y_d, y_n, pg.demand, theta, per_region=per_region)
    empty = np.zeros(0, dtype=np.int64)
    if P.shape[0] == 0:
        return np.zeros((0, sp.nmax), dtype=np.int64), empty, empty, np.zeros(0), float(theta)
    codes = sp.codes(P)
    cost = column_costs(sp, P, w)  # (m, R): as ``pricing.price`` sums them, so its rc ≤ theta decides alike
    ub = sp.known_bound(P)
    placed = np.array([c in sp.cache for c in codes.tolist()], dtype=bool)
    protected = np.isin(codes, np.fromiter(protect, dtype=np.int64, count=len(protect)))
    order = np.concatenate([np.flatnonzero(placed), np.flatnonzero(~placed)])  # each part in bound order
    rc = np.full(cost.shape, np.inf)  # exact reduced costs of the candidates placed (inf: left out or T ≤ 0)
    listed = np.zeros(P.shape[0], dtype=bool)
    T = np.zeros(P.shape[0])
    a, size = 0, BATCH
    while a < order.size:
        check_cancel(cancel, "pricing search")
        step = order[a : a + size]
        a, size = a + size, 2 * size
        if listed.any():
            step = step[protected[step] | ~beaten(cost[step], ub[step], cost[listed], T[listed])]
        if step.size == 0:
            continue
        T[step] = sp.throughput(P[step], cancel)
        with np.errstate(invalid="ignore"):
            here = cost[step] - y_d * np.minimum(T[step], pg.demand)[:, None] - y_n
        here[T[step] <= 0] = np.inf
        rc[step] = here
        listed[step[np.any(here <= theta, axis=1)]] = True
    floor = min(float(theta), float(np.nanmin(rc)))  # a multiset left out costs at least what beats it
    rows, r = np.nonzero(rc <= theta)
    Pn = P[rows]
    return Pn, sp.codes(Pn), r, rc[rows, r], floor


def beaten(cost: np.ndarray, ub: np.ndarray, by_cost: np.ndarray, by_thr: np.ndarray) -> np.ndarray:
    """Which candidates (``cost`` (m, R), throughput bounds ``ub``) some listed column (``by_cost`` (n, R),
    exact throughputs ``by_thr``) beats in every region where the candidate is sold: costs less there by the
    :data:`MARGIN` and serves at least its bound."""
    out = np.ones(cost.shape[0], dtype=bool)
    for r in range(cost.shape[1]):
        mine = np.isfinite(cost[:, r])
        if not mine.any():
            continue
        ok = np.isfinite(by_cost[:, r])
        c, t = by_cost[ok, r], by_thr[ok]
        if c.size == 0:
            out &= ~mine
            continue
        order = np.argsort(c, kind="stable")
        best = np.maximum.accumulate(t[order])
        with np.errstate(invalid="ignore"):
            limit = cost[:, r] - MARGIN * np.maximum(1.0, np.abs(cost[:, r]))
        n = np.searchsorted(c[order], limit, side="left")  # listed columns strictly cheaper than the limit
        here = np.where(n > 0, best[np.maximum(n - 1, 0)], -np.inf) >= ub
        out &= ~mine | here
    return out
