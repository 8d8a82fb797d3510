"""LP reduced-cost fixing is lossless: the reduced solve equals the full ILP on seeded random instances."""

from __future__ import annotations

import numpy as np
import pytest

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass, solve_allocation
from planning.allocate.reduce import ColumnBlock, lp_reduction


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
    red = lp_reduction(blocks, {s: k for k, s in enumerate(shapes)}, regions, prices, available, demand, K=0.1)
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
    red = lp_reduction(blocks, {s: k for k, s in enumerate(shapes)}, regions, prices, available, demand, K=0.1,
                       served=True, budget=15.0)
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
