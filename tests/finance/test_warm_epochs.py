"""Warm-started epoch solves give the cold answers (issue 26): a known plan's value caps the certificate's targets
(``certify.solve_certified(upper=...)``, fed by ``proof.Proof.upper``) without changing the certified value, even
when the hint is wrong; and Kelley's per-pool box (``cuts.next_prices``) keeps every price inside it."""

from __future__ import annotations

import math
import random

import pytest

from tests.finance.conftest import small_sizing_inputs


def test_upper_hint_gives_the_cold_certified_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each epoch at random pool prices and sizes: the certified solve with a hint (the optimum itself, 2 % and
    40 % above it, and a wrong one at half of it) returns the cold solve's value, certified as the cold one
    (this small instance does not make an attempt fail, so the cap path itself is not exercised here)."""
    import planning.allocate.certify as certify_module
    from planning.finance.epochs import epoch_resolved

    monkeypatch.setattr(certify_module, "REDUCE_MIN_TEMPLATES", 0)  # the reduced path on a small library
    resolved, sets, epochs, cands = small_sizing_inputs()
    keys = sorted({(c.pool, c.shape) for c in cands})
    rng = random.Random(26)
    for trial in range(6):
        pools = {k: (rng.choice([0.0, rng.uniform(0.05, 1.5)]), rng.randint(0, 4)) for k in keys}
        ep = epochs[trial % len(epochs)]
        res = epoch_resolved(resolved, ep, cands, pools, zero_pools=True)
        cold = certify_module.solve_certified(res, sets)
        assert cold.result.has_plan
        opt = float(cold.result.total_per_hour or 0.0)
        for factor in (1.0, 1.02, 1.4, 0.5):
            warm = certify_module.solve_certified(res, sets, upper=opt * factor)
            assert warm.result.has_plan
            assert float(warm.result.total_per_hour or 0.0) == pytest.approx(opt, rel=1e-9, abs=1e-9)
            assert warm.stats.get("reduction_certified") == cold.stats.get("reduction_certified")


def test_proof_upper_is_a_feasible_value_of_the_epoch() -> None:
    """``Proof.upper``: the cheapest plan seen that fits the pools, priced there, is ≥ the epoch's optimum at
    those pools (a feasible plan's value), and None when no plan seen fits."""
    from planning.allocate.certify import solve_certified
    from planning.finance.epochs import Horizon, epoch_resolved, solve_epochs
    from planning.finance.proof import Proof

    resolved, sets, epochs, cands = small_sizing_inputs()
    keys = sorted({(c.pool, c.shape) for c in cands})
    caps = {k: sum(c.max_count for c in cands if (c.pool, c.shape) == k) for k in keys}
    proof = Proof()
    full = {k: (0.4, caps[k]) for k in keys}
    _plans, allocs, _used = solve_epochs(Horizon(resolved, sets, epochs, cands), full, lambda _m: None, proof=proof)
    proof.record(allocs, 1e-6, prices={k: p for k, (p, _n) in full.items()})
    rng = random.Random(3)
    for e, ep in enumerate(epochs):
        pools = {k: (rng.uniform(0.0, 1.0), caps[k]) for k in keys}
        hint = proof.upper(e, pools)
        assert hint is not None and math.isfinite(hint)
        opt = float(solve_certified(epoch_resolved(resolved, ep, cands, pools, zero_pools=True), sets)
                    .result.total_per_hour or 0.0)
        assert hint >= opt * (1 - 1e-9)
        used = {k: n for p in proof.points if p.epoch == e for k, n in p.use.items() if n > 0}
        if used:  # pools too small for every plan seen: nothing to offer
            assert proof.upper(e, {k: (0.1, 0) for k in keys}) is None


def test_next_prices_keeps_each_pool_in_its_own_box() -> None:
    """Kelley's step with a per-pool radius: every price lies within its pool's radius of the centre."""
    from planning.finance.cuts import PlanPoint, next_prices

    a, b = ("r/reserved", "1xL4"), ("r/reserved", "1xL40S")
    hours = [6.0, 6.0, 12.0]
    candidates = [("c0", a, 4, 0.5 * 24), ("c1", b, 2, 1.3 * 24)]
    rng = random.Random(5)
    points = [PlanPoint(e, rng.uniform(5, 20), {a: rng.randint(0, 4), b: rng.randint(0, 2)})
              for e in range(3) for _ in range(6)]
    centre = [{a: 0.5, b: 1.3} for _ in hours]
    radius = {a: 0.1, b: 0.4}
    out = next_prices(points, hours, candidates, {}, centre, radius)
    assert out is not None
    prices, model = out
    assert math.isfinite(model)
    for e in range(3):
        for key in (a, b):
            assert abs(prices[e][key] - centre[e][key]) <= radius[key] + 1e-9
