"""The multi-epoch MILP (issue 27 §2): its certified answer equals the full MILP over every template on seeded
instances (running instances, K, two regions with prefill–decode pairing), brute force on tiny ones, and its
bound never exceeds a real schedule's cost."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from planning.timeline.horizon import HorizonData, HorizonGroup, HorizonProblem, solve_horizon
from planning.timeline.horizon_ilp import pairs_ilp as _ilp


def _problem(seed: int, epochs: int = 4, tiny: bool = False) -> HorizonProblem:
    rng = random.Random(seed)
    R = 1 if tiny or seed % 3 else 2
    S = 2 if tiny else 3
    regions = tuple(f"r{r}" for r in range(R))
    shapes = tuple(f"1x{'ABC'[k]}" for k in range(S))
    prices = np.array([[rng.uniform(0.5, 3.0) * (1 + 0.2 * r) for _k in range(S)] for r in range(R)])
    if not tiny and seed % 4 == 1:
        prices[-1, 0] = np.nan  # a shape not sold in one region
    linked = R > 1 and not tiny
    phases = ("prefill", "decode") if linked else ("aggregated",)
    groups = []
    for ph in phases:
        n = 2 if tiny else rng.randint(3, 6)
        usage = np.array([[rng.randint(0, 2) for _k in range(S)] for _i in range(n)], dtype=np.int64)
        usage[usage.sum(axis=1) == 0, 0] = 1
        thr = np.array([float(u.sum()) * rng.uniform(0.6, 1.4) for u in usage])
        groups.append(HorizonGroup(f"m/{ph}", "m", ph, usage, thr, tuple(f"m/{ph}:t{i}" for i in range(n))))
    shape_of_day = [rng.uniform(0.3, 1.0) for _ in range(epochs)]
    demand = np.array([[rng.uniform(1.0, 3.0 if tiny else 6.0) * shape_of_day[e] for _g in groups]
                       for e in range(epochs)])
    available = np.array([[[rng.randint(1 if tiny else 2, 3 if tiny else 8) for _k in range(S)] for _r in range(R)]
                          for _e in range(epochs)], dtype=float)
    K = (0.0, 0.5, 2.0)[seed % 3]
    running = {}
    if seed % 2 and not tiny:
        running = {(0, 0, 0): rng.randint(1, 2)}
    links = ((0, 1),) if linked else ()
    return HorizonProblem(tuple(groups), regions, shapes, prices, available, demand, 1.0, K, running, links)


def _full_milp(p: HorizonProblem) -> float:
    """The compact MILP over every (template, region) pair, solved to gap 0 (the formulation itself)."""
    d = HorizonData.build(p)
    pairs = [(gi, i, r) for gi, g in enumerate(p.groups) for i in range(len(g.keys)) for r in range(len(p.regions))
             if math.isfinite(d.cost[gi][i, r])]
    status, value, _bound, _counts = _ilp(d, pairs, 120.0, 0.0)
    assert status in ("optimal", "infeasible")
    return value


@pytest.mark.parametrize("seed", range(16))
def test_certified_horizon_equals_the_full_milp(seed: int) -> None:
    p = _problem(seed)
    full = _full_milp(p)
    plan = solve_horizon(p, time_limit_s=120)
    if not math.isfinite(full):
        assert not plan.has_plan
        return
    assert plan.status == "optimal" and plan.gap == 0.0
    assert plan.value == pytest.approx(full, rel=1e-7, abs=1e-6)
    assert plan.bound <= full + 1e-6 * max(1.0, full)
    assert plan.stats.get("lagrangian_bound", -math.inf) <= full + 1e-6 * max(1.0, full)


def _brute(p: HorizonProblem) -> float:
    """Every ν per (template, epoch) within availability: the cheapest that covers each epoch's demand."""
    g = p.groups[0]
    n, E = len(g.keys), p.epochs
    c = g.usage.astype(float) @ np.nan_to_num(p.prices[0])
    ub = [int(min(p.available[:, 0, k].max() // g.usage[i, k] for k in range(len(p.shapes)) if g.usage[i, k]))
          for i in range(n)]
    best = math.inf
    per_epoch = []
    for e in range(E):
        ok = []
        for nu in itertools.product(*(range(u + 1) for u in ub)):
            use = np.array(nu) @ g.usage
            if (use <= p.available[e, 0]).all() and float(np.array(nu) @ g.throughput) >= p.demand[e, 0] - 1e-9:
                ok.append(nu)
        per_epoch.append(ok)
    for seq in itertools.product(*per_epoch):
        cost, prev = 0.0, (0,) * n
        for nu in seq:
            cost += float(np.array(nu) @ c) * p.hours
            cost += p.K * p.hours * sum(max(0, a - b) * c[i] for i, (a, b) in enumerate(zip(nu, prev, strict=True)))
            prev = nu
        best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(10))
def test_tiny_horizon_equals_brute_force(seed: int) -> None:
    p = _problem(seed, epochs=3, tiny=True)
    oracle = _brute(p)
    plan = solve_horizon(p, time_limit_s=60)
    if not math.isfinite(oracle):
        assert not plan.has_plan
        return
    assert plan.status == "optimal" and plan.value == pytest.approx(oracle, rel=1e-7, abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_rolling_horizon_never_beats_the_offline_optimum(seed: int) -> None:
    """Any schedule is a solution of the whole-horizon MILP: look-ahead steps (H = 2) committed one epoch at a time
    cost at least the offline optimum, and the offline bound never exceeds them."""
    p = _problem(seed, epochs=5)
    offline = solve_horizon(p, time_limit_s=120)
    if not offline.has_plan:
        return
    d = HorizonData.build(p)
    prev: dict = dict(p.running)
    total = 0.0
    for t in range(p.epochs):
        sub = HorizonProblem(p.groups, p.regions, p.shapes, p.prices, p.available[t:t + 2], p.demand[t:t + 2],
                             p.hours, p.K, prev, p.links)
        step = solve_horizon(sub, time_limit_s=60)
        assert step.has_plan
        now = step.counts[0]
        base = prev
        for (gi, i, r), n in now.items():
            c = float(d.cost[gi][i, r])
            total += p.hours * c * n + p.K * p.hours * c * max(0, n - base.get((gi, i, r), 0))
        prev = dict(now)
    assert offline.value <= total + 1e-6 * max(1.0, total)
    assert offline.bound <= total + 1e-6 * max(1.0, total)


def test_the_lagrangian_bound_is_used_and_valid() -> None:
    """On most seeds the group covers bound the optimum (the fixing then keeps few pairs); never above it. (With two
    regions the pairing rows are left out of the group covers, so it can fall below the LP bound: still valid.)"""
    used = 0
    for seed in range(16):
        p = _problem(seed)
        plan = solve_horizon(p, time_limit_s=120)
        if "lagrangian_bound" in plan.stats and plan.has_plan:
            used += 1
            assert plan.stats["lagrangian_bound"] <= plan.value + 1e-6 * max(1.0, plan.value)
    assert used >= 8


def test_a_group_cover_over_the_seeds_own_pairs_is_solved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """When every pair a cheaper cover could use is already in the seed's proven cover, the second cover would be
    the same MIP: it is not solved again, and solving it again gives the first one's answer to the last bit."""
    import planning.timeline.horizon as H

    calls: list[tuple] = []
    real = H._cover

    def spy(d, gi, pairs, w, running, seconds):  # type: ignore[no-untyped-def]
        out = real(d, gi, pairs, w, running, seconds)
        calls.append((d, gi, list(pairs), np.array(w), dict(running), out))
        return out

    monkeypatch.setattr(H, "_cover", spy)
    once = 0
    for seed in range(16):
        calls.clear()
        solve_horizon(_problem(seed), time_limit_s=120)
        for a, b in itertools.pairwise(calls):
            assert not (a[1] == b[1] and a[2] == b[2]), f"seed {seed}: group {a[1]}'s cover solved twice"
        for i, (d, gi, pairs, w, running, out) in enumerate(calls):
            alone = (i == 0 or calls[i - 1][1] != gi) and (i + 1 == len(calls) or calls[i + 1][1] != gi)
            if alone and math.isfinite(out[0]) and out[1] >= out[0] - H.COVER_GAP * max(1.0, abs(out[0])):
                once += 1
                assert real(d, gi, pairs, w, running, 120.0) == out
    assert once >= 10


@pytest.mark.parametrize("seed", range(6))
def test_a_schedule_as_mip_start_is_taken_whole(seed: int) -> None:
    """Another policy's schedule (the rolling horizon's) handed to the MILP as a start: the answer is never dearer
    than it, even when the MILP has no time to improve on it (the start vector fills I and the regional shares)."""
    p = _problem(seed, epochs=5)
    d = HorizonData.build(p)
    prev: dict = dict(p.running)
    schedule, total = [], 0.0
    for t in range(p.epochs):
        sub = HorizonProblem(p.groups, p.regions, p.shapes, p.prices, p.available[t:t + 2], p.demand[t:t + 2],
                             p.hours, p.K, prev, p.links)
        step = solve_horizon(sub, time_limit_s=60)
        if not step.has_plan:
            return
        now = step.counts[0]
        for (gi, i, r), n in now.items():
            c = float(d.cost[gi][i, r])
            total += p.hours * c * n + p.K * p.hours * c * max(0, n - prev.get((gi, i, r), 0))
        schedule.append(dict(now))
        prev = dict(now)
    from planning.timeline.horizon_ilp import schedule_value

    assert schedule_value(d, schedule) == pytest.approx(total, rel=1e-9)
    pairs = sorted({k for counts in schedule for k in counts})
    _status, value, _bound, counts = _ilp(d, pairs, 1e-3, 0.0, schedule)
    assert counts and value <= total + 1e-6 * max(1.0, total)
    plan = solve_horizon(p, time_limit_s=120, start=schedule)
    assert plan.has_plan and plan.value <= total + 1e-6 * max(1.0, total)


def _long_horizon(n: int = 400, epochs: int = 24) -> HorizonProblem:
    """A day of a two-region, two-phase model with hundreds of templates: its certificate takes minutes."""
    rng = np.random.default_rng(0)
    S = 4
    groups = []
    for ph in ("prefill", "decode"):
        usage = rng.integers(0, 3, (n, S))
        usage[usage.sum(axis=1) == 0, 0] = 1
        thr = usage.sum(axis=1) * rng.uniform(0.6, 1.4, n)
        groups.append(HorizonGroup(f"m/{ph}", "m", ph, usage, thr, tuple(f"m/{ph}:t{i}" for i in range(n))))
    day = 0.55 + 0.45 * np.sin(np.linspace(0, 2 * np.pi, epochs))
    demand = np.array([[40.0 * day[e] * rng.uniform(0.9, 1.1) for _ in groups] for e in range(epochs)])
    return HorizonProblem(tuple(groups), ("r0", "r1"), tuple(f"1x{k}" for k in "ABCD"), rng.uniform(0.5, 3.0, (2, S)),
                          np.full((epochs, 2, S), 400.0), demand, 1.0, 0.3, {}, ((0, 1),))


def test_an_ilp_stopped_before_its_proof_returns_the_incumbent_with_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The multi-epoch ILP stopped before its proof returns status feasible, the best plan (never dearer than the
    given start), its proven bound and a gap in (0, 1); no "optimal" without the proof. The stop is injected
    (HiGHS stops at its first improving solution, where a deadline would stop it; the covers get 0.05 s), so the
    outcome does not depend on the machine's speed; the wall time against a limit is measured by
    benchmarks/bench_time_limits.py, not asserted here."""
    from planning.timeline import horizon, horizon_ilp
    from planning.timeline.horizon_ilp import schedule_value

    real = horizon_ilp.run_until

    def first_solution(h, seconds):  # type: ignore[no-untyped-def]
        h.setOptionValue("mip_max_improving_sols", 1)
        real(h, seconds)

    monkeypatch.setattr(horizon_ilp, "run_until", first_solution)
    monkeypatch.setattr(horizon, "COVER_LIMIT_S", 0.05)
    p = _long_horizon()
    d = HorizonData.build(p)
    greedy = []  # a start: per epoch enough of each phase's cheapest-per-throughput template in region 0
    for e in range(p.epochs):
        counts = {}
        for gi, g in enumerate(p.groups):
            i = int(np.argmin(d.cost[gi][:, 0] / g.throughput))
            counts[(gi, i, 0)] = math.ceil(p.demand[e, gi] / g.throughput[i])
        greedy.append(counts)
    start_value = schedule_value(d, greedy)
    assert math.isfinite(start_value)
    plan = solve_horizon(p, time_limit_s=3600, start=greedy)  # time never binds: the injected stop does
    assert plan.has_plan and plan.status == "feasible"
    assert plan.gap is not None and 0 < plan.gap < 1 and plan.bound <= plan.value
    assert plan.value <= start_value + 1e-6 * start_value


def test_a_large_ilp_in_its_child_process_gives_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child-process route (ILPs above CHILD_COLUMNS, killed at the deadline) answers like the ILP here: both
    proven optimal, the same value. No limit binds, whatever the machine's load: the horizon's 600 s and the
    covers' (``COVER_LIMIT_S``, 2 s a group by default, of which a child spends ``CHILD_START_S`` = 1.5 s starting;
    a child slower to start than that was killed and the routes parted) are far above what the small instance
    needs. Killing a child at its deadline is asserted by the next test, on an injected clock."""
    from planning.timeline import horizon, horizon_ilp

    monkeypatch.setattr(horizon, "COVER_LIMIT_S", 300.0)
    p = _problem(3, epochs=4)
    here = solve_horizon(p, time_limit_s=600)
    monkeypatch.setattr(horizon_ilp, "CHILD_COLUMNS", 0)
    there = solve_horizon(p, time_limit_s=600)
    assert here.status == "optimal"
    assert (there.status, there.value) == (here.status, pytest.approx(here.value, rel=1e-9))


def test_a_child_ilp_past_its_deadline_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that has not answered when the caller's time is up is killed: status time_limit, no plan, and no
    child of this call left running (other tests' pool workers may live on). The caller's clock is injected
    (``left()`` gives the child 60 s, then reads 0 when the caller waits for the answer), so nothing here depends on
    how fast the machine spawns or solves."""
    import multiprocessing

    from planning.timeline import horizon_ilp

    monkeypatch.setattr(horizon_ilp, "CHILD_COLUMNS", 0)
    p = _long_horizon()
    d = HorizonData.build(p)
    pairs = [(gi, i, r) for gi in range(2) for i in range(200) for r in range(2)]
    reads = iter([60.0])

    def left() -> float:
        return next(reads, 0.0)  # the child's limit first; then the caller's time is up

    before = {c.pid for c in multiprocessing.active_children()}  # e.g. the shared pool's workers of earlier tests
    status, value, _bound, counts = horizon_ilp.pairs_ilp_within(d, pairs, left, 0.0)
    assert status == "time_limit" and not counts and math.isinf(value)
    assert not [c for c in multiprocessing.active_children() if c.is_alive() and c.pid not in before]


def test_the_plans_found_on_the_way_are_the_ilps_own_and_the_last_is_its_answer() -> None:
    """``on_incumbent`` (what a child process streams to its caller) gets each plan HiGHS finds, mapped to counts
    whose schedule costs what HiGHS says; the last one is the finished ILP's answer."""
    from planning.timeline.horizon_ilp import pairs_ilp_within, schedule_value

    found = 0
    for seed in range(6):
        p = _problem(seed)
        d = HorizonData.build(p)
        pairs = [(gi, i, r) for gi, g in enumerate(p.groups) for i in range(len(g.keys))
                 for r in range(len(p.regions)) if math.isfinite(d.cost[gi][i, r])]
        seen: list[tuple] = []
        status, value, bound, counts = _ilp(d, pairs, 120.0, 0.0, on_incumbent=seen.append)
        if status != "optimal":
            continue
        assert seen, f"seed {seed}: no plan reported on the way"
        for answer in seen:
            assert answer[0] == "time_limit" and answer[2] <= answer[1] + 1e-6 * max(1.0, answer[1])
            assert schedule_value(d, answer[3]) == pytest.approx(answer[1], rel=1e-7, abs=1e-6)
        assert seen[-1][1] == pytest.approx(value, rel=1e-9, abs=1e-9) and seen[-1][3] == counts
        assert pairs_ilp_within(d, pairs, lambda: 120.0, 0.0) == (status, value, bound, counts)
        found += 1
    assert found >= 4


def test_a_caller_keeps_the_last_plan_a_child_sent_when_it_stops_waiting() -> None:
    """The caller's side of the child's pipe: the answer when the child finishes; at its deadline, or when the
    child dies, the last plan the child sent (status time_limit); with none sent, no plan."""
    import multiprocessing

    from planning.timeline.horizon_ilp import _child_answer

    first = ("time_limit", 12.0, 9.0, [{(0, 1, 0): 2}])
    second = ("time_limit", 11.0, 9.5, [{(0, 1, 0): 1}])
    done = ("optimal", 10.5, 10.5, [{(0, 2, 0): 1}])

    def answer(messages: list[tuple], close: bool) -> tuple:
        receive, send = multiprocessing.Pipe(duplex=False)
        for m in messages:
            send.send(m)
        if close:
            send.close()
        try:
            return _child_answer(receive, lambda: 0.2)
        finally:
            receive.close()
            if not close:
                send.close()

    assert answer([("incumbent", first), ("incumbent", second), ("done", done)], close=False) == done
    assert answer([("incumbent", first), ("incumbent", second)], close=False) == second  # its deadline
    assert answer([("incumbent", first)], close=True) == first  # the child died after a plan
    assert answer([], close=True) == ("other", math.inf, -math.inf, [])  # died without one
    assert answer([], close=False) == ("time_limit", math.inf, -math.inf, [])  # no plan by the deadline
