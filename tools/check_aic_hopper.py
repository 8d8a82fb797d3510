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
4. ``silicon``: AIConfigurator's measured end-to-end TPOT on 1-8 H100s under TensorRT-LLM 1.0.0rc3
   (``systems/silicon_sample.csv``) against ``validation.predict``: Qwen3-235B-A22B-FP8 and, as a cross-check of
   whether a gap is the engine's or the model family's, the dense Qwen3-32B (FP8 GEMMs) and Llama-3.1-8B (BF16).

With ``--rc3-wheel`` (an ``aiconfigurator`` wheel of 0.1.0-0.8.0: pip download aiconfigurator==0.8.0 --no-deps;
those releases still shipped TensorRT-LLM **1.0.0rc3** kernel tables for the H100 and H200, as CSV text under
``aiconfigurator/systems/data/<gpu>/trtllm/1.0.0rc3/``), the ``moe`` and ``attention`` checks are printed again on
the engine release the overview's 1.0 rows ran (``moe-1.0``, ``attention-1.0``), and the dense FP8 rows' decode step
is compared term by term (docs/perf-model.md Sec. 7, "A trtllm-bench run in waves"): ``dense-1.0``, each GEMM of a
Llama-3.1-8B layer (FP8) and its LM head (BF16) at decode batches against ``gemm_perf.txt``, and
``attention-dense-1.0``, the FP8-KV decode attention at its 32 query / 8 KV heads.
"""

from __future__ import annotations

import argparse
import io
import math
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
OLD_PKG = "aiconfigurator/systems"
RC3 = "1.0.0rc3"  # the TensorRT-LLM release of the older wheels' Hopper tables and of the silicon TPOTs
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
    """The wheel's data files, read from the zip without extracting it: ``aiconfigurator-core`` (0.12.0, package
    ``aiconfigurator_core``, one parquet per op and version) or ``aiconfigurator`` up to 0.10.0 (package
    ``aiconfigurator``; up to 0.8.0 one CSV text per op under ``data/<system>/trtllm/<version>/``)."""

    def __init__(self, path: Path) -> None:
        self.zf = zipfile.ZipFile(path)
        self.names = self.zf.namelist()
        self.pkg = PKG if any(n.startswith(PKG + "/") for n in self.names) else OLD_PKG

    def read(self, name: str) -> bytes:
        info = self.zf.getinfo(name)
        if info.file_size > MAX_ENTRY_BYTES:
            raise SystemExit(f"{name}: {info.file_size} bytes, more than the {MAX_ENTRY_BYTES} this check reads.")
        return self.zf.read(name)

    def newest(self, system: str, folder: str, table: str, keep: str = "") -> str:
        """The newest version's ``table`` under ``systems/data/<system>/<folder>/trtllm/`` (containing ``keep``)."""
        prefix = f"{self.pkg}/data/{system}/{folder}/trtllm/"
        found = sorted((n for n in self.names if n.startswith(prefix) and n.endswith("/" + table) and keep in n),
                       key=lambda n: version_key(n[len(prefix):].split("/")[0]))
        if not found:
            raise SystemExit(f"no {prefix}*/{table} in the wheel.")
        return found[-1]

    def parquet(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(self.read(name)))

    def op_table(self, system: str, folder: str, table: str, version: str | None) -> tuple[pd.DataFrame, str]:
        """One op's TensorRT-LLM table and its version: the newest parquet of the core layout when ``version`` is
        None, else ``version``'s CSV text of the older layout (``data/<system>/trtllm/<version>/<table>.txt``, its
        ``latency`` in ms like the parquet's)."""
        if version is None:
            name = self.newest(system, folder, f"{table}.parquet")
            return self.parquet(name), name.split("/")[-2]
        name = f"{self.pkg}/data/{system}/trtllm/{version}/{table}.txt"
        if name not in self.names:
            raise SystemExit(f"no {name} in the wheel (aiconfigurator 0.1.0-0.8.0 ship it).")
        return pd.read_csv(io.BytesIO(self.read(name))), version

    def system_misc(self, system: str) -> dict:
        name = f"{self.pkg}/{system}.yaml"
        # yaml.safe_load (plain data only): the wheel's system files key nccl_mem by GPU count (int keys), which
        # planning.safeio's user-file rules refuse.
        doc = yaml.safe_load(self.read(name).decode("utf-8"))
        return dict(doc["misc"])


def attention_check(wheel: Wheel, pm, shape: Shape,  # type: ignore[no-untyped-def]
                    version: str | None = None) -> pd.DataFrame:
    """Measured / model decode attention at one attention-DP rank's shape, per GPU and KV dtype (the newest
    release's table, or ``version``'s from an older wheel)."""
    from planning.perf.roofline import attention_decode_time

    out = []
    for gpu, system in SYSTEMS.items():
        d, found = wheel.op_table(system, "attention", "generation_attention_perf", version)
        full = d.window_size == 0 if "window_size" in d else True  # 1.0.0rc3's tables time full attention only
        d = d[(d.num_heads == shape.heads) & (d.num_key_value_heads == shape.kv_heads)
              & (d.head_dim == shape.head_dim) & full].copy()
        kv_bytes = np.where(d.kv_cache_dtype == "fp8", 1.0, 2.0)
        dev = pm.device(gpu, "trtllm")
        model = attention_decode_time(dev, d.batch_size.to_numpy(), d.step.to_numpy() + 1.0, shape.heads,
                                      shape.kv_heads, shape.head_dim, None, kv_bytes) * 1e3
        d = d.assign(model_ms=model, ratio=d.latency / model, tokens=d.batch_size * (d.step + 1))
        for kv, g in d.groupby("kv_cache_dtype"):
            big = g[g.tokens >= 32768]
            top = g.loc[g.tokens.idxmax()]
            out.append(dict(gpu=gpu, kv=kv, version=found, points=len(g), big_points=len(big),
                            median_ratio_big=big.ratio.median(), max_tokens=int(top.tokens),
                            at_max=f"b={int(top.batch_size)} s={int(top.step) + 1}: {top.latency:.3f} / "
                                   f"{top.model_ms:.3f} ms"))
    return pd.DataFrame(out)


class GemmTable:
    """One dtype of a TensorRT-LLM GEMM table (``gemm_perf.txt``): latency interpolated multilinearly in log m, log n
    and log k over its grid (a point the grid lacks takes its neighbours along k); above the largest n, linear in n
    (a wider GEMM is more columns of the same kernel)."""

    def __init__(self, d: pd.DataFrame) -> None:
        from scipy.interpolate import RegularGridInterpolator

        axes = [np.array(sorted(d[c].unique()), dtype=float) for c in ("m", "n", "k")]
        grid = d.pivot_table(index=["m", "n"], columns="k", values="latency").reindex(
            pd.MultiIndex.from_product(axes[:2]), columns=axes[2])
        logs = np.log(grid.to_numpy(dtype=float))
        for row in logs:  # fill a missing k from its neighbours (log-log)
            ok = np.isfinite(row)
            if ok.any() and not ok.all():
                row[~ok] = np.interp(np.log(axes[2][~ok]), np.log(axes[2][ok]), row[ok])
        self.n_max = axes[1][-1]
        self.interp = RegularGridInterpolator([np.log(a) for a in axes], logs.reshape([len(a) for a in axes]))

    def ms(self, m: float, n: float, k: float) -> float:
        scale = max(1.0, n / self.n_max)
        return float(np.exp(self.interp([[math.log(m), math.log(n / scale), math.log(k)]])[0])) * scale


def dense_check(wheel: Wheel, pm, model_id: str = "llama-3-8b",  # type: ignore[no-untyped-def]
                batches: tuple[int, ...] = (128, 256, 512, 1024), version: str = RC3) -> pd.DataFrame:
    """Each GEMM of one dense layer (QKV, O, gate + up, down at FP8) and the LM head (BF16) at decode batches: the
    TensorRT-LLM table's latency against ``roofline.gemm_time`` on the CUDA-graphed TensorRT-LLM device."""
    from planning.perf.curves import graphed
    from planning.perf.roofline import LayerArch, gemm_time

    a = LayerArch.from_spec(pm.model(model_id))
    terms = {"qkv": ((a.heads + 2 * a.kv_heads) * a.head_dim, a.hidden, "fp8"), "o": (a.hidden, a.heads * a.head_dim,
             "fp8"), "gate+up": (2 * a.inter, a.hidden, "fp8"), "down": (a.hidden, a.inter, "fp8"),
             "lm_head": (a.vocab, a.hidden, "float16")}
    out = []
    for gpu, system in SYSTEMS.items():
        d, found = wheel.op_table(system, "gemm", "gemm_perf", version)
        tables = {dt: GemmTable(d[d.gemm_dtype == dt]) for dt in ("fp8", "float16")}
        dev = graphed(pm.device(gpu, "trtllm"), pm.calibration.settings)
        for b in batches:
            for term, (n, k, dt) in terms.items():
                model = float(gemm_time(dev, b, n, k, 1.0 if dt == "fp8" else 2.0,
                                        "fp8" if dt == "fp8" else "bf16")) * 1e3
                table = tables[dt].ms(b, n, k)
                out.append(dict(gpu=gpu, version=found, batch=b, term=term, n=n, k=k, model_ms=model,
                                table_ms=table, ratio=table / model))
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


MOE_COLUMNS = (("ep8_pl1.2", 1, 8, "power_law_1.2", "fp8"), ("ep8_bal", 1, 8, "balanced", "fp8"),
               ("tp8_pl1.2", 8, 1, "power_law_1.2", "fp8"), ("tp8_pl1.01", 8, 1, "power_law_1.01", "fp8"),
               ("ep8_block_pl1.2", 1, 8, "power_law_1.2", "fp8_block"))


def moe_check(wheel: Wheel, pm, shape: Shape,  # type: ignore[no-untyped-def]
              tokens: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384), version: str | None = None) -> pd.DataFrame:
    """TensorRT-LLM's FP8 fused MoE at Qwen3-235B's shape beside the model: per-tensor FP8 at EP 8 and TP 8 (two
    routings each) and 128x128-block FP8 (Qwen's own checkpoint, the silicon TPOTs') at EP 8; the 1.3.0rc20 table of
    the core wheel, or ``version``'s from an older wheel. A routing or dtype the table lacks prints NaN."""
    out = []
    for gpu, system in SYSTEMS.items():
        if version is None:
            d = wheel.parquet(wheel.newest(system, "moe", "moe_perf.parquet", keep="1.3.0rc20"))
        else:
            d = wheel.op_table(system, "moe", "moe_perf", version)[0]
        d = d[(d.hidden_size == shape.hidden) & (d.inter_size == shape.inter) & (d.topk == shape.topk)
              & (d.num_experts == shape.experts)]
        model, note = model_expert_ms(pm, gpu, shape, np.asarray(tokens, dtype=float))
        print(f"{gpu}: model's kernel: {note}")
        for n, m in zip(tokens, model, strict=True):
            row: dict[str, object] = dict(gpu=gpu, tokens=n)
            for label, tp, ep, dist, dtype in MOE_COLUMNS:
                hit = d[(d.moe_tp_size == tp) & (d.moe_ep_size == ep) & (d.distribution == dist)
                        & (d.moe_dtype == dtype) & (d.num_tokens == n)]
                row[label] = float(hit.latency.iloc[0]) if len(hit) else float("nan")
            row["model"] = float(m)
            out.append(row)
    return pd.DataFrame(out)


# The silicon TPOTs' checkpoints as the catalog's models. Llama-3.1-8B is the catalog's llama-3-8b (the same layers;
# only the RoPE scaling of long contexts differs). The dtype follows the dump's GEMM quantization: Qwen3-32B is timed
# with FP8 GEMMs although its path names the BF16 checkpoint, and read as BF16 the model is 30-68 % slower than
# measured at every TP, so the label is kept; Llama-3.1-8B has no quantization (BF16).
SILICON_MODELS = {"Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b", "Qwen/Qwen3-32B": "qwen3-32b",
                  "meta-llama/Llama-3.1-8B-Instruct": "llama-3-8b"}


def silicon_points(wheel: Wheel):  # type: ignore[no-untyped-def]
    """The silicon sample's aggregated TensorRT-LLM 1.0.0rc3 TPOTs on H100s of the catalog's models, as validation
    points (closed loop: ``batch_size`` clients each send the next request when one ends)."""
    from planning.perf.validation import ValidationPoint

    d = pd.read_csv(io.BytesIO(wheel.read(f"{wheel.pkg}/silicon_sample.csv")))
    d = d[d.model_path.isin(list(SILICON_MODELS)) & (d["system"] == "h100_sxm") & (d["backend"] == "trtllm")
          & (d["backend_version"].astype(str) == RC3) & (d["mode"] == "agg")]
    out = []
    for r in d.itertuples():
        n = int(r.tp_size)
        dtype = "fp8" if str(r.gemm_quant_mode).startswith("fp8") else "bf16"
        p = ValidationPoint(id="aic-silicon", source="aic-silicon", reference=str(r.id), engine="trtllm",
                            engine_version=RC3, model=SILICON_MODELS[str(r.model_path)], gpu="H100", n_gpus=n, tp=n,
                            pp=1, dtype=dtype, input_len=int(r.isl), output_len=int(r.osl),
                            concurrency=int(r.batch_size), batch=None, quantity="tpot_ms",
                            value=float(r.silicon_tpot_ms), unit="ms", notes="", file="")
        out.append((p, int(np.nan_to_num(r.moe_ep_size, nan=1.0))))
    return out


def silicon_check(wheel: Wheel, pm, shape: Shape) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Measured TPOT on H100s (TensorRT-LLM 1.0.0rc3) against the model, per model, TP and clients: Qwen3-235B and,
    beside it, two dense models, so a gap that grows with the clients can be told apart as the engine's (every
    model) or the MoE model's."""
    from planning.perf.validation import predict

    rows = [dict(model=p.model, dtype=p.dtype, tp=p.tp, ep=ep, clients=p.concurrency, measured_ms=p.value,
                 model_ms=predict(pm, p)) for p, ep in silicon_points(wheel)]
    df = pd.DataFrame(rows)
    df["error"] = df.model_ms / df.measured_ms - 1.0
    df["gap_ms"] = df.measured_ms - df.model_ms
    return (df.groupby(["model", "dtype", "tp", "ep", "clients"])
              .agg(points=("error", "size"), measured_ms=("measured_ms", "median"), model_ms=("model_ms", "median"),
                   median_error=("error", "median"), median_gap_ms=("gap_ms", "median")).reset_index())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, required=True, help="aiconfigurator_core-0.12.0-*.whl")
    ap.add_argument("--rc3-wheel", type=Path, help="aiconfigurator-0.8.0-*.whl (TensorRT-LLM 1.0.0rc3 Hopper tables)")
    ap.add_argument("--only", choices=["attention", "memory", "moe", "silicon", "attention-1.0", "moe-1.0",
                                       "dense-1.0", "attention-dense-1.0"], action="append")
    args = ap.parse_args(argv)
    for flag, path, pkg in (("--wheel", args.wheel, "aiconfigurator-core==0.12.0"),
                            ("--rc3-wheel", args.rc3_wheel, "aiconfigurator==0.8.0")):
        if path is not None and not path.is_file():
            raise SystemExit(f"{flag} {path}: no such file; pip download {pkg} --no-deps.")
    from planning.perf.model import PerfModel

    wheel, pm, shape = Wheel(args.wheel), PerfModel(), Shape()
    checks = {"attention": lambda: attention_check(wheel, pm, shape), "memory": lambda: memory_check(wheel, pm, shape),
              "moe": lambda: moe_check(wheel, pm, shape), "silicon": lambda: silicon_check(wheel, pm, shape)}
    if args.rc3_wheel is not None:
        old = Wheel(args.rc3_wheel)
        checks["attention-1.0"] = lambda: attention_check(old, pm, shape, version=RC3)
        checks["moe-1.0"] = lambda: moe_check(old, pm, shape, tokens=(128, 512, 1024, 2048, 4096, 8192, 16384),
                                              version=RC3)
        checks["dense-1.0"] = lambda: dense_check(old, pm)
        checks["attention-dense-1.0"] = lambda: attention_check(old, pm, Shape(heads=32, kv_heads=8), version=RC3)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        for name in args.only or list(checks):
            if name not in checks:
                raise SystemExit(f"{name} needs --rc3-wheel (an aiconfigurator 0.1.0-0.8.0 wheel).")
            print(f"== {name}")
            print(checks[name]().to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
