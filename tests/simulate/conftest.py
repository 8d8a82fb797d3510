"""Fixtures for the simulator tests: the shipped perf model and small hand-built plans (no solver needed)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from planning.perf import PerfModel
from planning.result import GroupService, InstancePlan, NodeBox, PlanResult, StagePlan
from planning.scenario import Scenario
from planning.simulate import InstanceModel


@pytest.fixture(scope="session")
def pm() -> PerfModel:
    return PerfModel()


def one_stage(shape: str, layers: int, throughput: float = 1.0) -> tuple[StagePlan, ...]:
    count, gpu = shape.split("x", 1)
    return (StagePlan(layers, 0, layers, (NodeBox(shape, gpu, int(count), throughput),)),)


def instance(pm: PerfModel, model: str, shape: str, phase: str = "decode", slo_ms: float = 100.0,
             inp: float = 1024, out: float = 128, **kw: object) -> InstanceModel:
    spec = pm.model(model)
    return InstanceModel(pm, spec, one_stage(shape, spec.layers), phase, slo_ms, inp, out, **kw)  # type: ignore[arg-type]


SCENARIO = {
    "name": "sim-test", "mode": "disaggregated", "regions": ["aws:us-east-2"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 60},
                "demand": {"rate_rps": 4, "input_len": 900, "output_len": 120}}],
}


def small_plan() -> tuple[PlanResult, Scenario]:
    """A disaggregated llama-3-8b plan: 2 single-node prefill instances, a 1-node and a 2-stage decode instance."""
    sc = Scenario.from_dict(SCENARIO)
    two_stage = (StagePlan(16, 0, 16, (NodeBox("1xL40S", "L40S", 1, 1.0),)),
                 StagePlan(16, 16, 32, (NodeBox("1xL40S", "L40S", 1, 1.0),)))
    base = {"region": "aws:us-east-2", "usage": {}, "gpus": {}, "throughput_unit": "", "load": 0.5,
            "cost_per_hour": 1.0}
    # the one-node-shape flag was renamed (homogeneous -> single_shape) by the middle-layer refactor
    base.update({f.name: True for f in fields(InstancePlan) if f.name in ("homogeneous", "single_shape")})
    insts = (
        InstancePlan(model="llama-3-8b", phase="prefill", template_id="1x1xH100", count=2, throughput=20000,
                     stages=one_stage("1xH100", 32), **base),  # type: ignore[arg-type]
        InstancePlan(model="llama-3-8b", phase="decode", template_id="1x1xH100", count=1, throughput=600,
                     stages=one_stage("1xH100", 32), **base),  # type: ignore[arg-type]
        InstancePlan(model="llama-3-8b", phase="decode", template_id="2x1xL40S", count=1, throughput=300,
                     stages=two_stage, **base),  # type: ignore[arg-type]
    )
    plan = PlanResult(status="optimal", objective="cost", cost_per_hour=4.0, provisioning_per_hour=4.0,
                      penalty_per_hour=0.0, served_fraction=1.0, mip_gap=None, instances=insts,
                      service=(GroupService("llama-3-8b", "prefill", 3600, 3600, "prompt tok/s"),
                               GroupService("llama-3-8b", "decode", 480, 480, "output tok/s")),
                      scenario=sc.to_dict())
    return plan, sc
