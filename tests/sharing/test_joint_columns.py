"""The joint sharing master's pricing oracles against brute force: the covering knapsack that prices whole-group
plans, and the pattern knapsack asked for a set above a threshold (a "no" must mean none exists, or column
generation stops early and its LP value is no bound)."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from planning.sharing.joint_columns import Duals, best_pattern
from planning.sharing.joint_groups import cheapest_cover
from planning.sharing.joint_model import JointArrays
from planning.sharing.packing import fits
from tests.sharing.test_joint import _instance


@pytest.mark.parametrize("seed", range(40))
def test_cheapest_cover_equals_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 5)
    cost = np.array([rng.choice([math.inf, *[rng.uniform(0.5, 5.0)] * 5]) for _ in range(n)])
    thr = np.array([rng.uniform(0.1, 3.0) for _ in range(n)])
    demand = rng.uniform(0.05, 6.0)
    value, counts = cheapest_cover(cost, thr, demand)
    best = math.inf
    for ns in itertools.product(*[range(math.ceil(demand / t) + 1) for t in thr]):
        if sum(k * t for k, t in zip(ns, thr, strict=True)) >= demand - 1e-9:
            c = sum(k * c_ for k, c_ in zip(ns, cost, strict=True) if k)
            best = min(best, c)
    assert value == pytest.approx(best, rel=1e-9) if math.isfinite(best) else math.isinf(value)
    if math.isfinite(value):  # the plan it returns covers the demand at the value it reports
        assert sum(thr[j] * k for j, k in counts) >= demand - 1e-9
        assert sum(cost[j] * k for j, k in counts) == pytest.approx(value)


@pytest.mark.parametrize("seed", range(20))
def test_pattern_pricing_finds_a_set_above_the_threshold_whenever_one_exists(seed: int) -> None:
    inst, _extra = _instance(seed)
    a = JointArrays.build(inst)
    rng = np.random.default_rng(seed)
    du = Duals.zero(a)
    du.pi[:] = rng.uniform(0.0, 1.5, len(inst.shareable))
    for t, node in enumerate(inst.types):
        allowed = a.fit_on[t]
        best = max((float(du.pi[list(s)].sum()) for k in range(1, len(allowed) + 1)
                    for s in itertools.combinations(allowed, k) if fits([inst.shareable[i] for i in s], node)),
                   default=0.0)
        for need in (best - 0.3, best - 1e-3, best + 1e-3):
            gain, chosen = best_pattern(a, du, t, allowed, need=need)
            if best > need:
                assert gain > need and fits([inst.shareable[i] for i in chosen], node)
            else:
                assert gain <= need + 1e-9


@pytest.mark.parametrize("seed", range(12))
def test_column_packing_equals_the_compact_packing_milp(seed: int) -> None:
    """The shared part by column generation (large scenarios) and by the compact MILP: the same optimum, and the
    bound it reports is below its plan."""
    from planning.sharing.joint_plan import column_packing
    from planning.sharing.packing import exact_packing

    inst, _extra = _instance(seed)
    models = [m for m in inst.shareable if any(fits([m], t) for t in inst.types)]
    col = column_packing(models, inst.types, time_limit_s=60)
    mip = exact_packing(models, inst.types, time_limit_s=60, mip_rel_gap=0.0)
    if not mip.feasible:  # availability cannot hold every model shared: both say so
        assert mip.status == "infeasible" and col.status == "infeasible" and not col.feasible
        return
    assert col.status == "optimal" and col.gap == 0.0
    assert col.cost_per_hour == pytest.approx(mip.cost_per_hour, rel=1e-7, abs=1e-9)
    assert col.bound_per_hour is not None and col.bound_per_hour <= col.cost_per_hour + 1e-9
    for node in col.nodes:
        assert fits([m for m in models if m.id in node.models], next(t for t in inst.types if t.key == node.type))


@pytest.mark.parametrize("fewer", [0, 1])
@pytest.mark.parametrize("seed", range(12))
def test_packing_lp_node_prices_bound_the_dearer_packing(seed: int, fewer: int) -> None:
    """The packing LP's node prices (its availability duals) are what ``joint_contend`` charges the dedicated
    part: with those offers dearer by their price, every packing costs at least z_LP + Σ price·available (the
    LP's duals stay feasible). Checked against the compact MILP's optimum at the dearer prices, with the seeded
    availability and one node fewer of each type (more binding rows: 3 of the 24 cases have prices)."""
    from dataclasses import replace

    from planning.sharing.joint_plan import packing_lp
    from planning.sharing.packing import exact_packing

    inst, _extra = _instance(seed)
    inst = replace(inst, types=tuple(replace(t, available=max(1, t.available - fewer)) for t in inst.types))
    models = [m for m in inst.shareable if any(fits([m], t) for t in inst.types)]
    z, prices, lp_nodes = packing_lp(models, inst.types, time_limit_s=60)
    mip = exact_packing(models, inst.types, time_limit_s=60, mip_rel_gap=0.0)
    if not mip.feasible:
        return
    assert z <= mip.cost_per_hour + 1e-9
    avail = {tuple(t.key.split(" ", 1)): t.available for t in inst.types}
    assert all(p >= 0 for p in prices.values()) and set(prices) <= set(avail)
    assert all(0 <= n <= avail[key] + 1e-9 for key, n in lp_nodes.items())
    dearer = [replace(t, price_per_hour=t.price_per_hour + prices.get(tuple(t.key.split(" ", 1)), 0.0))
              for t in inst.types]
    at = exact_packing(models, dearer, time_limit_s=60, mip_rel_gap=0.0)
    shifted = z + sum(p * avail[key] for key, p in prices.items())
    assert at.status == "optimal" and shifted <= at.cost_per_hour + 1e-7
    z_dearer, _p, _n = packing_lp(models, dearer, time_limit_s=60, extra=None)
    assert shifted <= z_dearer + 1e-7  # the LP at the dearer prices agrees
