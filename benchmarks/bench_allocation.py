"""Allocation benchmark on synthetic Coral-scale instances: build time (pulp vs matrix), solve time, status, gap.

Run: ``python3 benchmarks/bench_allocation.py [--templates 5000 20000] [--repeats 3]``. Prints one line per
size with medians over the repeats. Instances are seeded synthetic ones (planning.allocate.synthetic): 12
groups (one class each, Coral's case) × T templates of ≤ 6 nodes over 20 shapes × 3 regions.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.allocate import solve_allocation
from planning.allocate.formulation import build_pulp
from planning.allocate.instance import build_instance
from planning.allocate.matrix_model import build_matrix
from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines import run_all_baselines


def coral_like(templates: int, seed: int = 0, classes: int = 1, instances: float = 5.0, max_available: int = 30):  # type: ignore[no-untyped-def]
    """~``instances`` average-template instances of demand per group (Coral extended: 100-300 GPUs in all)."""
    return random_problem(seed, Synthetic(groups=12, templates_per_group=templates, regions=3, shapes=20,
                          classes_per_group=classes, max_nodes=6, max_available=max_available,
                          demand_scale=instances / templates**0.5, homogeneous_share=0.2), time_limit_s=60.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--templates", type=int, nargs="+", default=[1000, 5000, 20000], help="templates per group")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--max-available", type=int, default=30, help="availability per (region, shape) is 0..this")
    ap.add_argument("--pulp-max-pairs", type=int, default=250_000, help="skip the pulp build above this size")
    ap.add_argument("--baselines", action="store_true", help="also time the baselines on the smallest size")
    args = ap.parse_args()
    print(f"# machine: {platform.machine()} {platform.processor()}, python {platform.python_version()}")
    for n in args.templates:
        t0 = time.perf_counter()
        p = replace(coral_like(n, max_available=args.max_available), time_limit_s=args.time_limit)
        gen = time.perf_counter() - t0
        # model building at full size (no dominance pruning): matrix vs pulp
        raw = build_instance(replace(p, prune=False))
        mb = statistics.median(build_matrix(raw, False, None).build_seconds for _ in range(args.repeats))
        pb = float("nan")
        if raw.n_pairs <= args.pulp_max_pairs:
            pb = build_pulp(raw, False, None, "cost").build_seconds
        print(f"T/group={n} templates={12 * n} gen={gen:.1f}s | unpruned pairs={raw.n_pairs}: "
              f"matrix build {mb:.3f}s, pulp build {pb:.1f}s", flush=True)
        rows = []
        for _ in range(args.repeats):
            res = solve_allocation(p, diagnose=False)
            rows.append(res)
        med = {k: statistics.median(r.timings[k] for r in rows) for k in ("prune_seconds", "build_seconds", "solve_seconds", "total_seconds")}
        r = rows[-1]
        print(
            f"  pruned: pairs={r.stats.pairs} vars={r.stats.variables} rows={r.stats.constraints} "
            f"dominated={r.stats.templates_dominated} unsold={r.stats.templates_unsold} | prune {med['prune_seconds']:.2f}s "
            f"build {med['build_seconds']:.3f}s solve {med['solve_seconds']:.2f}s total {med['total_seconds']:.2f}s | "
            f"status={[x.status for x in rows]} gap={r.gap} cost={r.cost_per_hour} phase={r.phases[-1].phase}",
            flush=True,
        )
    if args.baselines:
        p = replace(coral_like(min(args.templates), max_available=args.max_available), time_limit_s=args.time_limit)
        t0 = time.perf_counter()
        for b in run_all_baselines(p):
            print(f"baseline {b.name}: cost {b.cost_per_hour:.2f} served-min {b.served_fraction_min:.3f} "
                  f"feasible {b.feasible} ({b.seconds:.2f}s) {b.note[:100]}")
        print(f"baselines total {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
