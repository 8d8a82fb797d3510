"""A new user's day on the Timeline page (issue 41 §4): a three-model scenario that is not a preset, planned the way
the page plans it, timed, with the time-left estimate the page shows checked against the real time left.

Run: ``python benchmarks/bench_timeline_day.py [--repeats 3] [--policies myopic lookahead offline] [--busy 4]``
(``--busy N``: N CPU-burning processes beside every repeat, ``benchmarks._load.Busy``).
The scenario: llama-3-8b, llama-3-70b and qwen3-32b with the user's own rates, request sizes and SLOs, two AWS
regions, ten node shapes, K = 0.1; demand per model the page's default pick (the shipped Azure code and conversation
days, alternating) matched to the scenario's rate at the peak, 24 hourly epochs. Each repeat runs the page's job
function (``api.timeline_job`` on ``api.timeline_request``) in a fresh engine context, so the template libraries
are built (or priced on demand) inside the timed run as they are for a new scenario, with ``PLANNING_HOME``
(the library and perf-table disk cache) an empty folder. Prints per repeat the wall time, the time in templates (libraries or on-demand pricing)
vs the epochs vs the policies' schedules vs the static peak, each policy's day total, and the time-left estimate
``JobRecord.time_left`` gives at 25 / 50 / 75 % of the run against the actual time left; then the medians and the
load average.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._load import Busy, load_line
from planning import api
from planning.jobs.record import JobRecord

SCENARIO: dict[str, Any] = {
    "name": "new-three-models",
    "mode": "disaggregated",
    "pricing": "on_demand",
    "models": [
        {"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
         "demand": {"rate_rps": 12, "input_len": 1000, "output_len": 250}},
        {"id": "llama-3-70b", "slo": {"prefill_ms": 1500, "decode_ms": 80},
         "demand": {"rate_rps": 4, "input_len": 1500, "output_len": 300}},
        {"id": "qwen3-32b", "slo": {"prefill_ms": 1600, "decode_ms": 100},
         "demand": {"rate_rps": 6, "input_len": 800, "output_len": 350}},
    ],
    "regions": ["aws:us-east-1", "aws:us-west-2"],
    "shapes": ["1xL4", "4xL4", "8xL4", "1xA10G", "4xA10G", "1xL40S", "4xL40S", "8xL40S", "1xH100", "8xH100"],
    "options": {"K": 0.1},
}
SAMPLES = ("azure_code_day", "azure_conv_day")


def page_request(policies: tuple[str, ...], offline_limit: float) -> dict[str, Any]:
    """The request the Timeline page submits for this scenario with its default widgets."""
    scenario = api.Scenario.from_dict(SCENARIO)
    demand = {m.id: {"sample": SAMPLES[i % len(SAMPLES)]} for i, m in enumerate(scenario.models)}
    return api.timeline_request(scenario, demand, epoch="1h", rate_scale=1.0, K=scenario.options.K,
                                policies=policies, horizon=int(scenario.options.lookahead_epochs),
                                offline_time_limit_s=offline_limit, demand_match="peak")


def estimate_at(events: list[tuple[float, float, str]], request: dict[str, Any], at: float, wall: float) -> str:
    """What the page's progress line says ``at`` seconds into a run of ``wall`` seconds: the last reported
    fraction and message, the estimate of ``JobRecord.time_left`` from it, and the actual time left."""
    f, msg = 0.0, "queued"
    for t, frac, text in events:
        if t > at:
            break
        f, msg = frac, text
    import json

    record = JobRecord(id="bench", kind="timeline", request_key="", request_json=json.dumps(request),
                       status="running", progress=f, message=msg, result_json=None, error=None, error_field=None,
                       error_detail=None, cancel_requested=False, owner=None, host=None, pid=None, heartbeat=None,
                       created=0.0, started=0.0, finished=None)
    left = record.time_left(now=at)
    est = "none" if left is None else f"{left:.1f} s"
    ratio = "" if left is None or wall - at <= 0 else f" ({left / (wall - at):.2f}x)"
    return f"at {at:.1f} s ({f:.0%} {msg!r}): estimated {est}{ratio}, actual {wall - at:.1f} s"


def one_run(request: dict[str, Any]) -> tuple[float, dict[str, Any], list[tuple[float, float, str]]]:
    """One run of the page's job function in a fresh engine context and an empty library cache."""
    from planning import context as ctx

    events: list[tuple[float, float, str]] = []
    t0 = time.perf_counter()

    def progress(frac: float, msg: str) -> None:
        events.append((time.perf_counter() - t0, float(frac), str(msg)))

    with tempfile.TemporaryDirectory() as cache:
        os.environ["PLANNING_HOME"] = cache  # a new user: no library or perf table on disk yet
        ctx._CTX = None  # the next engine_context() loads afresh under that home
        t0 = time.perf_counter()
        out = api.timeline_job(request, progress, threading.Event())
        wall = time.perf_counter() - t0
    return wall, out, events


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", nargs="+", default=["myopic", "lookahead", "offline"])
    ap.add_argument("--offline-limit", type=float, default=20.0, help="the page's default offline time limit (s)")
    ap.add_argument("--busy", type=int, default=0, help="CPU-burning processes beside the runs (issue 41's load)")
    args = ap.parse_args()
    with Busy(args.busy):
        print(load_line(args.busy))
        return _runs(args)


def _runs(args: argparse.Namespace) -> int:
    """The repeats of one day, printed with their parts, totals and estimates; then the median."""
    request = page_request(tuple(args.policies), args.offline_limit)
    print(f"# {platform.platform()}, python {platform.python_version()}, {os.cpu_count()} cores; "
          f"{SCENARIO['name']}: {', '.join(m['id'] for m in SCENARIO['models'])}; {len(SCENARIO['shapes'])} shapes "
          f"in {len(SCENARIO['regions'])} regions; 24 hourly epochs; policies {args.policies}")
    walls, loads = [], []
    for r in range(args.repeats):
        load0 = os.getloadavg()[0]
        wall, out, events = one_run(request)
        walls.append(wall)
        loads.append((load0 + os.getloadavg()[0]) / 2)
        tm = out["timings"]
        parts = ", ".join(f"{k} {tm[k]:.1f} s" for k in ("templates_seconds", "pool_seconds", "epochs_seconds",
                                                             "lookahead_seconds", "offline_seconds", "static_seconds",
                                                             "independent_epochs_seconds") if tm.get(k))
        print(f"repeat {r}: {wall:.1f} s wall (load {loads[-1]:.1f}); {parts}; "
              f"on-demand templates {bool(tm.get('templates_on_demand'))}")
        totals = {p: round(v["total_cost"], 2) for p, v in out.get("policies", {}).items()}
        info = {p: f"{v['status']} gap {v['gap']}" for p, v in out.get("policy_info", {}).items()}
        print(f"  day totals {totals or {'myopic': round(out['total_cost'], 2)}}; static peak "
              f"${out['static_peak_total_cost']:.2f}; {info}")
        for share in (0.25, 0.5, 0.75):
            print("  " + estimate_at(events, request, share * wall, wall))
    print(f"median of {len(walls)}: {statistics.median(walls):.1f} s wall (runs {', '.join(f'{w:.1f}' for w in walls)}); "
          f"load average {statistics.median(loads):.1f}; {load_line(args.busy)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
