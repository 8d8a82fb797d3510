"""Peak memory of the driver and of each worker when independent solves fan out (issue 29 §4).

A demand sweep of ``--points`` multipliers runs as tasks on the process pool (``--workers`` spawn processes) and,
when Ray is installed, on a local Ray instance with as many CPUs. Each task reports the peak resident set of the
process it ran in (``ru_maxrss``: a pool worker's peak over every task it ran), and the driver reports its own
after the fan-out, so the figures say what one machine of the cluster needs for one scenario.

Run: ``python -m benchmarks.bench_worker_memory [--preset platform-100] [--points 4] [--workers 2]``.
Each backend runs in a fresh subprocess with an empty ``PLANNING_HOME``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from typing import Any

from benchmarks._load import run_child


def measured_point(point: tuple[dict[str, Any], str, float]) -> tuple[float, int, float]:
    """``api_fanout.sweep_point`` in this worker → (the plan's $/h, this process's pid, its peak RSS in MB)."""
    from planning.api_fanout import sweep_point

    rows = sweep_point(point)
    cost = next((r["cost_per_hour"] for r in rows if r["method"].startswith("Plan")), float("nan"))
    return float(cost), os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(preset: str, points: int, workers: int, backend: str) -> dict[str, Any]:
    from planning import api
    from planning.parallel import run_tasks

    scenario = api.load_preset_scenario(preset)
    values = [0.5 + 1.5 * i / max(points - 1, 1) for i in range(points)]
    items = [(scenario.to_dict(), "demand", x) for x in values]
    t0 = time.perf_counter()
    out = run_tasks(measured_point, items, backend=backend, workers=workers, what="memory benchmark")
    wall = time.perf_counter() - t0
    per_worker: dict[int, float] = {}
    for _cost, pid, rss in out:
        per_worker[pid] = max(per_worker.get(pid, 0.0), rss)
    return {"wall": wall, "costs": [c for c, _p, _r in out], "workers": sorted(per_worker.values()),
            "driver_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_case(preset: str, points: int, workers: int, backend: str) -> dict[str, Any]:
    """One fan-out in a fresh process with an empty PLANNING_HOME."""
    return run_child("benchmarks.bench_worker_memory", "_child", (preset, points, workers, backend), backend)


def main() -> int:
    """Print one line per backend: wall, the plans' $/h, peak RSS of each worker and of the driver."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="coral-extended")
    parser.add_argument("--points", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    backends = ["process"]
    try:
        import ray  # noqa: F401

        backends.append("ray")
    except ImportError:
        print("ray not installed (make install-dev with the [ray] extra, or make test-ray): process pool only")
    print(f"{args.preset}: demand sweep of {args.points} points on {args.workers} workers, fresh processes")
    print(f"{'backend':8} {'wall s':>7} | {'plans $/h':40} | {'worker peak RSS MB':24} {'driver MB':>9}")
    for backend in backends:
        r = run_case(args.preset, args.points, args.workers, backend)
        costs = ", ".join(f"{c:.2f}" for c in r["costs"])
        workers = ", ".join(f"{m:.0f}" for m in r["workers"])
        print(f"{backend:8} {r['wall']:7.1f} | {costs:40} | {workers:24} {r['driver_mb']:9.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
