"""Stage evaluation benchmark: ``templates.stages.evaluate_stages`` per call (histogram demand evaluates every
template's fixed placement once per class), and how the rows-of-shapes path compares with the node-indexed
``placement.evaluate`` on the same placement.

Run: ``python3 benchmarks/bench_stages.py [--calls 20000] [--runs 5]``; prints the median µs per call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.templates.placement import Stage, evaluate
from planning.templates.stages import evaluate_stages, stages_from_placement


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    K, s_max, L = 8, 6, 80
    tables = np.sort(rng.random((K, s_max, L)), axis=2)[:, :, ::-1].copy()  # non-increasing in j, like T̂
    shapes = [f"{i + 1}xL4" for i in range(K)]
    index = {s: i for i, s in enumerate(shapes)}
    stages = stages_from_placement([{"layers": 30, "shapes": [shapes[0], shapes[2]]},
                                    {"layers": 50, "shapes": [shapes[5]]}])
    node_thr = tables[[0, 2, 5]].transpose(1, 0, 2)
    node_stages = (Stage(30, (0, 1)), Stage(50, (2,)))
    assert evaluate_stages(stages, tables, index) == evaluate(L, node_thr, node_stages)

    def per_call(fn: object) -> float:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                fn()  # type: ignore[operator]
            times.append((time.perf_counter() - t0) / args.calls)
        return statistics.median(times) * 1e6

    print(f"evaluate_stages (shape tables): {per_call(lambda: evaluate_stages(stages, tables, index)):.1f} µs/call")
    print(f"placement.evaluate (node tables, validated): {per_call(lambda: evaluate(L, node_thr, node_stages)):.1f} µs/call")


if __name__ == "__main__":
    main()
