"""MoE experts from measured fused-MoE kernels, engine-specific kernels and attention DP (issue 42)."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel, Workload
from planning.perf.engines import BenchRun, published_engine
from planning.perf.moe import DEFAULT_MOE_PATH, MoeCurve, load_moe_kernels
from planning.perf.roofline import EngineCopy, LayerArch, resolve_precision


def _table(gpu: str, engine: str, dtype: str, shape: tuple[int, int, int, int], tp: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, seconds) of one measured curve, read straight from the shipped CSV."""
    rows = []
    with DEFAULT_MOE_PATH.open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            key = (r["gpu"], r["engine"], r["dtype"], int(r["hidden"]), int(r["inter"]), int(r["topk"]),
                   int(r["experts"]), int(r["tp"]))
            if key == (gpu, engine, dtype, *shape, tp):
                rows.append((float(r["tokens"]), float(r["latency_ms"]) * 1e-3))
    rows.sort()
    return np.array([t for t, _ in rows]), np.array([s for _, s in rows])


def _experts(pm: PerfModel, model_id: str, gpu_id: str, tp: int, tokens: np.ndarray, dtype: str | None = None,
             model: LayerArch | None = None) -> np.ndarray:
    spec = pm.model(model_id)
    dev = pm.device(gpu_id)
    arch = model or LayerArch.from_spec(spec)
    assert dev.moe is not None
    return dev.moe.seconds(dev, arch, resolve_precision(spec, dtype, pm.gpu(gpu_id)), tp, tokens)


def test_a_measured_setting_reads_the_table(pm: PerfModel) -> None:
    # Mixtral-8x7B on one H100 in BF16 under vLLM is measured as is: the expert time at each measured token count is
    # the measured latency (made non-decreasing in tokens), not a roofline.
    tokens, secs = _table("H100", "vllm", "bf16", (4096, 14336, 2, 8), 1)
    assert len(tokens) > 20
    got = _experts(pm, "mixtral-8x7b", "H100", 1, tokens, "bf16")
    np.testing.assert_allclose(got, np.maximum.accumulate(secs), rtol=1e-9)
    assert pm.kernel_notes("mixtral-8x7b", "H100", 1, "bf16")[0].endswith("interpolated over tokens.")


@pytest.mark.parametrize("model_id,gpu_id,tp", [("qwen3-235b-a22b", "H100", 8), ("mixtral-8x7b", "A100-80G", 2),
                                                ("gpt-oss-20b", "L4", 1), ("gpt-oss-120b", "A100-80G", 1)])
def test_small_batches_read_weights_large_ones_compute(pm: PerfModel, model_id: str, gpu_id: str, tp: int) -> None:
    # A few tokens touch a few experts, a few dozen most of them (weight-bound, nearly flat), thousands are
    # compute-bound (time doubles with the tokens).
    t = _experts(pm, model_id, gpu_id, tp, np.array([1.0, 64.0, 128.0, 4096.0, 8192.0, 16384.0]))
    assert np.all(np.diff(t) >= 0)
    assert t[2] / t[1] < 1.5, "64 -> 128 tokens: the weights of most experts are read either way"
    assert 1.6 < t[4] / t[3] < 2.4 and 1.6 < t[5] / t[4] < 2.4, "compute-bound: linear in tokens"
    assert t[1] / t[0] > 1.5, "one token reads top-k experts, 64 tokens most of them"


def test_unmeasured_shape_and_gpu_are_scaled_and_said_so(pm: PerfModel) -> None:
    spec = pm.model("qwen3-235b-a22b")
    wider = replace(LayerArch.from_spec(spec), moe_inter=2 * spec.moe_intermediate_size)
    t = np.array([1.0, 256.0, 8192.0])
    base = _experts(pm, "qwen3-235b-a22b", "H100", 4, t)
    scaled = _experts(pm, "qwen3-235b-a22b", "H100", 4, t, model=wider)
    assert np.all(scaled > base) and np.all(scaled < 2.2 * base), "twice the expert width: up to twice the time"
    dev = pm.device("H100")
    assert dev.moe is not None
    choice = dev.moe.choice(dev, wider, resolve_precision(spec, None, pm.gpu("H100")), 4)
    assert choice is not None and "the layer shape" in choice.describe()
    note = pm.kernel_notes("gpt-oss-20b", "L4", 1)[0]
    assert "scaled by the roofline ratio for the GPU (L4)" in note and "L40S" in note


def test_engine_is_in_the_key_and_the_provenance(pm: PerfModel) -> None:
    trt = pm.for_engine("trtllm")
    assert trt is pm.for_engine("TRTLLM") and pm.for_engine(None) is pm
    est = trt.estimate("mixtral-8x7b", "A100-80G", 2, batch=64, input_len=500, output_len=100)
    assert est.engine == "trtllm" and est.to_dict()["engine"] == "trtllm"
    assert any("trtllm fused-MoE kernel measured on A100-80G" in n for n in est.notes)
    vllm = pm.estimate("mixtral-8x7b", "A100-80G", 2, batch=64, input_len=500, output_len=100)
    assert vllm.engine == "vllm" and vllm.decode_step_ms != est.decode_step_ms
    wl = Workload(500, 100)
    spec = pm.model("mixtral-8x7b")
    assert pm._table_key(spec, "2xA100-80G", "decode", 80, wl, 6, None, None) != trt._table_key(
        spec, "2xA100-80G", "decode", 80, wl, 6, None, None)
    # the engine's own A100 constants (fitted on TensorRT-LLM 1.0's kernels) apply only under that engine
    assert trt.device("A100-80G").cal != pm.device("A100-80G").cal
    assert trt.device("H100").cal == pm.device("H100").cal


def test_fingerprint_follows_the_kernel_table(pm: PerfModel, tmp_path: Path) -> None:
    text = DEFAULT_MOE_PATH.read_text(encoding="utf-8").splitlines()
    head, first = text[0], text[1].split(",")
    first[9] = str(float(first[9]) * 2)
    path = tmp_path / "moe.csv"
    path.write_text("\n".join([head, ",".join(first), *text[2:]]) + "\n", encoding="utf-8")
    other = PerfModel(moe_kernels=load_moe_kernels(path))
    assert other.fingerprint() != pm.fingerprint()
    assert other._calibration_fingerprint() != pm._calibration_fingerprint()


@pytest.mark.parametrize("bad,field", [("gpu,engine\nH100,vllm\n", "missing columns"),
                                       (None, "non-numeric")])
def test_a_malformed_kernel_file_names_the_problem(tmp_path: Path, bad: str | None, field: str) -> None:
    path = tmp_path / "moe.csv"
    if bad is None:
        lines = DEFAULT_MOE_PATH.read_text(encoding="utf-8").splitlines()[:3]
        cells = lines[2].split(",")
        cells[8] = "many"
        lines[2] = ",".join(cells)
        bad = "\n".join(lines) + "\n"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(PlanningError) as err:
        load_moe_kernels(path)
    assert field in str(err.value)


def test_curve_extrapolates_linearly_beyond_the_table() -> None:
    c = MoeCurve("X", "vllm", "bf16", (1, 1, 1, 1), 1, np.log(np.array([1.0, 100.0])), np.log(np.array([1.0, 2.0])),
                 "test")
    assert c.seconds(np.array([400.0]))[0] == pytest.approx(8.0)
    assert c.seconds(np.array([0.0]))[0] == pytest.approx(1.0)


def test_attention_dp_keeps_kv_heads_whole(pm: PerfModel) -> None:
    # Qwen3-235B has 4 KV heads: TP 8 replicates them (one per GPU), attention DP keeps each sequence's 4 heads on
    # one GPU, half the KV per GPU per token of the node; the attention weights are whole on every GPU.
    arch = LayerArch.from_spec(pm.model("qwen3-235b-a22b"))
    dp = replace(arch, attention_dp=True)
    prec = resolve_precision(pm.model("qwen3-235b-a22b"), None, pm.gpu("H200"))
    assert dp.kv_bytes_per_token(8, 1.0) == pytest.approx(arch.kv_bytes_per_token(8, 1.0) / 2)
    assert dp.weight_bytes_per_gpu(prec, 8) - arch.weight_bytes_per_gpu(prec, 8) == pytest.approx(
        (arch.attn_params() * prec.dense_bytes + arch.embed_params_per_layer() * 2.0) * 7 / 8)
    run = BenchRun("qwen3-235b-a22b", "fp8", 8, 128, 2048)
    row = published_engine(pm, "trtllm", "1.0", "H200", 8, "TP8 with expert parallel and attention DP; trtllm-bench",
                           run=run)
    plain = published_engine(pm, "trtllm", "1.0", "H200", 8, "TP8; trtllm-bench", run=run)
    assert row.attention_dp and not plain.attention_dp and row.max_num_seqs > plain.max_num_seqs
    view = pm.for_engine("trtllm", attention_dp=True)
    assert view._layer_arch(pm.model("qwen3-235b-a22b")).attention_dp
    assert not pm.for_engine("trtllm")._layer_arch(pm.model("qwen3-235b-a22b")).attention_dp
    a = view.serving("qwen3-235b-a22b", "H200", 8, 8, input_len=1000, output_len=1000)
    b = pm.for_engine("trtllm").serving("qwen3-235b-a22b", "H200", 8, 8, input_len=1000, output_len=1000)
    assert a is not None and b is not None and a.max_output_tokens_per_s != b.max_output_tokens_per_s


def test_attention_dp_reserves_the_gathered_moe_workspace(pm: PerfModel) -> None:
    # TensorRT-LLM profiles max_num_tokens on every rank before it sizes the KV cache; under attention DP each GPU's
    # MoE runs over the tokens of all 8 (gathered), top-8 expanded, (2 h + 3 I) elements a row: 3.85 GB per GPU for
    # Qwen3-235B at 2,304 tokens a rank, against 0.10 GB of the tensor-parallel engine. The embedding and LM head
    # are whole on every GPU (2.5 GB BF16, not 0.3).
    from planning.perf.curves import workspace_bytes
    from planning.perf.engines import engine_memory

    spec = pm.model("qwen3-235b-a22b")
    arch = LayerArch.from_spec(spec)
    dp = replace(arch, attention_dp=True)
    settings = replace(pm.calibration.settings, max_batched_tokens=2304.0)
    ws_dp = float(workspace_bytes(dp, settings, 8, 2304.0))
    ws_tp = float(workspace_bytes(arch, settings, 8, 2304.0))
    rows = 8 * 2304 * 8 * (2 * 4096 + 3 * 1536) * 2.0
    assert ws_dp == pytest.approx(rows + 2304 * settings.activation_factor * 4096 * 2.0)
    assert 3.8e9 < ws_dp < 3.9e9 and ws_tp < 0.15e9
    assert float(workspace_bytes(dp, settings, 8, 8192.0)) == pytest.approx(ws_dp)  # capped at the rank's budget
    prec = resolve_precision(spec, "fp8", pm.gpu("H100"))
    embed = arch.embed_params_per_layer() * arch.layers * 2.0
    assert dp.layers * (dp.weight_bytes_per_gpu(prec, 8) - arch.weight_bytes_per_gpu(prec, 8)) == pytest.approx(
        (arch.attn_params() * arch.layers * prec.dense_bytes + embed) * 7 / 8)
    assert 2.4e9 < embed < 2.6e9
    # The serving point on 8xH100 (TensorRT-LLM's reservation at 0.95) holds fewer sequences for it.
    view = pm.for_engine("trtllm", attention_dp=True)
    limits = (2304, 2048)
    mem = engine_memory("trtllm", "1.0", pm.calibration.settings, free_fraction=0.95)
    a = view.serving("qwen3-235b-a22b", "H100", 8, 8, "fp8", input_len=128, output_len=2048, engine_limits=limits,
                     memory=mem)
    assert a is not None and a.limited_by == "memory" and 1400 < a.batch < 1700


def test_planner_charges_the_running_batch_fluctuation(pm: PerfModel) -> None:
    # The tables read the expert time at n + kv_sigmas·√n (the running batch fluctuates by ~√n around the plan and
    # vLLM 0.14's A100 kernel steps up by ~39 % between 128 and 160 tokens); the simulator and estimates read n.
    spec = pm.model("qwen3-235b-a22b")
    arch, prec = LayerArch.from_spec(spec), resolve_precision(spec, None, pm.gpu("A100-80G"))
    plan, run = pm._planning_device("A100-80G"), pm.device("A100-80G")
    assert plan.moe is not None and run.moe is not None
    n = np.array([16.0, 128.0, 1024.0])
    sigma = pm.calibration.settings.kv_sigmas
    np.testing.assert_allclose(plan.moe.seconds(plan, arch, prec, 1, n),
                               run.moe.seconds(run, arch, prec, 1, n + sigma * np.sqrt(n)), rtol=1e-12)
    step = run.moe.seconds(run, arch, prec, 1, np.array([128.0, 160.0]))
    assert step[1] / step[0] > 1.3


def test_decode_tables_charge_experts_at_the_admission_cap(pm: PerfModel) -> None:
    # gpt-oss-20b on one A10G: the expert time doubles from 8 to 16 tokens. The engine admits n + σ·√(n / (1 − e))
    # (e the elasticity of the step the tables hold), so the tables charge the experts there: the spread the charge
    # uses is at least the one its own charged step implies (the fixed point holds) and the running step's.
    from planning.perf.curves import fluctuation_charged, fluctuation_spread, graphed, step_elasticity

    spec = pm.model("gpt-oss-20b")
    arch, prec = LayerArch.from_spec(spec), resolve_precision(spec, None, pm.gpu("A10G"))
    dev = graphed(pm._planning_device("A10G"), pm.calibration.settings)
    assert dev.moe is not None
    b = np.array([1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 11.0, 16.0, 23.0, 32.0])

    def spread(d: object) -> np.ndarray:
        t = layer_step(d)
        return fluctuation_spread(step_elasticity(b, t))

    def layer_step(d: object) -> np.ndarray:
        from planning.perf.roofline import EngineCopy, layer_time
        eng = EngineCopy(d, arch, prec, 1)  # type: ignore[arg-type]
        full = layer_time(eng, b, 1.0, 1500.0, False, "decode")
        slide = layer_time(eng, b, 1.0, 1500.0, True, "decode") if arch.window else full
        n_full = float(arch.full_in_window[-1])
        return np.asarray(n_full * full + (arch.layers - n_full) * slide + d.cal.step_ms * 1e-3)  # type: ignore[attr-defined]

    charged = fluctuation_charged(EngineCopy(dev, arch, prec, 1), b, 1500.0)
    assert charged.moe is not None
    used = np.interp(b, *charged.moe._spread)  # type: ignore[misc]
    running = replace(dev, moe=dev.moe.running())
    assert np.all(used >= spread(running) - 1e-12)
    assert np.all(used >= spread(charged) * (1 - 1e-3))  # the fixed point, to the rounds' precision
    # the charge is above the plain √n one wherever the step is elastic
    plain = layer_step(dev)
    assert np.all(layer_step(charged) >= plain - 1e-15) and np.any(layer_step(charged) > plain * 1.01)


def test_prefill_tables_read_the_experts_as_they_run(pm: PerfModel) -> None:
    # The admission-cap charge is a decode batch's fluctuation; a prefill step holds the prompts it was planned with,
    # so Qwen3-235B's prefill curves on the planner's device equal those of the device as it runs (perf v5.2) while
    # its decode curves stay charged.
    from planning.perf.curves import build_curves
    from planning.perf.roofline import NodeEngine

    spec = pm.model("qwen3-235b-a22b")
    arch, prec = LayerArch.from_spec(spec), resolve_precision(spec, None, pm.gpu("H100"))
    plan, run = pm._planning_device("H100"), pm.device("H100")
    assert plan.moe is not None and plan.moe.sigmas > 0 and run.moe is not None and run.moe.sigmas == 0
    wl, b = Workload(2048, 28), np.array([1.0, 2.0, 4.0, 8.0])

    def curves(dev: object, phase: str) -> np.ndarray:
        node = NodeEngine(arch, dev, prec, pm.calibration.settings, 2, 1)  # type: ignore[arg-type]
        return np.asarray(build_curves(node, phase, wl, b, 100.0).t_full)

    np.testing.assert_allclose(curves(plan, "prefill"), curves(run, "prefill"), rtol=1e-12)
    assert np.all(curves(plan, "decode") >= curves(run, "decode")) and np.any(curves(plan, "decode") > curves(run, "decode"))


def test_fp8_under_an_unmeasured_engine_reads_the_bf16_kernel(pm: PerfModel) -> None:
    # vLLM's FP8 MoE kernels are vLLM's own: the planner (vLLM) on an H100 reads its measured FP8 curve, while
    # TensorRT-LLM on an H100 (its MoE kernels measured only on the A100) reads vLLM's BF16 curve scaled to FP8 by
    # the roofline, and says so; on the A100 TensorRT-LLM reads its own measured kernel.
    spec = pm.model("mixtral-8x7b")
    arch, fp8 = LayerArch.from_spec(spec), resolve_precision(spec, "fp8", pm.gpu("H100"))
    t = np.array([16.0, 1024.0, 8192.0])
    tokens, secs = _table("H100", "vllm", "fp8", (4096, 14336, 2, 8), 1)
    run = pm.device("H100")
    assert run.moe is not None
    np.testing.assert_allclose(run.moe.seconds(run, arch, fp8, 1, tokens), np.maximum.accumulate(secs), rtol=1e-9)
    trt = pm.for_engine("trtllm").device("H100")
    assert trt.moe is not None
    choice = trt.moe.choice(trt, arch, fp8, 1)
    assert choice is not None and choice.curve.dtype == "bf16" and choice.curve.engine == "vllm"
    assert "the dtype (fp8; vllm's FP8 MoE kernels are its own)" in choice.describe()
    bf16_tokens, bf16_secs = _table("H100", "vllm", "bf16", (4096, 14336, 2, 8), 1)
    bf16 = np.exp(np.interp(np.log(t), np.log(bf16_tokens), np.log(np.maximum.accumulate(bf16_secs))))
    got = trt.moe.seconds(trt, arch, fp8, 1, t)
    assert np.all(got < bf16), "FP8 weights and the FP8 peak: faster than the BF16 kernel it is scaled from"
    assert got[-1] < 0.8 * run.moe.seconds(run, arch, fp8, 1, t)[-1], "vLLM's FP8 kernel: ~1.2x BF16 at 8k tokens"
    a100 = pm.for_engine("trtllm").kernel_notes("mixtral-8x7b", "A100-80G", 2, engine="trtllm")[0]
    assert "trtllm fused-MoE kernel measured on A100-80G" in a100 and "dtype" not in a100


def test_trtllm_fuses_the_fp8_input_quantization(pm: PerfModel) -> None:
    # TensorRT-LLM writes a GEMM's FP8 input from the kernel before it (perf v5.3): an FP8 GEMM under it costs the
    # GEMM alone, under the planner's vLLM the GEMM plus one quantization kernel over its input; BF16 is the same
    # under both. Its MoE quantizes the tokens once before the fused kernel, vLLM the top-k permuted rows.
    from planning.perf.engines import fuses_activation_quant
    from planning.perf.roofline import gemm_time, moe_input_quant_time, quant_kernel_time

    assert fuses_activation_quant("trtllm") and fuses_activation_quant("nim-trtllm")
    assert not fuses_activation_quant("vllm") and not fuses_activation_quant(None)
    vllm, trt = pm.device("H100"), pm.for_engine("trtllm").device("H100")
    assert not vllm.fused_quant and trt.fused_quant and pm.device("H100", "trtllm").fused_quant
    m = np.array([1.0, 256.0, 8192.0])
    plain = gemm_time(vllm, m, 8192, 8192, 1.0, "fp8")
    np.testing.assert_allclose(plain - gemm_time(trt, m, 8192, 8192, 1.0, "fp8"), quant_kernel_time(vllm, m, 8192))
    np.testing.assert_allclose(gemm_time(vllm, m, 8192, 8192, 2.0), gemm_time(trt, m, 8192, 8192, 2.0))
    np.testing.assert_allclose(moe_input_quant_time(vllm, m, 4096, 8), quant_kernel_time(vllm, 8 * m, 4096))
    np.testing.assert_allclose(moe_input_quant_time(trt, m, 4096, 8), quant_kernel_time(trt, m, 4096))
    fp8 = pm.estimate("llama-3-8b", "H100", dtype="fp8", batch=8, input_len=2048, output_len=128)
    fused = pm.for_engine("trtllm").estimate("llama-3-8b", "H100", dtype="fp8", batch=8, input_len=2048,
                                             output_len=128)
    assert fused.prefill_ms < fp8.prefill_ms and fused.decode_step_ms < fp8.decode_step_ms
