"""LP reduced-cost fixing is lossless: the reduced solve equals the full ILP on seeded random instances."""

from __future__ import annotations

import numpy as np
import pytest

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass, solve_allocation
from planning.allocate.reduce import ColumnBlock, LpSides, Market, lp_reduction


def _instance(seed: int) -> tuple[list[ColumnBlock], dict[str, float], list[str], list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = ["1xL4", "2xL4", "1xL40S", "1xA10G"]
    regions = ["a", "b"]
    prices = np.array([[0.8, 1.6, 1.9, 1.0], [0.9, np.nan, 2.1, 1.1]])
    available = rng.integers(2, 9, size=prices.shape).astype(float)
    blocks, demand = [], {}
    for g in range(3):
        n = int(rng.integers(30, 70))
        usage = rng.integers(0, 3, size=(n, len(shapes)))
        usage[usage.sum(axis=1) == 0, 0] = 1
        thr = (usage * np.array([1.0, 2.1, 2.6, 1.2])).sum(axis=1) * rng.uniform(0.6, 1.4, size=n) * 100
        blocks.append(ColumnBlock(f"m{g}/decode", tuple(shapes), usage, thr))
        demand[f"m{g}/decode"] = float(rng.uniform(50, 900))
    return blocks, demand, shapes, regions, prices, available


def _problem(blocks, demand, shapes, regions, prices, available, masks=None) -> AllocationProblem:  # type: ignore[no-untyped-def]
    templates = []
    for bi, b in enumerate(blocks):
        for i in range(len(b.throughput)):
            if masks is not None and not masks[bi][i]:
                continue
            usage = {shapes[k]: int(n) for k, n in enumerate(b.usage[i]) if n > 0}
            templates.append(TemplateOption(id=f"{b.group}:{i}", group=b.group, usage=usage,
                                            throughput={b.group: float(b.throughput[i])}))
    offers = [Offer(region=r, shape=s, price_per_hour=float(prices[ri, k]), available=int(available[ri, k]))
              for ri, r in enumerate(regions) for k, s in enumerate(shapes) if not np.isnan(prices[ri, k])]
    classes = [WorkloadClass(id=g, group=g, rate=d) for g, d in demand.items()]
    return AllocationProblem(templates=tuple(templates), offers=tuple(offers), classes=tuple(classes), K=0.1,
                             mip_rel_gap=1e-9, prune=False)


@pytest.mark.parametrize("seed", range(8))
def test_reduced_ilp_equals_full_ilp(seed: int) -> None:
    blocks, demand, shapes, regions, prices, available = _instance(seed)
    full = solve_allocation(_problem(blocks, demand, shapes, regions, prices, available))
    red = lp_reduction(blocks, Market({s: k for k, s in enumerate(shapes)}, regions, prices, available), demand, K=0.1)
    assert full.status == "optimal"  # the seeds are chosen feasible; the comparison must really happen
    assert red.feasible_lp
    assert red.z_lp <= full.total_per_hour + 1e-6  # the LP (with cardinality cuts) is a relaxation
    threshold = 0.0
    for _ in range(6):
        masks = red.select(threshold, blocks)
        sub = solve_allocation(_problem(blocks, demand, shapes, regions, prices, available, masks))
        bound = red.z_lp + red.min_excluded()
        if sub.has_plan and sub.total_per_hour <= bound + 1e-7:
            break
        threshold = (sub.total_per_hour - red.z_lp) if sub.has_plan else max(threshold * 4, 1.0)
    assert sub.total_per_hour == pytest.approx(full.total_per_hour, rel=1e-7, abs=1e-7)
    # every excluded column really is priced out: its reduced cost exceeds the certified gap
    assert red.min_excluded() >= sub.total_per_hour - red.z_lp - 1e-7


@pytest.mark.parametrize("seed", range(4))
def test_served_lp_bounds_the_ilp_and_prices_out_columns(seed: int) -> None:
    blocks, demand, shapes, regions, prices, available = _instance(seed)
    demand = {g: 5 * d for g, d in demand.items()}  # more than the pool serves: α < 1
    full_problem = _problem(blocks, demand, shapes, regions, prices, available)
    from dataclasses import replace

    full = solve_allocation(replace(full_problem, objective="served", budget_per_hour=15.0))
    red = lp_reduction(blocks, Market({s: k for k, s in enumerate(shapes)}, regions, prices, available), demand,
                       K=0.1, sides=LpSides(served=True, budget=15.0))
    assert full.has_plan and full.alpha is not None
    assert -red.z_lp >= full.alpha - 1e-7  # α_LP ≥ α_ILP
    threshold = 1e-6
    for _ in range(6):
        masks = red.select(threshold, blocks)
        sub = solve_allocation(replace(_problem(blocks, demand, shapes, regions, prices, available, masks),
                                       objective="served", budget_per_hour=15.0))
        if sub.has_plan and -(sub.alpha or 0.0) <= red.z_lp + red.min_excluded() + 1e-9:
            break
        threshold = (-(sub.alpha or 0.0) - red.z_lp) if sub.has_plan else threshold * 4
    assert sub.alpha == pytest.approx(full.alpha, abs=1e-6)


def _running(blocks: list[ColumnBlock], regions: list[str], prices: np.ndarray, seed: int) -> dict[tuple[str, str], int]:
    """A few running instances (the previous epoch's plan): cheap-per-throughput rows, in regions selling them."""
    rng = np.random.default_rng(1000 + seed)
    out: dict[tuple[str, str], int] = {}
    for b in blocks:
        for i in rng.choice(len(b.throughput), size=3, replace=False).tolist():
            r = int(rng.integers(0, len(regions)))
            if np.isnan(prices[r][b.usage[i] > 0]).any():
                continue
            out[(f"{b.group}:{i}", regions[r])] = int(rng.integers(1, 3))
    return out


def _with_running(blocks: list[ColumnBlock], running: dict[tuple[str, str], int]) -> list[ColumnBlock]:
    from dataclasses import replace

    out = []
    for b in blocks:
        mine = tuple((int(t.split(":")[1]), r, n) for (t, r), n in running.items() if t.split(":")[0] == b.group)
        keep = np.zeros(len(b.throughput), dtype=bool)
        keep[[i for i, _r, _n in mine]] = True
        out.append(replace(b, keep_always=keep, running=mine))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("K", [0.5, 2.0])
def test_reduction_with_running_instances_is_a_relaxation_and_certifies_the_optimum(seed: int, K: float) -> None:
    """Running instances cost p (not (1 + K)·p) up to their count: the LP must price them so, or its bound
    exceeds the true optimum and the certificate accepts a worse plan (the timeline's epochs > 0)."""
    from dataclasses import replace

    blocks, demand, shapes, regions, prices, available = _instance(seed)
    running = _running(blocks, regions, prices, seed)
    assert running
    full = solve_allocation(replace(_problem(blocks, demand, shapes, regions, prices, available), current=running, K=K))
    assert full.status == "optimal"
    blocks = _with_running(blocks, running)
    red = lp_reduction(blocks, Market({s: k for k, s in enumerate(shapes)}, regions, prices, available), demand, K=K)
    assert red.feasible_lp
    assert red.z_lp <= full.total_per_hour + 1e-6
    threshold = 0.0
    for _ in range(6):
        masks = red.select(threshold, blocks)
        sub = solve_allocation(replace(_problem(blocks, demand, shapes, regions, prices, available, masks),
                                       current=running, K=K))
        bound = red.z_lp + red.min_excluded()
        if sub.has_plan and sub.total_per_hour <= bound + 1e-7:
            break
        threshold = (sub.total_per_hour - red.z_lp) if sub.has_plan else max(threshold * 4, 1.0)
    assert sub.total_per_hour == pytest.approx(full.total_per_hour, rel=1e-7, abs=1e-7)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("K, running", [(0.1, False), (0.5, True), (2.0, True)])
def test_lagrangian_fixing_certifies_the_full_ilp_optimum(seed: int, K: float, running: bool) -> None:
    """Per-group integer cover bounds (z_LB ≥ z_LP) and their thresholds lose nothing: the ILP over the rows
    they keep, re-solved at its own value until it lands under the target, equals the full ILP."""
    from dataclasses import replace

    from planning.allocate.reduce import lagrangian_bound

    blocks, demand, shapes, regions, prices, available = _instance(seed)
    current = _running(blocks, regions, prices, seed) if running else {}
    if running:
        blocks = _with_running(blocks, current)
    full = solve_allocation(replace(_problem(blocks, demand, shapes, regions, prices, available), current=current, K=K))
    assert full.status == "optimal"
    red = lp_reduction(blocks, Market({s: k for k, s in enumerate(shapes)}, regions, prices, available), demand, K=K)
    dem = [demand[b.group] for b in blocks]
    lag = lagrangian_bound(red, dem)
    assert red.z_lp - 1e-9 <= lag.z_lb <= full.total_per_hour + 1e-6
    target = lag.z_lb * 1.003
    for _ in range(6):
        masks = red.select(lag.thresholds(red, dem, target), blocks)
        sub = solve_allocation(replace(_problem(blocks, demand, shapes, regions, prices, available, masks),
                                       current=current, K=K))
        if sub.has_plan and sub.total_per_hour <= target + 1e-9:
            break
        target = sub.total_per_hour if sub.has_plan else lag.z_lb + 4 * (target - lag.z_lb)
    assert sub.total_per_hour == pytest.approx(full.total_per_hour, rel=1e-7, abs=1e-7)



def test_the_reduction_holds_its_deadline() -> None:
    """The LP's column generation checks the deadline between rounds, and the cover ILPs share one budget: at
    the deadline the LP stops with Cancelled, and a spent budget leaves the LP's bound (never a wrong one)."""
    import time

    from planning.allocate.reduce import lagrangian_bound
    from planning.context import Cancelled, Deadline

    blocks, demand, shapes, regions, prices, available = _instance(3)
    index = {s: k for k, s in enumerate(shapes)}
    expired = Deadline(0.5)
    time.sleep(0.6)
    with pytest.raises(Cancelled):
        lp_reduction(blocks, Market(index, regions, prices, available), demand, K=0.1, cancel=expired)
    red = lp_reduction(blocks, Market(index, regions, prices, available), demand, K=0.1, cancel=Deadline(600.0))
    dem = [demand[b.group] for b in blocks]
    full = lagrangian_bound(red, dem)
    spent = lagrangian_bound(red, dem, budget_s=0.0)
    assert spent.z_lb == red.z_lp <= full.z_lb
    assert spent.thresholds(red, dem, full.z_lb * 1.01) == [full.z_lb * 1.01 - red.z_lp] * len(dem)
