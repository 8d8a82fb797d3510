"""Library benchmark: build time per preset (median of N runs), templates per (model, phase).

Run: ``python3 benchmarks/bench_library.py [--preset coral-core|coral-extended|all] [--runs 3] [--workers 2]
[--tables perf|synthetic]``.

``--tables perf`` (default) reads the shipped presets ``data/presets/<preset>.yaml`` (models, SLOs, mean
request sizes, shapes) and builds the stage tables with ``planning.perf.PerfModel.stage_tables``;
``--tables synthetic`` uses ``planning.templates.synthetic`` (memory cap per node, latency-budget batch limit,
KV-memory batch limit; non-increasing in j and S) on the same Coral Sec. 6.1 setups: core = Qwen3-32B,
GPT-OSS-20B, Phi-4 on 12 shapes (L40S, L4, A10G × 1/2/4/8 GPUs); extended adds Llama-3-70B, GPT-OSS-120B,
Qwen3-235B and H100/A100 × 1/2/4/8 (20 shapes). Table construction is excluded from the timings. Each (model, phase) library uses Nmax = 6, ρ = 12. Time is wall clock for all libraries of the
preset, enumeration included (the multiset enumeration is cached per process after the first run, so run 1
pays it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from planning.templates.library import LibraryRun, build_library
from planning.templates.synthetic import (
    CORE_MODELS,
    CORE_SHAPES,
    EXTENDED_MODELS,
    EXTENDED_SHAPES,
    shape_tables,
)

PRESETS = {"coral-core": (CORE_SHAPES, CORE_MODELS), "coral-extended": (EXTENDED_SHAPES, EXTENDED_MODELS)}


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (pool workers are reaped when each pool closes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


Job = tuple[str, str, list[str], np.ndarray, np.ndarray, float, int]


def synthetic_jobs(name: str) -> list[Job]:
    shapes, models = PRESETS[name]
    jobs = []
    for model, L, weight, prefill_ms, decode_ms in models:
        for phase, slo in (("prefill", prefill_ms), ("decode", decode_ms)):
            tables, mem = shape_tables(shapes, L, weight, slo)
            jobs.append((model, phase, list(shapes), tables, mem, weight, L))
    return jobs


def perf_jobs(name: str) -> list[Job]:
    import yaml

    from planning.catalog import load_catalog
    from planning.perf import PerfModel, Workload

    root = Path(__file__).resolve().parents[1]
    preset = yaml.safe_load((root / "data" / "presets" / f"{name}.yaml").read_text())
    catalog = load_catalog()
    perf = PerfModel(catalog=catalog)
    models = catalog.models if isinstance(catalog.models, dict) else {m.id: m for m in catalog.models}
    gpus = catalog.gpus if isinstance(catalog.gpus, dict) else {g.id: g for g in catalog.gpus}
    shapes = list(preset["shapes"])
    mem = np.asarray([int(s.split("x", 1)[0]) * gpus[s.split("x", 1)[1]].memory_gb for s in shapes])
    jobs = []
    for m in preset["models"]:
        spec = models[m["id"]]
        wl = Workload(m["demand"]["input_len"], m["demand"]["output_len"])
        for phase in ("prefill", "decode"):
            tables = perf.stage_tables(spec, shapes, phase, float(m["slo"][f"{phase}_ms"]), wl, 6)
            jobs.append((m["id"], phase, shapes, tables, mem, spec.weight_bytes() / 1e9, spec.layers))
    return jobs


def run_preset(jobs: list[Job], workers: int, verbose: bool) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    c0 = cpu_seconds()
    total = 0
    for model, phase, shapes, tables, mem, weight, L in jobs:
        t = time.perf_counter()
        c = cpu_seconds()
        df = build_library(shapes, mem, tables, weight, L, nmax=6, rho=12, run=LibraryRun(workers=workers))
        total += df.height
        if verbose:
            print(
                f"    {model:16s} {phase:7s} {df.height:7d} templates {time.perf_counter() - t:6.2f} s wall "
                f"{cpu_seconds() - c:6.2f} s CPU",
                flush=True,
            )
    return time.perf_counter() - t0, cpu_seconds() - c0, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="all", choices=[*PRESETS, "all"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tables", default="perf", choices=["perf", "synthetic"])
    args = ap.parse_args()
    names = list(PRESETS) if args.preset == "all" else [args.preset]
    for name in names:
        times = []
        cpus = []
        count = 0
        jobs = perf_jobs(name) if args.tables == "perf" else synthetic_jobs(name)
        for r in range(args.runs):
            secs, cpu, count = run_preset(jobs, args.workers, verbose=(r == 0))
            times.append(secs)
            cpus.append(cpu)
            print(f"  {name} run {r + 1}: {secs:.2f} s wall, {cpu:.2f} s CPU", flush=True)
        print(
            f"{name}: {count} templates, median {statistics.median(times):.2f} s wall, "
            f"{statistics.median(cpus):.2f} s CPU over {args.runs} runs ({args.tables} tables, "
            f"workers={args.workers}, load average at end {os.getloadavg()[0]:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
