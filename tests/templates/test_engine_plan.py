"""Every instance carries the engine limits its T̂ entries count on; the simulator and the exports run them."""

from __future__ import annotations

import math

import pytest

from planning import api
from planning.export.deploy import engine_flags, engine_share
from planning.export.engine import engine_layouts
from planning.result import EnginePlan, InstancePlan, NodeBox, PlanResult, StagePlan
from planning.simulate import SimConfig, build_topology, simulate_topology


@pytest.fixture(scope="module")
def core() -> tuple[PlanResult, object]:
    scenario = api.load_preset_scenario("coral-core")
    return api.solve(scenario, with_baselines=False), scenario


def test_decode_instances_run_the_batch_their_rate_was_priced_at(core: tuple[PlanResult, object]) -> None:
    plan, _ = core
    decode = [i for i in plan.instances if i.phase == "decode"]
    assert decode and all(i.engine is not None for i in plan.instances)
    for inst in decode:
        e = inst.engine
        assert e is not None and e.phase == "decode"
        # batch sequences, one token each per step of step_ms: the template's (common micro-batch) rate
        assert e.batch / (e.step_ms / 1e3) == pytest.approx(inst.throughput, rel=1e-3)
        assert e.max_num_seqs == math.floor(e.batch + e.kv_sigmas * math.sqrt(e.batch / (1 - e.elasticity)) + 1e-9)
        assert e.max_batched_tokens == e.max_num_seqs  # one token per sequence per step
    # the plan's JSON carries them (a stored plan deploys the same engines)
    back = PlanResult.from_json(plan.to_json())
    assert [i.engine for i in back.instances] == [i.engine for i in plan.instances]


def test_simulated_engines_never_exceed_the_planned_cap(core: tuple[PlanResult, object]) -> None:
    plan, scenario = core
    topo = build_topology(plan, scenario, api.engine_context().perf)  # type: ignore[arg-type]
    caps = {i: it.model.max_batch for i, it in enumerate(topo.instances)}
    for i, it in enumerate(topo.instances):
        if it.plan.phase != "prefill":
            assert it.plan.engine is not None and caps[i] == it.plan.engine.max_num_seqs
    res = simulate_topology(topo, SimConfig(duration_s=120, seed=0))
    by_name = {f"{p.plan.model}/{p.plan.phase}/{p.plan.template_id}@{p.plan.region}": p for p in topo.instances}
    for sim in res.instances:
        item = by_name[sim.name.rsplit("#", 1)[0]]
        if item.plan.phase == "decode":
            assert sim.peak_batch <= caps[topo.instances.index(item)]


def test_data_parallel_engines_split_the_batch_each_with_its_own_room() -> None:
    stage = StagePlan(32, 0, 32, (NodeBox("1xL40S", "L40S", 1, 300.0), NodeBox("1xL40S", "L40S", 1, 300.0),
                                  NodeBox("2xL40S", "L40S", 2, 600.0)))
    plan = EnginePlan("decode", 100.0, 110, 110, 1.0, 50.0)
    inst = InstancePlan("llama-3-8b", "decode", "t", "aws:us-east-1", 1, {"1xL40S": 2, "2xL40S": 1},
                        {"L40S": 4}, 1200.0, "tokens/s", 0.5, 1.0, False, (stage,), engine=plan)
    engines = engine_layouts(inst)
    shares = {e.slots[0].shape: engine_share(inst, e) for e in engines}
    assert shares == pytest.approx({"1xL40S": 0.25, "2xL40S": 0.5})  # planned throughput over the stage's
    for e in engines:
        seqs, tokens = engine_flags(inst, e)  # type: ignore[misc]
        b = 100.0 * engine_share(inst, e)
        assert seqs == math.floor(b + math.sqrt(b)) and tokens == seqs  # elasticity 0
    assert plan.split(1.0) == (110, 110)
    assert EnginePlan("aggregated", 40.0, 1024, 512, 1.0).split(0.5) == (512, 512)  # two engines: each its own T
    assert EnginePlan("prefill", 4.0, 1024, 8192).split(0.5) == (1024, 8192)
