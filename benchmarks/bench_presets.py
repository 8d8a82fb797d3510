"""Benchmark: template-library build, allocation ILP and baselines per preset (median of N runs).

Run: ``python -m benchmarks.bench_presets [--runs 3] [--presets coral-core coral-extended]``.
Each run uses a fresh, empty template cache so the library time is a cold build; a final warm run shows the
cached time. Prints one line per run and a median summary (also as JSON with --json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from planning.context import EngineContext, default_context
from planning.pipeline import solve


def run_once(preset: str, cache_dir: Path, workers: int) -> dict[str, float | str]:
    from dataclasses import replace

    from planning.api import load_preset_scenario

    scenario = load_preset_scenario(preset)
    scenario = replace(scenario, options=replace(scenario.options, workers=workers))
    base = default_context(cache_dir=cache_dir)
    ctx = EngineContext(catalog=base.catalog, perf=base.perf, cache_dir=cache_dir)
    t0 = time.perf_counter()
    result = solve(scenario, context=ctx)
    total = time.perf_counter() - t0
    return {
        "status": result.status,
        "cost_per_hour": round(result.comparable_cost, 4),  # provisioning (+ KV egress), as the baselines count
        "mip_gap": result.mip_gap if result.mip_gap is not None else float("nan"),
        # on demand there is no library step (templates are generated inside the allocation): 0 s, not missing
        "templates_seconds": result.timings.get("templates_seconds", 0.0),
        "allocation_seconds": result.timings.get("allocation_seconds", 0.0),
        "baselines_seconds": result.timings.get("baselines_seconds", 0.0),
        "first_plan_seconds": result.stats.get("anytime_first_plan_seconds", float("nan")),
        "total_seconds": total,
        "templates": sum(result.template_counts.values()),
        "best_baseline": (best.name if (best := result.best_baseline()) else "none"),
        "best_baseline_cost": (best.cost_per_hour if best else float("nan")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--presets", nargs="+", default=["coral-core", "coral-extended", "melange-arena", "demystifying"])
    parser.add_argument("--workers", type=int, default=0, help="library processes (0 = one per core)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-warm", action="store_true", help="skip the cached (warm) re-run")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    summary = {}
    for preset in args.presets:
        runs = []
        for i in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                r = run_once(preset, Path(tmp), args.workers)
                runs.append(r)
                print(f"{preset} run {i + 1}: {r}")
        warm: dict[str, float | str] = {"templates_seconds": float("nan")}
        if not args.no_warm:
            with tempfile.TemporaryDirectory() as tmp:
                run_once(preset, Path(tmp), args.workers)
                warm = run_once(preset, Path(tmp), args.workers)
        med = {k: statistics.median(float(r[k]) for r in runs)
               for k in ("first_plan_seconds", "templates_seconds", "allocation_seconds", "baselines_seconds",
                         "total_seconds")}
        summary[preset] = {**med, "warm_templates_seconds": warm["templates_seconds"], "status": runs[-1]["status"],
                           "cost_per_hour": runs[-1]["cost_per_hour"], "templates": runs[-1]["templates"],
                           "mip_gap": runs[-1]["mip_gap"], "best_baseline": runs[-1]["best_baseline"],
                           "best_baseline_cost": runs[-1]["best_baseline_cost"]}
        print(f"{preset} MEDIAN of {args.runs}: " + ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                                            for k, v in summary[preset].items()))
    if args.json:
        print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
