"""The time limit on every solve path under load (issue 23 §2): wall − limit ≤ 2 s with 4× more busy processes
than cores, for the paths ``bench_under_load`` does not cover.

Paths (each in a fresh process with an empty ``PLANNING_HOME``, the solve's own ``options.time_limit_s`` set to
``--limit``):

- ``library``: coral-extended with ``options.templates: library`` (enumerate and place every template, then
  the certified ILP);
- ``served``: coral-extended with the served objective and a budget below the cost optimum (the two-phase ILP);
- ``what-if``: coral-extended, one variant (demand ×2), ``base=False`` (one solve through ``api.what_if``);
- ``sweep``: coral-extended, one demand point ×1.5 (one solve through ``api.sweep``);
- ``sharing-exact``: long-tail through ``api.solve_shared(method="exact")`` (the joint sharing model);
- ``finance``: the enterprise preset (commitment sizing over its epochs, then the design hour).

Prints per path the median wall seconds, the overrun (wall − limit; contract ≤ 2 s), the status and gap, and
exits 1 when a median overrun exceeds 2 s.

Run: ``python -m benchmarks.bench_paths_under_load --isolate [--busy 8] [--limit 10] [--runs 3] [--paths ...]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from benchmarks._load import Busy, load_line, parse_with_isolate, run_child

PATHS = ("library", "served", "what-if", "sweep", "sharing-exact", "finance")
SLACK_S = 2.0


def _limited(preset: str, limit: float) -> Any:
    from planning import api

    scenario = api.load_preset_scenario(preset)
    return replace(scenario, options=replace(scenario.options, time_limit_s=float(limit)))


def _child(path: str, limit: float) -> dict[str, Any]:
    """One solve of ``path`` in this (fresh) process; returns wall seconds, status, gap."""
    from planning import api

    t0 = time.perf_counter()
    status, gap = "", None
    if path == "library":
        sc = _limited("coral-extended", limit)
        res = api.solve(replace(sc, options=replace(sc.options, templates="library")))
        status, gap = res.status, res.mip_gap
    elif path == "served":
        from planning.scenario_options import Objective

        sc = _limited("coral-extended", limit)
        res = api.solve(replace(sc, objective=Objective(kind="served", budget_per_hour=150.0)))
        status, gap = res.status, res.mip_gap
    elif path == "what-if":
        from planning.whatif import parse_variant

        out = api.what_if(_limited("coral-extended", limit), [parse_variant("demand=2")], base=False)
        (res,) = out.values()
        status, gap = res.status, res.mip_gap
    elif path == "sweep":
        frame = api.sweep(_limited("coral-extended", limit), "demand", [1.5])
        plan = frame[frame["method"] == "Plan (mixed templates)"]
        status = "feasible" if bool(plan["feasible"].all()) else "no plan"
    elif path == "sharing-exact":
        shared = api.solve_shared(_limited("long-tail", limit), method="exact")
        status = shared.status
        gap = shared.shared_gap
    elif path == "finance":
        res = api.solve(_limited("enterprise", limit))
        status, gap = res.status, res.mip_gap
    return {"wall": time.perf_counter() - t0, "status": status, "gap": gap, "limit": limit}


def run_case(path: str, limit: float) -> dict[str, Any]:
    """The figures of one solve in a fresh Python process with an empty PLANNING_HOME."""
    return run_child("benchmarks.bench_paths_under_load", "_child", (path, limit), path)


def main() -> int:
    """Parse the arguments, print one line per (busy processes, path); 1 when a median overrun exceeds 2 s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, nargs="+", default=[8])
    parser.add_argument("--limit", type=float, default=10.0)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--runs", type=int, default=3)
    args = parse_with_isolate(parser)
    print(f"{'busy':>4} {'path':14} {'limit':>6} | {'wall s':>7} {'overrun':>8} | {'status':10} {'gap':>7}")
    ok = True
    for busy in args.busy:
        with Busy(busy):
            print(load_line(busy), flush=True)
            for path in args.paths:
                rows = [run_case(path, args.limit) for _ in range(args.runs)]
                wall = statistics.median(r["wall"] for r in rows)
                over = wall - args.limit
                ok &= over <= SLACK_S
                gaps = [r["gap"] for r in rows if r["gap"] is not None]
                gap = f"{statistics.median(gaps):.2%}" if gaps else "-"
                statuses = "/".join(sorted({r["status"] for r in rows}))
                print(f"{busy:>4} {path:14} {args.limit:>6.0f} | {wall:7.2f} {over:+8.2f} | {statuses:10} {gap:>7}",
                      flush=True)
    print("contract (overrun <= 2 s): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
