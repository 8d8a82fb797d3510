"""What NVIDIA's AIConfigurator wheel says about TensorRT-LLM on Hopper, beside the model (issue 42; `make calibrate`
side, never the app, CLI or default suite).

Run from the repo root with the wheel's path (pip download aiconfigurator-core==0.12.0 --no-deps):

    python tools/check_aic_hopper.py --wheel aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl

The wheel is read as a zip archive (data files only; none of its code is imported or run). Printed, for the
Qwen3-235B-A22B rows of TensorRT-LLM 1.0's overview (docs/perf-model.md Sec. 7, "What AIConfigurator 0.12.0
settles"):

1. ``attention``: TensorRT-LLM's decode attention timed with an FP8 and a BF16 KV cache
   (``systems/data/<gpu>/attention/trtllm/<version>/generation_attention_perf.parquet``) against
   ``roofline.attention_decode_time`` at one attention-DP rank's shape (64 query heads, 4 KV heads, 128).
2. ``memory``: what AIConfigurator's TensorRT-LLM memory rule reserves per GPU besides weights and KV
   (``sdk/backends/base_backend.py`` ``BaseBackend._get_memory_usage``, ``sdk/backends/trtllm_backend.py``,
   ``sdk/memory.py`` ``kv_cache_budget_bytes``; ``other_mem`` and ``nccl_mem`` from ``systems/<gpu>.yaml``) at each
   row's ``max_num_tokens`` (``engines.published_engine``).
3. ``moe``: TensorRT-LLM's own fused MoE (``moe/trtllm/<version>/moe_perf.parquet``) at Qwen3-235B's shape, FP8, 8-way
   expert parallel against 8-way tensor parallel, beside the expert time the model charges (data/moe_kernels.csv).
4. ``silicon``: AIConfigurator's measured end-to-end TPOT of Qwen3-235B-A22B-FP8 on 4x/8xH100 under TensorRT-LLM
   1.0.0rc3 (``systems/silicon_sample.csv``) against ``validation.predict``.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PKG = "aiconfigurator_core/systems"
SYSTEMS = {"H100": "h100_sxm", "H200": "h200_sxm"}
MAX_ENTRY_BYTES = 64 << 20  # the largest table the checks read is ~5 MB
GIB = float(1 << 30)
# AIConfigurator 0.12.0's TensorRT-LLM memory rule, restated (sdk/backends/trtllm_backend.py):
# ACTIVATION_COEFFICIENTS["MOE"] (Qwen3MoeForCausalLM is family MOE, common.py), indexed by attention TP (1 under
# attention DP); KV_CACHE_MEMORY_RESERVED_FRACTION and KV_CACHE_MEMORY_TOLERANCE shrink the free fraction.
AIC_MOE_ACT_COEF = {1: 22.0, 2: 13.0, 4: 10.0, 8: 10.0}
AIC_KV_RESERVED = 0.015
AIC_KV_TOLERANCE = 0.02


@dataclass(frozen=True)
class Shape:
    """Qwen3-235B-A22B as the checks read it: attention per attention-DP rank and the MoE layer."""

    heads: int = 64
    kv_heads: int = 4
    head_dim: int = 128
    hidden: int = 4096
    inter: int = 1536
    topk: int = 8
    experts: int = 128
    model_id: str = "qwen3-235b-a22b"
    rows: tuple[str, ...] = tuple(f"trtllm-perf-overview-1.0-{i:03d}" for i in range(31, 41))


def version_key(version: str) -> tuple[float, ...]:
    """Order of release strings such as 1.0.0rc3 < 1.2.0 < 1.3.0rc20 (a release after its candidates)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?", version)
    if not m:
        return (-1.0,)
    a, b, c, rc = m.groups()
    return (float(a), float(b), float(c), float(rc) if rc is not None else float("inf"))


class Wheel:
    """The wheel's data files, read from the zip without extracting it."""

    def __init__(self, path: Path) -> None:
        self.zf = zipfile.ZipFile(path)
        self.names = self.zf.namelist()

    def read(self, name: str) -> bytes:
        info = self.zf.getinfo(name)
        if info.file_size > MAX_ENTRY_BYTES:
            raise SystemExit(f"{name}: {info.file_size} bytes, more than the {MAX_ENTRY_BYTES} this check reads.")
        return self.zf.read(name)

    def newest(self, system: str, folder: str, table: str, keep: str = "") -> str:
        """The newest version's ``table`` under ``systems/data/<system>/<folder>/trtllm/`` (containing ``keep``)."""
        prefix = f"{PKG}/data/{system}/{folder}/trtllm/"
        found = sorted((n for n in self.names if n.startswith(prefix) and n.endswith("/" + table) and keep in n),
                       key=lambda n: version_key(n[len(prefix):].split("/")[0]))
        if not found:
            raise SystemExit(f"no {prefix}*/{table} in the wheel.")
        return found[-1]

    def parquet(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(self.read(name)))

    def system_misc(self, system: str) -> dict:
        name = f"{PKG}/{system}.yaml"
        # yaml.safe_load (plain data only): the wheel's system files key nccl_mem by GPU count (int keys), which
        # planning.safeio's user-file rules refuse.
        doc = yaml.safe_load(self.read(name).decode("utf-8"))
        return dict(doc["misc"])


def attention_check(wheel: Wheel, pm, shape: Shape) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Measured / model decode attention at one attention-DP rank's shape, per GPU and KV dtype."""
    from planning.perf.roofline import attention_decode_time

    out = []
    for gpu, system in SYSTEMS.items():
        name = wheel.newest(system, "attention", "generation_attention_perf.parquet")
        d = wheel.parquet(name)
        d = d[(d.num_heads == shape.heads) & (d.num_key_value_heads == shape.kv_heads)
              & (d.head_dim == shape.head_dim) & (d.window_size == 0)].copy()
        kv_bytes = np.where(d.kv_cache_dtype == "fp8", 1.0, 2.0)
        dev = pm.device(gpu, "trtllm")
        model = attention_decode_time(dev, d.batch_size.to_numpy(), d.step.to_numpy() + 1.0, shape.heads,
                                      shape.kv_heads, shape.head_dim, None, kv_bytes) * 1e3
        d = d.assign(model_ms=model, ratio=d.latency / model, tokens=d.batch_size * (d.step + 1))
        for kv, g in d.groupby("kv_cache_dtype"):
            big = g[g.tokens >= 32768]
            top = g.loc[g.tokens.idxmax()]
            out.append(dict(gpu=gpu, kv=kv, version=name.split("/")[-2], points=len(g), big_points=len(big),
                            median_ratio_big=big.ratio.median(), max_tokens=int(top.tokens),
                            at_max=f"b={int(top.batch_size)} s={int(top.step) + 1}: {top.latency:.3f} / "
                                   f"{top.model_ms:.3f} ms"))
    return pd.DataFrame(out)


def memory_check(wheel: Wheel, pm, shape: Shape) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """AIConfigurator's per-GPU reserve besides weights and KV (attention TP 1, DP 8, EP 8) at each row's
    max_num_tokens, and the share of the free memory its reserved/tolerance factors withhold."""
    from planning.perf.engines import BenchRun, published_engine
    from planning.perf.validation import load_validation

    h = shape.heads * shape.head_dim  # AIConfigurator's activation width: num_heads x head_size
    out = []
    for p in (q for q in load_validation() if q.id in shape.rows):
        eng = published_engine(pm, p.engine, p.engine_version, p.gpu, p.tp, p.notes,
                               run=BenchRun(p.model, p.dtype, p.n_gpus, p.input_len, max(p.output_len, 1)))
        misc = wheel.system_misc(SYSTEMS[p.gpu])
        act = max(2.0 * eng.max_batched_tokens * h * AIC_MOE_ACT_COEF[1], 70 * 2**20)
        nccl, other = float(misc["nccl_mem"][1]), float(misc["other_mem"])
        out.append(dict(row=p.id[-3:], gpu=p.gpu, setting=f"{p.input_len}/{p.output_len}",
                        max_num_tokens=eng.max_batched_tokens, activations_gib=act / GIB, nccl_gib=nccl / GIB,
                        other_gib=other / GIB, reserve_gib=(act + nccl + other) / GIB,
                        withheld_share=1.0 - (1.0 - AIC_KV_RESERVED) * (1.0 - AIC_KV_TOLERANCE)))
    return pd.DataFrame(out)


def model_expert_ms(pm, gpu: str, shape: Shape, tokens: np.ndarray) -> tuple[np.ndarray, str]:  # type: ignore[no-untyped-def]
    """The expert milliseconds of one MoE layer the model charges a TensorRT-LLM attention-DP row (TP 8 over the
    node's tokens) and the kernel's provenance."""
    from planning.perf.roofline import resolve_precision

    view = pm.for_engine("trtllm", attention_dp=True)
    spec, dev = view.model(shape.model_id), view.device(gpu, "trtllm")
    arch, prec = view._layer_arch(spec), resolve_precision(spec, "fp8", view.gpu(gpu))
    assert dev.moe is not None, "the model ships measured MoE kernels (data/moe_kernels.csv)"
    return dev.moe.seconds(dev, arch, prec, 8, tokens) * 1e3, view.kernel_notes(shape.model_id, gpu, 8, "fp8")[0]


def moe_check(wheel: Wheel, pm, shape: Shape,  # type: ignore[no-untyped-def]
              tokens: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384)) -> pd.DataFrame:
    """TensorRT-LLM's FP8 fused MoE at Qwen3-235B's shape: EP 8 and TP 8 (two routings) beside the model."""
    out = []
    for gpu, system in SYSTEMS.items():
        name = wheel.newest(system, "moe", "moe_perf.parquet", keep="1.3.0rc20")
        d = wheel.parquet(name)
        d = d[(d.hidden_size == shape.hidden) & (d.inter_size == shape.inter) & (d.topk == shape.topk)
              & (d.num_experts == shape.experts) & (d.moe_dtype == "fp8")]
        model, note = model_expert_ms(pm, gpu, shape, np.asarray(tokens, dtype=float))
        print(f"{gpu}: model's kernel: {note}")
        for n, m in zip(tokens, model, strict=True):
            row: dict[str, object] = dict(gpu=gpu, tokens=n)
            for label, tp, ep, dist in (("ep8_pl1.2", 1, 8, "power_law_1.2"), ("ep8_bal", 1, 8, "balanced"),
                                        ("tp8_pl1.2", 8, 1, "power_law_1.2"), ("tp8_pl1.01", 8, 1, "power_law_1.01")):
                hit = d[(d.moe_tp_size == tp) & (d.moe_ep_size == ep) & (d.distribution == dist) & (d.num_tokens == n)]
                row[label] = float(hit.latency.iloc[0]) if len(hit) else float("nan")
            row["model"] = float(m)
            out.append(row)
    return pd.DataFrame(out)


def silicon_check(wheel: Wheel, pm, shape: Shape) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Measured TPOT of Qwen3-235B-A22B-FP8 on H100s (TensorRT-LLM 1.0.0rc3) against the model, per TP and clients."""
    from planning.perf.validation import ValidationPoint, predict

    d = pd.read_csv(io.BytesIO(wheel.read(f"{PKG}/silicon_sample.csv")))
    d = d[d.model_path.astype(str).str.contains("Qwen3-235B-A22B-FP8") & (d["system"] == "h100_sxm")
          & (d["backend"] == "trtllm") & (d["mode"] == "agg")]
    rows = []
    for r in d.itertuples():
        n = int(r.tp_size)
        p = ValidationPoint(id="aic-silicon", source="aic-silicon", reference="", engine="trtllm",
                            engine_version=str(r.backend_version), model=shape.model_id, gpu="H100", n_gpus=n, tp=n,
                            pp=1, dtype="fp8", input_len=int(r.isl), output_len=int(r.osl),
                            concurrency=int(r.batch_size), batch=None, quantity="tpot_ms",
                            value=float(r.silicon_tpot_ms), unit="ms", notes="", file="")
        rows.append(dict(tp=n, ep=int(np.nan_to_num(r.moe_ep_size, nan=1.0)), clients=int(r.batch_size), measured_ms=p.value,
                         model_ms=predict(pm, p)))
    df = pd.DataFrame(rows)
    df["error"] = df.model_ms / df.measured_ms - 1.0
    return (df.groupby(["tp", "ep", "clients"])
              .agg(points=("error", "size"), measured_ms=("measured_ms", "median"), model_ms=("model_ms", "median"),
                   median_error=("error", "median")).reset_index())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, required=True, help="aiconfigurator_core-0.12.0-*.whl")
    ap.add_argument("--only", choices=["attention", "memory", "moe", "silicon"], action="append")
    args = ap.parse_args(argv)
    if not args.wheel.is_file():
        raise SystemExit(f"--wheel {args.wheel}: no such file; pip download aiconfigurator-core==0.12.0 --no-deps.")
    from planning.perf.model import PerfModel

    wheel, pm, shape = Wheel(args.wheel), PerfModel(), Shape()
    checks = {"attention": lambda: attention_check(wheel, pm, shape), "memory": lambda: memory_check(wheel, pm, shape),
              "moe": lambda: moe_check(wheel, pm, shape), "silicon": lambda: silicon_check(wheel, pm, shape)}
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        for name in args.only or list(checks):
            print(f"== {name}")
            print(checks[name]().to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
