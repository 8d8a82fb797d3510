"""The Benders cuts of the sizing (``proof.Proof.benders``, from ``certify.AvailabilityDuals``) against exact
second-stage values: on the small seeded scenario, each epoch solved at random pool prices and availabilities
(and at pools free at a point) gives a cut z_e(K) ≥ low − π·K that holds at every K of the grid, where z_e(K) is
the ILP over every template with the pools free at K; and the cuts are not vacuous."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from planning.scenario import Scenario


def _inputs() -> tuple[Any, Any, Any, Any]:
    from planning.api import engine_context
    from planning.finance.commitments import candidates_of, epochs_of
    from planning.resolve import resolve_scenario
    from planning.templates.sets import build_template_sets
    from tests.finance.conftest import SMALL

    s = Scenario.from_dict(SMALL)
    ctx = engine_context()
    resolved = resolve_scenario(s, ctx.catalog)
    return resolved, build_template_sets(ctx, resolved), epochs_of(s), candidates_of(s, ctx.catalog)


def _exact(resolved: Any, sets: Any, epoch: Any, cands: Any, k: dict[tuple[str, str], int]) -> float:
    """z_e(K): the epoch's ILP over every template with each pool free at K nodes (gap 1e-9)."""
    from dataclasses import replace

    from planning.allocate.certify import allocation_problem
    from planning.allocate.solve import solve_allocation
    from planning.finance.epochs import epoch_resolved

    res = epoch_resolved(resolved, epoch, cands, {p: (0.0, n) for p, n in k.items()})
    alloc = solve_allocation(replace(allocation_problem(res, sets), mip_rel_gap=1e-9))
    assert alloc.status == "optimal"
    return float(alloc.total_per_hour or 0.0)


def test_benders_cuts_hold_at_every_pool_size(monkeypatch: pytest.MonkeyPatch) -> None:
    import planning.allocate.certify as certify_module
    from planning.finance import epochs as epochs_module
    from planning.finance import proof as proof_module

    monkeypatch.setattr(certify_module, "REDUCE_MIN_TEMPLATES", 0)  # the reduced path, whose duals give cuts
    resolved, sets, epochs, cands = _inputs()
    keys = sorted({(c.pool, c.shape) for c in cands})
    caps = {k: sum(c.max_count for c in cands if (c.pool, c.shape) == k) for k in keys}
    grid = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(range(caps[k] + 1) for k in keys))]
    rng = random.Random(7)
    proof = proof_module.Proof()
    settings: list[dict[tuple[str, str], tuple[float, int]]] = [
        {k: (0.0, 0) for k in keys},  # R = 0: every pool offered with no node
        {k: (0.0, caps[k]) for k in keys},  # every pool free and full
        {k: (0.0, rng.randint(0, caps[k])) for k in keys},  # an exact point of the cut master
        {k: (rng.uniform(0.1, 1.5), caps[k]) for k in keys},  # Kelley: pools priced, at their caps
        {k: (rng.uniform(0.1, 1.5), caps[k]) for k in keys},
    ]
    for pools in settings:
        epochs_module.solve_epochs(epochs_module.Horizon(resolved, sets, epochs, cands), pools, lambda _m: None,
                                   proof=proof)
    assert proof.benders_cuts == len(settings) * len(epochs)
    exact = {(e, tuple(k.values())): _exact(resolved, sets, ep, cands, k) for e, ep in enumerate(epochs) for k in grid}
    useful = 0
    for i, cut in enumerate(proof.cuts):
        for k in grid:
            z = exact[(cut.epoch, tuple(k.values()))]
            assert cut.low - sum(cut.prices.get(p, 0.0) * n for p, n in k.items()) <= z * (1 + 1e-7) + 1e-7
        pools = settings[i // len(epochs)]
        if all(p == 0.0 for p, _n in pools.values()):  # pools free at a point: tight there up to the certificate
            point = {k: n for k, (_p, n) in pools.items()}
            z = exact[(cut.epoch, tuple(point.values()))]
            useful += cut.low - sum(cut.prices.get(p, 0.0) * n for p, n in point.items()) >= 0.5 * z > 0
    assert useful >= len(epochs)  # not vacuous: many come within half of z_e at their point (the small
    # instance's integer gap is wide; the enterprise epochs' is ~0.3 %)


def test_epochs_solved_two_at_a_time_give_the_serial_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass with two epochs at once (threads) returns the same plans and the same cuts, in the same order."""
    import planning.allocate.certify as certify_module
    from planning.finance import epochs as epochs_module
    from planning.finance import proof as proof_module

    monkeypatch.setattr(certify_module, "REDUCE_MIN_TEMPLATES", 0)
    resolved, sets, epochs, cands = _inputs()
    pools = {(c.pool, c.shape): (0.3, c.max_count) for c in cands}
    answers = []
    for threads in (1, 2):
        monkeypatch.setattr(epochs_module, "EPOCH_THREADS", threads)
        proof = proof_module.Proof()
        _plans, allocs, _used = epochs_module.solve_epochs(epochs_module.Horizon(resolved, sets, epochs, cands), pools,
                                                           lambda _m: None, proof=proof)
        answers.append(([a.total_per_hour for a in allocs], [dict(a.counts) for a in allocs], proof.cuts))
    assert answers[0] == answers[1]
    assert len(answers[0][2]) == len(epochs)
