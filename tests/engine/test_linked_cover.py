"""The linked Lagrangian cover bound (``planning.allocate.linked_cover``) against exact ILPs over every template.

On the seeded instances of ``test_on_demand`` (one or two models, prefill and decode linked, two regions, scarce
or plentiful offers): a model's bound lies between L_p + L_d and the exact linked cover at the Lagrangian prices
(the allocation ILP over the whole library with those prices and no availability limit), and equal to it when
the rounds converged; the pairing raises the bound on some of them; the certificate costs what the plain
Lagrangian certificate costs (no linked rounds). That z′ stays below the exact optimum and the
certificate built on it still returns the optimum is ``test_on_demand.test_on_demand_equals_library_ilp`` (the
same 24 instances, the engine's ``pricing.z_lb`` is now z′).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from planning.allocate import solve_allocation
from planning.allocate.certify import allocation_problem
from planning.allocate.linked_cover import CoverRun, linked_bounds, linked_pairs, model_bound
from planning.allocate.ondemand import lagrangian_bound, template_set
from planning.allocate.pricers import LocalPricers
from planning.allocate.pricing import PricedGroup, PricingResult, solve_lp
from planning.allocate.problem import Offer
from planning.resolve import ResolvedScenario

from .conftest import unbound_inner_limits
from .test_on_demand import _instance, _library_sets, _resolved

SEEDS = range(24)


@pytest.fixture(autouse=True)
def _no_wall_clock_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    unbound_inner_limits(monkeypatch)


def _lagrangian(seed: int) -> tuple[list[PricedGroup], ResolvedScenario, PricingResult, np.ndarray, float] | None:
    priced, offers = _instance(seed)
    resolved = _resolved(priced, offers)
    shapes = priced[0].space.shapes
    available = resolved.availability_matrix(shapes)
    pr, lp = solve_lp(priced, resolved.price_matrix(shapes), available, resolved.scenario.options.K)
    if not pr.feasible:
        return None
    L, z_lb = lagrangian_bound(priced, pr, lp, available, True, None, LocalPricers(priced))
    return priced, resolved, pr, L, z_lb


def _exact_linked_cover(priced: list[PricedGroup], resolved: ResolvedScenario, pr: PricingResult,
                        pair: tuple[int, int]) -> float:
    """The oracle: min over every template of the model's two groups of the cost at the prices w (offer price
    w/(1 + K), as the builders fold K in), with the pairing and no availability limit."""
    sets = _library_sets([priced[gi] for gi in pair])
    problem = allocation_problem(resolved, sets, groups=[priced[gi].group for gi in pair], objective="cost")
    K = resolved.scenario.options.K
    shapes = list(priced[0].space.shapes)
    regions = list(resolved.regions)
    offers = tuple(Offer(o.region, o.shape, float(pr.w[regions.index(o.region), shapes.index(o.shape)]) / (1 + K),
                         10**6) for o in problem.offers if o.shape in shapes
                   and np.isfinite(pr.w[regions.index(o.region), shapes.index(o.shape)]))
    from dataclasses import replace

    alloc = solve_allocation(replace(problem, offers=offers, budget_per_hour=None, mip_rel_gap=1e-9,
                                     time_limit_s=600))
    assert alloc.status == "optimal"
    return float(alloc.total_per_hour or 0.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_models_linked_bound_is_between_its_groups_bounds_and_the_exact_linked_cover(seed: int) -> None:
    for _seed, run, pr, L, pair in _model_runs(range(seed, seed + 1)):
        got = model_bound(run, pr, L, pair)
        ell, rounds = got.bound, got.rounds
        assert got.clock_stops == 0
        exact = _exact_linked_cover(list(run.priced), run.resolved, pr, pair)
        tol = 1e-6 * max(1.0, exact)
        assert float(L[pair[0]] + L[pair[1]]) - tol <= ell <= exact + tol
        assert float(L[pair[0]] + L[pair[1]]) <= exact + tol  # the oracle is at least the unlinked bound
        if rounds < 3:  # converged: the best cover was among the listed columns
            assert ell == pytest.approx(exact, rel=1e-4, abs=1e-6)


def test_the_pairing_raises_the_bound_on_some_instances() -> None:
    """Not a no-op: on some seeded instances the linked bound is strictly above Σ L_g (pairing binds)."""
    gains = []
    for seed in range(6):
        got = _lagrangian(seed)
        if got is None:
            continue
        priced, resolved, pr, L, z_lb = got
        run = CoverRun(priced, resolved, LocalPricers(priced), lambda pg, P: template_set(pg, P))
        gains.append(linked_bounds(run, pr, L, z_lb).gain)
    assert all(g >= 0 for g in gains)
    assert sum(g > 1e-6 for g in gains) >= 1, gains


@pytest.mark.parametrize("seed", range(6))
def test_the_certificate_costs_what_it_cost_without_the_linked_bounds(seed: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The same certified cost as the plain Lagrangian certificate (no linked rounds: the engine before issue
    41's linked bounds), from a bound at least as high."""
    from planning.allocate import linked_cover
    from planning.allocate.ondemand import allocate_on_demand

    priced, offers = _instance(seed)
    linked = allocate_on_demand(priced, _resolved(priced, offers))
    monkeypatch.setattr(linked_cover, "LINK_ROUNDS", 0)
    priced, offers = _instance(seed)
    plain = allocate_on_demand(priced, _resolved(priced, offers))
    if plain is None or not plain.alloc.has_plan:
        assert linked is None or not linked.alloc.has_plan
        return
    assert linked is not None and linked.certified and plain.certified
    assert plain.pricing.linked_gain == 0.0
    assert linked.pricing.z_lb >= plain.pricing.z_lb - 1e-9
    assert linked.alloc.total_per_hour == pytest.approx(plain.alloc.total_per_hour, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(("name", "value"), [("LINK_NODES", 0), ("LINK_SAFETY_S", 0.0)])
def test_the_bound_holds_whatever_stops_its_ilps(name: str, value: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped at once on work (no branch-and-bound node) or by its wall-clock safety net (expired before the
    ILP starts, so HiGHS's interrupt callback stops it at its first check: the same on every machine), a model's
    bound still lies between L_p + L_d and the exact linked cover; a clock stop is counted, a work stop is not."""
    from planning.allocate import linked_cover

    monkeypatch.setattr(linked_cover, name, value)
    clocked = 0
    for _seed, run, pr, L, pair in _model_runs(range(8)):
        bound = model_bound(run, pr, L, pair)
        exact = _exact_linked_cover(list(run.priced), run.resolved, pr, pair)
        tol = 1e-6 * max(1.0, exact)
        assert float(L[pair[0]] + L[pair[1]]) - tol <= bound.bound <= exact + tol
        clocked += bound.clock_stops
    if name == "LINK_NODES":
        assert clocked == 0
    else:
        assert clocked > 0


def test_models_bounded_at_once_give_the_bounds_of_one_after_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LINK_THREADS`` models at once (threads) give the same shares, bound, rounds and covers as one model after
    another, on the seeded instances with two linked models (fresh spaces each way: nothing placed is shared)."""
    from planning.allocate import linked_cover

    compared = 0
    for seed in SEEDS:
        answers = []
        for threads in (1, 2):
            got = _lagrangian(seed)
            if got is None or len(linked_pairs(got[0])) < 2:
                break
            priced, resolved, pr, L, z_lb = got
            monkeypatch.setattr(linked_cover, "LINK_THREADS", threads)
            run = CoverRun(priced, resolved, LocalPricers(priced), lambda pg, P: template_set(pg, P))
            answers.append(linked_bounds(run, pr, L, z_lb))
        if len(answers) < 2:
            continue
        compared += 1
        one, two = answers
        assert two.shares.tolist() == one.shares.tolist() and two.z_lb == one.z_lb, seed
        assert two.models == one.models and len(two.covers) == len(one.covers), seed
        for a, b in zip(one.covers, two.covers, strict=True):
            assert (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b)), seed
    assert compared >= 4, compared  # 5 of the 24 seeds have two linked models and a feasible LP


def test_a_later_rounds_ilp_starts_from_the_cover_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round after the first starts its ILP from the round before's cover (whose columns it lists: the cap
    only grew), with HiGHS's root heuristics off; the bounds and rounds are those of ILPs without a start."""
    from planning.allocate import linked_cover

    seen: list[tuple[dict, bool, dict]] = []
    real = linked_cover.solve_allocation

    def spy(problem, **k):  # type: ignore[no-untyped-def]
        alloc = real(problem, **k)
        seen.append((dict(problem.start), problem.start_only, dict(alloc.counts)))
        return alloc

    monkeypatch.setattr(linked_cover, "solve_allocation", spy)
    started = 0
    for seed, run, pr, L, pair in _model_runs(SEEDS):
        seen.clear()
        with_start = model_bound(run, pr, L, pair)
        rounds = list(seen)
        for (start, only, _c), (_s, _o, before) in zip(rounds[1:], rounds, strict=False):
            if before:  # the round before found a cover: it is this round's start
                assert start == {k: v for k, v in before.items() if v > 0} and only, seed
                started += 1
        monkeypatch.setattr(linked_cover, "solve_allocation",
                            lambda problem, **k: real(replace(problem, start={}, start_only=False), **k))
        without = model_bound(run, pr, L, pair)
        monkeypatch.setattr(linked_cover, "solve_allocation", spy)
        assert with_start.rounds == without.rounds, seed
        assert with_start.bound == pytest.approx(without.bound, rel=1e-5, abs=1e-6), seed
    assert started >= 1, started


def _model_runs(seeds: range) -> Iterator[tuple[int, CoverRun, PricingResult, np.ndarray, tuple[int, int]]]:
    """(seed, cover run, LP prices, group bounds, linked pair) of every linked model of the seeded instances."""
    for seed in seeds:
        got = _lagrangian(seed)
        if got is None:
            continue
        priced, resolved, pr, L, _z = got
        run = CoverRun(priced, resolved, LocalPricers(priced), lambda pg, P: template_set(pg, P))
        for pair in linked_pairs(priced):
            yield seed, run, pr, L, pair


def test_a_cover_ilp_without_the_beaten_columns_finds_the_same_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The linked cover ILPs keep only the columns no other one beats in their region (``undominated``): on the
    seeded instances they drop some, and every model's bound and rounds are those of ILPs over every column."""
    from planning.allocate import linked_cover

    dropped = 0
    real = linked_cover.undominated

    def counting(usage, thr, w, protected):  # type: ignore[no-untyped-def]
        nonlocal dropped
        keep = real(usage, thr, w, protected)
        dropped += int((~keep).sum())
        return keep

    for seed, run, pr, L, pair in _model_runs(SEEDS):
        monkeypatch.setattr(linked_cover, "undominated", counting)
        pruned = model_bound(run, pr, L, pair)
        monkeypatch.setattr(linked_cover, "undominated", lambda usage, *_a: np.ones(len(usage), dtype=bool))
        every = model_bound(run, pr, L, pair)
        assert pruned.rounds == every.rounds, seed
        assert pruned.bound == pytest.approx(every.bound, rel=1e-5, abs=1e-6), seed
    assert dropped > 0


@pytest.mark.parametrize("seed", range(40))
def test_each_dropped_column_has_a_kept_one_that_beats_it_in_its_region(seed: int) -> None:
    """``undominated``: a row is kept iff protected or no other row costs ≤ and serves ≥ in some region where it is
    sold (ties: the first of equals stays); and a single-row cover costs the same over the kept rows as over all."""
    from planning.allocate.knapcover import cover_ilp
    from planning.allocate.linked_cover import undominated

    rng = np.random.default_rng(seed)
    n, R, K = int(rng.integers(2, 30)), int(rng.integers(1, 4)), 3
    usage = rng.integers(0, 3, size=(n, K))
    usage[usage.sum(axis=1) == 0, 0] = 1
    thr = rng.choice([1.0, 2.0, 3.0, 5.0, 8.0], size=n)  # repeated values: ties happen
    w = rng.choice([1.0, 2.0, 4.0, np.inf], size=(R, K), p=[0.4, 0.3, 0.2, 0.1])
    protected = rng.random(n) < 0.1
    keep = undominated(usage, thr, w, protected)
    cost = np.array([[sum(u * w[r, k] for k, u in enumerate(row) if u) for r in range(R)] for row in usage])
    for i in range(n):
        beaten_everywhere = all(
            not np.isfinite(cost[i, r])
            or any(j != i and cost[j, r] <= cost[i, r] and thr[j] >= thr[i]
                   and (cost[j, r] < cost[i, r] or thr[j] > thr[i] or j < i) for j in range(n))
            for r in range(R))
        assert keep[i] == (bool(protected[i]) or not beaten_everywhere), (seed, i)
    for r in range(R):
        ok = np.isfinite(cost[:, r])
        if ok.any():
            every = cover_ilp(cost[ok, r], thr[ok], 10.0)[0]
            kept = cover_ilp(cost[ok & keep, r], thr[ok & keep], 10.0)[0]
            assert kept == pytest.approx(every, rel=1e-9), (seed, r)


def test_groups_bounded_at_once_give_the_bounds_of_one_after_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GROUP_THREADS`` groups at once (threads) give each group the Lagrangian cover bound it gets alone (fresh
    spaces each way: nothing placed is shared); the threads do run on these instances."""
    from planning.allocate import pricing

    compared = 0
    names: set[str] = set()
    real = pricing.cover_ilp

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        names.add(threading.current_thread().name.split("_")[0])
        return real(*a, **k)

    monkeypatch.setattr(pricing, "cover_ilp", spy)
    for seed in SEEDS:
        bounds = []
        for threads in (1, 2):
            monkeypatch.setattr(pricing, "GROUP_THREADS", threads)
            got = _lagrangian(seed)
            if got is None:
                break
            bounds.append((got[3].tolist(), got[4]))
        if len(bounds) == 2:
            compared += 1
            assert bounds[0] == bounds[1], seed
    assert compared >= 10 and "group-bound" in names, (compared, names)
