"""Restate measured engine kernels the performance model reads directly into data/ (run by `make calibrate`).

Run from the repo root (it reads ../shared/reference, never at runtime):

    python3 tools/calibrate_kernels.py [--reference ../shared/reference] [--out-dir data]

Writes ``data/moe_kernels.csv``: one MoE layer's fused expert computation (routing permutation, the two grouped
GEMMs, the activation; no all-reduce, no router GEMM) in ms on one GPU, per (GPU, engine, dtype, layer shape,
tensor-parallel degree, tokens entering the layer). Source: aiconfigurator's silicon database
(``aic_moe_grouped_gemm.parquet``, docs/perf-model.md Sec. 1b). Kept: routing skewed by a power law of exponent
ROUTING (real routers are not balanced), moe_tp_size <= 8 (the planner's nodes), dtypes bf16 / fp8 (the faster of
per-tensor and block scaling, ``_fastest_fp8_family``) / MXFP4; the engine is ``vllm`` or ``trtllm`` as measured. The app, CLI and default suite read only this file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

MOE_FILE = "aic_moe_grouped_gemm.parquet"
TRTLLM_A100 = "aic_a100_trtllm1.0_{}"  # gemm.parquet, context_attention.csv, generation_attention.csv, custom_allreduce.csv
ENGINE_FITTED = ("eff_bw", "eff_compute_bf16", "kernel_us", "eff_attn", "attn_us", "attn_tile_tokens",
                 "ar_latency_us", "ar_eff", "ar_scaling")
ROUTING = "power_law_1.01"  # the milder of the two skews measured; Mixtral's router is near uniform (Sec. 1b)
SYSTEMS = {"a100_sxm": "A100-80G", "h100_sxm": "H100", "h200_sxm": "H200", "l40s": "L40S"}
ENGINES = {"VLLM": "vllm", "TRTLLM": "trtllm"}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "w4a16_mxfp4": "mxfp4"}
MAX_TP = 8
SHAPE = ["hidden", "inter", "topk", "experts"]
COLUMNS = ["gpu", "engine", "dtype", "hidden", "inter", "topk", "experts", "tp", "tokens", "latency_ms", "source"]


def catalog_moe_shapes() -> list[tuple[int, int, int, int]]:
    """(hidden, expert intermediate, top-k, experts) of every MoE model of the shipped catalog."""
    sys.path.insert(0, str(ROOT))
    from planning.catalog import load_catalog

    return sorted({(m.hidden_size, m.moe_intermediate_size, m.experts_active, m.experts_total)
                   for m in load_catalog().models.values() if m.experts_total > 0})


def nearest_shapes(measured: pd.DataFrame, wanted: list[tuple[int, int, int, int]]) -> set[tuple[int, ...]]:
    """For each wanted shape the measured shape nearest in log space (the planner scales from it at runtime)."""
    have = measured[SHAPE].drop_duplicates().to_numpy(float)
    keep = set()
    for w in wanted:
        dist = (np.log(have / np.asarray(w, dtype=float)) ** 2).sum(axis=1)
        keep.add(tuple(int(v) for v in have[int(np.argmin(dist))]))
    return keep


def moe_rows(reference: Path) -> pd.DataFrame:
    """The MoE kernel table in the project's schema (COLUMNS), sorted, one row per measured point.

    Only the measured layer shapes nearest to the catalog's MoE models are kept (a compact table: each catalog
    model has its own shape measured; other shapes scale from the nearest at runtime, ``planning.perf.moe``).

    Where one key was measured by two kernels (vLLM's Triton and FlashInfer paths for per-tensor FP8 on the same
    GPU), the faster is kept: the engine picks its fastest backend for the GPU.
    """
    df = pd.read_parquet(reference / "perf" / MOE_FILE)
    df = df[(df["distribution"] == ROUTING) & (df["moe_tp_size"] <= MAX_TP) & df["moe_dtype"].isin(list(DTYPES))]
    df = df[df["system"].isin(list(SYSTEMS)) & df["framework"].isin(list(ENGINES))]
    keep = nearest_shapes(df.rename(columns={"hidden_size": "hidden", "inter_size": "inter", "num_experts": "experts"}),
                          catalog_moe_shapes())
    shape = list(zip(df["hidden_size"], df["inter_size"], df["topk"], df["num_experts"], strict=True))
    df = df[[tuple(int(v) for v in s) in keep for s in shape]]
    out = pd.DataFrame({
        "gpu": df["system"].map(SYSTEMS), "engine": df["framework"].map(ENGINES), "dtype": df["moe_dtype"].map(DTYPES),
        "hidden": df["hidden_size"], "inter": df["inter_size"], "topk": df["topk"], "experts": df["num_experts"],
        "tp": df["moe_tp_size"], "tokens": df["num_tokens"], "latency_ms": df["latency_ms"].round(6),
        "source": "aic:" + df["system"] + "/" + df["framework"].str.lower() + "/" + df["version"] + ":" + df["moe_dtype"],
    })
    out = _fastest_fp8_family(out, df["moe_dtype"])
    keys = COLUMNS[:9]
    out = out.sort_values([*keys, "latency_ms"]).drop_duplicates(keys, keep="first")
    return out.reset_index(drop=True)


def _fastest_fp8_family(out: pd.DataFrame, family: pd.Series) -> pd.DataFrame:
    """Per (GPU, engine, shape) keep one FP8 kernel family, per-tensor or 128x128-block scaled, whichever has the
    lower median latency over the (TP, tokens) points both measured: both store 1-byte weights and an engine runs
    its fastest FP8 MoE backend (vLLM 0.24's per-tensor FlashInfer path is 2-3x slower than BF16 on H100 and H200,
    its block-scaled Triton path faster, as FP8 weights should be). The other TPs scale from it at runtime."""
    out = out.assign(family=family.to_numpy())
    drop = pd.Series(False, index=out.index)
    for _, g in out[out["dtype"] == "fp8"].groupby(["gpu", "engine", *SHAPE]):
        fams = g["family"].unique()
        if len(fams) < 2:
            continue
        piv = g.pivot_table(index=["tp", "tokens"], columns="family", values="latency_ms").dropna()
        best = str(piv.median().idxmin()) if len(piv) else str(fams[0])
        drop |= out.index.isin(g.index[g["family"] != best])
    return out[~drop].drop(columns="family")


def _calibrate_perf():  # type: ignore[no-untyped-def]
    """tools/calibrate_perf.py as a module (its observation parsers and least-squares fit are reused)."""
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    import calibrate_perf

    return calibrate_perf


def trtllm_a100_observations(reference: Path) -> list:  # type: ignore[type-arg]
    """TensorRT-LLM 1.0's A100 kernels (BF16 GEMM, prefill and decode attention, its custom all-reduce) as the
    observation groups of tools/calibrate_perf.py, in that tool's column names."""
    cp = _calibrate_perf()
    base = reference / "perf"
    gemm = pd.read_parquet(base / TRTLLM_A100.format("gemm.parquet"))
    gemm = gemm[gemm["gemm_dtype"] == "bfloat16"].assign(gpu="A100-SXM-80GB")
    dec = pd.read_csv(base / TRTLLM_A100.format("generation_attention.csv"))
    dec = dec.assign(gpu="A100-SXM-80GB", kv_len_past_tokens=dec["step"])[
        ["gpu", "batch_size", "kv_len_past_tokens", "num_heads", "num_key_value_heads", "head_dim", "latency_ms"]]
    pre = pd.read_csv(base / TRTLLM_A100.format("context_attention.csv")).assign(gpu="A100-SXM-80GB")[
        ["gpu", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "latency_ms"]]
    ar = pd.read_csv(base / TRTLLM_A100.format("custom_allreduce.csv")).assign(gpu="A100-SXM-80GB")[
        ["gpu", "num_gpus", "message_size", "latency_ms"]]
    return [*cp._gemm(gemm[["gpu", "gemm_dtype", "m", "n", "k", "latency_ms"]]), *cp._attention(dec, pre),
            *cp._nccl(ar)]


def engine_rows(reference: Path, calibration_csv: Path) -> list[str]:
    """Calibration rows ``A100-80G@trtllm``: the per-GPU constants refitted on TensorRT-LLM 1.0's own A100 kernels
    (same least squares, bounds and hold-out as tools/calibrate_perf.py); the rest copied from the A100-80G row."""
    cp = _calibrate_perf()
    from planning.catalog import load_catalog
    from planning.perf.calibration import GPU_PARAMS, load_calibration

    gpu = load_catalog().gpus["A100-80G"]
    prior = load_calibration(calibration_csv).for_gpu(gpu)
    groups = trtllm_a100_observations(reference)
    cal, _, free = cp.fit_gpu(gpu, groups, prior)
    n = int(sum(len(o.measured_ms) for o in groups))
    today = dt.date.today().isoformat()
    held = {src: [] for src in ("aic_gemm", "aic_attention", "aic_nccl")}
    dev = cp.Device.from_specs(gpu, cal)
    for o in groups:
        ape = np.abs(o.predict(dev, {}) / o.measured_ms - 1.0)[o.held_out]
        held[o.source].extend(ape.tolist())
    for src, errs in held.items():
        if not errs:
            continue
        print(f"A100-80G@trtllm {src:14s} held out {len(errs):4d}  median {100 * np.median(errs):5.1f} %  "
              f"p90 {100 * np.quantile(errs, 0.9):5.1f} %")
    rows = []
    for p in GPU_PARAMS:
        if p in free:
            src = "fit: TensorRT-LLM 1.0 A100 kernels (gemm+attention+custom all-reduce, held out 1 in 5)"
            rows.append(f'A100-80G@trtllm,{p},{getattr(cal, p):.4g},"{src}",{n},reference/perf,{today}')
        else:
            rows.append(f'A100-80G@trtllm,{p},{getattr(cal, p):.4g},"as A100-80G (not identified by the engine\'s '
                        f'kernels)",0,,{today}')
    return rows


def write_engine_rows(reference: Path, calibration_csv: Path) -> None:
    """Replace the ``@engine`` rows of data/calibration.csv with a fresh fit (atomically; a row whose value is
    unchanged keeps its date)."""
    from planning.perf.calibration import kept_dates

    rows = engine_rows(reference, calibration_csv)
    kept = [line for line in calibration_csv.read_text(encoding="utf-8").splitlines() if "@" not in line.split(",")[0]]
    tmp = calibration_csv.with_suffix(".csv.tmp")
    tmp.write_text("\n".join(kept_dates(kept + rows, calibration_csv)) + "\n", encoding="utf-8")
    tmp.replace(calibration_csv)
    print(f"wrote {len(rows)} A100-80G@trtllm rows to {calibration_csv}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "data")
    args = parser.parse_args(argv)
    if not (args.reference / "perf" / MOE_FILE).exists():
        print(f"no {args.reference}/perf/{MOE_FILE}: keeping the committed data/moe_kernels.csv")
        return 0
    rows = moe_rows(args.reference)
    path = args.out_dir / "moe_kernels.csv"
    tmp = path.with_suffix(".csv.tmp")
    rows.to_csv(tmp, index=False, columns=COLUMNS)
    tmp.replace(path)
    shapes = rows.groupby(SHAPE).ngroups
    print(f"wrote {path}: {len(rows)} rows, {shapes} layer shapes, "
          f"{rows.groupby(['gpu', 'engine', 'dtype']).ngroups} (GPU, engine, dtype) tables")
    if (args.reference / "perf" / TRTLLM_A100.format("gemm.parquet")).exists():
        write_engine_rows(args.reference, args.out_dir / "calibration.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
