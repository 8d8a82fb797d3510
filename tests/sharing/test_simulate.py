"""Shared-GPU simulation (Prism Sec. 6): conservation, determinism, a closed-form single-model case, admission
policies, KV accounting, eviction's activation delay, and a long-tail shared plan end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planning import api
from planning.errors import PlanningError
from planning.sharing import solve_shared
from planning.sharing.profiles import GpuProfile, ModelProfile
from planning.sharing.simulate import (
    BURST_PERIOD_S,
    LOAD_GB_PER_S,
    SharedSimOptions,
    arrivals,
    simulate_node,
    simulate_sharing,
)


def _profile(mid: str, rate: float, *, prefill_ms: float = 50.0, step_ms: float = 10.0, out: float = 20.0,
             ttft_s: float = 1.0, tpot_s: float | None = 0.1, pool_requests: float = 8.0, burst: float = 1.0,
             weights_gb: float = 16.0) -> ModelProfile:
    per = 0.1  # GB of KV per request
    return ModelProfile(id=mid, base="llama-3-8b", rate_rps=rate, burstiness=burst, input_len=500.0, output_len=out,
                        ttft_s=ttft_s, tpot_s=tpot_s, weights_gb=weights_gb, kv_pool_gb=pool_requests * per,
                        kv_gb_per_request=per, weighted_rate=rate / ttft_s,
                        gpus={"L4": GpuProfile("L4", 0.0, 0.0, prefill_ms, step_ms, 1)})


def test_every_request_finishes_once_and_a_seed_repeats() -> None:
    models = [_profile("a", 2.0), _profile("b", 1.0, prefill_ms=80.0, out=50.0)]
    first, busy = simulate_node(models, "L4", SharedSimOptions(duration_s=300, seed=4))
    again, busy2 = simulate_node(models, "L4", SharedSimOptions(duration_s=300, seed=4))
    assert first == again and busy == busy2
    other, _ = simulate_node(models, "L4", SharedSimOptions(duration_s=300, seed=5))
    assert [m.requests for m in other] != [m.requests for m in first]
    assert all(m.requests > 100 for m in first)  # ~600 and ~300 arrivals
    assert all(m.tpot_ms_p50 == m.tpot_ms_p50 for m in first)  # every request got its tokens (no NaN)


def test_one_model_alone_busy_share_is_its_work() -> None:
    """One model alone, one request at a time (pool of one): the GPU's busy time is exactly Σ (prefill + decode
    steps) = n·(e + (O − 1)·t), and every TTFT ≥ the prefill time."""
    p = _profile("a", 0.5, prefill_ms=40.0, step_ms=5.0, out=11, pool_requests=1.0)
    (sim,), busy = simulate_node([p], "L4", SharedSimOptions(duration_s=2000, seed=1))
    work = sim.requests * (0.040 + 10 * 0.005)
    end = max(2000.0, 0.0)
    assert busy == pytest.approx(work / end, rel=0.01)  # the run ends shortly after the last arrival
    assert sim.ttft_ms_p50 >= 40.0 - 1e-6
    assert sim.tpot_ms_p50 == pytest.approx(5.0)  # alone: one step per token


def test_mm1_waiting_matches_the_closed_form() -> None:
    """Poisson arrivals, prefill-only requests (output 1 token) of a constant time e: an M/D/1 queue. The mean
    TTFT (wait + service) is e + ρ·e / (2(1 − ρ)) (Pollaczek–Khinchine)."""
    e, rate = 0.1, 6.0  # ρ = 0.6
    p = _profile("a", rate, prefill_ms=e * 1e3, out=1, pool_requests=1000.0, ttft_s=100.0, tpot_s=None)
    rho = rate * e
    expected = e + rho * e / (2 * (1 - rho))  # 0.175 s
    means = [simulate_node([p], "L4", SharedSimOptions(duration_s=3000, seed=seed))[0][0].ttft_ms_mean / 1e3 for seed in range(3)]
    assert float(np.mean(means)) == pytest.approx(expected, rel=0.05)


def test_moore_hodgson_misses_fewer_deadlines_than_fcfs_under_overload() -> None:
    """An overloaded GPU (ρ ≈ 1.3 of prefill work) with tight and loose TTFT SLOs: Moore–Hodgson admission keeps
    more requests within their TTFT than first come, first served."""
    tight = _profile("tight", 6.0, prefill_ms=80.0, out=1, ttft_s=0.5, tpot_s=None, pool_requests=500)
    loose = _profile("loose", 8.0, prefill_ms=100.0, out=1, ttft_s=3.0, tpot_s=None, pool_requests=500)
    mh, _ = simulate_node([tight, loose], "L4", SharedSimOptions(duration_s=120, seed=2, admission="moore-hodgson"))
    ff, _ = simulate_node([tight, loose], "L4", SharedSimOptions(duration_s=120, seed=2, admission="fcfs"))

    def on_time(res: list) -> float:
        return sum(m.attainment * m.requests for m in res)

    assert on_time(mh) > on_time(ff)


def test_reserved_kv_admits_no_more_than_paged() -> None:
    p = _profile("a", 0.4, out=200, step_ms=8.0, pool_requests=1.7, ttft_s=2.0)  # reserve: ρ ≈ 0.65
    paged, _ = simulate_node([p], "L4", SharedSimOptions(duration_s=600, seed=3, kv="paged"))
    reserve, _ = simulate_node([p], "L4", SharedSimOptions(duration_s=600, seed=3, kv="reserve"))
    assert reserve[0].requests == paged[0].requests
    assert reserve[0].ttft_ms_p99 >= paged[0].ttft_ms_p99 - 1e-9


def test_eviction_charges_the_activation_delay_after_an_idle_gap() -> None:
    """A rare model (one request every ~100 s) evicted after 10 s idle pays its weights' load time on most
    requests: TTFT ≈ prefill + weights / LOAD_GB_PER_S."""
    p = _profile("rare", 0.01, prefill_ms=50.0, out=2, weights_gb=16.0, ttft_s=5.0)
    kept, _ = simulate_node([p], "L4", SharedSimOptions(duration_s=20000, seed=6))
    evicted, _ = simulate_node([p], "L4", SharedSimOptions(duration_s=20000, seed=6, evict_after_s=10.0))
    # gaps are exponential with mean 100 s: about 90 % exceed the 10 s threshold
    assert 0.8 * evicted[0].requests <= evicted[0].activations < evicted[0].requests
    assert kept[0].activations == 0
    assert evicted[0].ttft_ms_p50 == pytest.approx(50.0 + 16.0 / LOAD_GB_PER_S * 1e3, rel=0.01)
    assert kept[0].ttft_ms_p50 == pytest.approx(50.0, rel=0.01)


def test_bursty_arrivals_keep_the_mean_rate_and_leave_idle_gaps() -> None:
    rng = np.random.default_rng(0)
    t = arrivals(0.5, 4.0, 200_000.0, rng)
    assert t.size / 200_000.0 == pytest.approx(0.5, rel=0.05)
    gaps = np.diff(t)
    assert (gaps > 2 * BURST_PERIOD_S).sum() > 50  # idle periods far longer than Poisson's mean gap of 2 s
    assert arrivals(0.0, 1.0, 100.0, rng).size == 0


def test_bad_options_name_the_field() -> None:
    p = _profile("a", 1.0)
    with pytest.raises(PlanningError, match="admission"):
        simulate_node([p], "L4", SharedSimOptions(admission="lifo"))
    with pytest.raises(PlanningError, match="kv"):
        simulate_node([p], "L4", SharedSimOptions(kv="magic"))
    with pytest.raises(PlanningError, match="has no profile on H100"):
        simulate_node([p], "H100")
    with pytest.raises(PlanningError, match="duration"):
        simulate_node([p], "L4", SharedSimOptions(duration_s=math.inf))


def test_long_tail_shared_plan_end_to_end() -> None:
    """The long-tail preset's KVPR shared plan: every shared model is simulated on its node, the totals add up,
    and the GPUs are far from saturated (the planner packs loads ≤ 1)."""
    scenario = api.load_preset_scenario("long-tail")
    res = solve_shared(scenario, method="kvpr", context=api.engine_context())  # the heuristic's own plan (the checked
    sim = simulate_sharing(res, scenario, SharedSimOptions(duration_s=300, seed=0))  # api.solve_shared returns the dedicated one here)
    shared = {m.model for n in res.shared_nodes for m in n.models}
    assert {m.model for m in sim.models} == shared
    assert len(sim.node_busy) == len(res.shared_nodes) and max(sim.node_busy) < 1.0
    assert 0.0 < sim.attainment <= 1.0 and sim.requests > 0
    assert sim.to_dict()["requests"] == sum(m.requests for m in sim.models)


def test_cli_simulate_with_sharing(small: dict, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[type-arg, no-untyped-def]
    """`planning simulate SCENARIO --sharing kvpr`: the shared GPUs simulated request by request next to the
    dedicated plan; JSON has both parts; a saved plan or a trace is refused with the fix."""
    import json

    from planning.cli import main
    from planning.scenario import Scenario, save_scenario

    path = save_scenario(Scenario.from_dict(small), tmp_path / "small.yaml")
    assert main(["simulate", str(path), "--sharing", "kvpr", "--duration", "120", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    shared = {m["model"] for m in out["shared"]["models"]}
    assert shared and "llama-3-8b" not in shared  # the popular model stays dedicated
    assert out["dedicated"] is not None and {m["model"] for m in out["dedicated"]["models"]} == {"llama-3-8b"}
    assert 0.0 <= out["shared"]["attainment"] <= 1.0 and out["gpus"] >= 1
    assert main(["simulate", str(path), "--sharing", "kvpr", "--duration", "60"]) == 0
    text = capsys.readouterr().out
    assert "Shared plan (kvpr)" in text and "Dedicated plan of the popular models" in text
    assert main(["simulate", str(path), "--sharing", "kvpr", "--headroom"]) == 2
    assert "--sharing" in capsys.readouterr().err
