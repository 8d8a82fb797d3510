"""A browser's cold solve as the workbench runs it: a solve job in a job worker process (issue 41 §3).

Each run makes a fresh job runner with worker processes (``JobRunner(processes=True)``, the app's warm modules,
an empty ``PLANNING_HOME``, the result cache off), waits for its worker to warm up (the app starts one when the
server starts), then times one ``ui.jobs.solve_job`` of the preset from submit to done: the figure a user waits for
after pressing Solve. ``--cores`` sets what the runner shares out (``JobRunner.cores``): ``--cores 1`` is the job
worker that runs its baselines one after another (every job before this change), the default the machine's cores.
Runs alternate the two when ``--against-cores`` is given, and the answers' digests (plan cost and every
baseline's cost and note) must agree. Prints one JSON line per run, then the medians with the load averages.

    python -m benchmarks.bench_job_solve --preset coral-extended --runs 3 --against-cores 1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def warm(request: dict[str, Any], progress: Any, token: Any) -> dict[str, Any]:
    """A job that returns at once: the worker has imported the app's modules when it answers."""
    return {"pid": os.getpid()}


def one_run(preset: str, cores: int) -> dict[str, Any]:
    """One fresh runner and worker, one timed solve job; the wall time from submit to done and the digest."""
    from planning import api
    from planning.jobs import JobRunner, JobStore
    from ui.jobs import solve_job, solve_request

    with tempfile.TemporaryDirectory() as home:
        os.environ["PLANNING_HOME"] = home
        runner = JobRunner(JobStore(Path(home) / "jobs.sqlite"), max_workers=2, processes=True,
                           warm_modules=("ui.state",))
        runner.cores = cores
        try:
            runner.wait(runner.submit("warm", {}, warm), timeout=300)
            request = solve_request(api.load_preset_scenario(preset))
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            record = runner.wait(runner.submit("solve", request, solve_job), timeout=1200)
            wall = time.perf_counter() - t0
        finally:
            runner.shutdown(wait=True, cancel=True)
    if record.status != "done" or record.result is None:
        raise SystemExit(f"the solve job ended {record.status}: {record.error}")
    r = record.result
    answer = json.dumps([r["cost_per_hour"]] + [(b["name"], b["cost_per_hour"], b.get("note"))
                                                for b in r.get("baselines", [])])
    return {"cores": cores, "wall": round(wall, 2), "load": round(load, 2),
            "baselines": round(r.get("timings", {}).get("baselines_seconds", 0.0), 2),
            "digest": hashlib.sha1(answer.encode()).hexdigest()[:12]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="coral-extended")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--against-cores", type=int, help="alternate with runs at this many cores")
    args = ap.parse_args()
    os.environ["PLANNING_RESULT_CACHE"] = "off"
    os.environ.pop("PLANNING_BASELINE_WORKERS", None)
    arms = [args.cores] + ([args.against_cores] if args.against_cores else [])
    rows: dict[int, list[dict[str, Any]]] = {c: [] for c in arms}
    for _ in range(args.runs):
        for cores in arms:
            row = one_run(args.preset, cores)
            rows[cores].append(row)
            print(json.dumps(row), flush=True)
    for cores, got in rows.items():
        print(f"{args.preset}, cores {cores}: median {statistics.median(r['wall'] for r in got):.2f} s "
              f"(runs {', '.join(str(r['wall']) for r in got)}); load {', '.join(str(r['load']) for r in got)}")
    digests = {r["digest"] for got in rows.values() for r in got}
    print("answers agree" if len(digests) == 1 else f"ANSWERS DIFFER: {sorted(digests)}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
