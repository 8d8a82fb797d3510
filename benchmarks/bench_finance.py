"""The enterprise preset end to end (issue 26): commitment sizing, the design hour, the bill, and the time limit.

Prints per run the wall time (the contract: ≤ ``options.time_limit_s`` + 2 s), the sizing's steps and figures
(relaxation bound, epochs alone at R = 0 and with reservations at their rate, the MILP, the certified second
stage, the Lagrangian dual by Kelley's steps, the cut master), the commitments to sign with their utilisation
and break-even, the horizon total against all on-demand and all reserved, the proven gaps (of the sizing's
variable cost and of the whole bill), the design hour's costs by pricing kind, and the medians over ``--runs``.

``--limit S`` sets ``options.time_limit_s`` (default: the preset's); ``--scale K`` multiplies every interruption
rate (a what-if). ``--sizing-only`` runs the commitment sizing alone with ``--limit`` as its deadline (its
steps, bound and proven gap). ``--busy N`` runs everything with N CPU-burning processes
(``benchmarks._load.Busy``; a busy machine), ``--isolate`` in a heavily weighted CPU cgroup (``_load.isolate``:
other users' work on a shared machine does not skew the figures); every run prints the load line (the CPU share
a busy loop gets, the load average). Run:
``python -m benchmarks.bench_finance [--runs 3] [--limit 120] [--sizing-only] [--busy 2] [--isolate]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace

from benchmarks._load import Busy, isolate, load_line
from planning import api

SLACK_S = 2.0


def run_once(limit: float | None, scale: float) -> tuple[float, dict[str, float]]:
    scenario = api.load_preset_scenario("enterprise")
    if limit is not None:
        scenario = replace(scenario, options=replace(scenario.options, time_limit_s=limit))
    if scale != 1.0:
        scenario = replace(scenario, spot=replace(scenario.spot, interruption_scale=scale))
    t0 = time.perf_counter()
    result = api.solve(scenario)
    wall = time.perf_counter() - t0
    fin = result.finance or {}
    sizing = fin.get("sizing") or {}
    stats = sizing.get("stats") or {}
    comparisons = fin.get("comparisons") or {}
    print(f"wall {wall:6.1f} s (limit {scenario.options.time_limit_s:g} s, "
          f"{'contract met' if wall <= scenario.options.time_limit_s + SLACK_S else 'CONTRACT MISSED'}); "
          f"design hour {result.status}, ${result.comparable_cost:,.2f}/h "
          f"(of which committed ${result.committed_per_hour:,.2f}/h)")
    print("  by pricing kind $/h: " + ", ".join(f"{k} {v:,.2f}" for k, v in result.cost_by_pricing_kind.items()))
    print(f"  sizing {sizing.get('status')} in {sizing.get('seconds', float('nan')):.1f} s over "
          f"{int(stats.get('epochs', 0))} epochs: relaxation bound {stats.get('lagrangian_cover_bound', float('nan')):,.0f}, "
          f"epochs at R = 0 {stats.get('no_reservation_value', float('nan')):,.0f}, epochs with reservations at their "
          f"rate {stats.get('lagrangian_epoch_bound', float('nan')):,.0f}, MILP {stats.get('milp_value', float('nan')):,.0f} "
          f"(gap {stats.get('milp_gap', float('nan')):.2%}, {int(stats.get('templates_in_milp', 0)):,} epoch templates), "
          f"bound after {int(stats.get('dual_steps', 0))} Kelley steps "
          f"{stats.get('dual_bound', stats.get('lagrangian_epoch_bound', float('nan'))):,.0f}, "
          f"cut master {stats.get('master_bound', float('nan')):,.0f} after {int(stats.get('master_steps', 0))} "
          "steps")
    for c in result.commitments:
        util = f"{c.utilisation:.0%}" if c.utilisation is not None else "—"
        print(f"  {c.status:4} {c.count:3d} × {c.shape:7} {c.region:18} {c.term_years:g} y at ${c.effective_hourly:.4f}/h "
              f"(break-even {c.break_even:.0%}, used {util})")
    total = sizing.get("total_usd")
    bound = sizing.get("bound_usd")
    for name, s in [("chosen commitments", sizing), *comparisons.items()]:
        t = s.get("total_usd")
        print(f"  {name:20} {s.get('status', '?'):9} {'$' + format(t, ',.0f') if t is not None else 'no plan':>12}"
              + (f"  gap {s['gap']:.2%}" if s.get("gap") is not None else ""))
    whole = (total - bound) / total if total and bound is not None else float("nan")
    print(f"  proven gap of the whole bill: {whole:.2%}; bill {sum((fin.get('bill_totals') or {}).get('kind', {}).values()):,.0f} "
          "over the horizon")
    return wall, {"total": float(total or float("nan")), "gap": float(sizing.get("gap") or float("nan")),
                  "whole_gap": whole}


def sizing_only(limit: float) -> float:
    """The enterprise commitment sizing alone (no comparisons, no design hour) under a deadline of ``limit`` s:
    prints its steps' figures and returns its proven gap (of the variable cost)."""
    from planning.api import engine_context
    from planning.context import Deadline
    from planning.finance.commitments import candidates_of, epochs_of
    from planning.finance.sizing import size
    from planning.resolve import resolve_scenario
    from planning.templates.sets import build_template_sets

    scenario = api.load_preset_scenario("enterprise")
    ctx = engine_context()
    resolved = resolve_scenario(scenario, ctx.catalog)
    t0 = time.perf_counter()
    sets = build_template_sets(ctx, resolved)
    print(f"library {sum(len(ts) for ts in sets):,} templates per epoch in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    sz = size(resolved, sets, epochs_of(scenario), candidates_of(scenario, ctx.catalog), cancel=Deadline(limit))
    wall = time.perf_counter() - t0
    st = sz.stats
    print(f"sizing {sz.status} in {wall:.1f} s (deadline {limit:g} s): value ${sz.value:,.0f}, bound ${sz.bound:,.0f}, "
          f"gap {sz.gap:.3%}; Kelley {int(st.get('dual_steps', 0))} steps to ${st.get('dual_bound', float('nan')):,.0f} "
          f"(model ${st.get('dual_model', float('nan')):,.0f}), cut master {int(st.get('master_steps', 0))} steps to "
          f"${st.get('master_bound', float('nan')):,.0f} ({int(st.get('master_epoch_solves', 0))} epoch solves, "
          f"{int(st.get('benders_cuts', 0))} Benders cuts); commitments "
          + ", ".join(f"{n} × {c.shape} {c.region}" for c in sz.candidates if (n := sz.counts.get(c.id, 0))))
    return float(sz.gap if sz.gap is not None else float("nan"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--limit", type=float, default=None, help="options.time_limit_s (default: the preset's)")
    parser.add_argument("--scale", type=float, default=1.0, help="× every spot interruption rate")
    parser.add_argument("--sizing-only", action="store_true",
                        help="run only the commitment sizing, with --limit as its deadline (default 600 s)")
    parser.add_argument("--busy", type=int, default=0, help="CPU-burning processes running alongside (default 0)")
    parser.add_argument("--isolate", action="store_true",
                        help="run in a heavily weighted CPU cgroup (root): the cores as if nothing else ran")
    args = parser.parse_args(argv)
    if args.isolate:
        print(isolate())
    with Busy(args.busy):
        if args.sizing_only:
            print(load_line(args.busy), flush=True)
            sizing_only(args.limit if args.limit is not None else 600.0)
            print(f"load after: {os.getloadavg()[0]:.1f} (1-min average)")
            return 0
        walls, gaps = [], []
        for run in range(args.runs):
            print(f"run {run + 1}: {load_line(args.busy)}", flush=True)
            wall, figures = run_once(args.limit, args.scale)
            walls.append(wall)
            gaps.append(figures["gap"])
            print(f"  load average after run {run + 1}: {os.getloadavg()[0]:.1f}", flush=True)
    print(f"median wall {statistics.median(walls):.1f} s over {args.runs} run(s); median sizing gap "
          f"{statistics.median(gaps):.2%}; gaps " + ", ".join(f"{g:.2%}" for g in gaps)
          + "; walls " + ", ".join(f"{w:.1f} s" for w in walls))
    limit = args.limit if args.limit is not None else api.load_preset_scenario("enterprise").options.time_limit_s
    return 0 if statistics.median(walls) <= limit + SLACK_S else 1


if __name__ == "__main__":
    sys.exit(main())
