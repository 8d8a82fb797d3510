"""Timeline policies benchmark (issue 27 §2): myopic vs look-ahead vs static peak vs the offline optimum.

Run: ``python benchmarks/bench_timeline_policies.py [--preset coral-core] [--days 1] [--horizon 3]
[--policies myopic lookahead offline] [--offline-time-limit 600] [--repeats 1] [--K 0] [--workers 2]
[--backend process|ray] [--hours N] [--templates auto|on-demand|library] [--isolate] [--ray-nodes N] [--save result.json]``.

``--K 0`` (no initialization penalty: the epochs do not chain) with myopic first solves each distinct epoch problem
once, here (``--workers 1``), on the process pool or as Ray tasks (``PLANNING_RAY_ADDRESS`` for a cluster); the
line ``epoch problems`` gives how many were distinct and their wall time.

Demand: the shipped day samples (``data/demand/azure_{code,conv}_day.csv``, alternating per model) scaled so each
model's peak is the preset's rate, as ``bench_timeline.py``; ``--days 7`` repeats the day into a week (168 hourly
epochs; the project ships day traces only). Prints per policy: total cost over the horizon (provisioning + Coral's
initialization penalty K·p per started instance), churn (nodes started / stopped), attainment (worst served fraction
and epochs short of demand), percent above the offline optimum, and the offline MILP's proof (status, bound, gap);
then the static peak plan on the same rows, and the wall time of the whole ``api.timeline`` call (median of
``--repeats``) and of each policy.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._load import parse_with_isolate
from benchmarks.bench_timeline import day_demand
from planning import api
from planning.timeline import TimelineOptions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="coral-core")
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--horizon", type=int, default=None)
    ap.add_argument("--policies", nargs="+", default=["myopic", "lookahead", "offline"])
    ap.add_argument("--offline-time-limit", type=float, default=600.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--K", type=float, default=None, help="initialization penalty factor (default: the preset's)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--backend", default=None, choices=("process", "ray"))
    ap.add_argument("--no-static", action="store_true", help="skip the static peak plan")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="options.time_limit_s per epoch solve (default: the preset's; raise it on a busy machine)")
    ap.add_argument("--hours", type=int, default=0, help="only the first N hourly epochs (0: all; a measured prefix)")
    ap.add_argument("--templates", default="auto", choices=("auto", "on-demand", "library"),
                    help="serving templates: priced on demand per distinct epoch demand, or full libraries")
    ap.add_argument("--save", default="", help="write the timeline result (JSON) here, e.g. to compare backends")
    ap.add_argument("--ray-nodes", type=int, default=0,
                    help="start a local Ray cluster of N one-CPU nodes (`ray start` processes) and plan on it")
    args = parse_with_isolate(ap, runs=1)  # --isolate: a weighted cgroup, as if nothing else ran on the cores
    if args.ray_nodes:
        with ray_cluster(args.ray_nodes) as address:
            print(f"Ray cluster: {args.ray_nodes} nodes of 1 CPU at {address}")
            args.backend = "ray"
            return run(args)
    return run(args)


@contextlib.contextmanager
def ray_cluster(nodes: int) -> Iterator[str]:
    """A head and ``nodes`` − 1 workers, each a ``ray start`` of one CPU (``tests/parallel/ray_cluster.py``);
    yields its address with ``PLANNING_RAY_ADDRESS`` set for this process, stops it after."""
    import tempfile

    from tests.parallel.ray_cluster import DRIVER_ENV, LocalCluster

    with tempfile.TemporaryDirectory(prefix="planning-ray-") as tmp:
        cluster = LocalCluster(Path(tmp))
        try:
            cluster.start(head_cpus=1, worker_cpus=[1] * (nodes - 1))
            os.environ.update({**DRIVER_ENV, "PLANNING_RAY_ADDRESS": cluster.address})
            yield cluster.address
        finally:
            cluster.stop()


def run(args: argparse.Namespace) -> int:
    scenario = api.load_preset_scenario(args.preset)
    if args.time_limit is not None:
        scenario = replace(scenario, options=replace(scenario.options, time_limit_s=args.time_limit))
    demand = day_demand(scenario, args.days, args.hours or 24 * args.days)
    opts = TimelineOptions(baselines=(), policies=tuple(args.policies), horizon=args.horizon,
                           offline_time_limit_s=args.offline_time_limit, K=args.K, workers=args.workers,
                           backend=args.backend, static_peak=not args.no_static,
                           templates=args.templates)
    print(f"# {platform.platform()}, python {platform.python_version()}; {args.preset}, {len(demand[0])} hourly "
          f"epochs, policies {args.policies}, H={args.horizon or scenario.options.lookahead_epochs}, "
          f"templates {args.templates}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.repeats > 1:  # build (or load) the template libraries once before the timed repeats
        api.timeline(scenario, demand, options=TimelineOptions(baselines=(), static_peak=False))
    walls, result = [], None
    last = [0.0]

    def progress(fraction: float, message: str) -> None:  # partial progress on stderr, at most every 10 s
        now = time.perf_counter()
        if now - last[0] >= 10 or fraction >= 1:
            last[0] = now
            print(f"  [{now - t0:7.1f} s, cpu {time.process_time():7.1f} s] {fraction:.0%} {message}",
                  file=sys.stderr, flush=True)

    for _ in range(args.repeats):
        t0 = time.perf_counter()
        result = api.timeline(scenario, demand, options=opts, progress=progress)
        walls.append(time.perf_counter() - t0)
    assert result is not None
    if args.save:
        Path(args.save).write_text(result.to_json())
    totals = result.policy_totals()
    offline = totals.get("offline", {}).get("total_cost")
    print(f"{'policy':<22} {'total $':>11} {'starts':>7} {'stops':>7} {'worst served':>13} {'short':>6} "
          f"{'vs offline':>11} {'seconds':>8}")
    for name, t in totals.items():
        total = t.get("total_cost")
        churn = t.get("churn") or {}
        above = f"{100 * (total - offline) / offline:+.2f} %" if offline and total is not None else "-"
        secs = result.timings.get(f"{name}_seconds")
        print(f"{t.get('label', name):<22} {total if total is not None else float('nan'):>11.2f} "
              f"{churn.get('nodes_started', '-'):>7} {churn.get('nodes_stopped', '-'):>7} "
              f"{t.get('min_served_fraction', float('nan')):>13.1%} {t.get('epochs_short', '-'):>6} {above:>11} "
              f"{'' if secs is None else f'{secs:.1f}':>8}")
    d = result.to_dict()
    static = d["static_peak_total_cost"]
    above = f"{100 * (static - offline) / offline:+.2f} %" if offline else "-"
    if not args.no_static:
        print(f"{'static peak':<22} {static:>11.2f} {'0':>7} {'0':>7} "
              f"{'100.0%' if result.static_peak_feasible else 'short':>13} {'-':>6} {above:>11}")
    info = result.policy_info.get("offline")
    if info:
        print(f"offline proof: status {info.get('status')}, bound {info.get('bound')}, gap {info.get('gap')}")
    for note in result.notes:
        if "look-ahead" in note or "offline" in note or result.timings.get("shared_epochs"):
            print("note:", note)
    print(f"epoch problems: {result.timings.get('distinct_epoch_problems', len(result.epochs)):g} distinct of "
          f"{len(result.epochs)}, {result.timings.get('independent_epochs_seconds', 0.0):.1f} s "
          f"(K = {result.K:g}, workers {args.workers}, backend {args.backend or 'default'})")
    print(f"api.timeline wall: median {statistics.median(walls):.1f} s of {len(walls)} "
          f"(templates {result.timings['templates_seconds']:.1f} s, epochs {result.timings['epochs_seconds']:.1f} s)")
    t = result.timings
    if t.get("shared_epochs"):
        print(f"shared plans per epoch (options.sharing {scenario.options.sharing}): "
              f"{t['distinct_epoch_problems']:g} distinct problems (static peak included)")
        gaps = sorted((e.gap, e.index) for e in result.epochs if e.gap is not None)
        if gaps:
            print(f"epoch proven gaps ({len(gaps)} of {len(result.epochs)} epochs): median "
                  f"{statistics.median(g for g, _ in gaps):.2%}, p90 {gaps[int(0.9 * (len(gaps) - 1))][0]:.2%}, "
                  f"max {gaps[-1][0]:.2%} (epoch {gaps[-1][1]}); epoch seconds median "
                  f"{statistics.median(e.seconds for e in result.epochs):.1f}, max "
                  f"{max(e.seconds for e in result.epochs):.1f}")
    elif t.get("templates_on_demand"):
        print(f"templates on demand: {t['pool_problems']:g} distinct problems ({t['pool_certified']:g} certified over "
              f"all templates) in {t['pool_seconds']:.1f} s; pool {t['pool_templates']:,.0f} templates")
    else:
        print("templates: full libraries")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (this process), "
          f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB (largest finished child); "
          f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
