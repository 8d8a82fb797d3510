"""Where a what-if's baselines spend their CPU (issue 41): each baseline of a preset's variant timed alone, with
every HiGHS solve inside it.

    python -m benchmarks.bench_baseline_proofs [--preset coral-extended] [--variant demand] [--baselines single:L40S]
    python -m benchmarks.bench_baseline_proofs --against DIR --runs 3

The variant's baseline problem is made as ``bench_whatif`` makes it (the base solved cold, the what-if warm from it,
result cache off) and pickled (``--problem FILE`` reuses one). Then, in this process, each baseline (default: all
but memP) runs alone: its CPU seconds (``time.process_time``), wall seconds, answer (cost, served fraction, note)
and every HiGHS solve (phase, rows × columns, branch-and-bound nodes, model status, objective and bound, seconds)
with the totals by phase: where its time goes.

``--against DIR`` instead times the baselines on the same pickled problem in fresh processes of this checkout and
of ``DIR`` (e.g. ``git archive main | tar -x -C DIR``; the same virtualenv), alternately, ``--runs`` times each:
each baseline's CPU seconds, the medians, the load average at each start, and whether both give the same answers
(cost, served fractions, GPUs, nodes, note) in every run.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS = ("demand", "L40S", "prices", "SLO")  # bench_whatif's four what-ifs: ×2, without L40S, −20 %, ×0.8


def variant_problem(preset: str, variant: str) -> Any:
    """The baseline problem of ``preset``'s what-if ``variant`` (a key of :data:`VARIANTS`), as a warm what-if
    hands it to its baselines (``bench_whatif``'s path; baselines not run)."""
    import planning.pipeline as pipeline
    from planning import api
    from planning.allocate.warm import WarmStart
    from planning.relations import BasePlan
    from planning.whatif import DemandScale, DropGpu, PriceChange, SloScale, apply_variants

    os.environ["PLANNING_RESULT_CACHE"] = "off"
    change: Any = {"demand": DemandScale(2.0), "L40S": DropGpu("L40S"), "prices": PriceChange(-20),
              "SLO": SloScale(0.8)}[variant]
    from benchmarks.bench_baselines_beside import baseline_problems

    with baseline_problems() as caught:
        scenario, ctx = api.load_preset_scenario(preset), api.engine_context()
        base = pipeline.solve(scenario, context=ctx, with_baselines=True)
        reuse = pipeline.Reuse(warm=WarmStart.from_result(base), base=BasePlan(scenario, base))
        pipeline.solve(apply_variants(scenario, [change]), context=ctx, reuse=reuse, with_baselines=True)
    return caught[-1]


def _spy() -> list[tuple[str, int, int, int, str, Any, Any, float]]:
    """From now on, every HiGHS solve of the allocation's matrix path as it is read: (phase, rows, columns, nodes,
    model status, objective, bound, seconds), in the list returned."""
    import planning.allocate.linked as linked
    import planning.allocate.matrix_model as matrix_model

    real = matrix_model.read_highs
    log: list[tuple[str, int, int, int, str, Any, Any, float]] = []

    def spy(h: Any, phase: str, seconds: float, gap_tol: float, sense: float = 1.0) -> Any:
        raw = real(h, phase, seconds, gap_tol, sense)
        lp = h.getLp()
        log.append((phase, lp.num_row_, lp.num_col_, max(0, int(h.getInfo().mip_node_count)),
                    h.modelStatusToString(h.getModelStatus()), raw.phase.objective, raw.phase.bound, seconds))
        return raw

    matrix_model.read_highs = spy
    linked.read_highs = spy
    return log


def profile(problem: Any, names: list[str]) -> None:
    """Each baseline of ``names`` alone on ``problem``: CPU, wall, answer and its HiGHS solves (module docstring)."""
    from planning.baselines.base import run_baseline

    log = _spy()
    for name in names:
        log.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        b = run_baseline(name, problem)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        print(f"{name}: {cpu:.2f} CPU-s, {wall:.2f} s (load {os.getloadavg()[0]:.1f}); ${b.cost_per_hour:.4f}/h, "
              f"served min {b.served_fraction_min:.4f}; {b.note[:110]}", flush=True)
        by_phase: dict[str, list[float]] = {}  # solves, nodes, seconds
        for phase, rows, cols, nodes, status, obj, bound, secs in log:
            print(f"    {phase:22} {rows:4} x {cols:<5} nodes {nodes:6,}  {status:24} objective {obj} bound {bound} "
                  f"{secs:.2f} s")
            by_phase.setdefault(phase, [0.0, 0.0, 0.0])
            by_phase[phase][0] += 1
            by_phase[phase][1] += nodes
            by_phase[phase][2] += secs
        for phase, (count, total, spent) in by_phase.items():
            print(f"  {phase}: {count:.0f} solves, {total:,.0f} nodes, {spent:.2f} s")


_CHILD = """
import json, pickle, sys, time
from planning.baselines.base import run_baseline
def answer(b):
    return [b.name, b.cost_per_hour, dict(b.served_fraction), dict(b.gpus_used),
            sorted((list(k), v) for k, v in b.nodes_used.items()), b.note]
problem = pickle.load(open(sys.argv[1], "rb"))
out = {}
for name in sys.argv[2:]:
    c0 = time.process_time()
    b = run_baseline(name, problem)
    out[name] = {"cpu": time.process_time() - c0, "answer": answer(b)}
print(json.dumps(out, default=str))
"""


def against(other: str, path: Path, names: list[str], runs: int) -> None:
    """The baselines ``names`` on the pickled problem at ``path``, in fresh processes of this checkout and of
    ``other``, alternately (module docstring)."""
    here = str(Path(__file__).resolve().parent.parent)
    checkouts = {"before": other, "after": here}
    cpu: dict[tuple[str, str], list[float]] = {}
    same = True
    for run in range(runs):
        answers = {}
        for which in (("before", "after") if run % 2 == 0 else ("after", "before")):
            load = os.getloadavg()[0]
            env = {**os.environ, "PYTHONPATH": checkouts[which], "PLANNING_RESULT_CACHE": "off"}
            done = subprocess.run([sys.executable, "-c", _CHILD, str(path), *names], check=True, cwd=checkouts[which],
                                  env=env, capture_output=True, text=True)
            doc = json.loads(done.stdout.strip().splitlines()[-1])
            answers[which] = {n: doc[n]["answer"] for n in names}
            for n in names:
                cpu.setdefault((n, which), []).append(doc[n]["cpu"])
            print(f"run {run + 1} {which:6} (load {load:.1f}): "
                  + ", ".join(f"{n} {doc[n]['cpu']:.2f}" for n in names) + " CPU-s", flush=True)
        same = same and answers["before"] == answers["after"]
    for n in names:
        print(f"{n:18} CPU-s median before {statistics.median(cpu[(n, 'before')]):.2f}, after "
              f"{statistics.median(cpu[(n, 'after')]):.2f}")
    print(f"the same answers in every run: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="coral-extended")
    parser.add_argument("--variant", default="demand", choices=VARIANTS)
    parser.add_argument("--baselines", nargs="+", help="names (default: every baseline but memP)")
    parser.add_argument("--problem", type=Path, help="a pickled baseline problem: read if it exists, else written")
    parser.add_argument("--against", metavar="DIR", help="compare with the checkout in DIR, fresh processes")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from planning.baselines.base import baseline_names

    # without --problem, a private folder of this run: no pickle is read that this run did not write
    path = args.problem or Path(tempfile.mkdtemp(prefix="baseline-problem-")) / f"{args.preset}-{args.variant}.pkl"
    if not path.exists():
        t0 = time.perf_counter()
        path.write_bytes(pickle.dumps(variant_problem(args.preset, args.variant)))
        print(f"# {args.preset} {args.variant}: baseline problem made in {time.perf_counter() - t0:.1f} s, {path}")
    problem = pickle.loads(path.read_bytes())
    names = args.baselines or [n for n in baseline_names(problem) if n != "memp"]
    print(f"# {len(problem.templates):,} templates; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.against:
        against(args.against, path, names, args.runs)
    else:
        profile(problem, names)


if __name__ == "__main__":
    main()
