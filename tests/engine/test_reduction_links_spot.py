"""The LP reduction with region links (R), free flows between pricing pools and a spot cap (S) stays a relaxation:
its LP and Lagrangian bounds never exceed the full ILP's optimum, the certificate loop over the rows its
thresholds keep reaches that optimum, and the rows make the bound tighter than the LP without them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass, solve_allocation
from planning.allocate.problem import TransferPrice
from planning.allocate.reduce import ColumnBlock, LpSides, Market, lagrangian_bound, lp_reduction

SHAPES = ["1xL4", "2xL4", "1xL40S"]
REGIONS = ["c:a", "c:a/spot", "c:b"]  # a site with its spot pool, and a second site
SPOT = frozenset({"c:a/spot"})


def _instance(seed: int) -> tuple[list[ColumnBlock], dict[str, float], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    prices = np.array([[0.8, 1.6, 1.9], [0.3, 0.6, 0.7], [0.95, np.nan, 2.2]])
    available = rng.integers(2, 7, size=prices.shape).astype(float)
    blocks, demand = [], {}
    for m in range(2):
        for phase in ("prefill", "decode"):
            g = f"m{m}/{phase}"
            n = int(rng.integers(15, 30))
            usage = rng.integers(0, 3, size=(n, len(SHAPES)))
            usage[usage.sum(axis=1) == 0, 0] = 1
            thr = (usage * np.array([1.0, 2.1, 2.6])).sum(axis=1) * rng.uniform(0.6, 1.4, size=n) * 100
            blocks.append(ColumnBlock(g, tuple(SHAPES), usage, thr))
            demand[g] = float(rng.uniform(80, 700))
    return blocks, demand, prices, available


def _problem(blocks: list[ColumnBlock], demand: dict[str, float], prices: np.ndarray, available: np.ndarray,
             cap: float, masks: list[np.ndarray] | None = None) -> AllocationProblem:
    templates = []
    for bi, b in enumerate(blocks):
        for i in range(len(b.throughput)):
            if masks is not None and not masks[bi][i]:
                continue
            usage = {SHAPES[k]: int(n) for k, n in enumerate(b.usage[i]) if n > 0}
            templates.append(TemplateOption(id=f"{b.group}:{i}", group=b.group, usage=usage,
                                            throughput={b.group: float(b.throughput[i])}))
    offers = [Offer(r, s, float(prices[ri, k]), int(available[ri, k]))
              for ri, r in enumerate(REGIONS) for k, s in enumerate(SHAPES) if not np.isnan(prices[ri, k])]
    links = tuple((f"m{m}/prefill", f"m{m}/decode") for m in range(2))
    transfers = tuple(TransferPrice(f"m{m}/prefill", a, b, 0.0) for m in range(2)
                      for a, b in (("c:a", "c:a/spot"), ("c:a/spot", "c:a")))
    return AllocationProblem(templates=tuple(templates), offers=tuple(offers),
                             classes=tuple(WorkloadClass(g, g, d) for g, d in demand.items()), mip_rel_gap=1e-9,
                             prune=False, links=links, transfers=transfers,
                             spot_cap=dict.fromkeys(demand, cap), spot_regions=SPOT)


def _reduce(blocks, demand, prices, available, cap, rows=True):  # type: ignore[no-untyped-def]
    extra = {}
    if rows:
        extra = {"spot_cap": dict.fromkeys(demand, cap), "spot_regions": SPOT,
                 "links": [(f"m{m}/prefill", f"m{m}/decode") for m in range(2)],
                 "transfers": {(m, a, b): 0.0 for m in range(2) for a, b in (("c:a", "c:a/spot"), ("c:a/spot", "c:a"))}}
    return lp_reduction(blocks, Market({s: k for k, s in enumerate(SHAPES)}, REGIONS, prices, available), demand,
                        K=0.0, sides=LpSides(**extra))


@pytest.mark.parametrize("cap", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("seed", range(8))
def test_links_and_spot_cap_in_the_lp_keep_the_certificate_exact(seed: int, cap: float) -> None:
    blocks, demand, prices, available = _instance(seed)
    full = solve_allocation(_problem(blocks, demand, prices, available, cap))
    red = _reduce(blocks, demand, prices, available, cap)
    if full.status == "infeasible":
        assert not red.feasible_lp or red.z_lp > 0  # nothing to certify; the LP may still be feasible
        return
    assert full.status == "optimal"
    dem = [demand[b.group] for b in blocks]
    lag = lagrangian_bound(red, dem)
    assert red.z_lp <= full.total_per_hour + 1e-6
    assert lag.z_lb <= full.total_per_hour + 1e-6
    plain = _reduce(blocks, demand, prices, available, cap, rows=False)
    assert red.z_lp >= plain.z_lp - 1e-6  # the rows only tighten the relaxation
    target = lag.z_lb * 1.003
    for _ in range(8):
        masks = red.select(lag.thresholds(red, dem, target), blocks)
        sub = solve_allocation(_problem(blocks, demand, prices, available, cap, masks))
        if sub.has_plan and sub.total_per_hour <= target + 1e-9:
            break
        target = sub.total_per_hour if sub.has_plan else lag.z_lb + 4 * (target - lag.z_lb)
    assert sub.total_per_hour == pytest.approx(full.total_per_hour, rel=1e-7, abs=1e-7)


def test_the_rows_close_most_of_the_gap_on_a_capped_instance() -> None:
    """With a cap of 0 nothing may run on the cheap spot pool: the LP without (S) prices everything at spot."""
    blocks, demand, prices, available = _instance(3)
    available = available * 10
    full = solve_allocation(replace(_problem(blocks, demand, prices, available, 0.0)))
    assert full.status == "optimal"
    with_rows = _reduce(blocks, demand, prices, available, 0.0).z_lp
    without = _reduce(blocks, demand, prices, available, 0.0, rows=False).z_lp
    assert without < 0.6 * full.total_per_hour < with_rows <= full.total_per_hour + 1e-6
