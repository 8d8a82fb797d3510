"""The baselines one after another vs beside each other on the process pool (issue 41 §3), on a preset's own
baseline problem: its allocation is solved once (the baselines' problem holds the templates it generated), then
every baseline but memP runs ``--runs`` times each way, alternately (1, 2, then 2, 1, …), in this process, the
pool started before. Prints each run's wall time with the load average, the medians and whether both ways gave
the same answers (name, cost, GPUs, note, served fractions).

    python -m benchmarks.bench_baselines_beside --presets coral-extended catalog-wide --runs 3

``--against DIR`` instead compares two checkouts (e.g. ``git archive main | tar -x -C DIR``, the same virtualenv):
the baseline problem is made once here and pickled, then each run times the baselines alone (beside each other on
``--workers`` processes, the pool warmed first) in a fresh process of this checkout and of DIR, alternately;
prints each run's wall time, every baseline's own seconds and the load average, the medians, and whether both
gave the same answers in every run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from planning import api


@contextmanager
def baseline_problems() -> Iterator[list[Any]]:
    """Inside, every solve hands its baseline problem to the list yielded instead of running its baselines."""
    import planning.pipeline as pipeline

    caught: list[Any] = []
    real = pipeline.run_baselines

    def catch(ctx: Any, resolved: Any, problem: Any, cancel: Any = None, early: Any = None,
              memo: Any = None) -> list[Any]:
        caught.append(problem)
        return []

    pipeline.run_baselines = catch  # type: ignore[assignment]
    try:
        yield caught
    finally:
        pipeline.run_baselines = real  # type: ignore[assignment]


def baseline_problem(preset: str) -> Any:
    """The preset's baseline problem, as a cold solve hands it to its baselines (result cache off)."""
    with baseline_problems() as caught:
        api.solve(api.load_preset_scenario(preset), cache=False)
    return caught[0]


_CHILD = """
import json, pickle, sys, time
from planning.baselines import run_all_baselines
from planning.baselines.beside import prewarm
problem, workers = pickle.load(open(sys.argv[1], "rb")), int(sys.argv[2])
prewarm(workers)
time.sleep(3)  # the pool's processes spawned and warm, as when a solve's allocation ends
t0 = time.perf_counter()
out = run_all_baselines(problem, workers=workers)
print(json.dumps({"wall": time.perf_counter() - t0, "each": {b.name: round(b.seconds, 2) for b in out},
                  "answers": [[b.name, b.cost_per_hour, dict(b.gpus_used), b.note, dict(b.served_fraction)]
                              for b in out]}))
"""


def against(other: str, presets: list[str], runs: int, workers: int) -> None:
    """The baselines alone in fresh processes of this checkout and ``other``, alternately (module docstring)."""
    import json
    import pickle
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    here = str(Path(__file__).resolve().parent.parent)
    checkouts = {"before": other, "after": here}
    walls: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset in presets:
            path = Path(tmp) / f"{preset}.pkl"
            path.write_bytes(pickle.dumps(baseline_problem(preset)))
            same = True
            for run in range(runs):
                answers = {}
                for which in (("before", "after") if run % 2 == 0 else ("after", "before")):
                    load = os.getloadavg()[0]
                    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(workers)], check=True,
                                          cwd=checkouts[which], env={**os.environ, "PYTHONPATH": checkouts[which]},
                                          capture_output=True, text=True)
                    doc = json.loads(done.stdout.strip().splitlines()[-1])
                    walls.setdefault((preset, which), []).append(doc["wall"])
                    answers[which] = doc["answers"]
                    print(f"{preset} run {run + 1} {which:6} {doc['wall']:.2f} s (load {load:.1f}) {doc['each']}",
                          flush=True)
                same = same and answers["before"] == answers["after"]
            print(f"{preset}: the same answers in every run: {same}", flush=True)
    for (preset, which), rows in walls.items():
        print(f"{preset:15} {which:6} median {statistics.median(rows):.2f} s (runs "
              f"{', '.join(f'{w:.2f}' for w in rows)})")


def main() -> None:
    from planning.baselines import run_all_baselines
    from planning.baselines.beside import prewarm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["coral-extended"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", metavar="DIR", help="compare with the checkout in DIR, fresh processes")
    parser.add_argument("--workers", type=int, default=2, help="with --against: the baselines' processes")
    args = parser.parse_args()
    os.environ["PLANNING_RESULT_CACHE"] = "off"
    if args.against:
        against(args.against, args.presets, args.runs, args.workers)
        return
    prewarm(2)
    for preset in args.presets:
        problem = baseline_problem(preset)
        walls: dict[int, list[float]] = {1: [], 2: []}
        answers: dict[int, list[tuple[Any, ...]]] = {}
        for run in range(args.runs):
            for workers in ((1, 2) if run % 2 == 0 else (2, 1)):
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                out = run_all_baselines(problem, workers=workers)
                walls[workers].append(time.perf_counter() - t0)
                answers.setdefault(workers, [(b.name, b.cost_per_hour, dict(b.gpus_used), b.note,
                                              dict(b.served_fraction)) for b in out])
                print(f"{preset} run {run + 1} workers {workers}: {walls[workers][-1]:.2f} s (load {load:.1f})",
                      flush=True)
        print(f"{preset}: median one after another {statistics.median(walls[1]):.2f} s, beside each other "
              f"{statistics.median(walls[2]):.2f} s; the same answers: {answers[1] == answers[2]}", flush=True)


if __name__ == "__main__":
    main()
