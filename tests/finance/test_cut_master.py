"""The cut master (planning.finance.cuts) against brute force: on seeded second-stage value functions z_e(K)
(non-increasing in the pool sizes K), its bound never exceeds the optimum over R, and with the monotone cut of
every point it equals it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from planning.finance.cuts import Cut, solve_master

POOLS = [("cloud:a/reserved", "1xL4"), ("cloud:b/reserved", "1xL40S")]


def _instance(seed: int) -> tuple[dict[tuple[int, ...], list[float]], list[float], list[tuple[str, tuple[str, str], int, float]],
                                  dict[tuple[str, str], int]]:
    """z[K][e] on the grid of K (held + 0..cap per pool), non-increasing in K; hours; candidates; held."""
    rng = np.random.default_rng(seed)
    caps, held = [3, 2], {POOLS[0]: int(seed % 2), POOLS[1]: 0}
    hours = [float(h) for h in rng.integers(50, 400, size=3)]
    grid = list(itertools.product(*(range(held[p], held[p] + c + 1) for p, c in zip(POOLS, caps, strict=True))))
    z: dict[tuple[int, ...], list[float]] = {}
    for k in sorted(grid):  # z(K) = min over smaller K of a random drop: non-increasing by construction
        base = [float(rng.uniform(5, 20)) for _ in hours]
        for j in range(len(POOLS)):
            prev = tuple(k[i] - (i == j) for i in range(len(POOLS)))
            if prev in z:
                base = [min(b, z[prev][e] - float(rng.uniform(0, 2.5))) for e, b in enumerate(base)]
        z[k] = [max(b, 0.0) for b in base]
    cands = [(f"reservations[{j}]", POOLS[j], caps[j], float(rng.uniform(0.3, 1.5)) * sum(hours)) for j in range(2)]
    return z, hours, cands, held


def _brute(z: dict[tuple[int, ...], list[float]], hours: list[float], cands: list[tuple[str, tuple[str, str], int, float]],
           held: dict[tuple[str, str], int]) -> float:
    best = np.inf
    for r in itertools.product(*(range(c[2] + 1) for c in cands)):
        k = tuple(held[p] + r[j] for j, p in enumerate(POOLS))
        best = min(best, sum(c[3] * x for c, x in zip(cands, r, strict=True)) + sum(w * v for w, v in zip(hours, z[k], strict=True)))
    return float(best)


@pytest.mark.parametrize("seed", range(8))
def test_master_bound_is_valid_and_exact_with_every_point(seed: int) -> None:
    z, hours, cands, held = _instance(seed)
    optimum = _brute(z, hours, cands, held)
    top = max(z)
    # Lagrangian cuts at random prices: low = min_K z_e(K) + π·K over the grid (what a certified solve proves)
    rng = np.random.default_rng(100 + seed)
    lag = []
    for _ in range(4):
        for e in range(len(hours)):
            prices = {p: float(rng.uniform(0, 3)) for p in POOLS}
            low = min(z[k][e] + sum(prices[p] * k[i] for i, p in enumerate(POOLS)) for k in z)
            lag.append(Cut(e, low, prices))
    only_lag = solve_master(lag, hours, cands, held)
    assert only_lag is not None and only_lag.bound <= optimum + 1e-6
    # monotone cuts at two points only: still a valid bound
    some = [Cut(e, z[k][e], {}, dict(zip(POOLS, k, strict=True))) for k in (min(z), top) for e in range(len(hours))]
    partial = solve_master(lag + some, hours, cands, held)
    assert partial is not None and only_lag.bound - 1e-6 <= partial.bound <= optimum + 1e-6
    every = [Cut(e, z[k][e], {}, dict(zip(POOLS, k, strict=True))) for k in z for e in range(len(hours))]
    exact = solve_master(lag + every, hours, cands, held)
    assert exact is not None and exact.finished
    assert exact.bound == pytest.approx(optimum, rel=1e-7)
    r = tuple(exact.counts[c[0]] for c in cands)
    k = tuple(held[p] + r[j] for j, p in enumerate(POOLS))
    assert sum(c[3] * x for c, x in zip(cands, r, strict=True)) + sum(
        w * v for w, v in zip(hours, z[k], strict=True)) == pytest.approx(optimum, rel=1e-7)


def test_no_cut_no_bound() -> None:
    assert solve_master([], [1.0], [("reservations[0]", POOLS[0], 2, 1.0)], {}) is None
