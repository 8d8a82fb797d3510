"""Memory as the driver reports it, and each engine's own KV reservation (docs/perf-model.md Sec. 2)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.perf import PerfModel, engines
from planning.perf.engines import (
    BenchRun,
    EngineMemory,
    engine_memory,
    planner_memory,
    published_engine,
    sglang_mem_fraction,
    stated_free_fraction,
    trtllm_bench_limits,
)

GIB = 2.0**30


@pytest.fixture(scope="module")
def pm() -> PerfModel:
    return PerfModel()


def test_engines_reserve_memory_their_own_way(pm: PerfModel) -> None:
    s = pm.calibration.settings
    cap, weights, act = 23028 * 2.0**20, 16.06e9, 0.3e9
    vllm = engine_memory("vllm", "0.8.5", s)
    assert vllm.kv_bytes(cap, weights, act) == pytest.approx(0.9 * cap - weights - act - vllm.overhead_bytes)
    trt = engine_memory("trtllm", "1.0", s, free_fraction=0.95)
    assert trt.kv_bytes(cap, weights, act) == pytest.approx(0.95 * (cap - weights - act - trt.overhead_bytes))
    assert trt.kv_tokens(1000, 1000) == 2000 and vllm.kv_tokens(1000, 1000) == 1500  # GUARANTEED_NO_EVICT
    tgi = engine_memory("tgi", "2.0.4", s)
    assert tgi.of == "free" and tgi.fraction == 0.95
    sgl = engine_memory("sglang", "0.4.9", s, memory_bytes=81559 * 2.0**20, tp=1)
    assert not sgl.activations_inside and sgl.fraction == pytest.approx((79.65 - 10.0) / 79.65, abs=1e-3)
    assert sglang_mem_fraction(23034 * 2.0**20, 2) == pytest.approx((22.49 - 3.0) / 22.49, abs=1e-3)
    assert sglang_mem_fraction(80 * GIB, 8, "0.3.6") == 0.81
    assert planner_memory(s) == EngineMemory("vllm", "card", s.gpu_memory_utilization, s.engine_overhead_gib, True,
                                             "grow", "--gpu-memory-utilization", planner_memory(s).source)
    assert stated_free_fraction("trtllm-bench with kv_cache_free_gpu_mem_fraction 0.95 (...)") == 0.95
    assert stated_free_fraction("nothing stated") is None


def test_trtllm_bench_sizes_its_batch_from_memory() -> None:
    """tensorrt_llm/bench/build/tuning.py: requests the KV estimate holds, capped at 4096; tokens batch x (1 + I/O),
    capped at 32768 (Llama-3.1-8B FP8 on one H100)."""
    kv_tok = 2 * 32 * 8 * 128 * 1.0
    assert trtllm_bench_limits(8.03e9, 1.0, kv_tok, 1, 81559 * 2.0**20, 128, 128) == (8192, 4096)
    # 0.95 x (79.65 GiB - 8.03 GB) of KV hold 530 requests of 2,176 tokens: batch 640, tokens 530 x 17 -> 9,216
    assert trtllm_bench_limits(8.03e9, 1.0, kv_tok, 1, 81559 * 2.0**20, 2048, 128) == (9216, 640)
    # 203 requests of 5,500 tokens: batch rounded to 224, tokens 203 x 11 -> 2,304
    assert trtllm_bench_limits(8.03e9, 1.0, kv_tok, 1, 81559 * 2.0**20, 5000, 500) == (2304, 224)


def test_kv_cache_on_a_24_gb_card_is_what_vllm_allocates(pm: PerfModel) -> None:
    """The closing note of the perf-v2 issue: Llama-3-8B on an RTX 4090 got 3.7 GB of KV cache in the model against
    ~6.4 GB in vLLM. Now vLLM's arithmetic: 0.9 x 23.99 GiB - 14.96 GiB of weights - one step's activations (2,048
    tokens by default on a card under 70 GiB) - 0.4 GiB; the planner's own engine steps 8,192 tokens."""
    from planning.perf.curves import workspace_bytes
    from planning.perf.roofline import LayerArch

    s = pm.calibration.settings
    arch = LayerArch.from_spec(pm.model("llama-3-8b"))
    weights = pm.model("llama-3-8b").weight_bytes()
    cap = pm.gpu("RTX4090").memory_bytes
    vllm = engine_memory("vllm", "0.8.5", s)
    kv = vllm.kv_bytes(cap, weights, float(workspace_bytes(arch, s, 1, 2048.0)))
    assert kv == pytest.approx(6.4e9, rel=0.03)
    e = pm.estimate("llama-3-8b", "RTX4090", input_len=200, output_len=200)
    free = planner_memory(s).kv_bytes(cap, e.memory.weights_gb * 1e9, e.memory.activations_gb * 1e9)
    assert free == pytest.approx(kv - (e.memory.activations_gb * 1e9 - float(workspace_bytes(arch, s, 1, 2048.0))), rel=1e-3)
    assert e.memory.max_decode_batch == int(free // (e.memory.kv_cache_gb * 1e9))  # one 400-token sequence at batch 1


def test_published_rows_run_their_engine_memory(pm: PerfModel) -> None:
    """A TensorRT-LLM overview row with a stated fraction reserves 0.95 of the memory free after the weights and
    keeps a request's whole KV. Llama-3.1-70B FP16 on 2 x A100-80G (70.6 GB of weights per GPU) was infeasible under
    the old 10 % + 1.5 GB reserve; TensorRT-LLM's rule leaves it far more KV than vLLM's 0.9 of the card."""
    eng = published_engine(pm, "trtllm", "0.17", "A100-80G", 2, "trtllm-bench with kv_cache_free_gpu_mem_fraction 0.95",
                           run=BenchRun("llama-3-70b", "fp16", 2, 1000, 1000))
    assert eng.memory.of == "free" and eng.memory.fraction == 0.95 and eng.memory.hold == "reserve"
    kw = dict(input_len=1000, output_len=1000, engine_limits=(eng.max_batched_tokens, eng.max_num_seqs))
    trt = pm.serving("llama-3-70b", "A100-80G", 2, dtype="fp16", memory=eng.memory, **kw)  # type: ignore[arg-type]
    vllm = pm.serving("llama-3-70b", "A100-80G", 2, dtype="fp16", **kw)  # type: ignore[arg-type]
    assert trt is not None and vllm is not None  # 70.6 GB of weights per GPU: feasible on both (was infeasible)
    assert trt.limited_by == vllm.limited_by == "memory" and trt.batch > 1.5 * vllm.batch


def test_trtllm_bench_sizes_the_kv_element_the_attention_reads(pm: PerfModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch trtllm-bench sizes from its KV estimate reads the KV element of the estimate's precision
    (``resolve_precision``), the one the decode attention reads: an FP8 checkpoint's FP8 KV cache (1 byte) holds
    Llama-3.1-8B's 640 requests of 2048/128 on one H100; the same run with a 2-byte KV element holds half (320,
    rounded up to trtllm-bench's 128 step: 384), and its token budget follows (9,216 -> 4,608)."""
    notes = "trtllm-bench with kv_cache_free_gpu_mem_fraction 0.95"
    run = BenchRun("llama-3-8b", "fp8", 1, 2048, 128)
    fp8_kv = published_engine(pm, "trtllm", "1.0", "H100", 1, notes, run=run)
    real = engines.resolve_precision
    monkeypatch.setattr(engines, "resolve_precision", lambda spec, dtype, gpu: replace(real(spec, dtype, gpu), kv_bytes=2.0))
    wide_kv = published_engine(pm, "trtllm", "1.0", "H100", 1, notes, run=run)
    assert (fp8_kv.max_num_seqs, fp8_kv.max_batched_tokens) == (640, 9216)
    assert (wide_kv.max_num_seqs, wide_kv.max_batched_tokens) == (384, 4608)
