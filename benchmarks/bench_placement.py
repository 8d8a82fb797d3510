"""Placement benchmark: exact vs brute force (200 seeded instances) and vs Coral's ILP (median speed-up).

Run: ``python3 benchmarks/bench_placement.py [--instances 200] [--ilp 20] [--seed 0]``.

Instances are synthetic but realistic (``planning.templates.synthetic``): 1–6 nodes drawn from the 20 Coral
extended shapes, a model of 12–94 layers, prefill or decode SLO; half of the brute-force instances also get a
random arbitrary (non-monotone, zero-holed) table so the general path is covered. The brute force is the plain
enumeration of node→stage assignments × compositions when that is ≤ 200k evaluations, otherwise the independent
exhaustive oracle ``solve_partition_search`` (every labelled set partition × binary search over the candidate
throughputs with a subset-sum feasibility test by boolean convolution; no merging of identical nodes, no DP).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.templates import place
from planning.templates.brute import brute_evaluations, solve_brute, solve_partition_search
from planning.templates.synthetic import EXTENDED_SHAPES, shape_tables


def realistic(rng: np.random.Generator, n: int, L: int) -> np.ndarray:
    shapes = [EXTENDED_SHAPES[int(i)] for i in rng.integers(0, len(EXTENDED_SHAPES), size=n)]
    uniq = sorted(set(shapes))
    weight = float(rng.uniform(0.4, 1.2)) * L  # GB: ~0.4–1.2 GB per layer
    slo = float(rng.choice([60.0, 120.0, 1200.0, 1800.0]))
    tab, _ = shape_tables(uniq, L, weight, slo, max_stages=min(6, n))
    rows = np.stack([tab[uniq.index(s)] for s in shapes], axis=1)  # (S, n, L)
    return rows


def arbitrary(rng: np.random.Generator, n: int, L: int) -> np.ndarray:
    thr = rng.integers(0, 1000, size=(min(6, n), n, L)).astype(float)
    thr[rng.random(thr.shape) < 0.3] = 0.0
    return thr


def timed_exact(L: int, thr: np.ndarray, repeat: int = 5) -> tuple[float, float]:
    best = float("inf")
    value = 0.0
    for _ in range(repeat):
        p = place(L, thr)
        best = min(best, p.seconds)
        value = p.throughput
    return value, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--ilp", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ilp-time-limit", type=float, default=300.0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    equal = 0
    brute_kinds = {"plain": 0, "partition-search": 0}
    t_exact: list[float] = []
    for i in range(args.instances):
        n = int(rng.integers(1, 7))
        L = int(rng.integers(1, 95))
        thr = realistic(rng, n, L) if i % 2 == 0 else arbitrary(rng, n, L)
        value, secs = timed_exact(L, thr, repeat=1)
        t_exact.append(secs)
        if brute_evaluations(L, n, thr.shape[0]) <= 200_000:
            ref = solve_brute(L, thr).throughput
            brute_kinds["plain"] += 1
        else:
            ref = solve_partition_search(L, thr).throughput
            brute_kinds["partition-search"] += 1
        if abs(value - ref) <= 1e-9 * max(1.0, abs(ref)):
            equal += 1
        else:
            print(f"  MISMATCH instance {i}: n={n} L={L} exact={value} brute={ref}")
    print(
        f"exact == brute: {equal}/{args.instances} (brute kinds: {brute_kinds}); "
        f"exact median {statistics.median(t_exact) * 1e3:.3f} ms"
    )

    equal_ilp = 0
    speedups: list[float] = []
    ilp_times: list[float] = []
    exact_times: list[float] = []
    for _ in range(args.ilp):
        n = int(rng.integers(3, 5))
        L = int(rng.integers(12, 25))
        thr = realistic(rng, n, L)
        value, secs = timed_exact(L, thr)
        t0 = time.perf_counter()
        ilp = place(L, thr, method="ilp", time_limit=args.ilp_time_limit)
        ilp_secs = time.perf_counter() - t0
        ok = abs(value - ilp.throughput) <= 1e-6 * max(1.0, abs(value)) and ilp.status == "optimal"
        equal_ilp += ok
        if not ok:
            print(f"  ILP differs: n={n} L={L} exact={value} ilp={ilp.throughput} status={ilp.status}")
        speedups.append(ilp_secs / secs)
        ilp_times.append(ilp_secs)
        exact_times.append(secs)
        print(
            f"  n={n} L={L}: ILP {ilp_secs:.2f} s, exact {secs * 1e6:.0f} µs, ×{ilp_secs / secs:,.0f}",
            flush=True,
        )
    print(
        f"exact == ILP: {equal_ilp}/{args.ilp}; ILP median {statistics.median(ilp_times):.2f} s, "
        f"exact median {statistics.median(exact_times) * 1e6:.0f} µs, "
        f"median speed-up ×{statistics.median(speedups):,.0f}"
    )


if __name__ == "__main__":
    main()
