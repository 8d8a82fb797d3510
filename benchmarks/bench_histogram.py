"""Histogram demand benchmark: per-class evaluation of fixed placements (vectorised vs the per-template loop)
and end-to-end solves of histogram scenarios (Mélange's Arena grid as explicit templates; generated templates).

Run: ``python3 benchmarks/bench_histogram.py [--templates 20000] [--classes 36] [--repeat 5]``.
Prints medians over ``--repeat`` runs; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.templates.sets import _per_class
from planning.templates.stages import evaluate_stages, stages_from_placement

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "melange"


def _placements(rng: np.random.Generator, n: int, shapes: list[str], layers: int) -> list[str]:
    out = []
    for _ in range(n):
        s = int(rng.integers(1, 5))
        cuts = np.sort(rng.choice(np.arange(1, layers), size=s - 1, replace=False))
        sizes = np.diff(np.concatenate(([0], cuts, [layers])))
        out.append(json.dumps([{"layers": int(j), "shapes": [shapes[int(k)] for k in rng.integers(0, len(shapes), 2)]}
                               for j in sizes]))
    return out


def bench_per_class(n: int, classes: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    shapes = ["1xL4", "2xL4", "1xL40S", "2xL40S", "1xA100-80G", "1xH100"]
    layers = 32
    tables = [rng.uniform(0, 100, (len(shapes), 6, layers)) for _ in range(classes)]
    placements = _placements(rng, n, shapes, layers)
    fast = []
    for _ in range(repeat):
        t = time.perf_counter()
        _per_class(placements, tables, shapes)
        fast.append(time.perf_counter() - t)
    index = {s: k for k, s in enumerate(shapes)}
    sample = placements[: max(1, n // 20)]
    t = time.perf_counter()
    for text in sample:
        st = stages_from_placement(json.loads(text))
        for tab in tables:
            evaluate_stages(st, tab, index)
    loop = (time.perf_counter() - t) * n / len(sample)
    med = statistics.median(fast)
    print(f"per-class evaluation, {n} templates × {classes} classes: vectorised median {med:.3f} s; "
          f"per-template loop ≈ {loop:.2f} s (extrapolated from {len(sample)}); ratio ≈ {loop / med:.0f}×")


def bench_solves(repeat: int) -> None:
    from planning import api
    from planning.melange_import import import_melange

    for rate in (1.0, 4.0, 32.0):
        scen = import_melange(DATA / "arena_llama2_7b_feb2024.json", rate=rate)
        times, cost = [], 0.0
        for _ in range(repeat):
            t = time.perf_counter()
            cost = api.solve(scen, with_baselines=False).cost_per_hour
            times.append(time.perf_counter() - t)
        print(f"Arena 6×6 explicit templates, {rate:g} req/s: ${cost:.2f}/h, solve median {statistics.median(times):.3f} s")
    scen = api.load_preset_scenario("melange-arena")
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        res = api.solve(scen, with_baselines=False)
        times.append(time.perf_counter() - t)
    print(f"melange-arena preset (36 buckets, generated templates): ${res.cost_per_hour:.2f}/h, "
          f"solve median {statistics.median(times):.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--templates", type=int, default=20000)
    ap.add_argument("--classes", type=int, default=36)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import os

    os.environ.setdefault("PLANNING_HOME", tempfile.mkdtemp(prefix="bench-hist-"))
    bench_per_class(args.templates, args.classes, args.repeat)
    bench_solves(args.repeat)


if __name__ == "__main__":
    main()
