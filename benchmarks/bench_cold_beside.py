"""Cold solves with their baselines, timed after the imports (issue 41 §3, the baselines beside the allocation).

Each run is a fresh process of a checkout that imports the planner, then times one ``api.solve(preset,
cache=False)``: its wall time, the allocation's and the baselines' steps (the baselines' step is what is left of
them after the allocation), the CPU seconds of the process and of its pool workers (reaped when the pool shuts
down after the solve: their spawn and imports included) and a digest of the answer (plan cost and every
baseline's cost, note, served fraction and GPUs). ``--against DIR`` alternates this checkout and ``DIR`` (e.g.
``git archive main | tar -x -C DIR``; the same virtualenv) and says whether the digests agree. Prints one JSON
line per run, then the medians with the load averages at the starts.

``--fresh`` times the whole command instead, as a user meets it: ``planning solve --preset P --json`` in a fresh
process with an empty ``PLANNING_HOME`` and the result cache off, from outside (wall from start to exit; CPU of the
process and of the pool workers it reaped), the digest taken from its JSON. ``--no-bytecode`` makes every process
compile its modules from source (``PYTHONPYCACHEPREFIX`` at an empty folder, with ``PYTHONDONTWRITEBYTECODE``), as
it did before the installs compiled bytecode.

    python -m benchmarks.bench_cold_beside --against DIR --presets coral-extended catalog-wide --runs 3
    python -m benchmarks.bench_cold_beside --fresh --against DIR --runs 3

``--busy N`` runs everything beside N CPU-burning processes (``benchmarks._load.Busy``), as a user's laptop or a
CI runner is: issue 41 asks for its medians quiet and with 4 busy processes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._load import Busy, load_line

ONE = """
import hashlib, json, os, resource, sys, time
from planning import api
scenario = api.load_preset_scenario(sys.argv[1])
load = os.getloadavg()[0]
c0, w0 = time.process_time(), time.perf_counter()
r = api.solve(scenario, cache=False)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
from planning.spawning import shared_pool
shared_pool(2).shutdown(wait=True)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
answer = json.dumps([r.cost_per_hour] + [(b.name, b.cost_per_hour, b.note, b.served_fraction, sorted(b.gpus.items()))
                                         for b in r.baselines])
t = r.timings
print(json.dumps({"wall": wall, "cpu": cpu + kids.ru_utime + kids.ru_stime, "allocation": t.get("allocation_seconds", 0.0),
                  "baselines": t.get("baselines_seconds", 0.0), "load": load,
                  "digest": hashlib.sha1(answer.encode()).hexdigest()[:12]}))
"""


def one_run(checkout: str, preset: str) -> dict[str, float | str]:
    """One cold solve of ``preset`` in a fresh process of ``checkout`` (result cache off)."""
    env = {**os.environ, "PYTHONPATH": checkout, "PLANNING_RESULT_CACHE": "off"}
    out = subprocess.run([sys.executable, "-c", ONE, preset], cwd=checkout, env=env, capture_output=True, text=True,
                         check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def fresh_run(checkout: str, preset: str, no_bytecode: bool = False) -> dict[str, float | str]:
    """One ``planning solve --preset P --json`` of ``checkout`` in a fresh process with an empty home, timed from
    outside: wall, CPU (its own and its reaped workers'), the allocation's and baselines' steps, the digest."""
    with tempfile.TemporaryDirectory(prefix="cold-home-") as home, tempfile.TemporaryDirectory() as empty:
        env = {**os.environ, "PYTHONPATH": checkout, "PLANNING_RESULT_CACHE": "off", "PLANNING_HOME": home}
        if no_bytecode:
            env.update(PYTHONPYCACHEPREFIX=empty, PYTHONDONTWRITEBYTECODE="1")
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "planning.cli", "solve", "--preset", preset, "--json"],
                             cwd=checkout, env=env, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = json.loads(out.stdout)
    answer = json.dumps([r["cost_per_hour"]] + [(b["name"], b["cost_per_hour"], b["note"], b["served_fraction"],
                                                 sorted(b["gpus"].items())) for b in r["baselines"]])
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    t = r["timings"]
    return {"wall": wall, "cpu": cpu, "allocation": t.get("allocation_seconds", 0.0),
            "baselines": t.get("baselines_seconds", 0.0), "load": load,
            "digest": hashlib.sha1(answer.encode()).hexdigest()[:12]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=None, help="another checkout, run alternately (before)")
    parser.add_argument("--presets", nargs="+", default=["coral-extended", "catalog-wide"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="time the whole CLI command, empty home (docstring)")
    parser.add_argument("--no-bytecode", action="store_true", help="with --fresh: compile every module anew")
    parser.add_argument("--busy", type=int, default=0, help="CPU-burning processes beside every run")
    args = parser.parse_args()
    with Busy(args.busy):
        print(load_line(args.busy), flush=True)
        _runs(args)


def _runs(args: argparse.Namespace) -> None:
    """The runs of ``main`` and their medians."""
    here = str(Path(__file__).resolve().parent.parent)
    sides = [("after", here)] + ([("before", args.against)] if args.against else [])
    rows: dict[tuple[str, str], list[dict[str, float | str]]] = {}
    for run in range(args.runs):
        for which, checkout in (sides if run % 2 else sides[::-1]):
            for preset in args.presets:
                row = fresh_run(checkout, preset, args.no_bytecode) if args.fresh else one_run(checkout, preset)
                rows.setdefault((preset, which), []).append(row)
                print(json.dumps({"run": run + 1, "side": which, "preset": preset, **row}), flush=True)
    for (preset, which), got in sorted(rows.items()):
        med = {k: statistics.median(float(r[k]) for r in got) for k in ("wall", "allocation", "baselines", "cpu")}
        walls = ", ".join(f"{float(r['wall']):.2f}" for r in got)
        loads = ", ".join(f"{float(r['load']):.1f}" for r in got)
        print(f"{preset:15} {which:6} wall {med['wall']:7.2f} s (runs {walls})  allocation {med['allocation']:6.2f} s"
              f"  baselines after it {med['baselines']:6.2f} s  CPU {med['cpu']:6.2f} s  load {loads}  digests "
              f"{sorted({str(r['digest']) for r in got})}")


if __name__ == "__main__":
    main()
