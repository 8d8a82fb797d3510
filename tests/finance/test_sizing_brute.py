"""The two-stage commitment sizing equals brute force: on seeded synthetic epochs (every first-stage R and every
second-stage plan enumerated), and through the public interfaces on a small scenario (R enumerated, each epoch
planned by `planning solve` with R held)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from planning.allocate import AllocationProblem, Offer, solve_allocation
from planning.allocate.brute import brute_force
from planning.allocate.synthetic import Synthetic, random_problem
from planning.finance.commitments import Candidate, stack
from planning.pools import Terms


def _epochs(seed: int) -> tuple[list[AllocationProblem], list[float], list[Candidate]]:
    base = random_problem(seed, Synthetic(groups=2, templates_per_group=3, regions=1, shapes=3,
                          max_available=2), mip_rel_gap=1e-9)
    shape = base.offers[0].shape
    pool = Offer("cloud:r0/reserved", shape, 0.0, seed % 2)  # a held node in odd seeds
    factors = [0.4, 1.0, 0.7][: 2 + seed % 2]
    problems = [replace(base, offers=(*base.offers, pool),
                        classes=tuple(replace(q, rate=q.rate * f) for q in base.classes)) for f in factors]
    hours = [8.0 + 4 * e for e in range(len(factors))]
    hourly = base.offers[0].price_per_hour * (0.45 + 0.15 * (seed % 3))
    cand = Candidate("reservations[0]", 0, "cloud:r0", shape, 3, Terms(1.0, 0.0, hourly, "no_upfront", "test"),
                     base.offers[0].price_per_hour)
    return problems, hours, [cand]


def _oracle(problems: list[AllocationProblem], hours: list[float], cands: list[Candidate]) -> float | None:
    """min over R of Σ_j a_j R_j + Σ_e w_e · (brute-force optimum of epoch e with the pool at held + R)."""
    best: float | None = None
    for combo in itertools.product(*(range(c.max_count + 1) for c in cands)):
        total = sum(c.effective_hourly * sum(hours) * r for c, r in zip(cands, combo, strict=True))
        for p, w in zip(problems, hours, strict=True):
            extra = {(c.pool, c.shape): r for c, r in zip(cands, combo, strict=True)}
            offers = tuple(replace(o, available=o.available + extra.get((o.region, o.shape), 0)) for o in p.offers)
            b = brute_force(replace(p, offers=offers), 100_000)
            if not b.feasible:
                total = math.inf
                break
            total += w * float(b.cost or 0.0)
        if math.isfinite(total) and (best is None or total < best):
            best = total
    return best


@pytest.mark.parametrize("seed", range(8))
def test_stacked_two_stage_equals_brute_force(seed: int) -> None:
    problems, hours, cands = _epochs(seed)
    expected = _oracle(problems, hours, cands)
    r = solve_allocation(stack(problems, hours, cands))
    if expected is None:
        assert r.status == "infeasible"
        return
    assert r.status == "optimal"
    assert r.total_per_hour == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_the_seeds_exercise_commitments() -> None:
    """Not every answer is 'reserve nothing': some seeds commit, some are feasible only with the pool."""
    committed = 0
    for seed in range(8):
        problems, hours, cands = _epochs(seed)
        r = solve_allocation(stack(problems, hours, cands))
        committed += bool(r.commitments)
    assert committed >= 2


def _epoch_cost_via_cli(scenario: dict[str, Any], factor: float, held: dict[str, int], tmp: Path) -> float | None:
    """One epoch through `planning solve`: demand × factor, the reservations held at R (K = 0), no horizon."""
    from planning.cli import main

    s = json.loads(json.dumps(scenario))
    s["models"][0]["demand"]["rate_rps"] *= factor
    s.pop("finance")
    s["options"]["K"] = 0.0
    s["reservations"] = [{**r, "status": "held", "count": held[r["shape"]]} for r in s["reservations"]
                         if held[r["shape"]] > 0]
    path = tmp / "epoch.json"
    path.write_text(json.dumps(s))
    out = tmp / "epoch-plan.json"
    code = main(["solve", str(path), "--json", "--out", str(out)])
    if code == 1:
        return None
    assert code == 0
    plan = json.loads(out.read_text())
    return float(plan["provisioning_per_hour"]) + float(plan["committed_per_hour"])


@pytest.mark.slow
def test_cli_commitments_equal_enumeration_through_the_cli(small: dict[str, Any], tmp_path: Path) -> None:
    """`planning solve FILE --json` sizes the reservations; enumerating every R and planning each epoch with R
    held (through the same CLI) finds the same total over the horizon and the same commitments."""
    from planning.cli import main

    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(small))
    out = tmp_path / "plan.json"
    assert main(["solve", str(path), "--json", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    sizing = plan["finance"]["sizing"]
    assert sizing["status"] == "optimal"
    factors = small["finance"]["profile"]["factors"]
    weight = 365.0 * small["finance"]["profile"]["epoch_hours"]
    best: tuple[float, dict[str, int]] | None = None
    caps = {r["shape"]: r["count"] for r in small["reservations"]}
    for combo in itertools.product(*(range(c + 1) for c in caps.values())):
        held = dict(zip(caps, combo, strict=True))
        total = 0.0
        for f in factors:
            cost = _epoch_cost_via_cli(small, f, held, tmp_path)
            if cost is None:
                total = math.inf
                break
            total += weight * cost
        if best is None or total < best[0]:
            best = (total, held)
    assert best is not None
    assert sizing["total_usd"] == pytest.approx(best[0], rel=1e-6)
    signed = {c["shape"]: c["count"] for c in plan["commitments"] if c["status"] == "sign"}
    assert {k: v for k, v in best[1].items() if v} == signed
    assert set(plan["cost_by_pricing_kind"]) == {"owned", "reserved", "on_demand", "spot"}


def test_pool_priced_relaxation_is_a_lower_bound_for_any_prices() -> None:
    """The Lagrangian bound the sizing tightens (``proof.kelley``): for any pool prices μ ≥ 0 per epoch (Σ_e μ
    below, at and above the candidate's cost), the relaxation's optimum minus C(μ) is at most the two-stage
    optimum found by brute force."""
    import random

    from planning.finance.relaxation import pool_constant

    checked = 0
    for seed in range(8):
        problems, hours, cands = _epochs(seed)
        expected = _oracle(problems, hours, cands)
        if expected is None:  # an infeasible seed has no optimum to bound
            continue
        rng = random.Random(seed)
        cand = cands[0]
        held = {(cand.pool, cand.shape): seed % 2}
        a = cand.effective_hourly * sum(hours)
        for trial in range(4):
            raw = [rng.random() for _ in hours]
            total = a * (0.5 + trial * 0.25)
            mu = {(cand.pool, cand.shape, e): total * r / sum(raw) for e, r in enumerate(raw)}
            relaxed = solve_allocation(stack(problems, hours, cands, pool_prices=mu))
            assert relaxed.status == "optimal"
            bound = float(relaxed.total_per_hour or 0.0) - pool_constant(mu, held, cands, sum(hours))
            assert bound <= expected * (1 + 1e-9) + 1e-9
            checked += 1
    assert checked >= 16
