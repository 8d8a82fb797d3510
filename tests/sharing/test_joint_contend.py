"""Contended nodes when the shared plan is solved part by part (``planning.sharing.joint_contend``): the
Lagrangian bound never exceeds the brute-force optimum over every split of the availability, the plan never
goes below it, and "optimal" means equal to it; through the API and the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from planning import api
from planning.cli import main
from planning.offers import resolve_offers
from planning.scenario import Scenario
from planning.sharing import solve_shared
from planning.sharing.joint_contend import contended, priced
from tests.sharing.test_plan import _brute_force_split, _usage


@pytest.fixture()
def part_by_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scenario above the joint model's offer limit: the shared plan is solved part by part."""
    import planning.sharing.joint_plan as jp

    monkeypatch.setattr(jp, "JOINT_MAX_OFFERS", 0)


def _instance(small: dict[str, Any], avail: tuple[int, int, int], seed: int, K: float = 0.0) -> dict[str, Any]:
    """The small tail scenario with the given availability and prices jittered ±20 % by ``seed`` (seed 0: as is)."""
    rng = random.Random(seed)
    for o, a in zip(small["offers"], avail, strict=True):
        o["available"] = a
        if seed:
            o["price_per_hour"] = round(o["price_per_hour"] * rng.uniform(0.8, 1.2), 3)
    small["options"]["K"] = K
    small["options"]["time_limit_s"] = 600  # a busy machine must not turn a case into a time limit
    return small


# availability, price seed, K: every case has the parts competing for an offer (asserted below)
CASES = [((4, 2, 1), 0, 0.0), ((2, 2, 2), 0, 0.0), ((1, 1, 3), 0, 0.0), ((1, 1, 3), 0, 0.5), ((4, 2, 1), 2, 0.0),
         ((1, 1, 3), 3, 0.0), ((2, 2, 2), 4, 0.0), ((2, 1, 3), 4, 0.5), ((1, 2, 2), 5, 0.0), ((4, 2, 1), 6, 0.0)]


@pytest.mark.parametrize(("avail", "seed", "K"), CASES)
def test_contended_plan_and_bound_against_brute_force(small: dict[str, Any], part_by_part: None,
                                                      avail: tuple[int, int, int], seed: int, K: float) -> None:
    data = _instance(small, avail, seed, K)
    res = solve_shared(Scenario.from_dict(data), method="exact")
    brute = _brute_force_split(data)
    assert res.status in ("optimal", "feasible"), res.notes
    assert res.stats["contended_offers"] >= 1  # the case is one of competition
    offered = {(o["region"], o["shape"]): o["available"] for o in data["offers"]}
    assert all(k <= offered[key] for key, k in _usage(res).items())
    assert res.cost_per_hour >= brute - 1e-6
    assert res.bound_per_hour is not None and res.bound_per_hour <= brute + 1e-6
    if res.status == "optimal":
        assert res.cost_per_hour == pytest.approx(brute, abs=1e-6)
    assert res.gap == pytest.approx(max(0.0, (res.cost_per_hour - res.bound_per_hour) / res.cost_per_hour)) or (
        res.status == "optimal" and res.gap == 0.0)


def test_lagrangian_bound_lifts_the_added_bound(small: dict[str, Any], part_by_part: None) -> None:
    """Where the parts compete, the multipliers prove more than the two free optima added (and stay valid)."""
    data = _instance(small, (1, 1, 3), 0)
    res = solve_shared(Scenario.from_dict(data), method="exact")
    added = [n for n in res.notes if "each part's optimum with every node available, added" in n]
    assert added and res.stats["contended_offers"] >= 1
    old = float(added[0].split("$")[1].split("/h")[0].replace(",", ""))
    assert res.stats["lagrangian_bound_per_hour"] > old + 0.1
    assert res.bound_per_hour == pytest.approx(res.stats["lagrangian_bound_per_hour"])
    assert res.bound_per_hour <= _brute_force_split(data) + 1e-6


def test_cli_reports_the_contended_bound(small: dict[str, Any], part_by_part: None, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    data = _instance(small, (4, 2, 1), 0)
    path = tmp_path / "contended.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["solve", str(path), "--sharing", "exact", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    brute = _brute_force_split(data)
    assert out["sharing"]["bound_per_hour"] <= brute + 1e-6 <= out["cost_per_hour"] + 2e-6
    assert out["mip_gap"] == out["sharing"]["gap"]
    assert out["sharing"]["stats"]["contended_offers"] == 1


def test_priced_scenario_charges_only_the_given_offers(small: dict[str, Any]) -> None:
    small["price_scale"] = 2.0
    s = Scenario.from_dict(small)
    ctx = api.engine_context()
    before = {(o.region, o.shape): o for o in resolve_offers(s, ctx.catalog)}
    after = {(o.region, o.shape): o for o in resolve_offers(priced(s, list(before.values()),
                                                                    {("test:r", "1xL40S"): 0.25}), ctx.catalog)}
    assert after.keys() == before.keys()
    for key, o in after.items():
        assert o.available == before[key].available
        extra = 0.25 if key == ("test:r", "1xL40S") else 0.0
        assert o.price_per_hour == pytest.approx(before[key].price_per_hour + extra)


def test_contended_offers_are_those_overflowed(small: dict[str, Any]) -> None:
    s = Scenario.from_dict(small)
    offers = resolve_offers(s, api.engine_context().catalog)
    a, b = ("test:r", "1xL40S"), ("test:r", "1xL4")
    assert contended(offers, {a: 4, b: 8}, {a: 2}) == {}  # 6 L40S, 8 L4 offered
    assert contended(offers, {a: 4, b: 8}, {a: 3, b: 1}) == {a: 6, b: 8}
