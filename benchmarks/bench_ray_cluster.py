"""Fan-out on a real multi-node Ray cluster (issue 29 §2, §4): speed-up vs nodes and peak RSS per process.

Run: ``python -m benchmarks.bench_ray_cluster [--preset coral-core] [--points 4] [--nodes 1,2,4] [--repeats 3]``
(needs the [ray] extra: ``make install-ray``).

For each node count N it starts a head and N − 1 worker nodes, each a separate ``ray start`` with one CPU
(``tests/parallel/ray_cluster.py``), points a fresh driver process at it with ``PLANNING_RAY_ADDRESS`` and times
``api.sweep`` over ``--points`` demand multipliers and ``api.what_if`` over as many variants; the same two run
on the process backend (here, one after another) for the baseline. Reported per case: the median wall time
(every run in brackets), the speed-up over the sequential run, the driver's peak RSS and the largest peak RSS
of any Ray worker process of the cluster (VmHWM read from /proc before teardown), and the check sum of the
plans' costs (identical on every row, or the row says so). The load average is printed with the table: the
machine is shared, so the figures are noisy; quote medians.
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
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from planning import api
from planning.whatif import AvailabilityScale, DemandScale, PriceChange, SloScale
case, backend, preset, points = {case!r}, {backend!r}, {preset!r}, {points}
scenario = api.load_preset_scenario(preset)
out = {{}}
if backend == "ray":
    from planning import parallel
    t = time.perf_counter(); parallel.ray_module(); out["ray_connect_s"] = time.perf_counter() - t
t = time.perf_counter()
if case == "sweep":
    xs = [0.5 + 1.5 * i / max(1, points - 1) for i in range(points)]
    frame = api.sweep(scenario, "demand", xs, backend=backend)
    out["check"] = round(float(frame[frame.method == "Plan (mixed templates)"].cost_per_hour.sum()), 6)
else:
    pool = [DemandScale(2.0), PriceChange(-20.0), SloScale(1.5), AvailabilityScale(0.5), DemandScale(0.5),
            PriceChange(20.0), SloScale(0.8), DemandScale(1.5)]
    res = api.what_if(scenario, pool[:points], base=False, backend=backend)
    out["check"] = round(sum(r.comparable_cost for r in res.values()), 6)
out["seconds"] = time.perf_counter() - t
out["driver_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps(out))
"""


def _peak_rss_mb(marker: str) -> float:
    """The largest VmHWM (peak RSS) among live Ray worker processes of the cluster under ``marker``."""
    from tests.parallel.ray_cluster import stragglers

    best = 0.0
    for pid in stragglers(marker):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"default_worker" not in cmd and not cmd.startswith(b"ray::"):
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                best = max(best, int(line.split()[1]) / 1024)
    return best


def run_case(case: str, backend: str, preset: str, points: int, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-rc-home-") as home:
        code = CHILD.format(root=str(ROOT), case=case, backend=backend, preset=preset, points=points)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600,
                              env={**os.environ, **env, "PLANNING_HOME": home})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{case}/{backend} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="coral-core")
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="sweep,whatif")
    args = ap.parse_args()
    from tests.parallel.ray_cluster import DRIVER_ENV, LocalCluster

    rows = []
    for case in args.cases.split(","):
        runs = [run_case(case, "process", args.preset, args.points, {}) for _ in range(args.repeats)]
        rows.append((case, "process (here, sequential)", runs, 0.0))
        for n in (int(x) for x in args.nodes.split(",")):
            with tempfile.TemporaryDirectory(prefix="brc") as tmp:
                cluster = LocalCluster(Path(tmp))
                try:
                    cluster.start(head_cpus=1, worker_cpus=[1] * (n - 1))
                    env = {**DRIVER_ENV, "PLANNING_RAY_ADDRESS": cluster.address}
                    runs = [run_case(case, "ray", args.preset, args.points, env) for _ in range(args.repeats)]
                    worker_rss = _peak_rss_mb(tmp)
                finally:
                    cluster.stop()
            rows.append((case, f"ray, {n} node(s) × 1 CPU", runs, worker_rss))
    load = os.getloadavg()
    print(f"preset {args.preset}, {args.points} points/variants, {args.repeats} runs each; "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}, {os.cpu_count()} cores")
    print("| case | backend | seconds (median; runs) | speed-up | driver peak RSS | worker peak RSS | check |")
    print("|---|---|---|---|---|---|---|")
    base: dict[str, float] = {}
    for case, name, runs, worker_rss in rows:
        secs = [r["seconds"] for r in runs]
        med = statistics.median(secs)
        base.setdefault(case, med)
        checks = {r["check"] for r in runs}
        check = f"{checks.pop():,.2f}" if len(checks) == 1 else f"DIFFERS {sorted(checks)}"
        driver = statistics.median(r["driver_rss_mb"] for r in runs)
        print(f"| {case} | {name} | **{med:.1f}** ({' / '.join(f'{s:.1f}' for s in secs)}) | "
              f"{base[case] / med:.2f}× | {driver:.0f} MB | {worker_rss:.0f} MB | {check} |")


if __name__ == "__main__":
    main()
