"""An instance's throughput is its capacity for the mix it is assigned (issue 38): for a histogram group, assigned
rate ÷ load, never its fastest class's rate; ``load × throughput`` is the assigned rate on every instance, and the
Plan table, report, JSON, pipeline labels and deploy notes all show that one figure."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from planning import api
from planning.assemble import instance_capacity
from planning.groups import Group, WorkClass
from planning.report import report_markdown
from planning.result import InstancePlan, NodeBox, PlanResult, StagePlan
from planning.scenario import Scenario
from planning.templates.stages import rated_stages

SHORT, LONG = (200.0, 40.0), (3500.0, 300.0)


def _group(rates: tuple[float, ...]) -> Group:
    return Group("m", "aggregated", 100.0, tuple(WorkClass(f"m/aggregated/b{i}", r, 10.0, 10.0)
                                                  for i, r in enumerate(rates)))


def test_capacity_is_assigned_rate_over_load() -> None:
    thr = np.array([10.0, 2.0])
    # 6 req/s of the short class (0.6 copies) and 1.5 of the long (0.75): 7.5 req/s on 1.35 copies
    assert instance_capacity(_group((6.0, 1.5)), thr, {0: 6.0, 1: 1.5}) == pytest.approx(7.5 / 1.35)
    assert instance_capacity(_group((6.0, 1.5)), thr, {0: 6.0}) == pytest.approx(10.0)  # only the short class
    assert instance_capacity(_group((6.0, 1.5)), thr, {1: 3.0}) == pytest.approx(2.0)
    # no traffic assigned: the group's demand mix over the classes the template serves
    assert instance_capacity(_group((6.0, 1.5)), thr, {}) == pytest.approx(7.5 / 1.35)
    assert instance_capacity(_group((6.0, 1.5)), np.array([0.0, 2.0]), {}) == pytest.approx(2.0)
    assert instance_capacity(_group((0.0, 0.0)), thr, {}) == 10.0  # no demand either: its fastest class
    assert instance_capacity(_group((4.0,)), np.array([7.25]), {0: 3.0}) == 7.25  # one class: its T̂, exactly


def test_rated_stages_keep_the_nodes_shares() -> None:
    stages = (StagePlan(10, 0, 10, (NodeBox("1xL4", "L4", 1, 6.0), NodeBox("1xA10G", "A10G", 1, 4.0))),
              StagePlan(10, 10, 20, (NodeBox("1xL40S", "L40S", 1, 20.0),)))
    rated = rated_stages(stages, 5.0)
    assert min(sum(b.throughput for b in st.nodes) for st in rated) == pytest.approx(5.0)
    assert [b.throughput for b in rated[0].nodes] == pytest.approx([3.0, 2.0])
    assert rated[1].nodes[0].throughput == pytest.approx(10.0)
    unlabelled = (StagePlan(10, 0, 10, (NodeBox("1xL4", "L4", 1),)),)
    assert rated_stages(unlabelled, 5.0) == unlabelled


def _explicit(rates: list[float], templates: list[dict[str, Any]], prices: dict[str, float]) -> Scenario:
    return Scenario.from_dict({
        "name": "mix", "mode": "aggregated", "regions": ["test:r"],
        "models": [{"id": "llama-2-7b", "slo": {"decode_ms": 120},
                    "demand": {"histogram": [{"input_len": 10 + 100 * i, "output_len": 20 + 50 * i, "rate_rps": r}
                                             for i, r in enumerate(rates)]}}],
        "offers": [{"region": "test:r", "shape": s, "price_per_hour": p, "available": 50} for s, p in prices.items()],
        "explicit_templates": templates, "generate_templates": False, "options": {"nmax": 1, "K": 0,
                                                                                   "mip_rel_gap": 0.0},
    })


def _assigned_tokens(inst: InstancePlan) -> float:
    """The instance's assigned rate in its group's unit, from its classes' req/s."""
    per = {"prefill": lambda i, o: i, "decode": lambda i, o: o, "aggregated": lambda i, o: 1.0}[inst.phase]
    return sum(rps * per(i, o) for i, o, rps in inst.class_rps)


def test_one_template_two_classes_is_rated_for_its_mix() -> None:
    """6 req/s at T̂ 10 and 1.5 req/s at T̂ 2 on one L4 template: 1.35 copies of load, 2 copies bought, and each
    copy serves 7.5 / 1.35 = 5.56 req/s of this mix (the old figure was the short class's 10)."""
    tpl = [{"id": "L4", "model": "llama-2-7b", "phase": "aggregated", "usage": {"1xL4": 1},
            "throughput": {"llama-2-7b/aggregated/b0": 10.0, "llama-2-7b/aggregated/b1": 2.0}}]
    res = api.solve(_explicit([6.0, 1.5], tpl, {"1xL4": 1.0}), with_baselines=False)
    (inst,) = res.instances
    assert inst.count == 2 and inst.load == pytest.approx(1.35)
    assert inst.throughput == pytest.approx(7.5 / 1.35)
    assert inst.load * inst.throughput == pytest.approx(7.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeded_two_class_load_times_throughput_is_the_assigned_rate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shapes = {"1xL4": 0.8, "1xA10G": 1.0, "1xL40S": 1.9}
    thr = rng.uniform(0.5, 12.0, size=(len(shapes), 2))
    tpl = [{"id": s.split("x")[1], "model": "llama-2-7b", "phase": "aggregated", "usage": {s: 1},
            "throughput": {f"llama-2-7b/aggregated/b{q}": float(thr[g, q]) for q in range(2)}}
           for g, s in enumerate(shapes)]
    rates = rng.uniform(0.5, 20.0, size=2).round(2).tolist()
    res = api.solve(_explicit(rates, tpl, shapes), with_baselines=False)
    assert res.status == "optimal" and res.instances
    total = 0.0
    for inst in res.instances:
        t = thr[list(shapes).index(next(iter(inst.usage)))]
        assigned = sum(rps for _, _, rps in inst.class_rps)
        assert inst.load * inst.throughput == pytest.approx(assigned, rel=1e-9)
        assert min(t) - 1e-9 <= inst.throughput <= max(t) + 1e-9  # a mix of its classes' rates
        total += assigned
    assert total == pytest.approx(sum(rates), rel=1e-6)


HIST: dict[str, Any] = {
    "name": "hist-small",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL40S", "2xL40S", "1xL4", "2xL4"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                "demand": {"histogram": [{"input_len": SHORT[0], "output_len": SHORT[1], "rate_rps": 6},
                                         {"input_len": LONG[0], "output_len": LONG[1], "rate_rps": 1.5}]}}],
    "options": {"mip_rel_gap": 0.0},
}


def test_generated_disaggregated_instances_in_token_units() -> None:
    """Prefill and decode groups count in tokens/s: load × throughput is the assigned tokens/s, and the pipeline's
    node labels (min over stages of the summed T̂) add up to the same throughput."""
    res = api.solve(Scenario.from_dict(HIST), with_baselines=False)
    assert res.status == "optimal"
    for inst in res.instances:
        assert inst.class_rps
        assert inst.load * inst.throughput == pytest.approx(_assigned_tokens(inst), rel=1e-6)
        if inst.stages and any(b.throughput > 0 for st in inst.stages for b in st.nodes):
            assert min(sum(b.throughput for b in st.nodes) for st in inst.stages) == pytest.approx(inst.throughput)


@pytest.fixture(scope="module")
def arena() -> PlanResult:
    res = api.solve(api.load_preset_scenario("melange-arena"))
    assert res.has_plan and res.instances
    return res


def _figure(value: float) -> str:
    return f"{value:,.1f}"


def test_melange_arena_shows_assigned_rate_over_load_everywhere(arena: PlanResult) -> None:
    demand = sum(r for i in arena.instances for _, _, r in i.class_rps)
    assert demand == pytest.approx(8.0, rel=1e-4)  # the preset's 8 req/s (fractions summing to 1.0000125)
    frame = arena.instances_frame()
    again = PlanResult.from_json(arena.to_json())
    notes = {f.instance: f.text for f in api.export_plan(arena, "all") if f.instance is not None}
    report = report_markdown(arena)
    for idx, inst in enumerate(arena.instances):
        rate = sum(r for _, _, r in inst.class_rps) / inst.load  # req/s assigned ÷ load
        assert inst.throughput == pytest.approx(rate)
        assert inst.load * inst.throughput == pytest.approx(sum(r for _, _, r in inst.class_rps))
        assert frame.iloc[idx]["throughput"] == pytest.approx(rate)  # the Plan table
        assert again.instances[idx].throughput == pytest.approx(rate)  # the JSON
        assert f"planned throughput {_figure(rate)} req/s each" in notes[idx]  # the deploy note
        shown = re.findall(r"\|\s*([\d,.]+) req/s\s*\|", report)  # the report's "What to rent"
        assert any(float(s.replace(",", "")) == pytest.approx(rate, rel=0.01) for s in shown)
        assert all(float(s.replace(",", "")) < 100 for s in shown)  # not the fastest class (343 for an A100)
        if inst.stages:
            labels = min(sum(b.throughput for b in st.nodes) for st in inst.stages)
            assert labels == pytest.approx(rate)
