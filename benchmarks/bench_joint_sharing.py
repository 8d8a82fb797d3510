"""Joint sharing benchmark (issue 27 §1): the joint split against the threshold split, both solved exactly.

Run: ``python benchmarks/bench_joint_sharing.py [--runs 3] [--time-limit 60] [--big-time-limit 300]``.

Prints per scenario: the joint plan's cost, status and proven gap, the threshold split's cost (the same model with
the split fixed by the rate threshold), how much cheaper the joint split is, GPUs, and the wall time of the whole
``solve_shared`` call (median of ``--runs``). Scenarios: ``long-tail`` (its threshold, 1 req/s, is a constraint on
the joint split: only the 41 tail models may share), ``long-tail`` with no threshold (every model that fits may
share; the threshold split then shares every one of them), and a 100-model variant (the preset + 56 variants at
½ and ¼ the rate, as ``bench_sharing.py``'s), with its own time limit. ``--only platform-100`` plans issue 29's
preset (610 offers: the threshold split part by part, the shared part by column generation) and prints its proven
gap and the process's peak RSS.

``--fresh`` (issue 29's figures): each run is a new process with an empty ``PLANNING_HOME`` (profiles and template
libraries built from nothing), three runs per scenario (``--runs``) of platform-100, long-tail and the 100-model
variant (``--only`` picks one); it prints per run and as medians: the process's wall time, the ``solve_shared``
call's, its peak RSS, cost, status, proven gap and bound, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning import api
from planning.scenario import Scenario
from planning.sharing import solve_shared


def hundred(s: Scenario) -> Scenario:
    """The preset plus 56 more variants (½ and ¼ the rate of the preset's variants): 100 models."""
    extra = tuple(replace(m, id=f"{m.id}-b", demand=m.demand.scaled(0.5)) for m in s.models if m.base is not None)
    extra += tuple(replace(m, id=f"{m.id}-c", demand=m.demand.scaled(0.25)) for m in s.models if m.base is not None)
    return replace(s, name="long-tail x100", models=s.models + extra[:56])


def run(name: str, s: Scenario, runs: int) -> None:
    times, res = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        res = solve_shared(s, method="exact")
        times.append(time.perf_counter() - t0)
    assert res is not None
    rule = res.threshold_split_cost_per_hour
    cheaper = f"{100 * (rule - res.cost_per_hour) / rule:.2f} %" if rule else "n/a"
    gap = "certified (gap 0)" if res.gap == 0 else (f"proven gap {res.gap:.2%}" if res.gap is not None else "no bound")
    if res.bound_per_hour is not None:
        gap += f", bound ${res.bound_per_hour:.2f}/h"
    rule_gap = ("certified" if res.threshold_split_gap == 0 else
                f"gap {res.threshold_split_gap:.2%}" if res.threshold_split_gap is not None else "no bound")
    print(f"{name}: {len(s.models)} models, time limit {s.options.time_limit_s:g} s")
    print(f"  joint split      ${res.cost_per_hour:8.2f}/h  {res.status:9s} {gap}; {len(res.shared_models)} shared on "
          f"{len(res.shared_nodes)} GPUs, {len(res.dedicated_models)} dedicated; {res.n_gpus} GPUs {res.gpus()}")
    print(f"  threshold split  ${rule if rule is not None else float('nan'):8.2f}/h  ({rule_gap}); joint cheaper by "
          f"{cheaper}")
    print(f"  wall {statistics.median(times):.1f} s median of {runs} ({', '.join(f'{t:.1f}' for t in times)}); "
          f"LP rounds {res.stats.get('lp_rounds', 0):.0f}, patterns in the ILP {res.stats.get('patterns_in_ilp', 0):,.0f}")
    print(f"  timings {({k: round(v, 1) for k, v in res.timings.items()})}")
    for note in res.notes:
        print(f"  note: {note}")


def scenario_named(name: str, time_limit: float, big_time_limit: float) -> Scenario:
    """One of the fresh-run scenarios: ``platform-100`` (its preset's options), ``long-tail`` (``time_limit``) or
    ``100`` (the 100-model variant, ``big_time_limit``)."""
    if name == "platform-100":
        return api.load_preset_scenario("platform-100")
    base = api.load_preset_scenario("long-tail")
    if name == "long-tail":
        return replace(base, options=replace(base.options, time_limit_s=time_limit))
    big = hundred(base)
    return replace(big, options=replace(big.options, time_limit_s=big_time_limit))


def child(name: str, time_limit: float, big_time_limit: float) -> None:
    """One run in this (fresh) process: a JSON line with the figures."""
    s = scenario_named(name, time_limit, big_time_limit)
    t0 = time.perf_counter()
    res = solve_shared(s, method="exact")
    seconds = time.perf_counter() - t0
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(json.dumps({"solve_seconds": seconds, "rss_mb": rss / 1024, "cost": res.cost_per_hour, "status": res.status,
                      "gap": res.gap, "bound": res.bound_per_hour, "models": len(s.models),
                      "time_limited": res.time_limited,
                      "time_limit": s.options.time_limit_s}))


def fresh(names: list[str], runs: int, time_limit: float, big_time_limit: float) -> None:
    """``runs`` new processes per scenario, each with an empty PLANNING_HOME; per run and medians."""
    for name in names:
        rows = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="bench-joint-home-") as home:
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, __file__, "--child", name, "--time-limit", str(time_limit),
                                      "--big-time-limit", str(big_time_limit)], env={**os.environ, "PLANNING_HOME": home},
                                     capture_output=True, text=True, check=True)
                wall = time.perf_counter() - t0
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row.update(wall=wall, load=load)
            rows.append(row)
            gap = "certified" if row["gap"] == 0 else (f"gap {row['gap']:.2%}" if row["gap"] is not None else "no bound")
            bound = f"${row['bound']:.3f}/h" if row["bound"] is not None else "none"
            print(f"  {name}: wall {wall:.1f} s (solve {row['solve_seconds']:.1f} s), peak RSS {row['rss_mb']:.0f} MB, "
                  f"${row['cost']:.3f}/h {row['status']} {gap}, bound {bound}"
                  + (", time-limited (the wall clock bound)" if row.get("time_limited") else "")
                  + f"; load before {load:.1f}", flush=True)
        gaps = [r["gap"] for r in rows if r["gap"] is not None]
        med = {key: statistics.median(r[key] for r in rows) for key in ("wall", "solve_seconds", "rss_mb", "cost")}
        print(f"{name} ({rows[0]['models']} models, time limit {rows[0]['time_limit']:g} s): median of {runs}: wall "
              f"{med['wall']:.1f} s, solve {med['solve_seconds']:.1f} s, peak RSS {med['rss_mb']:.0f} MB, cost "
              f"${med['cost']:.3f}/h, " + (f"gap {statistics.median(gaps):.2%}" if gaps else "no gap"), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--big-time-limit", type=float, default=300.0)
    ap.add_argument("--only", choices=("long-tail", "free", "100", "platform-100"), default=None)
    ap.add_argument("--fresh", action="store_true", help="new process and empty PLANNING_HOME per run")
    ap.add_argument("--child", choices=("long-tail", "100", "platform-100"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.time_limit, args.big_time_limit)
        return
    if args.fresh:
        print(f"# {platform.platform()}, python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        names = [args.only] if args.only in ("long-tail", "100", "platform-100") else ["platform-100", "long-tail", "100"]
        fresh(names, args.runs, args.time_limit, args.big_time_limit)
        print(f"# load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        return
    print(f"# {platform.platform()}, python {platform.python_version()}, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.only == "platform-100":
        run("platform-100", api.load_preset_scenario("platform-100"), args.runs)
        print(f"# peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; load average after: "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        return
    base = api.load_preset_scenario("long-tail")
    t0 = time.perf_counter()  # build (or load) the template libraries once, outside the timed runs
    solve_shared(replace(base, options=replace(base.options, time_limit_s=max(args.time_limit, 120.0))), method="exact")
    print(f"# warm-up (libraries built or loaded, one solve): {time.perf_counter() - t0:.1f} s")
    lt = replace(base, options=replace(base.options, time_limit_s=args.time_limit))
    if args.only in (None, "long-tail"):
        run("long-tail (threshold 1 req/s as a constraint)", lt, args.runs)
    if args.only in (None, "free"):
        run("long-tail, no threshold", replace(lt, options=replace(lt.options, sharing_threshold_rps=None)), args.runs)
    if args.only in (None, "100"):
        big = hundred(base)
        run("100-model variant", replace(big, options=replace(big.options, time_limit_s=args.big_time_limit)),
            args.runs)
    print(f"# load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
