"""The pipelined aggregated engine: S micro-batches through S stages, SLO-sized step budgets, fluid DP prompts."""

from __future__ import annotations

import numpy as np
import pytest

from planning.perf import PerfModel
from planning.result import NodeBox, StagePlan
from planning.simulate import InstanceModel
from planning.simulate.engine import DecodeEngine, Requests
from planning.simulate.loop import Sim
from planning.simulate.pipelined import PipelinedEngine
from planning.simulate.routing import ModelRoutes, Router

# llama-3-8b over a slow first stage of two data-parallel L4s and an L40S (the long-tail preset's instance)
MIXED = (StagePlan(10, 0, 10, (NodeBox("1xL4", "L4", 1, 1.0), NodeBox("1xL4", "L4", 1, 1.0))),
         StagePlan(22, 10, 32, (NodeBox("1xL40S", "L40S", 1, 1.0),)))
EVEN = (StagePlan(16, 0, 16, (NodeBox("1xL40S", "L40S", 1, 1.0),)),
        StagePlan(16, 16, 32, (NodeBox("1xL40S", "L40S", 1, 1.0),)))


def _im(pm: PerfModel, stages: tuple[StagePlan, ...], slo_ms: float = 60.0) -> InstanceModel:
    return InstanceModel(pm, pm.model("llama-3-8b"), stages, "aggregated", slo_ms, 1155, 211, max_step_tokens=2048)


def _run(im: InstanceModel, arrival: list[float], inp: int, out: int, chunk: int) -> tuple[Requests, Sim, PipelinedEngine]:
    n = len(arrival)
    req = Requests.empty(n)
    req.arrival = list(arrival)
    req.inp = [inp] * n
    req.out = [out] * n
    sim = Sim([], req)
    eng = PipelinedEngine(sim, im, "p", chunk)
    sim.routes = [ModelRoutes(Router([eng], [1.0], "proportional"), None)]
    sim.run(range(n))
    eng.close(sim.now)
    return req, sim, eng


def test_one_request_takes_the_stage_sum(pm: PerfModel) -> None:
    """Alone in the engine, a request's prompt and each of its tokens cross every stage once (no overlap)."""
    im = _im(pm, EVEN)
    inp, out = 1000, 40
    req, sim, _eng = _run(im, [0.0], inp, out, 2048)
    prompt = sum(b + s for b, s in im.stage_step_s(0, 1, inp, 0.0)[:-1]) + im.stage_step_s(0, 1, inp, 0.0)[-1][0]
    assert req.t_first[0] == pytest.approx(prompt, rel=1e-9)
    # then out − 1 decode steps of one sequence: the one-sequence decode cycle (Σ stages + sends)
    tokens = [im.decode_cycle_s(1, inp + 1 + i) for i in range(out - 1)]
    assert req.t_done[0] - req.t_first[0] == pytest.approx(sum(tokens), rel=0.01)
    assert sim.finish_events == 1


def test_conservation_and_determinism(pm: PerfModel) -> None:
    im = _im(pm, MIXED)
    rng = np.random.default_rng(11)
    arrival = np.cumsum(rng.exponential(1 / 5.0, 600)).tolist()
    a, sim, eng = _run(im, arrival, 1155, 211, im.step_token_budget(60, 2048))
    b, _s, _e = _run(im, arrival, 1155, 211, im.step_token_budget(60, 2048))
    assert sim.finish_events == 600 and not any(a.dropped)
    assert eng.served == 600
    assert eng.tokens_out == 600 * 211  # first tokens + every decode token, none lost or doubled
    assert a.t_done == b.t_done
    assert eng.kv_full == pytest.approx(0.0, abs=1e-6)  # every reservation released
    assert eng.b == 0 and all(mb.b == 0 and not mb.prefill_q for mb in eng.micro)


def test_micro_batches_overlap_like_the_decode_cycle(pm: PerfModel) -> None:
    """Decodes only (prompts of one token): S micro-batches in flight give the decode cycle's rule, not S trips."""
    im = _im(pm, EVEN)
    n, out = 64, 400
    req, _sim, _eng = _run(im, [0.0] * n, 1, out, 2048)
    tpot = (np.array(req.t_done) - np.array(req.t_first)) / (out - 1)
    cycle = im.decode_cycle_s(n, 200)  # mean context over the run
    trips = 2 * sum(b + s for b, s in im.stage_step_s(n // 2, 0, 0.0, 200))  # the two micro-batches one by one
    assert float(np.median(tpot)) == pytest.approx(cycle, rel=0.1)
    assert float(np.median(tpot)) < trips * 0.7


def test_step_budget_meets_the_per_stage_share_of_the_slo(pm: PerfModel) -> None:
    im = _im(pm, MIXED)
    limit = 0.060 / 2 / pm.calibration.settings.aggregated_headroom
    budget = im.step_token_budget(60, 2048)
    assert 64 < budget < 2048
    worst = max(b for b, _s in im.stage_step_s(0, 1, budget, 0.0))
    over = max(b for b, _s in im.stage_step_s(0, 1, budget + 32, 0.0))
    assert worst <= limit < over
    assert im.step_token_budget(30, 2048) < budget < im.step_token_budget(120, 2048)
    assert im.step_token_budget(10_000, 2048) == 2048


def test_data_parallel_stage_shares_prompt_work(pm: PerfModel) -> None:
    """Two L4 copies: the fluid table gives each half the prompt; whole prompts keep one L4 busy for all of it.
    A prefill step of a pipeline (S > 1) uses the fluid table too (the copies take turns with successive batches)."""
    im = _im(pm, MIXED)
    fluid = im.stage_step_s(0, 1, 2048, 0.0)[0][0]
    whole = im.prefill_stage_s(1, 2048, fluid=False)[0][0]
    assert fluid < 0.7 * whole
    assert im.prefill_stage_s(1, 2048)[0][0] == pytest.approx(im.prefill_stage_s(1, 2048, fluid=True)[0][0])
    assert im.prefill_stage_s(1, 2048)[0][0] < 0.7 * whole


def test_slo_budget_keeps_tpot_near_the_plan(pm: PerfModel) -> None:
    """At 5 req/s on the mixed pipeline: greedy 2048-token chunks stall every decode; SLO-sized steps do not."""
    im = _im(pm, MIXED)
    rng = np.random.default_rng(5)
    arrival = np.cumsum(rng.exponential(1 / 5.0, 1500)).tolist()
    out = 211

    def tpot_p50(chunk: int) -> float:
        req, _s, _e = _run(im, arrival, 1155, out, chunk)
        return float(np.median((np.array(req.t_done) - np.array(req.t_first)) / (out - 1)))

    assert tpot_p50(im.step_token_budget(60, 2048)) <= 0.060
    assert tpot_p50(2048) > 1.2 * tpot_p50(im.step_token_budget(60, 2048))


def test_single_stage_plans_keep_the_fused_engine(pm: PerfModel) -> None:
    """S = 1 stays on DecodeEngine (its decode leaps); stage_step_s refuses a single stage."""
    from planning.errors import PlanningError
    from tests.simulate.conftest import instance

    one = instance(pm, "llama-3-8b", "1xL40S", phase="aggregated", slo_ms=60)
    with pytest.raises(PlanningError):
        one.stage_step_s(1, 0, 0.0, 100.0)
    assert isinstance(DecodeEngine(Sim([], Requests.empty()), one, "x", True, 512), DecodeEngine)


def test_fine_tuned_variants_simulate_on_their_base_architecture(pm: PerfModel) -> None:
    """A model given as ``base: llama-3-8b`` (long-tail preset's variants) resolves as the planner resolves it."""
    from dataclasses import replace

    from planning.scenario import Scenario
    from planning.simulate import SimConfig, build_topology, simulate_topology
    from tests.simulate.conftest import SCENARIO, small_plan

    plan, _sc = small_plan()
    raw = {**SCENARIO, "models": [{**SCENARIO["models"][0], "id": "ft-8b", "base": "llama-3-8b"}]}  # type: ignore[index]
    sc = Scenario.from_dict(raw)
    plan = replace(plan, instances=tuple(replace(i, model="ft-8b") for i in plan.instances),
                   service=tuple(replace(g, model="ft-8b") for g in plan.service), scenario=sc.to_dict())
    topo = build_topology(plan, sc, pm)
    assert {i.model.spec.id for i in topo.instances} == {"llama-3-8b"}
    res = simulate_topology(topo, SimConfig(duration_s=30, seed=1))
    assert res.model("ft-8b").requests > 0
