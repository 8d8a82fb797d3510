"""The baselines one after another vs beside each other on the process pool (issue 41 §3), on a preset's own
baseline problem: its allocation is solved once (the baselines' problem holds the templates it generated), then
every baseline but memP runs ``--runs`` times each way, alternately (1, 2, then 2, 1, …), in this process, the
pool started before. Prints each run's wall time with the load average, the medians and whether both ways gave
the same answers (name, cost, GPUs, note, served fractions).

    python -m benchmarks.bench_baselines_beside --presets coral-extended catalog-wide --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from planning import api


def baseline_problem(preset: str) -> Any:
    """The preset's baseline problem, as a cold solve hands it to its baselines (result cache off)."""
    import planning.pipeline as pipeline

    caught: list[Any] = []
    real = pipeline.run_baselines

    def catch(ctx: Any, resolved: Any, problem: Any, cancel: Any = None) -> list[Any]:
        caught.append(problem)
        return []

    pipeline.run_baselines = catch  # type: ignore[assignment]
    try:
        api.solve(api.load_preset_scenario(preset), cache=False)
    finally:
        pipeline.run_baselines = real  # type: ignore[assignment]
    return caught[0]


def main() -> None:
    from planning.baselines import run_all_baselines
    from planning.baselines.beside import prewarm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["coral-extended"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ["PLANNING_RESULT_CACHE"] = "off"
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
