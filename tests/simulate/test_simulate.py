"""Oracles for the simulator: M/D/1 closed form, conservation, determinism, KV admission, P→D hand-off."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel
from planning.simulate import SimConfig, benchmark, build_topology, simulate_plan, simulate_topology
from planning.simulate.engine import DecodeEngine, PrefillEngine, Requests
from planning.simulate.loop import Sim
from planning.simulate.routing import ModelRoutes, Router
from tests.simulate.conftest import instance, small_plan


def _requests(arrival: list[float], inp: int, out: int) -> Requests:
    n = len(arrival)
    r = Requests.empty(n)
    r.arrival = list(arrival)
    r.inp = [inp] * n
    r.out = [out] * n
    return r


def test_step_times_are_the_perf_models(pm: PerfModel) -> None:
    """One node, one stage: the decode cycle and prefill step equal PerfModel.estimate at grid points."""
    im = instance(pm, "llama-3-8b", "1xH100", tp=1)
    est = pm.estimate("llama-3-8b", "H100", 1, 1, batch=8, input_len=1024, output_len=0)
    assert im.decode_cycle_s(8, 1024) * 1e3 == pytest.approx(est.decode_step_ms, rel=1e-9)
    est4 = pm.estimate("llama-3-8b", "H100", 1, 1, batch=4, input_len=1024)
    assert im.prefill_s(4, 4 * 1024) * 1e3 == pytest.approx(est4.prefill_ms, rel=1e-9)


def test_md1_mean_wait_matches_pollaczek_khinchine(pm: PerfModel) -> None:
    """Poisson arrivals, one prompt per batch, fixed prompt: an M/D/1 queue; Wq = ρ D / (2 (1 − ρ))."""
    im = instance(pm, "llama-3-8b", "1xH100", phase="prefill", slo_ms=1000)
    d = im.prefill_s(1, 1024)
    rho = 0.7
    rng = np.random.default_rng(7)
    n = 40_000
    arrival = np.cumsum(rng.exponential(d / rho, n))
    req = _requests(arrival.tolist(), 1024, 1)
    sim = Sim([], req)
    pe = PrefillEngine(sim, im, "p", token_budget=1024)
    de = DecodeEngine(sim, im, "d", False, 2048)
    sim.routes = [ModelRoutes(Router([pe], [1.0], "proportional"), Router([de], [1.0], "proportional"))]
    sim.run(range(n))
    wait = np.array(req.t_start) - arrival
    expected = rho * d / (2 * (1 - rho))
    assert pe.peak_batch == 1
    assert wait.mean() == pytest.approx(expected, rel=0.08)
    # the service is deterministic: TTFT − wait is exactly D
    assert np.allclose(np.array(req.t_first) - np.array(req.t_start), d)


def test_conservation_every_request_once_and_all_tokens(pm: PerfModel) -> None:
    plan, sc = small_plan()
    res = simulate_plan(plan, sc, SimConfig(duration_s=120, seed=3), perf=pm)
    m = res.model("llama-3-8b")
    assert res.requests > 300
    assert m.finished == res.requests and m.dropped == 0
    assert res.finish_events == res.requests
    tokens = sum(i.tokens_out for i in res.instances)
    assert tokens == res.requests * 120  # every request asked 120 output tokens
    by_phase = {p: sum(i.requests for i in res.instances if i.phase == p) for p in ("prefill", "decode")}
    assert by_phase == {"prefill": res.requests, "decode": res.requests}
    for i in res.instances:
        if i.phase == "decode":
            assert 0 < i.mean_batch <= i.peak_batch
    # Little's law on decode: mean running sequences ≈ output rate × time per token (TPOT)
    # (mean_batch is averaged over the run including the short drain, hence the tolerance)
    running = sum(i.mean_batch for i in res.instances if i.phase == "decode")
    assert running == pytest.approx(m.output_tokens_per_s * m.tpot_ms.mean / 1e3, rel=0.15)


def test_aggregated_conservation_with_chunked_prefill(pm: PerfModel) -> None:
    """Closed loop through one aggregated engine: prompts longer than the chunk; tokens out = tokens asked."""
    im = instance(pm, "llama-3-8b", "1xA100-80G", phase="aggregated", max_step_tokens=512)
    req = _requests([0.0] * 24, 1500, 77)
    sim = Sim([], req)
    eng = DecodeEngine(sim, im, "a", True, 512)
    sim.routes = [ModelRoutes(Router([eng], [1.0], "proportional"), None)]
    sim.run(range(24))
    assert sim.finish_events == 24
    assert eng.tokens_out == 24 * 77
    assert all(math.isfinite(t) for t in req.t_done)
    ttft = np.array(req.t_first)
    assert np.all(np.diff(ttft) >= 0)  # FIFO chunking: prompts complete in arrival order


def test_determinism_under_a_seed(pm: PerfModel) -> None:
    plan, sc = small_plan()
    topo = build_topology(plan, sc, pm)

    def run(seed: int) -> dict:
        d = simulate_topology(topo, SimConfig(duration_s=60, seed=seed)).to_dict()
        d.pop("wall_s")
        return d

    a, b, c = run(11), run(11), run(12)
    assert a == b
    assert a != c


def test_kv_admission_blocks_when_cache_is_full(pm: PerfModel) -> None:
    """Long requests on a 24 GB L4: only a few fit; the others wait for KV, never exceed it."""
    im = instance(pm, "llama-3-8b", "1xL4", phase="aggregated")
    fit = int(1.0 / im.kv_fraction(7000, 7000))
    assert 1 <= fit < 32
    req = _requests([0.0] * 32, 6000, 1000)
    sim = Sim([], req)
    eng = DecodeEngine(sim, im, "a", True, 2048)
    sim.routes = [ModelRoutes(Router([eng], [1.0], "proportional"), None)]
    sim.run(range(32))
    assert eng.peak_batch <= fit
    assert eng.kv_peak <= 1.0 + 1e-12
    admitted = np.array(req.t_start)
    assert np.sum(admitted > 0) >= 32 - fit  # these waited for a finishing request's KV
    assert sim.finish_events == 32


def test_disaggregated_handoff_adds_kv_transfer_time(pm: PerfModel) -> None:
    pim = instance(pm, "llama-3-8b", "1xH100", phase="prefill", slo_ms=1000)
    dim = instance(pm, "llama-3-8b", "1xL40S", phase="decode", slo_ms=60)
    inp, out = 2000, 50
    req = _requests([0.0], inp, out)
    sim = Sim([], req)
    pe = PrefillEngine(sim, pim, "p", token_budget=4096)
    de = DecodeEngine(sim, dim, "d", False, 2048)
    sim.routes = [ModelRoutes(Router([pe], [1.0], "proportional"), Router([de], [1.0], "proportional"))]
    sim.run([0])
    tx = dim.kv_transfer_s(inp, min(pim.net_gbps, dim.net_gbps))
    assert tx > dim.net_latency_s
    m = out - 1
    decode = m * dim.decode_cycle_s(1, inp + 1 + (m - 1) / 2)
    assert req.t_first[0] == pytest.approx(pim.prefill_s(1, inp))
    assert req.t_done[0] - req.t_first[0] == pytest.approx(tx + decode, rel=1e-9)


def test_pipeline_decode_cycle_is_bounded_by_stage_sum_and_bottleneck(pm: PerfModel) -> None:
    plan, sc = small_plan()
    topo = build_topology(plan, sc, pm)
    two = next(i.model for i in topo.instances if i.plan.template_id == "2x1xL40S")
    one = instance(pm, "llama-3-8b", "1xL40S")
    assert two.n_stages == 2
    # 2 micro-batches of 16 on half the layers each: slower than 1 batch of 16 on half, faster than 32 on all
    assert two.decode_cycle_s(32, 1000) < one.decode_cycle_s(32, 1000) * 1.5
    assert two.decode_cycle_s(32, 1000) > one.decode_cycle_s(16, 1000) * 0.5


def test_router_proportional_shares_and_least_loaded() -> None:
    class Fake:
        def __init__(self) -> None:
            self.n = 0

        def load(self) -> float:
            return self.n

    a, b = Fake(), Fake()
    r = Router([a, b], [1.0, 3.0], "proportional")  # type: ignore[list-item]
    picks = [r.pick() for _ in range(400)]
    assert picks.count(a) == 100 and picks.count(b) == 300  # type: ignore[comparison-overlap]
    ll = Router([a, b], [1.0, 1.0], "least-loaded")  # type: ignore[list-item]
    for _ in range(10):
        e = ll.pick()
        e.n += 1  # type: ignore[attr-defined]
    assert a.n == b.n == 5


def test_headroom_finds_a_scale_where_attainment_crosses(pm: PerfModel) -> None:
    from planning.simulate import headroom

    plan, sc = small_plan()
    topo = build_topology(plan, sc, pm)
    cfg = SimConfig(duration_s=60, seed=1)
    room = headroom(topo, cfg, lo=0.5, hi=64.0, iterations=5)
    assert 0.5 <= room.scale < 64.0
    below = [a for k, a in room.evaluations if k <= room.scale]
    above = [a for k, a in room.evaluations if k > room.scale]
    assert all(a >= 0.99 for a in below)
    assert above and all(a < 0.99 for a in above)


def test_benchmark_keys_and_concurrency_trend(pm: PerfModel) -> None:
    one = benchmark("llama-3-8b", "H100", input_len=512, output_len=128, concurrency=1, perf=pm)
    many = benchmark("llama-3-8b", "H100", input_len=512, output_len=128, concurrency=32, perf=pm)
    d = one.to_dict()
    for key in ("ttft_ms_mean", "itl_ms_mean", "output_tokens_per_s", "ttft_ms_p90", "itl_ms_p90"):
        assert key in d and d[key] > 0
    assert many.output_tokens_per_s > 5 * one.output_tokens_per_s
    assert many.itl_ms_mean > one.itl_ms_mean
    # concurrency 1 is one request at a time: ITL is one decode step of batch 1
    assert one.itl_ms_mean == pytest.approx(
        pm.estimate("llama-3-8b", "H100", batch=1, input_len=512 + 64).decode_step_ms, rel=0.05)


def test_bad_inputs_are_planning_errors(pm: PerfModel) -> None:
    with pytest.raises(PlanningError, match="router"):
        SimConfig(router="random")
    with pytest.raises(PlanningError, match="duration"):
        SimConfig(duration_s=0)
    with pytest.raises(PlanningError, match="concurrency"):
        benchmark("llama-3-8b", "H100", input_len=10, output_len=10, concurrency=0, perf=pm)
    with pytest.raises(PlanningError):
        benchmark("llama-3-70b", "L4", input_len=10, output_len=10, concurrency=1, perf=pm)


def test_trace_arrivals_are_rescaled_and_keep_the_trace_sizes(pm: PerfModel, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from planning.traces import read_trace

    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n0.0,800,100\n0.5,1200,50\n0.7,300,300\n"
                    "1.9,900,120\n2.2,1500,20\n3.0,700,200\n", encoding="utf-8")
    plan, sc = small_plan()
    res = simulate_plan(plan, sc, SimConfig(duration_s=60, seed=1, trace=read_trace(path)), perf=pm)
    assert res.arrivals == "trace"
    assert res.requests == pytest.approx(4 * 60, rel=0.05)  # the plan's 4 req/s
    # every request comes from the trace: total output tokens are a sum of the trace's sizes
    tokens = sum(i.tokens_out for i in res.instances)
    assert tokens % 10 == 0 and tokens != res.requests * 120


def test_prefill_pipeline_keeps_at_most_s_batches_in_flight(pm: PerfModel) -> None:
    """vLLM's virtual engines: a 2-stage prefill pipeline whose second stage (8 layers on one L4, bound by its
    weight reads for short prompts) is slow for one-prompt batches holds at most 2 batches in flight, so waiting
    prompts form larger batches and the pipeline keeps up at 100 req/s. Taking a batch whenever stage 1 is free
    would feed one prompt at a time to stage 2 and fall behind (TTFT grows for the whole run)."""
    from planning.result import NodeBox, StagePlan
    from planning.simulate import InstanceModel

    rate, inp = 100.0, 64
    stages = (StagePlan(24, 0, 24, (NodeBox("1xH100", "H100", 1, 1.0),)),
              StagePlan(8, 24, 32, (NodeBox("1xL4", "L4", 1, 1.0),)))
    pim = InstanceModel(pm, pm.model("llama-3-8b"), stages, "prefill", 1600, inp, 2)
    one, four = pim.prefill_stage_s(1, inp), pim.prefill_stage_s(4, 4 * inp)
    assert one[1][0] > 2 * one[0][0] and 1 / one[1][0] < rate < 1 / one[0][0]  # stage 2 slower than arrivals at k = 1
    assert 4 / four[1][0] > rate  # ... and fast enough at k = 4
    dim = instance(pm, "llama-3-8b", "8xH100", phase="decode", slo_ms=100)
    rng = np.random.default_rng(1)
    n = 1500
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    req = _requests(arrival.tolist(), inp, 2)
    sim = Sim([], req)
    pe = PrefillEngine(sim, pim, "p", token_budget=8 * inp)
    de = DecodeEngine(sim, dim, "d", False, 2048)
    sim.routes = [ModelRoutes(Router([pe], [1.0], "proportional"), Router([de], [1.0], "proportional"))]
    most = [0]
    start = pe.try_start

    def watched(t: float) -> None:
        start(t)
        most[0] = max(most[0], pe.in_flight)

    pe.try_start = watched  # type: ignore[method-assign]
    sim.run(range(n))
    assert most[0] == 2 and pe.in_flight == 0
    ttft = np.array(req.t_first) - arrival
    assert not np.isnan(ttft).any() and pe.peak_batch >= 3
    assert ttft.mean() < 0.5 and ttft[-100:].mean() < 0.5  # no backlog at the end of the run


def test_tgi_router_runs_a_prompt_step_only_when_the_gate_opens(pm: PerfModel) -> None:
    """The simulated TGI 2 engine runs waiting prompts only when nothing decodes, when they are at least 0.3 of the
    running batch, or 19 decode steps after the last prompt step; its TTFT grows, its throughput does not drop."""
    from planning.perf.engines import published_engine
    from planning.simulate import benchmark
    from planning.simulate import run as run_mod

    eng = published_engine(pm, "tgi", "2.0.4", "A10G")
    assert eng.router is not None
    kw = dict(input_len=474, output_len=150, concurrency=13, requests=80, chunk_tokens=eng.max_batched_tokens,
              max_seqs=eng.max_num_seqs, scheduling=eng.scheduling, memory=eng.memory, perf=pm)
    seen: list[tuple[int, int, int]] = []
    orig = DecodeEngine._gate_open

    def gate(self: DecodeEngine) -> bool:
        is_open = orig(self)
        if is_open and self.router is not None:
            seen.append((self.b, len(self.prefill_q), self.steps - self.last_prefill))
        return is_open

    DecodeEngine._gate_open = gate  # type: ignore[method-assign]
    try:
        held = benchmark("llama-3-8b", "A10G", router=eng.router, **kw)  # type: ignore[arg-type]
    finally:
        DecodeEngine._gate_open = orig  # type: ignore[method-assign]
    free = benchmark("llama-3-8b", "A10G", **kw)  # type: ignore[arg-type]
    assert seen and run_mod is not None
    for b, waiting, since in seen:
        assert b == 0 or waiting >= eng.router.min_waiting(b) or since >= eng.router.max_decode_steps
    assert any(b > 0 and since < eng.router.max_decode_steps for b, _w, since in seen)  # the ratio opened it
    assert held.ttft_ms_mean > free.ttft_ms_mean
    assert held.output_tokens_per_s > 0.95 * free.output_tokens_per_s
