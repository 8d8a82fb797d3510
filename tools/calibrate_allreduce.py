"""Restate the measured all-reduce tables the performance model reads into data/allreduce.csv (run by `make calibrate`).

Run from the repo root (it reads ../shared/reference, never at runtime):

    python3 tools/calibrate_allreduce.py [--reference ../shared/reference] [--out-dir data]

Writes ``data/allreduce.csv``: one all-reduce's latency in microseconds per (GPU, all-reduce engine, GPUs in the
group, message bytes), with a ``source`` column. Sources (aiconfigurator's silicon database,
../shared/reference/perf/README.md): NCCL 2.27.3 (H200: 2.26.2) from nccl-tests on the A100-SXM, H100-SXM and
H200 boxes (``aic_nccl_allreduce.csv``, engine ``nccl``: what vLLM and SGLang run; not the L40S box,
NOT_P2P_BOXES), and TensorRT-LLM 1.0's own custom all-reduce on the A100-SXM (``aic_a100_trtllm1.0_custom_allreduce.csv``, engine ``trtllm``). Message sizes count
16-bit elements in both files, so bytes = 2 x message_size; repeated measurements of one size are reduced to their
median. The app, CLI and default suite read only the CSV (planning/perf/allreduce.py, docs/perf-model.md Sec. 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
NCCL_FILE = "aic_nccl_allreduce.csv"
TRTLLM_FILE = "aic_a100_trtllm1.0_custom_allreduce.csv"
GPUS = {"A100-SXM-80GB": "A100-80G", "H100-SXM-80GB": "H100", "H200-SXM-141GB": "H200", "L40S-48GB": "L40S"}
ELEMENT_BYTES = 2  # message_size counts half / bfloat16 elements
COLUMNS = ["gpu", "engine", "tp", "bytes", "latency_us", "source"]
# Boxes whose measured rings are not all peer-to-peer. The aiconfigurator L40S box's 4- and 8-GPU rings cross GPU
# pairs without peer-to-peer (NCCL through host memory: 38.9 ms for 32 MB on 8 GPUs; the data behind
# ``ar_host_gbps``, tools/calibrate_perf.py host_allreduce_gbps), which a catalog L40S node (P2P over PCIe, as the
# published 4x/8x L40S TensorRT-LLM runs show) does not do, and its 2-GPU pairs alone would leave TP 4 and 8 to an
# extrapolation: the L40S keeps the ring fitted on its own kernels (docs/perf-model.md Sec. 1).
NOT_P2P_BOXES = ("L40S-48GB",)
NCCL_SOURCE = "aiconfigurator silicon db: NCCL nccl-tests all_reduce, half (reference/perf/aic_nccl_allreduce.csv)"
TRTLLM_SOURCE = ("aiconfigurator silicon db: TensorRT-LLM 1.0 custom all-reduce, bfloat16, A100-SXM4-80GB "
                 "(reference/perf/aic_a100_trtllm1.0_custom_allreduce.csv)")


def _restate(df: pd.DataFrame, engine: str, source: str) -> pd.DataFrame:
    """One row per (gpu, tp, bytes): the median of the repeated measurements, in the project's schema."""
    df = df[~df["gpu"].isin(NOT_P2P_BOXES)]
    out = (df.assign(gpu=df["gpu"].map(GPUS), tp=df["num_gpus"].astype(int),
                     bytes=df["message_size"].astype("int64") * ELEMENT_BYTES, latency_us=df["latency_ms"] * 1e3)
           .dropna(subset=["gpu"])
           .groupby(["gpu", "tp", "bytes"], as_index=False)["latency_us"].median())
    return out.assign(engine=engine, source=source, latency_us=out["latency_us"].round(4))


def allreduce_rows(reference: Path) -> pd.DataFrame:
    """The all-reduce table in the project's schema (COLUMNS), sorted by gpu, engine, tp, bytes."""
    base = reference / "perf"
    nccl = _restate(pd.read_csv(base / NCCL_FILE), "nccl", NCCL_SOURCE)
    parts = [nccl]
    if (base / TRTLLM_FILE).exists():
        trt = pd.read_csv(base / TRTLLM_FILE).assign(gpu="A100-SXM-80GB")
        parts.append(_restate(trt, "trtllm", TRTLLM_SOURCE))
    rows = pd.concat(parts, ignore_index=True)
    return rows.sort_values(["gpu", "engine", "tp", "bytes"]).reset_index(drop=True)[COLUMNS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "data")
    args = parser.parse_args(argv)
    if not (args.reference / "perf" / NCCL_FILE).exists():
        print(f"no {args.reference}/perf/{NCCL_FILE}: keeping the committed data/allreduce.csv")
        return 0
    rows = allreduce_rows(args.reference)
    path = args.out_dir / "allreduce.csv"
    tmp = path.with_suffix(".csv.tmp")
    rows.to_csv(tmp, index=False, columns=COLUMNS)
    tmp.replace(path)
    print(f"wrote {path}: {len(rows)} rows, {rows.groupby(['gpu', 'engine', 'tp']).ngroups} (GPU, engine, TP) curves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
