"""Anytime solving on a busy machine (issue 23): time to the first plan, its gap, the final answer, the overrun.

For N CPU-burning processes (default N = 0, 2, 4, 8: on a 2-core machine, up to 4x more busy processes than
cores) and each preset (coral-core, coral-extended, catalog-wide, long-tail with sharing), the solve runs in a
fresh process (cold caches, as `planning solve` from a shell) at the preset's own time limit and at 10 s, and
prints:

- ``first``: seconds from the solve's start to the first feasible plan, and that plan's proven gap when it was
  first bounded (the pipeline's progress messages carry "best plan $X/h, gap Y %" as soon as a plan exists);
- ``final``: wall seconds of the whole call (plan, baselines, diagnostics), its status, proven gap and cost;
- ``overrun``: wall − limit (the contract: ≤ 2 s), and how many baselines did not run for lack of time.

``--home cold`` gives every solve a new, empty ``PLANNING_HOME`` (the first solve on a machine); ``--home warm``
one per preset, filled by an untimed solve before the load starts (a later ``planning solve`` or job worker: the
perf model's T̂ tables and decode batch curves are read from disk, ``planning.perf.tables.TableCache``). The
default prints both.

Run: ``python -m benchmarks.bench_under_load [--busy 0 2 4 8] [--limits default 10] [--presets ...] [--runs 1]``.
With ``--runs`` > 1 each figure is the median over the runs. Exits 1 when a median overrun exceeds 2 s.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

from benchmarks._load import Busy, load_line, parse_with_isolate, run_child

PRESETS = ("coral-core", "coral-extended", "catalog-wide", "long-tail")
SHARED = {"long-tail"}  # planned with options.sharing kvpr through api.solve_shared
SLACK_S = 2.0
_PLAN = re.compile(r"best plan \$([\d,.]+)/h, (?:gap ([\d.]+)%|gap not yet bounded)")


def _child(preset: str, limit: float | None) -> dict[str, Any]:
    """One solve in this (fresh) process; returns the figures as a dict."""
    from planning import api

    scenario = api.load_preset_scenario(preset)
    if limit is not None:
        scenario = replace(scenario, options=replace(scenario.options, time_limit_s=float(limit)))
    seen: list[tuple[float, float, float | None]] = []
    t0 = time.perf_counter()

    def progress(_f: float, message: str) -> None:
        m = _PLAN.search(message)
        if m:
            seen.append((time.perf_counter() - t0, float(m.group(1).replace(",", "")),
                         float(m.group(2)) / 100 if m.group(2) else None))

    if preset in SHARED:  # the first plan: the packed shared nodes + the dedicated part's first incumbent
        shared = api.solve_shared(scenario, method="kvpr", progress=progress)
        wall = time.perf_counter() - t0
        seen = [(t, v + shared.shared_cost_per_hour, g) for (t, v, g) in seen]
        plan = shared.dedicated
        status, cost = shared.status, shared.cost_per_hour
        gap = plan.mip_gap if plan is not None else None
        not_run = sum(not b.ran for b in plan.baselines) if plan is not None else 0
    else:
        plan = api.solve(scenario, progress=progress)
        wall = time.perf_counter() - t0
        status, cost, gap = plan.status, plan.cost_per_hour, plan.mip_gap
        not_run = sum(not b.ran for b in plan.baselines)
    first = seen[0] if seen else None
    first_gap = next((g for (_t, v, g) in seen if first is not None and v == first[1] and g is not None), None)
    return {"limit": scenario.options.time_limit_s, "wall": wall, "status": status, "gap": gap, "cost": cost,
            "first_s": first[0] if first else None, "first_cost": first[1] if first else None,
            "first_gap": first_gap, "not_run": not_run}


def run_case(preset: str, limit: float | None, home: str | None = None) -> dict[str, Any]:
    """The figures of one solve in a fresh Python process (``home``: its PLANNING_HOME; None: a new empty one)."""
    return run_child("benchmarks.bench_under_load", "_child", (preset, limit), preset, home)


def _median(rows: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in rows if r[key] is not None]
    if not values:
        return None
    return statistics.median(values) if isinstance(values[0], int | float) else values[len(values) // 2]


def _fmt(x: float | None, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _print_row(busy: int, kind: str, preset: str, rows: list[dict[str, Any]]) -> bool:
    """One line of medians; False when the median overrun exceeds ``SLACK_S``."""
    wall, lim_s = _median(rows, "wall"), rows[0]["limit"]
    over = wall - lim_s
    gap, first_gap = _median(rows, "gap"), _median(rows, "first_gap")
    print(f"{busy:>4} {kind:4} {preset:15} {lim_s:>6.0f} | {_fmt(_median(rows, 'first_s'), '7.2f'):>7} "
          f"{_fmt(_median(rows, 'first_cost'), '9.2f'):>9} {_fmt(first_gap, '7.1%'):>7} | "
          f"{wall:7.2f} {rows[0]['status']:9} {_fmt(gap, '6.2%'):>6} "
          f"{_fmt(_median(rows, 'cost'), '9.2f'):>9} | {over:+7.2f} {_median(rows, 'not_run'):>10}", flush=True)
    return bool(over <= SLACK_S)


def main() -> int:
    """Parse the arguments, print one line per (busy processes, preset, limit); 1 when an overrun exceeds 2 s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 2, 4, 8])
    parser.add_argument("--limits", nargs="+", default=["default", "10"])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--home", nargs="+", default=["cold", "warm"], choices=["cold", "warm"],
                        help="cold: an empty PLANNING_HOME per solve; warm: one per preset, filled before the load")
    args = parse_with_isolate(parser)
    print(f"{'busy':>4} {'home':4} {'preset':15} {'limit':>6} | {'first s':>7} {'1st $/h':>9} {'1st gap':>7} | "
          f"{'final s':>7} {'status':9} {'gap':>6} {'$/h':>9} | {'overrun':>7} {'bl not run':>10}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="planning-warm-") as warm_root:
        homes: dict[str, str] = {}
        if "warm" in args.home:
            for preset in args.presets:  # untimed, before any load: what an earlier solve left on disk
                homes[preset] = os.path.join(warm_root, preset)
                run_case(preset, None, homes[preset])
        for busy in args.busy:
            with Busy(busy):
                print(load_line(busy), flush=True)
                for preset in args.presets:
                    for kind in args.home:
                        for lim in args.limits:
                            limit = None if lim == "default" else float(lim)
                            rows = [run_case(preset, limit, homes.get(preset) if kind == "warm" else None)
                                    for _ in range(args.runs)]
                            ok &= _print_row(busy, kind, preset, rows)
    print("contract (overrun <= 2 s): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
