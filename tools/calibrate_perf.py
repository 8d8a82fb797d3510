"""Fit the per-GPU perf-model constants to the measured reference data and write data/calibration.csv.

Run by hand from the repo root (it reads ../shared/reference, never at runtime):

    python3 tools/calibrate_perf.py [--reference ../shared/reference] [--out data/calibration.csv]
                                    [--report docs/perf-calibration.json] [--check]

Method (docs/perf-model.md, "Calibration"): every reference point is predicted with the SAME roofline
functions the planner uses (planning.perf.roofline), and a few physical constants per GPU (bandwidth,
compute and attention efficiency, kernel latency, all-reduce latency/efficiency/scaling) are fitted by
scipy.optimize.least_squares on log(predicted / measured), each source weighted equally. Points whose
stable hash (md5 of source + key fields) is 0 mod 5 are held out of the fit; the report gives per source
the median and p90 absolute percentage error on those held-out points.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from planning.catalog.schema import GPU, ModelSpec  # noqa: E402
from planning.perf.calibration import GLOBAL_PARAMS, GPU_PARAMS, GpuCalibration, kept_dates  # noqa: E402
from planning.perf.roofline import (  # noqa: E402
    Device,
    EngineCopy,
    LayerArch,
    Precision,
    allreduce_time,
    attention_decode_time,
    attention_prefill_time,
    gemm_time,
    layer_time,
)

HOLDOUT_MOD = 5
FITTED = ("eff_bw", "eff_compute_bf16", "eff_compute_fp8", "eff_attn", "kernel_us", "attn_us", "attn_tile_tokens",
          "ar_latency_us", "ar_eff",
          "ar_scaling")
# Physical ranges. ar_scaling: link efficiency falls as (2/n)**ar_scaling; 1 = all n GPUs share one x16 uplink,
# the worst case of a P2P-capable PCIe tree (a ring's per-GPU traffic 2(n-1)/n x size does not grow with n).
BOUNDS = {
    "eff_bw": (0.3, 1.0), "eff_compute_bf16": (0.15, 1.0), "eff_compute_fp8": (0.1, 1.0), "eff_attn": (0.05, 1.0),
    "kernel_us": (0.5, 60.0), "attn_us": (0.5, 80.0), "attn_tile_tokens": (0.0, 4096.0), "ar_latency_us": (1.0, 300.0), "ar_eff": (0.02, 1.0), "ar_scaling": (-0.5, 1.0),
    "nuisance_prefill_ms": (0.0, 200.0), "nuisance_decode_ms": (0.0, 200.0), "nuisance_layer_ms": (0.0, 5.0),
}
# Which parameters each source can identify (others stay at their prior).
IDENTIFIES = {
    "aic_gemm": {"eff_bw", "eff_compute_bf16", "kernel_us"},
    "aic_attention": {"eff_bw", "eff_attn", "attn_us", "attn_tile_tokens"},
    "aic_nccl": {"ar_latency_us", "ar_eff", "ar_scaling"},
    "vidur_linear": {"eff_bw", "eff_compute_bf16", "kernel_us"},
    "helix_layer": {"eff_bw", "eff_compute_bf16", "ar_latency_us", "ar_eff", "nuisance_layer_ms"},
    "splitwise_e2e": {"eff_bw", "eff_compute_bf16", "kernel_us", "nuisance_prefill_ms",
                      "nuisance_decode_ms"},
}
# Engine-level constants (not fitted: documented priors, see docs/perf-model.md).
STEP_MS_PRIOR = 1.0
GLOBAL_VALUES = {
    "gpu_memory_utilization": (0.90, "prior: the planner's engine (vLLM V1) budget, share of the driver-reported "
                               "memory; vLLM EngineArgs default 0.9, written by planning export"),
    "engine_overhead_gib": (0.4, "prior: non-torch memory vLLM counts inside its budget per GPU (CUDA context, NCCL "
                            "buffers; vLLM 0.6.4 logs non_torch_memory 0.39 GiB); CUDA graphs live in the rest"),
    "activation_factor": (4.0, "prior: ~4 live copies of (hidden + intermediate/tp) BF16 per token in a step"),
    "max_batched_tokens": (8192, "prior: engine token budget per step (vLLM V1 / TensorRT-LLM default "
                           "max_num_batched_tokens 8192); bounds the activation workspace"),
    "graph_kernel_factor": (0.5, "prior: CUDA-graph replay of decode and mixed steps removes the CPU launch gap, "
                            "about half of the eagerly measured per-kernel latency (kernel_us, attn_us)"),
    "max_num_seqs": (1024, "prior: engine cap on running sequences (vLLM V1 max_num_seqs on data-center GPUs; "
                     "TensorRT-LLM max_batch_size is larger)"),
    "network_gbps": (25.0, "prior: default node network when the config publishes none (25 Gbit/s class NIC)"),
    "network_latency_ms": (0.1, "prior: one TCP/IP hop inside a region, incl. serialization"),
    "prefill_headroom": (2.0, "model choice: a request waits for the running batch, so wait + run ~ 2x batch time; "
                              "also bounds the zero-load TTFT of aggregated (chunked-prefill) tables "
                              "(docs/perf-model.md Sec. 3c item 8)"),
    "decode_headroom": (1.0, "model choice: continuous batching admits at the next step; the step is the latency "
                        "(the KV hand-off and the wait for the next step are budgeted separately, docs/perf-model.md "
                        "Sec. 3c)"),
    "aggregated_headroom": (1.25, "model choice: an aggregated step carries a varying prompt chunk; its mean at the "
                            "planned batch is kept at TPOT/S/1.25 so that a request's mean TPOT stays within the SLO "
                            "(smallest of 1.0-1.3 with the aggregated presets at >= 98 % in the simulator, "
                            "docs/perf-model.md Sec. 3c)"),
    "prefill_max_load": (0.75, "model choice: prefill instances are planned at <= 75% of their batch rate so that "
                         "the queue drains (measured with the simulator, docs/perf-model.md Sec. 3c)"),
    "kv_sigmas": (1.0, "model choice: a decode or aggregated node keeps KV room for sqrt(S x batch) sequences "
                  "beyond the S x batch planned (running sequences fluctuate like a Poisson count; admission waits "
                  "otherwise queue requests and, disaggregated, hold the prefill's KV). 1 is the smallest of 0-3 "
                  "with every preset but demystifying seed 2 at >= 99 % in the simulator (docs/perf-model.md "
                  "Sec. 3c)"),
    "aggregated_max_load": (0.75, "model choice: aggregated instances are planned at <= 75% of their SLO-bound "
                            "rate so that the running batch stays below the TPOT-bound batch (simulator, "
                            "docs/perf-model.md Sec. 3c)"),
    "band_roofline": (0.40, "model choice: roofline-only GPUs (no measurement), wider than any fitted GPU's band"),
    "band_measured": (0.05, "model choice: run-to-run spread of measured profiles"),
}
# GPUs without any reference data borrow the fit of the closest measured GPU of their generation and bus.
GENERATION_PRIOR = {"L40": "L40S", "RTX4090": "L40S", "A10G": "A40", "A6000": "A40"}
REF_GPU = {
    "A100-SXM-80GB": "A100-80G", "H100-SXM-80GB": "H100", "H200-SXM-141GB": "H200", "L40S-48GB": "L40S",
    "a100": "A100-80G", "h100": "H100", "a40": "A40", "a100-80gb": "A100-80G", "h100-80gb": "H100",
}
HELIX_GPU = {"A100": ("A100-40G", 1), "V100": ("V100", 1), "L4": ("L4", 1), "L4X2": ("L4", 2), "T4": ("T4", 1),
             "T4X2": ("T4", 2), "T4X4": ("T4", 4)}
HELIX_PROMPT_LEN = 750.0  # Helix's AVG_INPUT_LEN: prompt tokens per sequence in a profiled prefill batch
HELIX_DECODE_CONTEXT = 1000.0  # Helix's DECODE_PER_TOKEN_MAX_CONTEXT: cached tokens per sequence


def _spec(mid: str, layers: int, hidden: int, heads: int, kv: int, inter: int, vocab: int) -> ModelSpec:
    return ModelSpec(id=mid, display_name=mid, hf_repo="", layers=layers, hidden_size=hidden, num_heads=heads,
                     num_kv_heads=kv, head_dim=hidden // heads, intermediate_size=inter, vocab_size=vocab,
                     experts_total=0, experts_active=0, moe_intermediate_size=0, sliding_window=None, layer_types=(),
                     params_total=0.0, params_active=0.0, dtype="fp16", tie_embeddings=False, source="", as_of="")


# Public config.json architecture of the reference models (LLaMA-1-30B is not in the catalog).
REF_MODELS = {
    "LLaMA-1-30B": _spec("llama-1-30b", 60, 6656, 52, 52, 17920, 32000),
    "Llama-2-70B": _spec("llama-2-70b", 80, 8192, 64, 8, 28672, 32000),
    "llama2-70b": _spec("llama-2-70b", 80, 8192, 64, 8, 28672, 32000),
}
FP16 = Precision("fp16", 2.0, 2.0, "bf16")
FP8 = Precision("fp8", 1.0, 1.0, "fp8")


@dataclass
class Obs:
    """Points of one source on one GPU: a vectorized predictor, the measurements, and the hold-out mask."""

    source: str
    gpu: str
    measured_ms: np.ndarray
    predict: Callable[[Device, dict[str, float]], np.ndarray]  # -> ms
    held_out: np.ndarray
    decode_like: np.ndarray


def _holdout(source: str, keys: pd.DataFrame) -> np.ndarray:
    text = keys.astype(str).agg("|".join, axis=1)
    return np.array([int(hashlib.md5(f"{source}|{t}".encode()).hexdigest(), 16) % HOLDOUT_MOD == 0 for t in text])


def _gemm(df: pd.DataFrame) -> list[Obs]:
    out = []
    for gpu, g in df.groupby("gpu"):
        m, n, k = (g[c].to_numpy(float) for c in ("m", "n", "k"))
        fp8 = (g["gemm_dtype"] == "fp8").to_numpy()

        def pred(dev: Device, _nz: dict[str, float], m: np.ndarray = m, n: np.ndarray = n, k: np.ndarray = k,
                 fp8: np.ndarray = fp8) -> np.ndarray:
            t16 = gemm_time(dev, m, n, k, 2.0, "bf16")
            t8 = gemm_time(dev, m, n, k, 1.0, "fp8") if dev.fp8_flops else t16
            return np.where(fp8, t8, t16) * 1e3

        out.append(Obs("aic_gemm", REF_GPU[str(gpu)], g["latency_ms"].to_numpy(float), pred,
                       _holdout("gemm", g[["gpu", "gemm_dtype", "m", "n", "k"]]), m < 128))
    return out


def _attention(dec: pd.DataFrame, pre: pd.DataFrame) -> list[Obs]:
    out = []
    for gpu, g in dec.groupby("gpu"):
        b, ctx = g["batch_size"].to_numpy(float), g["kv_len_past_tokens"].to_numpy(float) + 1.0
        h, kv, hd = (g[c].to_numpy(float) for c in ("num_heads", "num_key_value_heads", "head_dim"))

        def pd_(dev: Device, _nz: dict[str, float], b: np.ndarray = b, ctx: np.ndarray = ctx, h: np.ndarray = h,
                kv: np.ndarray = kv, hd: np.ndarray = hd) -> np.ndarray:
            return attention_decode_time(dev, b, ctx, h, kv, int(hd[0])) * 1e3  # type: ignore[arg-type]

        out.append(Obs("aic_attention", REF_GPU[str(gpu)], g["latency_ms"].to_numpy(float), pd_,
                       _holdout("dattn", g.drop(columns="latency_ms")), np.ones(len(g), bool)))
    for gpu, g in pre.groupby("gpu"):
        b, isl = g["batch_size"].to_numpy(float), g["isl"].to_numpy(float)
        h, kv, hd = (g[c].to_numpy(float) for c in ("num_heads", "num_key_value_heads", "head_dim"))

        def pp(dev: Device, _nz: dict[str, float], b: np.ndarray = b, isl: np.ndarray = isl, h: np.ndarray = h,
               kv: np.ndarray = kv, hd: np.ndarray = hd) -> np.ndarray:
            return attention_prefill_time(dev, b, isl, h, kv, int(hd[0])) * 1e3  # type: ignore[arg-type]

        out.append(Obs("aic_attention", REF_GPU[str(gpu)], g["latency_ms"].to_numpy(float), pp,
                       _holdout("pattn", g.drop(columns="latency_ms")), np.zeros(len(g), bool)))
    return out


PCIE_REF_GPUS = {"L40S-48GB"}  # aiconfigurator systems whose GPUs talk over PCIe


def _nccl(df: pd.DataFrame) -> list[Obs]:
    out = []
    # The 4- and 8-GPU all-reduces of the aiconfigurator L40S box reach 5.1 and 1.45 GB/s bus bandwidth: eight GPUs
    # bouncing through one shared x16 uplink without peer-to-peer, not the P2P ring serving engines run (published
    # TensorRT-LLM L40S TP4/TP8 throughputs, data/validation). Only its 2-GPU points are kept; the PCIe exponent
    # ar_scaling then stays at its physical prior 0 (a ring's per-GPU traffic does not grow with n).
    df = df[~(df["gpu"].isin(PCIE_REF_GPUS) & (df["num_gpus"] > 2))]
    for gpu, g in df.groupby("gpu"):
        size, n = 2.0 * g["message_size"].to_numpy(float), g["num_gpus"].to_numpy(int)

        def pred(dev: Device, _nz: dict[str, float], size: np.ndarray = size, n: np.ndarray = n) -> np.ndarray:
            t = np.zeros_like(size)
            for k in np.unique(n):
                sel = n == k
                t[sel] = allreduce_time(dev, size[sel], int(k))
            return t * 1e3

        out.append(Obs("aic_nccl", REF_GPU[str(gpu)], g["latency_ms"].to_numpy(float), pred,
                       _holdout("nccl", g.drop(columns="latency_ms")), size < 1e6))
    return out


def _vidur(df: pd.DataFrame) -> list[Obs]:
    out = []
    df = df.groupby(["gpu", "model", "num_tokens", "tp"], as_index=False).median(numeric_only=True)
    for gpu, g in df.groupby("gpu"):
        N, tp = g["num_tokens"].to_numpy(float), g["tp"].to_numpy(float)
        h, nh, nkv, inter = (g[c].to_numpy(float) for c in ("n_embd", "n_head", "n_kv_head", "n_expanded_embd"))
        hd = h / nh

        def pred(dev: Device, _nz: dict[str, float], N: np.ndarray = N, tp: np.ndarray = tp, h: np.ndarray = h,
                 nh: np.ndarray = nh, nkv: np.ndarray = nkv, inter: np.ndarray = inter,
                 hd: np.ndarray = hd) -> np.ndarray:
            kvh = np.maximum(1.0, nkv / tp)
            t = gemm_time(dev, N, (nh / tp + 2 * kvh) * hd, h, 2.0)
            t = t + gemm_time(dev, N, h, nh / tp * hd, 2.0)
            t = t + gemm_time(dev, N, 2 * inter / tp, h, 2.0)
            t = t + gemm_time(dev, N, h, inter / tp, 2.0)
            return t * 1e3

        out.append(Obs("vidur_linear", REF_GPU[str(gpu)], g["linear4_sum_ms"].to_numpy(float), pred,
                       _holdout("vidur", g[["gpu", "model", "num_tokens", "tp"]]), N < 128))
    return out


def _helix(df: pd.DataFrame) -> list[Obs]:
    out = []
    for (cfg, model, phase), g in df.groupby(["gpu_config", "model", "phase"]):
        gpu, tp = HELIX_GPU[str(cfg)]
        arch = LayerArch.from_spec(REF_MODELS[str(model)])
        tok = g["num_tokens"].to_numpy(float)
        if phase == "prompt":
            batch = np.maximum(1.0, np.round(tok / HELIX_PROMPT_LEN))
            q, ctx, ph = tok / batch, 0.0, "prefill"
        else:
            batch, q, ctx, ph = tok, 1.0, HELIX_DECODE_CONTEXT, "decode"

        def pred(dev: Device, nz: dict[str, float], arch: LayerArch = arch, tp: int = tp, batch: np.ndarray = batch,
                 q: object = q, ctx: float = ctx, ph: str = ph) -> np.ndarray:
            t = layer_time(EngineCopy(dev, arch, FP16, tp), batch, q, ctx, False, ph) * 1e3  # type: ignore[arg-type]
            return t + nz["nuisance_layer_ms"]

        out.append(Obs("helix_layer", gpu, g["time_per_layer_ms"].to_numpy(float), pred,
                       _holdout("helix", g[["model", "gpu_config", "phase", "num_tokens"]]),
                       np.full(len(g), phase == "decode")))
    return out


def _splitwise(df: pd.DataFrame) -> list[Obs]:
    out = []
    df = df[(df["model"] == "llama2-70b") & (df["hardware"] != "h100-80gb-pcap")]
    # The README flags TP2 batch-64 prefill rows as anomalous (far below batch 32): excluded.
    df = df[~((df["tensor_parallel"] == 2) & (df["batch_size"] == 64))]
    g0 = df.groupby(["hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size"], as_index=False)[
        ["prompt_time", "token_time"]].median()
    arch = LayerArch.from_spec(REF_MODELS["llama2-70b"])
    for hw, g in g0.groupby("hardware"):
        tp, b = g["tensor_parallel"].to_numpy(int), g["batch_size"].to_numpy(float)
        isl, osl = g["prompt_size"].to_numpy(float), g["token_size"].to_numpy(float)
        for phase, col in (("prefill", "prompt_time"), ("decode", "token_time")):

            def pred(dev: Device, nz: dict[str, float], tp: np.ndarray = tp, b: np.ndarray = b, isl: np.ndarray = isl,
                     osl: np.ndarray = osl, phase: str = phase) -> np.ndarray:
                t = np.zeros_like(b)
                for k in np.unique(tp):
                    s = tp == k
                    if phase == "prefill":
                        t[s] = layer_time(EngineCopy(dev, arch, FP16, int(k)), b[s], isl[s], 0.0, False, "prefill")
                    else:
                        t[s] = layer_time(EngineCopy(dev, arch, FP16, int(k)), b[s], 1.0, isl[s] + osl[s] / 2, False, "decode")
                return t * arch.layers * 1e3 + nz[f"nuisance_{phase}_ms"]

            out.append(Obs("splitwise_e2e", REF_GPU[str(hw)], g[col].to_numpy(float), pred,
                           _holdout(f"splitwise-{phase}", g[["hardware", "tensor_parallel", "prompt_size",
                                                              "batch_size", "token_size"]]),
                           np.full(len(g), phase == "decode")))
    return out


def load_observations(reference: Path) -> list[Obs]:
    """All reference points as Obs groups (one per source x GPU x sub-table)."""
    perf = reference / "perf"
    if not perf.is_dir():
        raise FileNotFoundError(perf)
    obs: list[Obs] = []
    obs += _gemm(pd.read_csv(perf / "aic_gemm_vllm0.14.csv"))
    obs += _attention(pd.read_csv(perf / "aic_decode_attention_vllm0.14.csv"),
                      pd.read_csv(perf / "aic_prefill_attention_vllm0.14.csv"))
    obs += _nccl(pd.read_csv(perf / "aic_nccl_allreduce.csv"))
    obs += _vidur(pd.read_csv(perf / "vidur_mlp_ops_per_layer.csv"))
    obs += _helix(pd.read_csv(perf / "helix_layer_profiles.csv"))
    obs += _splitwise(pd.read_csv(perf / "splitwise_perf_model.csv"))
    return obs


HOST_PATH_GPUS = 4  # the aiconfigurator L40S box's 4-GPU ring crosses GPU pairs without peer-to-peer (one socket)
HOST_PATH_BYTES = 16e6  # messages large enough that latency does not matter


def host_allreduce_gbps(reference: Path) -> tuple[float, int]:
    """(bus bandwidth GB/s, points) of an all-reduce through host memory: the median bus bandwidth
    2(n-1)/n x bytes / time of the aiconfigurator L40S 4-GPU all-reduces of at least 16 MB. Its 2-GPU pairs reach
    ~20 GB/s over PCIe peer-to-peer; the 4-GPU ring crosses pairs that have no peer-to-peer path on one socket and
    NCCL bounces through host memory (5.1 GB/s; across the two sockets, 8 GPUs, 1.45 GB/s). The planner uses it for
    nodes whose GPUs have no peer-to-peer at all (``GPU.p2p``: GeForce cards, the A10G/L4 VMs of AWS), which are
    one-socket nodes."""
    df = pd.read_csv(reference / "perf" / "aic_nccl_allreduce.csv")
    df = df[df["gpu"].isin(PCIE_REF_GPUS) & (df["num_gpus"] == HOST_PATH_GPUS)]
    nbytes = 2.0 * df["message_size"].to_numpy(float)
    n = float(HOST_PATH_GPUS)
    bus = 2.0 * (n - 1) / n * nbytes / (df["latency_ms"].to_numpy(float) * 1e-3) / 1e9
    big = nbytes >= HOST_PATH_BYTES
    return round(float(np.median(bus[big])), 3), int(big.sum())


FP8_LARGE = 4096  # m, n, k at least this: a GEMM large enough to run at the tensor cores' sustained rate


def fp8_large_gemm_rate(reference: Path, gpus: dict[str, GPU]) -> dict[str, float]:
    """eff_compute_fp8 per GPU = best measured FP8 GEMM rate with m, n, k >= FP8_LARGE over the spec FP8 peak.

    Not least-squares fitted: over all shapes the FP8 rows mix the quantization kernel and small-shape latency,
    and a free fit drove the efficiency below BF16 parity (FP8 slower than BF16), which no large FP8 GEMM shows.
    Floored at BF16 parity (eff_bf16 * bf16_peak / fp8_peak is applied after the fit, see calibrate()).
    """
    df = pd.read_csv(reference / "perf" / "aic_gemm_vllm0.14.csv")
    df = df[(df["gemm_dtype"] == "fp8") & (df["m"] >= FP8_LARGE) & (df["n"] >= FP8_LARGE) & (df["k"] >= FP8_LARGE)]
    out = {}
    for gpu, g in df.groupby("gpu"):
        gid = REF_GPU[str(gpu)]
        peak = gpus[gid].fp8_tflops
        if peak:
            rate = (2.0 * g["m"] * g["n"] * g["k"] / (g["latency_ms"] * 1e-3)).max()
            out[gid] = round(float(rate / (peak * 1e12)), 3)
    return out


def _base_cal(gpu_id: str, **values: float) -> GpuCalibration:
    base = dict(eff_bw=0.8, eff_compute_bf16=0.65, eff_compute_fp8=0.55, eff_attn=0.45, kernel_us=6.0,
                attn_us=12.0, attn_tile_tokens=128.0, ar_latency_us=15.0, ar_eff=0.6, ar_scaling=0.0,
                ar_host_gbps=1.5, step_ms=STEP_MS_PRIOR, band_prefill=0.3,
                band_decode=0.3)
    base.update(values)
    return GpuCalibration(gpu_id=gpu_id, provenance="calibrated", source="", **base)  # type: ignore[arg-type]


def fit_gpu(gpu: GPU, groups: list[Obs], prior: GpuCalibration) -> tuple[GpuCalibration, dict[str, float], list[str]]:
    """Least squares on log error over the training points of ``groups``; returns (cal, nuisances, free)."""
    from scipy.optimize import least_squares

    free = sorted(set().union(*(IDENTIFIES[o.source] for o in groups)))
    if gpu.fp8_tflops is None or not any(o.source == "aic_gemm" for o in groups):
        free = [p for p in free if p != "eff_compute_fp8"]
    if not gpu.intra_link.lower().startswith("nvlink"):  # 2-GPU points only (see _nccl): no GPU-count scaling
        free = [p for p in free if p != "ar_scaling"]
    nuis0 = {"nuisance_prefill_ms": 0.0, "nuisance_decode_ms": 0.0, "nuisance_layer_ms": 0.0}
    x0 = np.array([float(getattr(prior, p)) if p in FITTED else 0.2 * BOUNDS[p][1] for p in free])
    lo = np.array([BOUNDS[p][0] for p in free])
    hi = np.array([BOUNDS[p][1] for p in free])
    x0 = np.clip(x0, lo + 1e-6, hi - 1e-6)
    weights = {o.source: 0 for o in groups}
    for o in groups:
        weights[o.source] += int((~o.held_out).sum())

    def unpack(x: np.ndarray) -> tuple[Device, dict[str, float]]:
        vals = dict(zip(free, x, strict=True))
        cal = replace(prior, **{k: float(v) for k, v in vals.items() if k in FITTED})
        nz = {k: float(vals.get(k, nuis0[k])) for k in nuis0}
        return Device.from_specs(gpu, cal), nz

    def residuals(x: np.ndarray) -> np.ndarray:
        dev, nz = unpack(x)
        parts = []
        for o in groups:
            tr = ~o.held_out
            r = np.log(np.maximum(o.predict(dev, nz)[tr], 1e-9) / o.measured_ms[tr])
            parts.append(r / np.sqrt(weights[o.source]))
        return np.concatenate(parts)

    res = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.3, x_scale="jac")
    dev, nz = unpack(res.x)
    return dev.cal, nz, free


def _errors(groups: list[Obs], dev: Device, nz: dict[str, float]) -> list[dict[str, object]]:
    rows = []
    for o in groups:
        ape = np.abs(o.predict(dev, nz) / o.measured_ms - 1.0)
        rows.append({"source": o.source, "gpu": o.gpu, "ape": ape, "held": o.held_out, "decode": o.decode_like})
    return rows


def _summary(rows: list[dict[str, object]], key: Callable[[dict[str, object]], str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    keys = sorted({key(r) for r in rows})
    for k in keys:
        sel = [r for r in rows if key(r) == k]
        ape = np.concatenate([np.asarray(r["ape"]) for r in sel])
        held = np.concatenate([np.asarray(r["held"]) for r in sel])
        h = ape[held]
        out[k] = {"n_fit": int((~held).sum()), "n_held_out": int(held.sum()),
                  "median_ape": float(np.median(h)) if h.size else float("nan"),
                  "p90_ape": float(np.percentile(h, 90)) if h.size else float("nan"),
                  "train_median_ape": float(np.median(ape[~held])) if (~held).any() else float("nan")}
    return out


def evaluate(cals: dict[str, GpuCalibration], gpus: dict[str, GPU], obs: list[Obs],
             nuisances: dict[str, dict[str, float]] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """Held-out errors of given constants: {"by_source": ..., "by_source_gpu": ...}."""
    rows: list[dict[str, object]] = []
    for gpu_id in sorted({o.gpu for o in obs}):
        dev = Device.from_specs(gpus[gpu_id], cals[gpu_id])
        nz = {"nuisance_prefill_ms": 0.0, "nuisance_decode_ms": 0.0, "nuisance_layer_ms": 0.0}
        nz.update((nuisances or {}).get(gpu_id, {}))
        rows += _errors([o for o in obs if o.gpu == gpu_id], dev, nz)
    return {"by_source": _summary(rows, lambda r: str(r["source"])),
            "by_source_gpu": _summary(rows, lambda r: f"{r['source']} / {r['gpu']}")}


def calibrate(reference: Path, gpus: dict[str, GPU]) -> tuple[dict[str, GpuCalibration], dict[str, object]]:
    """Fit every GPU with data, then derive priors for the rest; returns (constants, report)."""
    obs = load_observations(reference)
    by_gpu: dict[str, list[Obs]] = {}
    for o in obs:
        by_gpu.setdefault(o.gpu, []).append(o)
    cals: dict[str, GpuCalibration] = {}
    nuis: dict[str, dict[str, float]] = {}
    free_by: dict[str, list[str]] = {}
    # 1) GPUs with kernel-level data first: they set the priors for parameters others cannot identify.
    order = sorted(by_gpu, key=lambda g: (not any(o.source.startswith("aic") for o in by_gpu[g]), g))
    fp8 = fp8_large_gemm_rate(reference, gpus)
    fp8_prior = float(np.median(list(fp8.values()))) if fp8 else 0.55
    host_gbps, host_points = host_allreduce_gbps(reference)
    for gpu_id in order:
        gpu = gpus[gpu_id]
        prior = replace(_prior_for(gpu, cals), eff_compute_fp8=fp8.get(gpu_id, fp8_prior), ar_host_gbps=host_gbps)
        cal, nz, free = fit_gpu(gpu, by_gpu[gpu_id], prior)
        if gpu.fp8_tflops:  # physical floor: FP8 tensor cores never run a large GEMM slower than BF16 ones
            parity = cal.eff_compute_bf16 * gpu.bf16_tflops / gpu.fp8_tflops
            cal = replace(cal, eff_compute_fp8=round(min(1.0, max(cal.eff_compute_fp8, parity)), 3))
        cals[gpu_id], nuis[gpu_id], free_by[gpu_id] = cal, nz, free
    # 2) Bands: p90 held-out error by phase kind (at least 10 %).
    for gpu_id in list(cals):
        dev = Device.from_specs(gpus[gpu_id], cals[gpu_id])
        rows = _errors(by_gpu[gpu_id], dev, nuis[gpu_id])
        bands = {}
        for kind, flag in (("band_prefill", False), ("band_decode", True)):
            ape = np.concatenate([np.asarray(r["ape"])[np.asarray(r["held"]) & (np.asarray(r["decode"]) == flag)]
                                  for r in rows if r["source"] != "aic_nccl"])
            bands[kind] = round(max(0.10, float(np.percentile(ape, 90))) if ape.size else 0.3, 3)
        cals[gpu_id] = replace(cals[gpu_id], **bands)
    report = evaluate(cals, gpus, obs, nuis)
    report["nuisance"] = {g: {k: round(v, 4) for k, v in nz.items() if k in free_by[g]} for g, nz in nuis.items()}
    report["free_params"] = free_by
    report["n_points"] = {g: int(sum(len(o.measured_ms) for o in by_gpu[g])) for g in by_gpu}
    report["sources_by_gpu"] = {g: sorted({o.source for o in by_gpu[g]}) for g in by_gpu}
    report["fp8_large_gemm_rate"] = fp8
    report["ar_host_gbps"] = [host_gbps, host_points]
    return cals, report


def _prior_for(gpu: GPU, fitted: dict[str, GpuCalibration]) -> GpuCalibration:
    """Starting point / fixed values for parameters the GPU's own data cannot identify."""
    nvlink = [c for g, c in fitted.items() if g in ("A100-80G", "H100", "H200")]
    pcie = [c for g, c in fitted.items() if g == "L40S"]
    attn = [c for g, c in fitted.items() if g in ("A100-80G", "H100", "H200", "L40S")]
    base = _base_cal(gpu.id)
    if attn:
        base = replace(base, eff_attn=float(np.median([c.eff_attn for c in attn])),
                       attn_us=float(np.median([c.attn_us for c in attn])),
                       attn_tile_tokens=float(np.median([c.attn_tile_tokens for c in attn])))
    link = nvlink if gpu.intra_link.lower().startswith("nvlink") else pcie
    if link:
        base = replace(base, ar_latency_us=float(np.median([c.ar_latency_us for c in link])),
                       ar_eff=float(np.median([c.ar_eff for c in link])),
                       ar_scaling=float(np.median([c.ar_scaling for c in link])))
    return base


def write_csv(path: Path, cals: dict[str, GpuCalibration], report: dict[str, object], gpus: dict[str, GPU]) -> None:
    """data/calibration.csv: one row per (gpu, param) with source, n_points, fitted_on, as_of."""
    today = dt.date.today().isoformat()
    free_by: dict[str, list[str]] = report["free_params"]  # type: ignore[assignment]
    n_points: dict[str, int] = report["n_points"]  # type: ignore[assignment]
    srcs: dict[str, list[str]] = report["sources_by_gpu"]  # type: ignore[assignment]
    lines = ["gpu,param,value,source,n_points,fitted_on,as_of"]
    for p, (v, why) in GLOBAL_VALUES.items():
        lines.append(f'default,{p},{v},"{why}",0,,{today}')
    defaults = _prior_for(_dummy_gpu(), cals)
    for p in ("eff_bw", "eff_compute_bf16", "eff_compute_fp8", "kernel_us"):
        fitted_values = [getattr(c, p) for g, c in cals.items() if p in free_by[g]]
        if fitted_values:
            defaults = replace(defaults, **{p: float(np.median(fitted_values))})
    fp8_all: dict[str, float] = report.get("fp8_large_gemm_rate", {})  # type: ignore[assignment]
    if fp8_all:
        defaults = replace(defaults, eff_compute_fp8=float(np.median(list(fp8_all.values()))))
    host_gbps, host_points = report["ar_host_gbps"]  # type: ignore[misc]
    defaults = replace(defaults, ar_host_gbps=float(host_gbps))
    for p in GPU_PARAMS:
        if p == "ar_host_gbps":
            lines.append(f'default,{p},{host_gbps:.4g},"aic_nccl: median bus bandwidth of the aiconfigurator L40S '
                         f'4-GPU all-reduces of 16 MB and more (NCCL through host memory between GPUs without '
                         f'peer-to-peer on one socket; tools/calibrate_perf.py host_allreduce_gbps)",{host_points},'
                         f'reference/perf,{today}')
            continue
        lines.append(f'default,{p},{getattr(defaults, p):.4g},"prior: median of fitted GPUs (unknown GPU types)",0,,{today}')
    for gpu_id in sorted(gpus):
        if gpu_id in cals:
            cal, free = cals[gpu_id], set(free_by[gpu_id])
            fp8_rates: dict[str, float] = report.get("fp8_large_gemm_rate", {})  # type: ignore[assignment]
            for p in GPU_PARAMS:
                if p == "ar_host_gbps":  # one host-memory path for all GPUs: the default row
                    continue
                if p == "eff_compute_fp8" and gpu_id in fp8_rates:
                    src = ("large-GEMM rate: best measured FP8 GEMM (m,n,k >= 4096) / spec peak (aic_gemm); "
                           "not least-squares fitted")
                    n, on = n_points[gpu_id], "reference/perf"
                elif p == "eff_compute_fp8":
                    src, n, on = "prior: median large-GEMM FP8 rate of the measured GPUs", 0, ""
                elif p in free:
                    src = f"fit: {'+'.join(srcs[gpu_id])} (held out 1 in {HOLDOUT_MOD})"
                    n, on = n_points[gpu_id], "reference/perf"
                elif p.startswith("band_"):
                    src, n, on = "p90 held-out |error| of this GPU's points (min 0.10)", n_points[gpu_id], "held-out"
                elif p == "step_ms":
                    src, n, on = "prior: engine step overhead (vLLM V1 with CUDA graphs), not in kernel data", 0, ""
                else:
                    src, n, on = "prior: median of fitted GPUs of the same class (not identifiable here)", 0, ""
                lines.append(f'{gpu_id},{p},{getattr(cal, p):.4g},"{src}",{n},{on},{today}')
        elif gpu_id in GENERATION_PRIOR and GENERATION_PRIOR[gpu_id] in cals:
            donor = cals[GENERATION_PRIOR[gpu_id]]
            for p in GPU_PARAMS:
                if p == "ar_host_gbps":
                    continue
                value = getattr(donor, p)
                if p in ("ar_latency_us", "ar_eff", "ar_scaling"):
                    value = getattr(_prior_for(gpus[gpu_id], cals), p)
                lines.append(f'{gpu_id},{p},{value:.4g},"prior: generation {gpus[gpu_id].generation} '
                             f'({GENERATION_PRIOR[gpu_id]} fit), no data for {gpu_id}",0,,{today}')
    nuisance: dict[str, dict[str, float]] = report["nuisance"]  # type: ignore[assignment]
    for gpu_id, values in sorted(nuisance.items()):
        for p, v in values.items():
            engine = "helix" if p == "nuisance_layer_ms" else "splitwise"
            what = "per-layer" if engine == "helix" else "per-step"
            lines.append(f'engine:{engine}:{gpu_id},{p},{v:.4g},"fit: {what} overhead of the {engine} '
                         f'engine (not transferred to the planner)",{n_points[gpu_id]},reference/perf,{today}')
    if path.exists():  # the ``<gpu>@<engine>`` rows are tools/calibrate_kernels.py's: kept for it to replace
        lines += [line for line in path.read_text(encoding="utf-8").splitlines()[1:] if "@" in line.split(",")[0]]
    path.write_text("\n".join(kept_dates(lines, path)) + "\n", encoding="utf-8")


def _dummy_gpu() -> GPU:
    return GPU(id="default", memory_gb=0, hbm_bw_gbps=1, bf16_tflops=1, fp8_tflops=None, intra_link="PCIe",
               intra_link_gbps=1, generation="", source="", as_of="")


def read_nuisance(path: Path) -> dict[str, dict[str, float]]:
    """Splitwise-engine overheads stored as ``engine:splitwise:<gpu>`` rows of the calibration file."""
    df = pd.read_csv(path)
    rows = df[df["gpu"].astype(str).str.startswith("engine:")]
    out: dict[str, dict[str, float]] = {}
    for _, r in rows.iterrows():
        out.setdefault(str(r["gpu"]).split(":")[-1], {})[str(r["param"])] = float(r["value"])
    return out


def check(reference: Path, calibration_csv: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Held-out errors of the COMMITTED constants (no refit): what the slow test asserts on."""
    from planning.catalog.load import load_catalog
    from planning.perf.calibration import load_calibration

    gpus = load_catalog().gpus
    cal = load_calibration(calibration_csv)
    obs = load_observations(reference)
    return evaluate({g: cal.for_gpu(gpus[g]) for g in gpus}, gpus, obs, read_nuisance(calibration_csv))


def markdown(report: dict[str, object]) -> str:
    """Markdown fragment pasted into docs/perf-model.md."""
    lines = ["| source | n fit | n held out | median APE (held out) | p90 APE (held out) | median APE (fit) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in ("by_source", "by_source_gpu"):
        for k, r in report[name].items():  # type: ignore[attr-defined]
            lines.append(f"| {k} | {r['n_fit']} | {r['n_held_out']} | {100 * r['median_ape']:.1f} % | "
                         f"{100 * r['p90_ape']:.1f} % | {100 * r['train_median_ape']:.1f} % |")
        if name == "by_source":
            lines.append("| **per source and GPU** | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference")
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "calibration.csv")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "perf-calibration.json")
    parser.add_argument("--check", action="store_true", help="evaluate the committed constants, do not refit")
    args = parser.parse_args(argv)
    from planning.catalog.load import load_catalog

    gpus = load_catalog().gpus
    if args.check:
        rep = check(args.reference, args.out)
        print(markdown(rep))
        return 0
    cals, report = calibrate(args.reference, gpus)
    write_csv(args.out, cals, report, gpus)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(markdown(report))
    print(f"\nwrote {args.out} and {args.report}")
    return 0


assert set(GLOBAL_VALUES) == set(GLOBAL_PARAMS)

if __name__ == "__main__":
    sys.exit(main())
