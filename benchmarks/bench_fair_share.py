"""30 users on one server: every user plans a different coral-core variant while one user queues five heavy jobs.

Issue 43's target: all get their plan, and nobody's first job waits behind the heavy user's queue (fair share).
The level: the job runner the Streamlit server shares between all its sessions (``default_runner``: worker
processes, the app's warm modules, the app's own job function ``ui.jobs.solve_job`` and request), driven by one
thread per user; no browsers (``benchmarks.bench_browser_users`` drives the same through 30 Chromium sessions), so the
figures leave out page rendering and the websocket, and count from *Plan it* (submit) to the finished plan.

    python -m benchmarks.bench_fair_share                 # 30 users, 5 heavy jobs, 2 workers, 1 job per user
    python -m benchmarks.bench_fair_share --users 8 --heavy-preset coral-core   # a quick run
    python -m benchmarks.bench_fair_share --fifo          # the same without fair share, to compare

Prints per light user the time to their plan (median, p90, max) and their wait in the queue, the heavy user's
waits and finish times, and ``heavy jobs started while a light user's first job waited``: 0 is the target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from planning import api
from planning.jobs import JobRecord, JobRunner, JobStore
from planning.scenario import Scenario
from ui.jobs import solve_job, solve_request

SAFETY_S = 900.0  # the whole run stops (and says so) after 15 minutes


def variants(base: Scenario, n: int) -> list[Scenario]:
    """n distinct coral-core variants: demand ×0.80 … and every third with its SLOs 20 % looser or tighter."""
    out = []
    for i in range(n):
        scenario = base.with_demand_scaled(round(0.8 + 0.025 * i, 3))
        if i % 3 == 1:
            scenario = scenario.with_slo_scaled(1.2)
        elif i % 3 == 2:
            scenario = scenario.with_slo_scaled(0.9)
        out.append(scenario)
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _user(runner: JobRunner, owner: str, scenario: Scenario, delay: float, rows: list[dict[str, Any]]) -> None:
    time.sleep(delay)
    t0 = time.monotonic()
    job_id = runner.submit("solve", solve_request(scenario), solve_job, owner=owner)
    record = runner.wait(job_id, timeout=SAFETY_S)
    rows.append({"owner": owner, "id": job_id, "seconds": time.monotonic() - t0, "record": record})


def _summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: none"
    return (f"{name}: median {statistics.median(values):.1f} s, p90 {percentile(values, 0.9):.1f} s, "
            f"max {max(values):.1f} s (n={len(values)})")


def _overtaken(light: list[JobRecord], heavy: list[JobRecord]) -> int:
    """Heavy jobs that started while a light user's first job was queued (submitted before, started after)."""
    return sum(1 for job in light for h in heavy
               if job.started is not None and h.started is not None and job.created < h.started < job.started)


def run(args: argparse.Namespace) -> int:
    # --fifo: everyone under one owner key with every worker theirs, i.e. first come, first served as before
    os.environ["PLANNING_MAX_JOBS_PER_USER"] = str(args.workers if args.fifo else args.per_user)
    owner = (lambda name: "everyone") if args.fifo else (lambda name: name)
    base = api.load_preset_scenario("coral-core")
    heavy_base = api.load_preset_scenario(args.heavy_preset)
    with tempfile.TemporaryDirectory() as folder:
        runner = JobRunner(JobStore(Path(folder) / "jobs.sqlite"), max_workers=args.workers, processes=True,
                           warm_modules=("planning.api", "ui.jobs", *api.SOLVE_MODULES))
        try:
            warm = time.monotonic()
            runner.result(runner.submit("solve", solve_request(base), solve_job, owner="warm-up"), timeout=SAFETY_S)
            print(f"warm-up (one worker starts, plans coral-core once): {time.monotonic() - warm:.1f} s")
            rows: list[dict[str, Any]] = []
            heavy_ids = [runner.submit("solve", solve_request(heavy_base.with_demand_scaled(1.02 + 0.05 * i)),
                                       solve_job, owner=owner("heavy")) for i in range(args.heavy)]
            heavy_t0 = time.monotonic()
            threads = [threading.Thread(target=_user, args=(runner, owner(f"user{i:02d}"), scenario, i * args.spread,
                                                            rows))
                       for i, scenario in enumerate(variants(base, args.users))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(SAFETY_S)
            heavy = [runner.wait(j, timeout=SAFETY_S) for j in heavy_ids]
            heavy_done = time.monotonic() - heavy_t0
            return _report(args, rows, heavy, heavy_done)
        finally:
            runner.shutdown(wait=False, cancel=True)


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], heavy: list[JobRecord], heavy_done: float) -> int:
    light = [r["record"] for r in rows]
    planned = sum(1 for r in light if r.status == "done" and (r.result or {}).get("instances") is not None)
    waits = [r.started - r.created for r in light if r.started is not None]
    heavy_waits = [h.started - h.created for h in heavy if h.started is not None]
    print(f"load average before/after: {args.load_before} / {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    cap = "first come, first served (--fifo)" if args.fifo else f"{args.per_user} running job(s) per user"
    print(f"{args.users} users on coral-core variants, 1 heavy user with {args.heavy} x {args.heavy_preset}; "
          f"{args.workers} workers, {cap}; arrivals every {args.spread} s")
    print(f"light users with their plan: {planned}/{len(light)} "
          f"(statuses: {sorted({r.status for r in light})})")
    print(_summary("time to each light user's plan", [r["seconds"] for r in rows]))
    print(_summary("light users' wait in the queue", waits))
    print(_summary("heavy user's waits in the queue", heavy_waits))
    print(f"heavy user's last job done after {heavy_done:.1f} s; statuses {[h.status for h in heavy]}")
    overtaken = _overtaken(light, heavy)
    print(f"heavy jobs started while a light user's first job waited: {overtaken} (target 0)")
    return 0 if planned == len(light) and overtaken == 0 and all(h.status == "done" for h in heavy) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--heavy", type=int, default=5, help="heavy jobs the one heavy user queues first")
    parser.add_argument("--heavy-preset", default="coral-extended")
    parser.add_argument("--workers", type=int, default=2, help="the server's worker cap (default_runner's)")
    parser.add_argument("--per-user", type=int, default=1, help="PLANNING_MAX_JOBS_PER_USER for the run")
    parser.add_argument("--spread", type=float, default=0.5, help="seconds between two light users' arrivals")
    parser.add_argument("--fifo", action="store_true",
                        help="no fair share: one owner key for all, every worker theirs (first come, first served)")
    args = parser.parse_args(argv)
    args.load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
