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
