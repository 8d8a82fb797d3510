"""tools/check_aic_hopper.py (a `make calibrate`-side check, docs/perf-model.md Sec. 7) on a small synthetic wheel:
it reads the newest version's table from the zip, compares measured decode attention with the model's, and
restates AIConfigurator's TensorRT-LLM memory reserve. The real wheel is never read here."""

from __future__ import annotations

import importlib.util
import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planning.perf.roofline import attention_decode_time

ROOT = Path(__file__).resolve().parents[2]


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("check_aic_hopper", ROOT / "tools" / "check_aic_hopper.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


def _parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf)
    return buf.getvalue()


def _attention_frame(dev, scale: float) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Decode attention at Qwen3-235B's rank shape, timed as ``scale`` x the model's own estimate."""
    rows = []
    for kv, kv_bytes in (("fp8", 1.0), ("bfloat16", 2.0)):
        for b, step in ((32, 1023), (64, 2047), (128, 2047), (32, 8191)):
            t = float(attention_decode_time(dev, b, step + 1.0, 64, 4, 128, None, kv_bytes)) * 1e3
            rows.append(dict(batch_size=b, step=step, num_heads=64, num_key_value_heads=4, head_dim=128,
                             window_size=0, kv_cache_dtype=kv, latency=scale * t))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, pm):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("aic") / "aiconfigurator_core-0.0-py3-none-any.whl"
    base = "aiconfigurator_core/systems"
    with zipfile.ZipFile(path, "w") as zf:
        for gpu, system in TOOL.SYSTEMS.items():
            dev = pm.device(gpu, "trtllm")
            # an older release timed 3x slower: the check must read the newest (1.3.0rc20 > 1.2.0 > 1.0.0rc3)
            for version, scale in (("1.0.0rc3", 3.0), ("1.3.0rc20", 1.25), ("1.2.0", 3.0)):
                zf.writestr(f"{base}/data/{system}/attention/trtllm/{version}/generation_attention_perf.parquet",
                            _parquet(_attention_frame(dev, scale)))
            zf.writestr(f"{base}/{system}.yaml", "misc:\n  nccl_mem:\n    1: 0\n    8: 411041792\n"
                                                 "  other_mem: 3758096384\n")
    return TOOL.Wheel(path)


def test_newest_version_is_read_and_ratio_is_measured_over_model(wheel, pm) -> None:  # type: ignore[no-untyped-def]
    out = TOOL.attention_check(wheel, pm, TOOL.Shape())
    assert set(out.version) == {"1.3.0rc20"}
    assert set(zip(out.gpu, out.kv, strict=True)) == {(g, kv) for g in TOOL.SYSTEMS for kv in ("fp8", "bfloat16")}
    # every synthetic point above 32k tokens is 1.25x the model's: the check reports exactly that
    assert np.allclose(out.median_ratio_big, 1.25)
    assert (out.max_tokens == 32 * 8192).all()


def test_memory_reserve_restates_aiconfigurators_rule(wheel, pm) -> None:  # type: ignore[no-untyped-def]
    out = TOOL.memory_check(wheel, pm, TOOL.Shape()).set_index("row")
    assert list(out.index) == [f"{i:03d}" for i in range(31, 41)]
    # activations 2 x max_num_tokens x (64 heads x 128) x 22 bytes (family MOE at attention TP 1), no NCCL at TP 1
    expected = 2.0 * out.max_num_tokens * 64 * 128 * 22 / 2**30
    assert np.allclose(out.activations_gib, expected)
    assert (out.nccl_gib == 0).all() and np.allclose(out.other_gib, 3.5)
    assert np.allclose(out.reserve_gib, out.activations_gib + 3.5)
    assert out.withheld_share.iloc[0] == pytest.approx(1 - 0.985 * 0.98)


def test_oversized_entry_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "w.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.bin", b"\0" * (TOOL.MAX_ENTRY_BYTES + 1))
    with pytest.raises(SystemExit, match="more than"):
        TOOL.Wheel(path).read("big.bin")


def test_version_order() -> None:
    versions = ["1.3.0rc20", "1.0.0rc3", "1.2.0", "1.2.0rc5", "1.3.0rc10"]
    assert sorted(versions, key=TOOL.version_key) == ["1.0.0rc3", "1.2.0rc5", "1.2.0", "1.3.0rc10", "1.3.0rc20"]


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


def _moe_frame() -> pd.DataFrame:
    """TensorRT-LLM 1.0.0rc3's MoE table as the older wheels ship it: per-tensor FP8 at EP 8 timed 0.5 ms a 1k
    tokens, block FP8 at EP 8 1.5 ms, TP 8 per-tensor 2.0 ms; another shape and a BF16 row that must not be read."""
    rows = []
    for dtype, tp, ep, dist, ms in (("fp8", 1, 8, "power_law_1.2", 0.5), ("fp8_block", 1, 8, "power_law_1.2", 1.5),
                                    ("fp8", 8, 1, "power_law_1.2", 2.0), ("fp8", 8, 1, "power_law_1.01", 2.5),
                                    ("float16", 1, 8, "power_law_1.2", 9.0)):
        for n in (1024, 2048):
            rows.append(dict(moe_dtype=dtype, num_tokens=n, hidden_size=4096, inter_size=1536, topk=8, num_experts=128,
                             moe_tp_size=tp, moe_ep_size=ep, distribution=dist, latency=ms * n / 1024))
    rows.append(dict(moe_dtype="fp8", num_tokens=1024, hidden_size=4096, inter_size=14336, topk=2, num_experts=8,
                     moe_tp_size=1, moe_ep_size=8, distribution="power_law_1.2", latency=99.0))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def rc3_wheel(tmp_path_factory, pm):  # type: ignore[no-untyped-def]
    """An ``aiconfigurator`` 0.8.0-style wheel: package ``aiconfigurator``, one CSV text per op and release."""
    path = tmp_path_factory.mktemp("aic08") / "aiconfigurator-0.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for gpu, system in TOOL.SYSTEMS.items():
            base = f"aiconfigurator/systems/data/{system}/trtllm/1.0.0rc3"
            att = _attention_frame(pm.device(gpu, "trtllm"), 2.0).drop(columns="window_size")
            zf.writestr(f"{base}/generation_attention_perf.txt", _csv(att))
            zf.writestr(f"{base}/moe_perf.txt", _csv(_moe_frame()))
            zf.writestr(f"{base}/gemm_perf.txt", _csv(_gemm_frame(pm, gpu)))
    return TOOL.Wheel(path)


def _gemm_frame(pm, gpu: str) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """A ``gemm_perf.txt`` grid holding Llama-3-8B's decode shapes: FP8 timed 1.5 x and float16 0.8 x what
    ``gemm_time`` gives on the CUDA-graphed TensorRT-LLM device (the dense check compares with that device)."""
    from planning.perf.curves import graphed
    from planning.perf.roofline import gemm_time

    dev = graphed(pm.device(gpu, "trtllm"), pm.calibration.settings)
    rows = []
    for dtype, wbytes, compute, scale in (("fp8", 1.0, "fp8", 1.5), ("float16", 2.0, "bf16", 0.8)):
        for m in (64, 128, 256, 512):
            for n in (4096, 6144, 14336, 28672, 128256):
                for k in (4096, 14336):
                    t = float(gemm_time(dev, m, n, k, wbytes, compute)) * 1e3
                    rows.append(dict(gemm_dtype=dtype, m=m, n=n, k=k, latency=scale * t))
    return pd.DataFrame(rows)


def test_older_wheel_layout_is_read_at_the_named_release(rc3_wheel, pm) -> None:  # type: ignore[no-untyped-def]
    """The 1.0.0rc3 CSV tables (no window_size column) are read from the ``aiconfigurator`` package: measured /
    model is the synthetic 2x, and the MoE columns are the table's own latencies per parallelism and FP8 family."""
    assert rc3_wheel.pkg == TOOL.OLD_PKG
    att = TOOL.attention_check(rc3_wheel, pm, TOOL.Shape(), version=TOOL.RC3)
    assert set(att.version) == {TOOL.RC3}
    assert np.allclose(att.median_ratio_big, 2.0)
    moe = TOOL.moe_check(rc3_wheel, pm, TOOL.Shape(), tokens=(1024, 2048), version=TOOL.RC3).set_index(["gpu", "tokens"])
    for gpu in TOOL.SYSTEMS:
        assert moe.loc[(gpu, 2048), "ep8_pl1.2"] == pytest.approx(1.0)
        assert moe.loc[(gpu, 2048), "ep8_block_pl1.2"] == pytest.approx(3.0)
        assert moe.loc[(gpu, 1024), "tp8_pl1.2"] == pytest.approx(2.0)
        assert moe.loc[(gpu, 1024), "tp8_pl1.01"] == pytest.approx(2.5)
        assert np.isnan(moe.loc[(gpu, 1024), "ep8_bal"])  # 1.0.0rc3 timed no balanced routing
        assert moe.loc[(gpu, 1024), "model"] > 0


def test_dense_step_gemms_are_compared_term_by_term(rc3_wheel, pm) -> None:  # type: ignore[no-untyped-def]
    """Each GEMM of a Llama-3-8B layer and its LM head, read from the 1.0.0rc3 ``gemm_perf.txt`` at decode batches:
    measured / model is the synthetic 1.5 for the FP8 projections and 0.8 for the BF16 LM head, on both GPUs."""
    dense = TOOL.dense_check(rc3_wheel, pm, batches=(128, 256))
    assert set(dense.gpu) == set(TOOL.SYSTEMS) and set(dense.version) == {TOOL.RC3}
    assert set(dense.term) == {"qkv", "o", "gate+up", "down", "lm_head"}
    fp8 = dense[dense.term != "lm_head"]
    assert np.allclose(fp8.ratio, 1.5)
    assert np.allclose(dense[dense.term == "lm_head"].ratio, 0.8)
    assert set(fp8[fp8.term == "qkv"].n) == {6144}  # (32 + 2 x 8) heads x 128


def test_missing_release_is_named(rc3_wheel, pm) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit, match=r"1\.2\.0rc5"):
        TOOL.attention_check(rc3_wheel, pm, TOOL.Shape(), version="1.2.0rc5")


def _silicon_rows() -> pd.DataFrame:
    """Silicon TPOTs: one kept row per catalog model, and rows the check must leave out (another release, system,
    backend, mode, model)."""
    base = dict(system="h100_sxm", backend="trtllm", backend_version="1.0.0rc3", mode="agg", isl=1024, osl=128,
                batch_size=32, tp_size=8, moe_ep_size=float("nan"), silicon_tpot_ms=10.0, id="x")
    keep = [dict(base, model_path="Qwen/Qwen3-235B-A22B-FP8", gemm_quant_mode="fp8_block", moe_ep_size=8.0),
            dict(base, model_path="Qwen/Qwen3-32B", gemm_quant_mode="fp8"),
            dict(base, model_path="meta-llama/Llama-3.1-8B-Instruct", gemm_quant_mode=float("nan"))]
    drop = [dict(keep[1], backend_version="1.2.0rc6.post1"), dict(keep[1], system="h200_sxm"),
            dict(keep[1], backend="vllm"), dict(keep[1], mode="disagg"), dict(keep[1], model_path="openai/gpt-oss-120b")]
    return pd.DataFrame(keep + drop)


def test_silicon_cross_check_reads_the_catalogs_models(tmp_path, pm) -> None:  # type: ignore[no-untyped-def]
    """Only TensorRT-LLM 1.0.0rc3 aggregated H100 rows of the three mapped models are compared, each at the dtype of
    its GEMMs (Llama unquantized: BF16), and the error is the model's TPOT over the measured 10 ms."""
    from planning.perf.validation import predict

    path = tmp_path / "aiconfigurator_core-0.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{TOOL.PKG}/silicon_sample.csv", _csv(_silicon_rows()))
    wheel = TOOL.Wheel(path)
    points = TOOL.silicon_points(wheel)
    assert sorted((p.model, p.dtype, ep) for p, ep in points) == [
        ("llama-3-8b", "bf16", 1), ("qwen3-235b-a22b", "fp8", 8), ("qwen3-32b", "fp8", 1)]
    out = TOOL.silicon_check(wheel, pm, TOOL.Shape()).set_index("model")
    for p, _ep in points:
        assert out.loc[p.model, "median_error"] == pytest.approx(predict(pm, p) / 10.0 - 1.0)
        assert out.loc[p.model, "median_gap_ms"] == pytest.approx(10.0 - predict(pm, p))
