"""What dominance pruning inside the on-demand pricing search would buy (issue 11 §1), measured, not built.

Usage: ``python benchmarks/bench_dominance.py [--presets catalog-wide,coral-extended]``.

A candidate multiset M needs no exact placement when an already placed strict sub-multiset M' ⊊ M has
T(M') ≥ UB(M): M' uses fewer nodes of every shape and serves at least as much, so its reduced cost is no higher
in every region (node weights are ≥ 0), and an ILP optimum never needs M. After a cold on-demand solve this
counts, per (model, phase) space, the placed multisets that such an M' among the other placed ones dominates (an
upper estimate: the search would have to place M' first), and the share of exact-placement time they took.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from planning import api  # noqa: E402
from planning.allocate import pricing  # noqa: E402


def _rows(space) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Padded sorted multisets (rows of shape indices, K = empty) of every placed multiset of a space."""
    base = space.K + 1
    codes = np.array(sorted(space.cache), dtype=np.int64)
    rows = np.zeros((codes.size, space.nmax), dtype=np.int64)
    rest = codes.copy()
    for p in range(space.nmax):
        rows[:, p] = rest % base
        rest //= base
    return rows


def dominated(space) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(placed, dominated by a placed strict sub-multiset whose exact throughput reaches the bound)."""
    P = _rows(space)
    if not len(P):
        return 0, 0
    K = space.K
    counts = np.stack([np.equal(P, k).sum(axis=1) for k in range(K)], axis=1)  # (n, K)
    thr = space.throughput(P)
    ub = space.upper_bound(P)
    n = len(P)
    hit = 0
    for i in range(n):
        smaller = (counts <= counts[i]).all(axis=1) & (counts.sum(axis=1) < counts[i].sum())
        if smaller.any() and thr[smaller].max() >= ub[i] > 0:
            hit += 1
    return n, hit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--presets", default="coral-core,coral-extended,catalog-wide")
    args = ap.parse_args()
    for name in args.presets.split(","):
        pricing._SPACES.clear()
        scenario = api.load_preset_scenario(name)
        t0 = time.perf_counter()
        plan = api.solve(scenario, with_baselines=False)
        wall = time.perf_counter() - t0
        placed = hit = 0
        exact_s = search_s = 0.0
        for space in list(pricing._SPACES.values()):
            n, h = dominated(space)
            placed += n
            hit += h
            exact_s += space.stats.seconds_exact
            search_s += space.stats.seconds_search
        share = hit / placed if placed else 0.0
        print(f"{name}: solve {wall:.1f} s ({plan.status}, ${plan.cost_per_hour:,.2f}/h); search {search_s:.2f} s, "
              f"exact placement {exact_s:.2f} s of {placed:,} multisets; dominated by a placed sub-multiset: "
              f"{hit:,} ({share:.1%}) -> at most {share * exact_s:.2f} s of placement saved")


if __name__ == "__main__":
    main()
