"""The router follows a histogram plan's class assignment: requests of a class go to the instances the ILP
assigned that class to, in proportion to the assigned rates (issue 10: demystifying's router spread every class
over every instance by one scalar throughput)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from planning import api
from planning.result import PlanResult
from planning.scenario import Scenario
from planning.simulate import SimConfig, simulate_plan
from planning.simulate.routing import Router
from planning.simulate.run import class_weights


class _Idle:
    def __init__(self, name: str) -> None:
        self.name = name

    def load(self) -> float:
        return 0.0


def _picks(router: Router, inp: int, out: int, n: int) -> Counter[str]:
    return Counter(router.pick(inp, out).name for _ in range(n))  # type: ignore[attr-defined]


def test_class_router_sends_each_class_to_its_planned_engines() -> None:
    a, b, c = _Idle("a"), _Idle("b"), _Idle("c")
    classes = {(100.0, 10.0): [3.0, 1.0, 0.0], (2000.0, 200.0): [0.0, 0.0, 2.0]}
    router = Router([a, b, c], [1.0, 1.0, 1.0], "proportional", classes)  # type: ignore[list-item]
    assert _picks(router, 100, 10, 400) == Counter({"a": 300, "b": 100})  # 3 : 1, never c
    assert _picks(router, 2000, 200, 50) == Counter({"c": 50})
    assert _picks(router, 150, 12, 40) == Counter({"a": 30, "b": 10})  # nearest class (log distance): the short one
    assert _picks(router, 1800, 250, 10) == Counter({"c": 10})
    plain = Router([a, b, c], [1.0, 1.0, 2.0], "proportional")  # type: ignore[list-item]
    assert _picks(plain, 2000, 200, 40) == Counter({"a": 10, "b": 10, "c": 20})  # no classes: scalar weights


def test_least_loaded_stays_within_the_class() -> None:
    class Busy(_Idle):
        def __init__(self, name: str, load: float) -> None:
            super().__init__(name)
            self._load = load

        def load(self) -> float:
            return self._load

    a, b = Busy("a", 5.0), Busy("b", 0.0)
    router = Router([a, b], [1.0, 1.0], "least-loaded", {(100.0, 10.0): [1.0, 0.0]})  # type: ignore[list-item]
    assert router.pick(100, 10).name == "a"  # type: ignore[attr-defined]  # b is idle but not planned for it


HIST: dict[str, Any] = {
    "name": "hist-small",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL40S", "2xL40S", "1xL4", "2xL4"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                "demand": {"histogram": [{"input_len": 200, "output_len": 40, "rate_rps": 6},
                                         {"input_len": 3500, "output_len": 300, "rate_rps": 1.5}]}}],
    "options": {"mip_rel_gap": 0.0},
}


@pytest.fixture(scope="module")
def hist_plan() -> tuple[PlanResult, Scenario]:
    scenario = Scenario.from_dict(HIST)
    plan = api.solve(scenario, with_baselines=False)
    assert plan.status == "optimal"
    return plan, scenario


def test_histogram_plan_carries_each_instances_class_rates(hist_plan: tuple[PlanResult, Scenario]) -> None:
    plan, _ = hist_plan
    for phase in ("prefill", "decode"):
        insts = [i for i in plan.instances if i.phase == phase]
        assert insts and all(i.class_rps for i in insts)
        per_class: dict[tuple[float, float], float] = {}
        for i in insts:
            for inp, out, rps in i.class_rps:
                per_class[(inp, out)] = per_class.get((inp, out), 0.0) + rps
        # every request class is assigned in full (req/s, whatever the phase's unit)
        assert per_class == pytest.approx({(200.0, 40.0): 6.0, (3500.0, 300.0): 1.5}, rel=1e-6)
    again = PlanResult.from_json(plan.to_json())  # saved plans keep the assignment
    assert [i.class_rps for i in again.instances] == [i.class_rps for i in plan.instances]
    weights = class_weights([i for i in plan.instances if i.phase == "decode" for _ in range(i.count)])
    assert weights is not None and set(weights) == {(200.0, 40.0), (3500.0, 300.0)}


def test_simulation_follows_the_plan_classes(hist_plan: tuple[PlanResult, Scenario]) -> None:
    """Split the decode side into an instance planned for the short class and one for the long class: with the
    class router each gets only its class (outputs of 40 vs 300 tokens); with scalar weights both get the mix."""
    from dataclasses import replace

    plan, scenario = hist_plan
    dec = next(i for i in plan.instances if i.phase == "decode")
    short = replace(dec, template_id="short-only", count=1, class_rps=((200.0, 40.0, 6.0),))
    long_ = replace(dec, template_id="long-only", count=1, class_rps=((3500.0, 300.0, 1.5),))
    split = replace(plan, instances=(*(i for i in plan.instances if i.phase != "decode"), short, long_))
    on = simulate_plan(split, scenario, SimConfig(duration_s=120, seed=1, router_classes=True))
    off = simulate_plan(split, scenario, SimConfig(duration_s=120, seed=1, router_classes=False))
    assert on.requests == off.requests and on.finish_events == on.requests  # same arrivals, all finished once

    def mean_out(res: Any, template: str) -> float:
        sim = next(x for x in res.instances if x.phase == "decode" and x.template_id == template)
        assert sim.requests > 50
        return float(sim.tokens_out / sim.requests)

    # a decode instance generates every output token but the first (prefill's)
    assert mean_out(on, "short-only") == pytest.approx(40.0 - 1)
    assert mean_out(on, "long-only") == pytest.approx(300.0 - 1)
    mix = (6.0 * 39 + 1.5 * 299) / 7.5  # 91 tokens
    assert mean_out(off, "short-only") == pytest.approx(mix, rel=0.25)
    assert mean_out(off, "long-only") == pytest.approx(mix, rel=0.25)


def test_decode_stays_in_the_prefill_region() -> None:
    """The planner pairs prefill and decode per region; the simulator hands a request's KV cache to a decode
    engine of its prefill's region (issue 12 §4). Two regions, one prefill and one decode instance in each, the
    decode capacities deliberately unequal (3:1) while the prefills are equal: region-local routing gives each
    decode instance its region's half of the requests, a global router would give 3:1."""
    from dataclasses import replace

    from tests.simulate.conftest import small_plan

    plan, scenario = small_plan()
    pre = next(i for i in plan.instances if i.phase == "prefill")
    dec = next(i for i in plan.instances if i.phase == "decode" and i.template_id == "1x1xH100")
    insts = (replace(pre, count=1, region="aws:us-east-2"), replace(pre, count=1, region="aws:us-west-2"),
             replace(dec, throughput=900, region="aws:us-east-2"), replace(dec, throughput=300, region="aws:us-west-2"))
    res = simulate_plan(replace(plan, instances=insts), scenario, SimConfig(duration_s=120, seed=3))
    assert res.finish_events == res.requests
    by = {(x.phase, x.region): x.requests for x in res.instances}
    for region in ("aws:us-east-2", "aws:us-west-2"):
        assert by[("decode", region)] == by[("prefill", region)] > 100
