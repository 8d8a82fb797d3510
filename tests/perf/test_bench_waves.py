"""A trtllm-bench dataset run in waves (planning.perf.waves): CUDA-graph padding, the overlap scheduler, the waves'
sum, and which published runs are timed that way (engines.bench_schedule)."""

from __future__ import annotations

import numpy as np
import pytest

from planning.perf import PerfModel
from planning.perf.curves import graphed
from planning.perf.engines import OVERVIEW_GRAPH_SIZES, BenchSchedule, bench_schedule
from planning.perf.results import Workload
from planning.perf.roofline import NodeEngine
from planning.perf.serving import step_time
from planning.perf.waves import bench_throughput, captured_sizes, overlapped, padded_batch, wave_seconds

BENCH = "trtllm-bench with kv_cache_free_gpu_mem_fraction 0.95"


def test_captured_sizes_stop_at_the_engine_cap_and_add_it() -> None:
    """Sizes above min(max_batch_size, max_num_tokens) are not captured; the cap itself is, when not listed."""
    assert captured_sizes(OVERVIEW_GRAPH_SIZES, 2048)[-3:] == (512.0, 1024.0, 2048.0)
    assert captured_sizes(OVERVIEW_GRAPH_SIZES, 2304)[-2:] == (2048.0, 2304.0)
    assert captured_sizes((1, 2, 4), 3) == (1.0, 2.0, 3.0)


def test_a_decode_step_pads_to_the_next_captured_size() -> None:
    """129 sequences run as 256 and 385 as 512; a captured size runs as itself; above the largest, unpadded; under
    attention DP every rank takes the largest rank's ceil(batch / tp) before padding."""
    sizes = captured_sizes(OVERVIEW_GRAPH_SIZES, 2048)
    assert padded_batch(129, sizes, 1, False) == 256
    assert padded_batch(385, sizes, 1, False) == 512
    assert padded_batch(384, sizes, 1, False) == 384
    assert padded_batch(3000, sizes, 1, False) == 3000
    assert padded_batch(1530, sizes, 8, True) == 8 * 256  # 192 a rank -> 256
    assert padded_batch(1530, sizes, 8, False) == 2048
    assert padded_batch(17000, sizes, 8, True) == 17000  # 2,125 a rank: above the captured 2,048


def test_the_overlap_scheduler_charges_the_longer_of_host_and_gpu() -> None:
    """A step whose host work overlaps the next GPU step takes max(GPU, host), not their sum."""
    assert overlapped(0.010, 0.001) == pytest.approx(0.009)
    assert overlapped(0.0015, 0.001) == pytest.approx(0.001)


def _node(pm: PerfModel) -> NodeEngine:
    """Llama-3-8B FP8 on one H100 under a 2,048-token, 512-sequence engine."""
    return pm._serving_node("llama-3-8b", "H100", 1, 1, "fp8", (2048, 512))


def test_a_wave_is_its_prefill_steps_then_its_decode_steps(pm: PerfModel) -> None:
    """Without padding or overlap a wave of B sequences is ceil(B·I / T) prompt steps of B·I / steps tokens and O
    decode steps of B sequences at the mean context I + O/2."""
    node = _node(pm)
    eng = node.copy(graphed(node.dev, node.settings))
    wl, b, budget = Workload(1000.0, 200.0), 256.0, 2048.0
    sizes = (1.0, 256.0)  # 256 is captured: no padding
    steps = int(np.ceil(b * 1000.0 / budget))
    t_pre = float(step_time(eng, np.zeros(1), 1000.0, np.array([b * 1000.0 / steps]), 1000.0)[0])
    t_dec = float(step_time(eng, np.array([b]), 1100.0, np.zeros(1), 1000.0)[0])
    assert wave_seconds(eng, b, wl, budget, sizes, None) == pytest.approx(steps * t_pre + 200.0 * t_dec)
    host = node.dev.cal.step_ms * 1e-3
    hidden = wave_seconds(eng, b, wl, budget, sizes, host)
    assert hidden == pytest.approx(steps * (t_pre - host) + 200.0 * (t_dec - host))
    padded = wave_seconds(eng, b - 1.0, wl, budget, sizes, None)  # 255 runs its GEMMs at 256
    unpadded = wave_seconds(eng, b - 1.0, wl, budget, (1.0, 255.0), None)
    assert padded > unpadded


def test_the_run_sums_its_full_waves_and_the_last_partial_one(pm: PerfModel) -> None:
    """Throughput = requests · O / (full waves · wave(B) + wave(rest))."""
    node = _node(pm)
    eng = node.copy(graphed(node.dev, node.settings))
    wl, b = Workload(500.0, 100.0), 200.0
    schedule = BenchSchedule(requests=500)  # 2 full waves of 200 and one of 100
    sizes = captured_sizes(schedule.graph_sizes, 512)
    host = node.dev.cal.step_ms * 1e-3
    total = 2 * wave_seconds(eng, b, wl, 2048.0, sizes, host) + wave_seconds(eng, 100.0, wl, 2048.0, sizes, host)
    assert bench_throughput(node, wl, b, schedule) == pytest.approx(500 * 100.0 / total)
    plain = bench_throughput(node, wl, b, BenchSchedule(requests=500, overlap=False))
    assert bench_throughput(node, wl, b, schedule) > plain


def test_only_pytorch_trtllm_bench_runs_of_a_stated_dataset_run_in_waves() -> None:
    """The 1.0 overview's trtllm-bench rows get their dataset size; the 0.17 (TensorRT engine) runs, other engines,
    runs without trtllm-bench and lengths the overview does not list keep the closed form."""
    assert bench_schedule("trtllm", "1.0", BENCH, 128, 2048) == BenchSchedule(requests=3000)
    assert bench_schedule("trtllm", "1.0", BENCH, 128, 128) == BenchSchedule(requests=30000)
    assert bench_schedule("trtllm", "0.17", BENCH, 128, 2048) is None
    assert bench_schedule("vllm", "1.0", BENCH, 128, 2048) is None
    assert bench_schedule("trtllm", "1.0", "static batch", 128, 2048) is None
    assert bench_schedule("trtllm", "1.0", BENCH, 300, 300) is None


def test_bench_throughput_is_the_node_output_rate(pm: PerfModel) -> None:
    """PerfModel.bench_throughput runs the waves at the closed form's memory-limited batch: the same order as the
    closed form's peak, and None where the model does not fit."""
    kw = dict(input_len=1000, output_len=1000, engine_limits=(2048, 640))
    peak = pm.serving("llama-3-8b", "H100", 1, 1, "fp8", **kw)  # type: ignore[arg-type]
    waves = pm.bench_throughput("llama-3-8b", "H100", 1, 1, "fp8", BenchSchedule(3000), **kw)  # type: ignore[arg-type]
    assert peak is not None and waves is not None
    assert 0.7 < waves / peak.max_output_tokens_per_s < 1.3
    assert pm.bench_throughput("llama-3.3-70b", "L4", 1, 1, "fp8", BenchSchedule(3000), **kw) is None  # type: ignore[arg-type]
