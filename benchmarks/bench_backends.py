"""Backends benchmark (issue 11 §3): wall time of the two fan-outs on the process backend and on Ray, by CPUs.

Run: ``python -m benchmarks.bench_backends [--preset coral-core] [--points 4] [--repeats 3]``.

Each case runs in a fresh subprocess with an empty PLANNING_HOME (cold caches):

* **sweep** — ``api.sweep`` over ``--points`` demand multipliers (0.5 … 2): the process backend solves them here
  one after another; Ray runs them as tasks on a local instance with 1 and 2 CPUs (Ray's start-up is timed apart).
* **library** — the scenario's template libraries (``templates: library``): the process pool with 1 and 2
  workers, Ray with 1 and 2 CPUs.
* **pricing** — one plan with templates on demand (``api.solve`` without baselines): the pricing searches here,
  one group after another (process), or as one Ray actor per group (Ray with 1 and 2 CPUs; actor start-up is
  in the time, the instance start-up is not). The check column is the plan's $/h.

Prints the medians (and every run) as a table: the scaling curve of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from dataclasses import replace
from planning import api, parallel
case, backend, cpus, preset, points = {case!r}, {backend!r}, {cpus}, {preset!r}, {points}
scenario = api.load_preset_scenario(preset)
out = {{}}
if backend == "ray":
    t = time.perf_counter(); parallel.ray_module(num_cpus=cpus); out["ray_start_s"] = time.perf_counter() - t
t = time.perf_counter()
if case == "sweep":
    xs = [0.5 + 1.5 * i / max(1, points - 1) for i in range(points)]
    frame = api.sweep(scenario, "demand", xs, backend=backend, workers=cpus)
    out["plan_cost"] = float(frame[frame.method == "Plan (mixed templates)"].cost_per_hour.sum())
elif case == "pricing":
    parallel.set_default_backend(backend)
    opts = replace(scenario.options, templates="on-demand")
    out["plan_cost"] = float(api.solve(replace(scenario, options=opts), with_baselines=False).cost_per_hour)
else:
    opts = replace(scenario.options, templates="library", workers=cpus)
    parallel.set_default_backend(backend)
    frame = api.build_templates(replace(scenario, options=opts))
    out["templates"] = int(len(frame))
out["seconds"] = time.perf_counter() - t
print(json.dumps(out))
"""


def run_case(case: str, backend: str, cpus: int, preset: str, points: int) -> dict[str, float]:
    code = CHILD.format(root=str(ROOT), case=case, backend=backend, cpus=cpus, preset=preset, points=points)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PLANNING_HOME": home, "RAY_AUTH_MODE": "disabled"}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{case}/{backend}/{cpus} failed:\n{proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="coral-core")
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", nargs="+", default=["sweep", "library"])
    args = ap.parse_args()
    print(f"preset {args.preset}, {args.points} sweep points, {args.repeats} runs each, {os.cpu_count()} cores")
    print(f"{'case':<8} {'backend':<8} {'CPUs':>4} {'median s':>9}  runs (s)   [Ray start-up s]  check")
    for case in args.cases:
        for backend, cpus in (("process", 1), ("process", 2), ("ray", 1), ("ray", 2)):
            if case in ("sweep", "pricing") and backend == "process" and cpus == 2:
                continue  # the process backend runs sweep points and pricing searches here, one after another
            runs = [run_case(case, backend, cpus, args.preset, args.points) for _ in range(args.repeats)]
            secs = [r["seconds"] for r in runs]
            start = [r.get("ray_start_s", 0.0) for r in runs]
            check = runs[0].get("plan_cost", runs[0].get("templates"))
            print(f"{case:<8} {backend:<8} {cpus:>4} {statistics.median(secs):>9.2f}  "
                  f"{' / '.join(f'{s:.2f}' for s in secs)}"
                  + (f"   [{statistics.median(start):.2f}]" if backend == "ray" else "") + f"  {check}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
