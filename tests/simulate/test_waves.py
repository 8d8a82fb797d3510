"""llmperf's launcher in the simulator (``simulate.bench.waves``): waves of requests sent ``gap_s`` apart, the next
wave once the whole wave is done. Checked on what follows from that rule alone: one client is a closed loop plus
the gap before each request; a wave of prompts sent together shares one prefill step on a prefill-first engine, so
spreading them cuts the TTFT; a wave waits for its last request."""

from __future__ import annotations

import math

import pytest

from planning.errors import PlanningError
from planning.measurements.fit import simulate_point
from planning.measurements.schema import Measurement
from planning.perf import PerfModel
from planning.simulate.bench import Waves, benchmark, waves

V0 = {"chunk_tokens": 8192, "max_seqs": 256, "scheduling": "prefill-first"}  # vLLM 0.4's scheduler


def test_one_client_is_a_closed_loop_plus_the_gap_before_each_request(pm: PerfModel) -> None:
    closed = benchmark("llama-3-8b", "A10G", input_len=466, output_len=64, concurrency=1, requests=6, perf=pm)
    gap = 0.25
    w = waves("llama-3-8b", "A10G", input_len=466, output_len=64, launcher=Waves(1, gap, 6), perf=pm)
    assert w.ttft_ms_mean == pytest.approx(closed.ttft_ms_mean, rel=1e-9)
    assert w.itl_ms_mean == pytest.approx(closed.itl_ms_mean, rel=1e-9)
    # the run spans each request's gap more: from the first send to the last token, 5 gaps between 6 requests
    assert 1 / w.requests_per_s - 1 / closed.requests_per_s == pytest.approx(5 * gap / 6, rel=1e-6)


def test_spreading_a_waves_prompts_cuts_the_ttft_on_a_prefill_first_engine(pm: PerfModel) -> None:
    ttft = [waves("llama-3-8b", "A10G", input_len=466, output_len=64, launcher=Waves(16, g, 32), perf=pm,
                  **V0).ttft_ms_mean for g in (0.0, 0.1, 0.4)]  # type: ignore[arg-type]
    assert ttft[0] > ttft[1] > ttft[2]
    # together, the 16 prompts are prefilled as one step: every TTFT is at least 16 prompts' prefill at batch 1
    one = waves("llama-3-8b", "A10G", input_len=466, output_len=64, launcher=Waves(1, 0.0, 1), perf=pm,
                **V0).ttft_ms_mean  # type: ignore[arg-type]
    assert ttft[0] > 8 * one


def test_the_next_wave_starts_when_the_whole_wave_is_done(pm: PerfModel) -> None:
    # 3 clients, 10 s apart: each request runs alone (e s), the wave ends at 30 + e, the next one's
    # requests go at 40 + e, 50 + e, 60 + e; the run spans first send (10) to last token (60 + 2e)
    alone = benchmark("llama-3-8b", "A10G", input_len=466, output_len=64, concurrency=1, requests=1, perf=pm)
    e = 1 / alone.requests_per_s
    w = waves("llama-3-8b", "A10G", input_len=466, output_len=64, launcher=Waves(3, 10.0, 6), perf=pm)
    assert w.ttft_ms_mean == pytest.approx(alone.ttft_ms_mean, rel=1e-9)
    assert 6 / w.requests_per_s == pytest.approx(50 + 2 * e, rel=1e-9)


@pytest.mark.parametrize(("kw", "field"), [({"clients": 0}, "clients"), ({"requests": 0}, "requests"),
                                           ({"gap_s": -0.1}, "gap_s"), ({"gap_s": math.nan}, "gap_s"),
                                           ({"gap_s": 1e300}, "gap_s")])
def test_a_bad_launcher_names_its_field(kw: dict[str, float], field: str) -> None:
    args: dict[str, float] = {"clients": 4, "gap_s": 0.1, "requests": 8, **kw}
    with pytest.raises(PlanningError) as err:
        Waves(int(args["clients"]), args["gap_s"], int(args["requests"]))
    assert err.value.field == field


def point(**kw: object) -> Measurement:
    base: dict[str, object] = {"model": "llama-3-8b", "gpu": "A10G", "count": 1, "tp": 1, "engine": "vllm",
                               "engine_version": "0.4.3", "dtype": "bf16", "input_len": 466, "output_len": 64,
                               "concurrency": 8, "request_rate": None, "requests": 16, "ttft_ms_mean": 200.0}
    return Measurement(**{**base, **kw})  # type: ignore[arg-type]


def test_a_point_with_a_client_gap_is_simulated_as_llmperf_waves(pm: PerfModel) -> None:
    closed, spread = simulate_point(point(), pm), simulate_point(point(client_gap_s=0.3), pm)
    # 16 requests in 2 waves, 0.3 s apart and idle for each wave's last, against clients that never wait
    assert spread.requests_per_s < closed.requests_per_s
    assert spread.ttft_ms_mean < closed.ttft_ms_mean  # the prompts no longer arrive together
    assert "client_gap_s" not in point(client_gap_s=0.3).as_row()  # never stored: no file states it


def test_a_client_gap_needs_a_wave_size() -> None:
    with pytest.raises(PlanningError) as err:
        point(concurrency=None, request_rate=2.0, client_gap_s=0.1)
    assert err.value.field == "client_gap_s"
