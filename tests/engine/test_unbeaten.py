"""The linked cover searches place only the multisets their ILPs can keep (``planning.allocate.unbeaten``), and
a space keeps its multisets' throughput bounds (``MultisetSpace.known_bound``): the same columns, the same
bounds, less work.

On the seeded instances of ``test_on_demand``: after ``undominated``'s mask, the columns of ``price_unbeaten``
are those of the plain search (protected multisets included), whatever the threshold; the linked bounds are
exactly those of the plain search while fewer multisets are placed; the kept bound is ``upper_bound``'s, and a
search reading it lists the same candidates as one reading the bound stopped at the demand.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planning.allocate import unbeaten
from planning.allocate.linked_cover import CoverRun, linked_bounds, undominated
from planning.allocate.ondemand import template_set
from planning.allocate.pricers import LocalPricers
from planning.allocate.pricing import PricedGroup, PricingResult, column_costs, price
from planning.templates.search import MultisetSpace, SearchStats

from .test_linked_cover import SEEDS, _lagrangian


def _fresh(priced: list[PricedGroup]) -> list[PricedGroup]:
    """The groups with spaces that have placed nothing (the same tables)."""
    return [PricedGroup(pg.group, replace(pg.space, stats=SearchStats()), pg.demand, pg.t_bar, {}) for pg in priced]


def _kept_ids(pg: PricedGroup, P: np.ndarray, w: np.ndarray, protect: set[int]) -> set[str]:
    """The template ids a linked cover ILP over the multisets ``P`` keeps (``undominated``, ``protect`` codes)."""
    if P.shape[0] == 0:
        return set()
    _, first = np.unique(pg.space.codes(P), return_index=True)
    ts = template_set(pg, P[np.sort(first)])
    codes = pg.space.usage_codes(np.asarray(ts.usage, dtype=np.int64))
    keep = undominated(ts.usage, ts.throughput[:, 0], w, [int(c) in protect for c in codes])
    return {ts.key(i) for i in np.flatnonzero(keep)}


@pytest.fixture
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The searches place 4 candidates at their first step (then 8, 16, …): these spaces are small."""
    monkeypatch.setattr(unbeaten, "BATCH", 4)


@pytest.mark.parametrize("seeds", [SEEDS[:12], SEEDS[12:]])
def test_the_columns_an_ilp_keeps_are_those_of_the_plain_search(seeds: range, small_steps: None) -> None:
    """Four thresholds per group, from the cheapest columns to every one; a random seventh of the listed multisets
    protected."""
    compared = 0
    for seed in seeds:
        got = _lagrangian(seed)
        if got is not None:
            _same_columns(seed, *got[:3])
            compared += 1
    assert compared >= 7, compared


def _same_columns(seed: int, priced: list[PricedGroup], _resolved: object, pr: PricingResult) -> None:
    rng = np.random.default_rng(seed)
    for pg, fresh in zip(priced, _fresh(priced), strict=True):
        gi = priced.index(pg)
        y_d, y_n = float(pr.y_d[gi]), float(pr.y_n[gi])
        every = pg.space.all_multisets()
        T = pg.space.throughput(every)
        rc = (column_costs(pg.space, every, pr.w) - y_d * np.minimum(T, pg.demand)[:, None] - y_n).min(axis=1)
        finite = rc[np.isfinite(rc) & (T > 0)]
        for q in (0.05, 0.3, 0.7, 1.0):
            theta = float(np.quantile(finite, q)) if finite.size else 0.0
            P, *_rest, floor_plain = price(pg, pr.w, y_d, y_n, theta, None)
            listed = np.unique(pg.space.codes(P))
            protect = {int(c) for c in listed if rng.random() < 0.15}
            Q, codes, _r, rcs, floor = unbeaten.price_unbeaten(fresh, pr.w, y_d, y_n, theta, True, protect)
            assert _kept_ids(fresh, Q, pr.w, protect) == _kept_ids(pg, P, pr.w, protect), (seed, gi, q)
            assert protect <= set(codes.tolist()), (seed, gi, q)
            assert np.all(rcs <= theta + 1e-12) and floor <= float(np.min(rc[np.isfinite(rc)], initial=theta)) + 1e-9
            assert floor_plain <= theta


def test_the_linked_bounds_are_the_plain_searchs_with_fewer_placements(monkeypatch: pytest.MonkeyPatch,
                                                                       small_steps: None) -> None:
    """Per seed, fresh spaces each way: the same shares, bound, rounds and covers, exactly; fewer multisets placed
    in all (the plain search places every candidate)."""
    plain = unbeaten.price_unbeaten
    placed = {"unbeaten": 0, "plain": 0}
    compared = 0
    for seed in SEEDS:
        got = _lagrangian(seed)
        if got is None:
            continue
        priced, resolved, pr, L, z_lb = got
        answers = {}
        for how in ("unbeaten", "plain"):
            if how == "plain":
                monkeypatch.setattr(unbeaten, "price_unbeaten",
                                    lambda pg, w, y_d, y_n, theta, per_region, _protect, cancel:
                                    price(pg, w, y_d, y_n, theta, None, per_region, cancel))
            else:
                monkeypatch.setattr(unbeaten, "price_unbeaten", plain)
            fresh = _fresh(priced)
            run = CoverRun(fresh, resolved, LocalPricers(fresh), lambda pg, P: template_set(pg, P))
            answers[how] = linked_bounds(run, pr, L, z_lb)
            placed[how] += sum(pg.space.stats.evaluated for pg in fresh)
        one, two = answers["unbeaten"], answers["plain"]
        assert one.shares.tolist() == two.shares.tolist() and one.z_lb == two.z_lb, seed
        assert one.models == two.models, seed
        for a, b in zip(one.covers, two.covers, strict=True):
            assert (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b)), seed
        compared += 1
    assert compared >= 16, compared
    assert placed["unbeaten"] < placed["plain"], placed


@pytest.mark.parametrize("seed", [0, 1, 3, 4, 5, 8, 10, 11, 12, 13, 15, 16])
def test_the_kept_bound_is_the_bound_and_the_search_lists_the_same(seed: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """On every multiset of each space: the bound kept is ``upper_bound``'s (half of them known, half new); a search
    again computes no bound; a search reading the bound stopped at the demand lists the same (the search before).
    The seeds whose LP is feasible (``_lagrangian``: its prices and duals)."""
    got = _lagrangian(seed)
    assert got is not None, seed
    priced, _resolved, pr, _L, _z = got
    calls = [0]
    real = MultisetSpace.upper_bound

    def counted(self: MultisetSpace, P: np.ndarray, enough: float = np.inf) -> np.ndarray:
        calls[0] += 1
        return real(self, P, enough)

    for gi, pg in enumerate(priced):
        sp = replace(pg.space, stats=SearchStats())
        every = sp.all_multisets()
        half = every[: every.shape[0] // 2]
        assert np.array_equal(sp.known_bound(half), sp.upper_bound(half))
        assert np.array_equal(sp.known_bound(every), sp.upper_bound(every))  # half known, half new
        args = (pr.w, float(pr.y_d[gi]), float(pr.y_n[gi]), pg.demand, 0.0)
        kept = replace(pg.space, stats=SearchStats())
        P, lb = kept.search(*args)
        monkeypatch.setattr(MultisetSpace, "upper_bound", counted)
        calls[0] = 0
        again, lb_again = kept.search(*args)
        monkeypatch.setattr(MultisetSpace, "upper_bound", real)
        assert calls[0] == 0 and np.array_equal(again, P) and np.array_equal(lb_again, lb)
        P0, lb0 = _stopped(pg, monkeypatch).search(*args)
        assert np.array_equal(P0, P) and np.array_equal(lb0, lb), (seed, gi)


def _stopped(pg: PricedGroup, monkeypatch: pytest.MonkeyPatch) -> MultisetSpace:
    """A fresh space of ``pg`` whose search reads the bound stopped at the demand (as before ``known_bound``)."""
    space = replace(pg.space, stats=SearchStats())
    enough = pg.demand if pg.demand > 0 else np.inf
    monkeypatch.setattr(space, "known_bound", lambda P: MultisetSpace.upper_bound(space, P, enough))
    return space
