"""Simulator speed (requests/s simulated), closed-loop validation error per source, and planner ↔ simulator
consistency per preset. Usage: ``python benchmarks/bench_simulate.py [--presets] [--hours H]``."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from planning import api  # noqa: E402
from planning.simulate import SimConfig, benchmark, build_topology, headroom, simulate_topology  # noqa: E402
from planning.simulate.validation import burst_errors, closed_loop_errors, error_summary  # noqa: E402


def speed(hours: float) -> None:
    """One run of ``hours`` of coral-core traffic at its planned rates; wall and CPU time."""
    scenario = api.load_preset_scenario("coral-core")
    plan = api.solve(scenario)
    topo = build_topology(plan, scenario, api.engine_context().perf)
    cpu, wall = time.process_time(), time.perf_counter()
    res = simulate_topology(topo, SimConfig(duration_s=3600 * hours, seed=0))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"coral-core, {hours:g} h of Poisson traffic at planned rates: {res.requests:,} requests, "
          f"{res.events:,} events; wall {wall:.1f} s ({res.requests / wall:,.0f} req/s), "
          f"CPU {cpu:.1f} s ({res.requests / cpu:,.0f} req/s) (goal <= 30 s)")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        b = benchmark("llama-3-8b", "H100", input_len=1024, output_len=128, concurrency=64,
                      perf=api.engine_context().perf)
        times.append(time.perf_counter() - start)
    print(f"single node closed loop (llama-3-8b, 1xH100, 1024/128, concurrency 64, {b.requests} requests): "
          f"median of 3 {statistics.median(times):.2f} s (goal <= 2 s)")


def _report(title: str, errors: pd.DataFrame, summary_title: str) -> None:
    print(f"\n{title} (predicted / published - 1):")
    for row in errors.itertuples(index=False):
        print(f"  {row.id:<36} {row.quantity:<20} published {row.value:>10.2f}  simulated {row.predicted:>10.2f}"
              f"  {row.rel_error:+.1%}")
    print(f"\n{summary_title}:")
    for row in error_summary(errors).itertuples(index=False):
        print(f"  {row.source:<30} {row.quantity:<20} n={row.points:<3} |e| {row.median_abs_error:6.1%}  "
              f"signed {row.median_signed_error:+6.1%}")


def validation() -> None:
    perf = api.engine_context().perf
    _report("closed-loop validation", closed_loop_errors(perf=perf),
            "median absolute error per source and quantity (target <= 20 %)")
    _report("finite open-loop runs (N prompts at a rate, chat length mix, median of 5 draws)", burst_errors(perf=perf),
            "median absolute error per source and quantity")


def presets(duration_s: float, with_headroom: bool) -> None:
    """Each preset's optimal plan at its planned rate, Poisson arrivals: attainment and what saturates."""
    print("\nplanner <-> simulator consistency (Poisson arrivals at the planned rates):")
    for name in api.list_presets():
        scenario = api.load_preset_scenario(name)
        start = time.perf_counter()
        plan = api.solve(scenario)
        solve_s = time.perf_counter() - start
        if not plan.instances:
            print(f"  {name}: plan status {plan.status}, nothing to simulate")
            continue
        topo = build_topology(plan, scenario, api.engine_context().perf)
        cfg = SimConfig(duration_s=duration_s, seed=0)
        res = simulate_topology(topo, cfg)
        print(f"  {name} (solve {solve_s:.0f} s, {res.requests:,} requests, sim {res.wall_s:.1f} s): "
              f"attainment {res.attainment:.2%}, plan {plan.cost_per_hour:.2f} $/h, "
              f"served {plan.served_fraction:.1%}")
        for m in res.models:
            print(f"    {m.model:<16} attain {m.attainment:7.2%} (TTFT {m.attainment_ttft:7.2%}, "
                  f"TPOT {m.attainment_tpot:7.2%})  TTFT p50/p99 {m.ttft_ms.p50:8.0f}/{m.ttft_ms.p99:8.0f} ms "
                  f"(SLO {m.slo_ttft_ms})  TPOT p50/p99 {m.tpot_ms.p50:6.1f}/{m.tpot_ms.p99:6.1f} ms "
                  f"(SLO {m.slo_tpot_ms})")
        for i in res.instances:
            plan_load = next((p.utilisation for p in plan.instances if i.name.startswith(
                f"{p.model}/{p.phase}/{p.template_id}@{p.region}#")), float("nan"))
            print(f"    {i.name:<62} planned load {plan_load:5.2f}  busy {i.utilisation:6.1%}  "
                  f"KV mean/peak {i.kv_mean:5.1%}/{i.kv_peak:5.1%}")
        for note in res.notes:
            print(f"    note: {note}")
        if with_headroom:
            room = headroom(topo, SimConfig(duration_s=min(duration_s, 300), seed=0), lo=0.1, hi=4.0, iterations=6)
            print(f"    headroom: attainment >= 99 % up to {room.scale:.2f} x the planned demand "
                  f"({len(room.evaluations)} runs)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--presets", action="store_true", help="also check every preset (slow: solves each)")
    ap.add_argument("--headroom", action="store_true", help="with --presets: bisect each plan's headroom")
    ap.add_argument("--duration", type=float, default=600.0, help="with --presets: arrival window (s)")
    args = ap.parse_args()
    speed(args.hours)
    validation()
    if args.presets:
        presets(args.duration, args.headroom)
