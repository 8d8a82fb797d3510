"""Properties of the T̂ stage tables and the roofline that must hold for every model and GPU."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planning.perf import PerfModel, Workload
from planning.perf.roofline import (
    EngineCopy,
    LayerArch,
    allreduce_time,
    gemm_time,
    layer_time,
    resolve_precision,
)
from tests.perf.conftest import CORAL_MODELS, CORAL_SHAPES, CORAL_SLO

WL = Workload(input_len=1000, output_len=250)


@pytest.mark.parametrize("model_id", CORAL_MODELS)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_more_layers_never_more_throughput(pm: PerfModel, model_id: str, phase: str) -> None:
    spec = pm.model(model_id)
    slo = CORAL_SLO[model_id][0 if phase == "prefill" else 1]
    tables = pm.stage_tables(spec, CORAL_SHAPES, phase, slo, WL)
    assert tables.shape == (len(CORAL_SHAPES), 6, spec.layers)
    assert np.all(np.diff(tables, axis=2) <= 1e-9 * np.maximum(tables[:, :, :-1], 1.0))
    assert tables.max() > 0, "some shape must be able to serve at least one layer"


@pytest.mark.parametrize("model_id", CORAL_MODELS)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_tighter_slo_and_more_stages_never_more_throughput(pm: PerfModel, model_id: str, phase: str) -> None:
    spec = pm.model(model_id)
    slo = CORAL_SLO[model_id][0 if phase == "prefill" else 1]
    loose = pm.stage_tables(spec, CORAL_SHAPES, phase, slo, WL)
    tight = pm.stage_tables(spec, CORAL_SHAPES, phase, slo * 0.6, WL)
    assert np.all(tight <= loose + 1e-9)
    assert (tight < loose).any(), "a 40 % tighter SLO must bind somewhere"
    assert np.all(np.diff(loose, axis=1) <= 1e-9 * np.maximum(loose[:, :-1, :], 1.0))  # more stages: smaller budget


@pytest.mark.parametrize("gpu_id", ["H100", "A100-80G", "L40S", "L4", "A10G", "T4", "V100"])
@pytest.mark.parametrize("model_id", ["llama-3-8b", "qwen3-235b-a22b", "gpt-oss-20b", "phi-4"])
def test_larger_batch_never_shorter_step(pm: PerfModel, gpu_id: str, model_id: str) -> None:
    spec, gpu = pm.model(model_id), pm.gpu(gpu_id)
    dev, arch = pm.device(gpu_id), LayerArch.from_spec(spec)
    prec = resolve_precision(spec, None, gpu)
    batches = np.arange(1, 600, dtype=float)
    for tp in pm.tp_options(spec, 4):
        for sliding in (False, True):
            dec = layer_time(EngineCopy(dev, arch, prec, tp), batches, 1.0, 3000.0, sliding, "decode")
            pre = layer_time(EngineCopy(dev, arch, prec, tp), batches, 700.0, 0.0, sliding, "prefill")
            assert np.all(np.diff(dec) >= -1e-15) and np.all(np.diff(pre) >= -1e-15)


def test_out_of_memory_is_zero(pm: PerfModel) -> None:
    spec = pm.model("llama-3-70b")
    table = pm.stage_table(spec, "1xL4", "decode", 80, WL)
    weights_per_layer = LayerArch.from_spec(spec).weight_bytes_per_layer(resolve_precision(spec, None, pm.gpu("L4")))
    too_many = int(24e9 // weights_per_layer) + 1  # layers whose weights alone exceed an L4
    assert np.all(table[:, too_many - 1:] == 0)
    assert table[0, 0] > 0
    est = pm.estimate("llama-3-70b", "L4", batch=1, input_len=512, output_len=128)
    assert not est.fits
    assert est.max_prefill_tokens_per_s == 0 and est.max_decode_tokens_per_s == 0


def test_fp8_faster_than_bf16_for_big_weight_bound_gemms_on_h100(pm: PerfModel) -> None:
    dev = pm.device("H100")
    for m in (1, 16, 64):
        assert gemm_time(dev, m, 8192, 8192, 1.0, "fp8") < gemm_time(dev, m, 8192, 8192, 2.0, "bf16")
    bf16 = pm.estimate("llama-3-70b", "H100", 4, dtype="bf16", batch=8, input_len=1000, output_len=200)
    fp8 = pm.estimate("llama-3-70b", "H100", 4, dtype="fp8", batch=8, input_len=1000, output_len=200)
    assert fp8.decode_step_ms < bf16.decode_step_ms
    assert fp8.memory.weights_gb == pytest.approx(bf16.memory.weights_gb / 2, rel=0.05)


def test_fp8_on_gpu_without_fp8_is_an_error(pm: PerfModel) -> None:
    from planning.errors import PlanningError

    with pytest.raises(PlanningError, match="FP8"):
        pm.estimate("llama-3-8b", "A100-80G", dtype="fp8", batch=1, input_len=10)


def test_tensor_parallel_all_reduce_adds_time(pm: PerfModel) -> None:
    dev = pm.device("L40S")
    sizes = np.array([1e3, 1e6, 1e8])
    t2, t4 = allreduce_time(dev, sizes, 2), allreduce_time(dev, sizes, 4)
    assert np.all(t2 > 0) and np.all(np.diff(t2) > 0) and np.all(t4 > t2)
    assert float(allreduce_time(dev, 1e6, 1)) == 0.0
    spec = pm.model("qwen3-32b")
    arch, prec = LayerArch.from_spec(spec), resolve_precision(spec, None, pm.gpu("L40S"))
    no_comm = replace(dev, allreduce=None, link_bw=1e30, cal=replace(dev.cal, ar_latency_us=0.0))
    with_comm = layer_time(EngineCopy(dev, arch, prec, 2), 64.0, 1000.0, 0.0, False, "prefill")
    without = layer_time(EngineCopy(no_comm, arch, prec, 2), 64.0, 1000.0, 0.0, False, "prefill")
    assert with_comm > without


def test_sliding_window_decode_cheaper_at_long_context(pm: PerfModel) -> None:
    spec = pm.model("gpt-oss-20b")
    assert spec.sliding_window and "sliding" in spec.layer_types
    dense = replace(spec, sliding_window=None, layer_types=())
    catalog = replace(pm.catalog, models={**pm.catalog.models, "dense-oss": replace(dense, id="dense-oss")})
    pm2 = PerfModel(catalog=catalog, calibration=pm.calibration)
    swa = pm2.estimate("gpt-oss-20b", "H100", batch=32, input_len=32000, output_len=1000)
    full = pm2.estimate("dense-oss", "H100", batch=32, input_len=32000, output_len=1000)
    assert swa.decode_step_ms < 0.8 * full.decode_step_ms
    assert swa.memory.kv_cache_gb < 0.6 * full.memory.kv_cache_gb
    short_swa = pm2.estimate("gpt-oss-20b", "H100", batch=1, input_len=64, output_len=0)
    short_full = pm2.estimate("dense-oss", "H100", batch=1, input_len=64, output_len=0)
    assert short_swa.decode_step_ms == pytest.approx(short_full.decode_step_ms, rel=1e-6)


def test_moe_memory_counts_all_experts_but_decode_reads_active(pm: PerfModel) -> None:
    spec = pm.model("qwen3-235b-a22b")
    est = pm.estimate("qwen3-235b-a22b", "H100", 8, batch=1, input_len=128, output_len=1)
    assert est.memory.weights_gb == pytest.approx(spec.params_total * 2 / 1e9, rel=0.05)
    # The same architecture with every expert active (a dense model of the same size) must be much slower.
    dense = replace(spec, id="all-active", experts_active=spec.experts_total)
    pm2 = PerfModel(catalog=replace(pm.catalog, models={**pm.catalog.models, "all-active": dense}),
                    calibration=pm.calibration)
    all_active = pm2.estimate("all-active", "H100", 8, batch=1, input_len=128, output_len=1)
    assert all_active.memory.weights_gb == pytest.approx(est.memory.weights_gb)
    assert all_active.decode_step_ms > 2 * est.decode_step_ms
    long_moe = pm.estimate("qwen3-235b-a22b", "H100", 1, batch=4, input_len=4096)  # times even when OOM
    long_dense = pm2.estimate("all-active", "H100", 1, batch=4, input_len=4096)
    assert long_dense.prefill_ms > 5 * long_moe.prefill_ms  # compute-bound prefill FLOPs follow the active experts
    big = pm.estimate("qwen3-235b-a22b", "H100", 8, batch=256, input_len=128, output_len=1)
    assert big.decode_step_ms > 1.5 * est.decode_step_ms  # a large batch touches (almost) every expert


def test_llama3_8b_decode_step_on_h100_matches_bandwidth_floor(pm: PerfModel) -> None:
    est = pm.estimate("llama-3-8b", "H100", batch=1, input_len=512, output_len=128)
    floor_ms = 16.06e9 / 3.35e12 * 1e3  # 16 GB of BF16 weights over 3.35 TB/s = 4.8 ms
    assert floor_ms < est.decode_step_ms < 10.0
    assert est.provenance["decode_step_ms"] == "calibrated"


def test_every_model_and_gpu_answers(pm: PerfModel) -> None:
    for model_id in pm.catalog.models:
        for gpu_id in pm.catalog.gpus:
            for count in (1, 8):
                est = pm.estimate(model_id, gpu_id, count, batch=4, input_len=1000, output_len=200,
                                  ttft_ms=2000, tpot_ms=100)
                assert est.prefill_ms > 0 and est.decode_step_ms > 0
                assert est.fits or est.max_decode_tokens_per_s == 0
                assert set(est.provenance.values()) <= {"measured", "calibrated", "roofline"}
                assert all(0 < b < 3 for b in est.band.values())  # a factor 1 + b either way
