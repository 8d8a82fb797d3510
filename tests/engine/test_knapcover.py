"""The exact one-row covering knapsack (``planning.allocate.knapcover``) against brute force and against HiGHS."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from planning.allocate import knapcover
from planning.allocate.knapcover import cover_ilp


def _caps(t: np.ndarray, demand: float, ub: np.ndarray | None) -> np.ndarray:
    cap = np.ceil(demand / t)
    return cap if ub is None else np.minimum(cap, ub)


def _brute(cost: np.ndarray, t: np.ndarray, demand: float, cap: np.ndarray) -> float:
    best = math.inf
    for x in itertools.product(*(range(int(u) + 1) for u in cap)):
        if float(np.dot(t, x)) >= demand * (1 - 1e-9):
            best = min(best, float(np.dot(cost, x)))
    return best


def _highs(monkeypatch: pytest.MonkeyPatch, cost, T, demand, ub=None) -> tuple[float, float]:
    with monkeypatch.context() as m:
        m.setattr(knapcover, "solve", lambda *a: None)
        return cover_ilp(cost, T, demand, 10.0, ub)


def _instance(rng: np.random.Generator, n: int, bounded: bool) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None]:
    """Node-like columns: prices with cents and six decimals, throughputs from a few node sizes, some capped."""
    demand = float(rng.choice([1400.0, 10550.0, 37750.0, 102400.0]))
    t = np.round(rng.uniform(0.05, 1.2, n) * demand / rng.integers(1, 6, n), 3)
    cost = np.round(t / demand * rng.uniform(5, 40, n) + rng.uniform(0, 3, n), 6)
    ub = np.where(rng.random(n) < 0.4, rng.integers(0, 3, n), np.inf) if bounded else None
    return cost, t, demand, ub


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force_on_small_instances(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cost, t, demand, ub = _instance(rng, int(rng.integers(1, 5)), bounded=seed % 2 == 1)
    cap = _caps(np.minimum(t, demand), demand, ub)
    if np.prod(cap + 1) > 20_000:
        cap = np.minimum(cap, 8)  # keep the enumeration small: an ub every column obeys
        ub = cap
    want = _brute(cost, np.minimum(t, demand), demand, cap)
    got = knapcover.solve(cost, np.minimum(t, demand), demand, cap)
    if math.isinf(want):
        assert got is None  # no cover: left to HiGHS
    else:
        assert got == pytest.approx(want, rel=1e-12)
        assert cover_ilp(cost, t, demand, 10.0, ub) == (got, got)


@pytest.mark.parametrize("seed", range(30))
def test_matches_highs_on_group_sized_instances(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1000 + seed)
    cost, t, demand, ub = _instance(rng, int(rng.integers(5, 120)), bounded=seed % 3 == 0)
    value, bound = cover_ilp(cost, t, demand, 10.0, ub)
    h_value, h_bound = _highs(monkeypatch, cost, t, demand, ub)
    assert value == pytest.approx(h_value, rel=1e-9)
    assert bound == pytest.approx(h_bound, rel=1e-9)


def test_an_exact_fraction_covers() -> None:
    """Three columns of D/3 cover D although their float sum may fall an ulp short."""
    demand = 10550.0
    assert knapcover.solve(np.array([1.7]), np.array([demand / 3]), demand, np.array([3.0])) == pytest.approx(5.1)
    # 49 − 10·(49/11) − 49/11 is 7e-15 above zero: ten of the cheap column and one dear one still cover 49
    t = np.array([49.0 / 11, 49.0 / 11])
    assert knapcover.solve(np.array([1.0, 1.5]), t, 49.0, np.array([10.0, 5.0])) == pytest.approx(11.5)


def test_a_dominated_column_is_dropped_only_by_a_full_one() -> None:
    """A cheaper, larger column dominates only when it may be used as often as a cover needs."""
    cost, t = np.array([1.0, 1.5]), np.array([60.0, 50.0])
    assert knapcover._columns(cost, t, 100.0, np.array([2.0, 2.0]))[0] == [1.0]
    kept = knapcover._columns(cost, t, 100.0, np.array([1.0, 2.0]))[0]
    assert sorted(kept) == [1.0, 1.5]
    assert knapcover.solve(cost, t, 100.0, np.array([1.0, 2.0])) == pytest.approx(2.5)


def test_near_ties_stay_exact_or_go_to_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many columns of almost one cost per unit: the search may give up, the answer is HiGHS's either way."""
    rng = np.random.default_rng(7)
    t = rng.integers(900, 1100, 80).astype(float) * 7.0
    cost = t * 0.001 * (1 + rng.uniform(0, 1e-4, 80))
    assert cover_ilp(cost, t, 102400.0) == pytest.approx(_highs(monkeypatch, cost, t, 102400.0), rel=1e-9)


def test_out_of_nodes_asks_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    cost, t, demand, _ = _instance(rng, 40, bounded=False)
    monkeypatch.setattr(knapcover, "NODE_LIMIT", 1)
    assert knapcover.solve(cost, np.minimum(t, demand), demand, _caps(np.minimum(t, demand), demand, None)) is None
    assert cover_ilp(cost, t, demand)[0] == pytest.approx(_highs(monkeypatch, cost, t, demand)[0], rel=1e-9)


@pytest.mark.parametrize("cost, t, cap", [
    ([-1.0, 2.0], [40.0, 60.0], [2.0, 2.0]),  # a negative cost
    ([1.0, np.inf], [40.0, 60.0], [3.0, 2.0]),  # an infinite cost
    ([1.0, 2.0], [40.0, 0.0], [3.0, 2.0]),  # a column of no throughput
    ([1.0, 2.0], [10.0, 20.0], [1.0, 1.0]),  # no cover of 100
])
def test_outside_its_assumptions_it_declines(cost, t, cap) -> None:
    assert knapcover.solve(np.array(cost), np.array(t), 100.0, np.array(cap)) is None


def test_highs_still_answers_what_it_declines() -> None:
    value, bound = cover_ilp(np.array([-1.0, 2.0]), np.array([40.0, 60.0]), 100.0, 10.0, np.array([2.0, 2.0]))
    assert value == pytest.approx(_brute(np.array([-1.0, 2.0]), np.array([40.0, 60.0]), 100.0, np.array([2.0, 2.0])))
    assert bound <= value
    assert cover_ilp(np.array([1.0]), np.array([10.0]), 100.0, 10.0, np.array([1.0]))[0] == math.inf
