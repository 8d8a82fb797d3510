"""Exploration at the speed of a slider (issue 41): re-solves, warm what-ifs, a warm demand sweep, cold solves.

Prints, per run and as medians over ``--runs``, in one process (its warm T̂ tables and multiset spaces, as a user's
session has them after the first plan):

- ``cold``: the preset solved with its baselines, result cache off (``api.solve(..., cache=False)``);
- ``re-solve``: the same question again through ``api.solve`` with the result cache on (a fresh cache folder per
  run, filled by one solve first);
- ``what-if <label>``: demand ×2, drop L40S, prices −20 %, SLO ×0.8, each solved from the base plan's columns
  (``pipeline.Reuse(warm=…, base=…)``, cache off: prices −20 % is proven by its relation to the base plan,
  ``planning.relations``; ``--no-relations`` solves it warm too), with its status (every one must be
  ``optimal``) and how it was proven, and how many of its baselines came from the baseline memo the base's solve
  filled (``planning.baselines.memo``, fresh per run; ``--no-memo``: every baseline re-planned); ``--check`` also
  solves it cold right after (timed: warm and cold see the same load; no memo, no warm start) and compares the
  costs and the baselines (name, cost, served fractions, GPUs, note);
  ``--no-baselines`` times the base's and the what-ifs' allocations alone;
- ``sweep``: ``api.sweep`` over 10 demand multipliers (0.5 … 5), each point from its neighbour, cache off, with
  each point's seconds, its plan's status and proof (``--sweep-only``: the sweep alone, in a fresh process the
  first point pays for the T̂ tables; ``--point-limit S``: each point's time limit; ``--sweep-no-baselines``: the
  plan's rows only);
- ``catalog-wide cold`` with ``--catalog-wide``.

``--profile`` instead profiles one cold solve of the preset with cProfile (the 25 functions with the most
cumulative time, and the pipeline's step timings): where a cold solve's time goes.

``--side-by-side DIR`` instead times cold solves in fresh processes, ``planning solve --preset P --json`` with the
result cache off, for the preset and catalog-wide, alternating this checkout and the one in ``DIR`` (e.g. ``git
archive main | tar -x -C DIR``; the same virtualenv), ``--runs`` times each, with the load average beside every
run; then the medians, and whether the two give the same plan cost and the same baselines (cost, served
fractions, GPUs, note) in every run (a baseline stopped by its own time limit is load-dependent and is named).

``--busy N`` runs everything with N CPU-burning processes (``benchmarks._load.Busy``); every run prints the load
line (the CPU share a busy loop gets, the load average: the machine is shared). Run:
``python -m benchmarks.bench_whatif [--preset coral-extended] [--runs 3] [--busy 4] [--check] [--catalog-wide]
[--no-baselines] [--profile] [--what-ifs demand,L40S] [--what-ifs-only] [--sweep-only] [--point-limit S]
[--sweep-no-baselines] [--no-relations] [--no-memo]``: ``--what-ifs`` keeps the what-ifs whose label
contains one of the words; ``--what-ifs-only`` leaves out the re-solve and the sweep (the base is still solved
cold first, as the what-ifs start from it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._load import Busy, load_line
from planning import api
from planning.allocate.warm import WarmStart
from planning.baselines.memo import BaselineMemo, salt_of
from planning.pipeline import Reuse
from planning.pipeline import solve as pipeline_solve
from planning.relations import BasePlan
from planning.resultcache import code_digest
from planning.whatif import DemandScale, DropGpu, PriceChange, SloScale, apply_variants, label

VARIANTS = [DemandScale(2.0), DropGpu("L40S"), PriceChange(-20), SloScale(0.8)]
SWEEP = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _cpu_timed(fn: Callable[[], Any], out: dict[str, float], name: str) -> Any:
    """``fn()``, its wall seconds in ``out[name]`` and this process's CPU seconds in ``out[name + " CPU"]`` (the
    baselines' pool workers are not counted: ``PLANNING_BASELINE_WORKERS=1`` keeps them here)."""
    c0 = time.process_time()
    out[name], result = _timed(fn)
    out[f"{name} CPU"] = time.process_time() - c0
    return result


@dataclass(frozen=True)
class RunOptions:
    """What one pass times: ``check`` (each what-if cold too), ``catalog_wide``, the what-ifs' ``baselines``,
    ``what_ifs`` (label words; empty: all four), ``what_ifs_only`` (no re-solve, no sweep), ``sweep_only`` (the
    sweep alone) and the sweep's options."""

    check: bool = False
    catalog_wide: bool = False
    baselines: bool = True
    what_ifs: Sequence[str] = ()
    what_ifs_only: bool = False
    sweep_only: bool = False
    sweep: api.SweepOptions = field(default_factory=api.SweepOptions)
    relations: bool = True
    memo: bool = True


def one_run(preset: str, opts: RunOptions) -> dict[str, float]:
    """One pass over every figure; returns seconds by name."""
    check, catalog_wide, baselines = opts.check, opts.catalog_wide, opts.baselines
    os.environ["PLANNING_RESULT_CACHE"] = "off"
    scenario = api.load_preset_scenario(preset)
    ctx = api.engine_context()
    out: dict[str, float] = {}
    if opts.sweep_only:
        out["sweep"] = timed_sweep(scenario, opts.sweep)
        return out
    # the baseline memo of a user's session (planning.baselines.memo; fresh per run): filled by the base's cold
    # solve, read by the what-ifs; the --check cold solves run without it
    memo = BaselineMemo(salt_of(code_digest())) if opts.memo else None
    base = _cpu_timed(lambda: api.solve(scenario, cache=False, with_baselines=baselines) if memo is None
                      else pipeline_solve(scenario, context=ctx, reuse=Reuse(baselines=memo),
                                          with_baselines=baselines), out, "cold")
    print(f"  cold {preset}: {out['cold']:.2f} s, {base.status} ${base.comparable_cost:,.4f}/h{_proof(base)} "
          f"(allocation {base.timings.get('allocation_seconds', 0):.2f} s, baselines "
          f"{base.timings.get('baselines_seconds', 0):.2f} s)")
    if not opts.what_ifs_only:
        _resolve(scenario, out)
    warm = WarmStart.from_result(base)
    # every variant starts from the base's columns; with relations, from its proven optimum too (planning.relations)
    reuse = Reuse(warm=warm, base=BasePlan(scenario, base) if opts.relations else None, baselines=memo)
    for v in VARIANTS:
        if opts.what_ifs and not any(word.lower() in label(v).lower() for word in opts.what_ifs):
            continue
        variant = apply_variants(scenario, [v])
        hits = memo.hits if memo is not None else 0
        res = _cpu_timed(lambda variant=variant: pipeline_solve(variant, context=ctx, reuse=reuse,
                                                                with_baselines=baselines), out, f"what-if {label(v)}")
        secs = out[f"what-if {label(v)}"]
        line = f"  what-if {label(v)}: {secs:.2f} s warm, {res.status} ${res.comparable_cost:,.4f}/h" + _proof(res)
        if memo is not None and baselines and not res.stats.get("proven_by_relation"):
            line += (f"; baselines {res.timings.get('baselines_seconds', 0.0):.2f} s, {memo.hits - hits} of "
                     f"{len(res.baselines)} from the memo")
        if check:  # the same variant cold, right after (the same load)
            cold_s, cold = _timed(lambda variant=variant: pipeline_solve(variant, context=ctx,
                                                                         with_baselines=baselines))
            out[f"what-if {label(v)} (cold)"] = cold_s
            same = abs(cold.comparable_cost - res.comparable_cost) <= 1e-6 * max(1.0, cold.comparable_cost)
            line += (f"; cold {cold_s:.2f} s, {cold.status} ${cold.comparable_cost:,.4f}/h "
                     f"({'same cost' if same else 'DIFFERENT COST'}"
                     + (", same baselines" if _baselines(cold) == _baselines(res) else ", DIFFERENT BASELINES")
                     + ")")
        print(line)
    if opts.what_ifs_only:
        return out
    out["sweep"] = timed_sweep(scenario, opts.sweep)
    if catalog_wide:
        wide = api.load_preset_scenario("catalog-wide")
        out["catalog-wide cold"], res = _timed(lambda: api.solve(wide, cache=False))
        print(f"  catalog-wide cold: {out['catalog-wide cold']:.2f} s, {res.status} ${res.comparable_cost:,.4f}/h")
    return out


def _baselines(res: Any) -> list[tuple[Any, ...]]:
    """What a what-if's baselines answer (name, cost, served fractions, GPUs, note, time-limited): what a warm
    what-if must share with its cold solve."""
    return [(b.name, round(b.cost_per_hour, 9), b.served_fraction, sorted(b.served_by_group.items()),
             sorted(b.gpus.items()), b.note, b.time_limited) for b in res.baselines]


def _proof(res: Any) -> str:
    """What the certificate needed: the templates in its fixing ILP (or in the linked covers' plan that proved it),
    the bound's gain from the region pairing (``allocate.linked_cover``) and the seconds of the linked bounds and of
    the ILPs."""
    st, t = res.stats, res.timings
    if st.get("proven_by_relation"):
        return f" ({res.message})"
    if "templates_in_ilp" not in st:
        return ""
    if st.get("proven_by_cover_plan"):  # no fixing round: the linked covers' plan met the bound (allocate.ondemand)
        return (f" (proven by the linked covers' plan over {int(st['templates_in_ilp']):,} templates; pairing adds "
                f"${st.get('linked_bound_gain_per_hour', 0.0):,.2f}/h to the bound in "
                f"{t.get('linked_bounds_seconds', 0.0):.2f} s; its ILP {t.get('cover_plan_seconds', 0.0):.2f} s)")
    return (f" (fixing ILP over {int(st['templates_in_ilp']):,} templates; pairing adds "
            f"${st.get('linked_bound_gain_per_hour', 0.0):,.2f}/h to the bound in "
            f"{t.get('linked_bounds_seconds', 0.0):.2f} s; ILPs {t.get('ilp_seconds', 0.0):.2f} s)")


def timed_sweep(scenario: Any, options: api.SweepOptions) -> float:
    """``api.sweep`` over ``SWEEP`` (demand), each point's seconds (between its progress reports), status and proof
    printed with the load average; returns the sweep's seconds."""
    from planning import api_fanout

    marks = [time.perf_counter()]
    point_fn = api_fanout.sweep_point

    def said(point: tuple[Any, ...], cancel: Any = None, warm: Any = None) -> list[dict[str, Any]]:
        """The point's rows, its plan's status and proof printed as it returns (the points solved here, one after
        another, call the module's ``sweep_point``): a run its timeout cuts off still says what each point proved."""
        rows = point_fn(point, cancel, warm)
        plan = rows[0]
        print(f"    demand ×{plan['x']:g}: {plan['status']} ${plan['cost_per_hour']:,.4f}/h, {plan['proof']}", flush=True)
        return rows

    def done(_fraction: float, message: str) -> None:  # a point finished (printed at once: a run may be cut off)
        marks.append(time.perf_counter())
        print(f"    {message} done after {marks[-1] - marks[-2]:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)

    api_fanout.sweep_point = said  # type: ignore[assignment]
    try:
        secs, frame = _timed(lambda: api.sweep(scenario, "demand", SWEEP, options=options, progress=done))
    finally:
        api_fanout.sweep_point = point_fn  # type: ignore[assignment]
    plan_rows = frame[frame["method"].str.startswith("Plan")]
    for i, row in enumerate(plan_rows.itertuples()):
        took = marks[i + 1] - marks[i] if i + 1 < len(marks) else float("nan")
        print(f"    demand ×{row.x:g}: {took:.2f} s, {row.status} ${row.cost_per_hour:,.4f}/h, {row.proof} "
              f"(load {os.getloadavg()[0]:.1f} at the end)")
    limited = frame[frame["status"] == "time-limited"]["method"].tolist()
    print(f"  sweep of {len(SWEEP)} demand points: {secs:.2f} s ({int(plan_rows['feasible'].sum())} of "
          f"{len(plan_rows)} with a plan, {int((plan_rows['status'] == 'optimal').sum())} proven optimal; "
          f"baselines stopped by their own limit: {len(limited)})", flush=True)
    return secs


def _resolve(scenario: Any, out: dict[str, float]) -> None:
    """The re-solve through the result cache (a fresh cache folder, filled by one solve first)."""
    with tempfile.TemporaryDirectory() as home:
        os.environ["PLANNING_HOME"], os.environ["PLANNING_RESULT_CACHE"] = home, "on"
        api.solve(scenario)
        out["re-solve"], again = _timed(lambda: api.solve(scenario))
        os.environ["PLANNING_RESULT_CACHE"] = "off"
    print(f"  re-solve: {out['re-solve'] * 1000:.1f} ms (from the cache: {again.stats.get('result_cache_hit') == 1})")


def profile_cold(preset: str) -> None:
    """cProfile of one cold solve (result cache off; the catalog and perf model are loaded before the profile
    starts): the top functions by cumulative time and the pipeline's own step timings."""
    import cProfile
    import pstats

    os.environ["PLANNING_RESULT_CACHE"] = "off"
    scenario = api.load_preset_scenario(preset)
    api.engine_context()  # the catalog and perf model load outside the profile
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.perf_counter()
    result = api.solve(scenario, cache=False)
    wall = time.perf_counter() - t0
    prof.disable()
    print(f"cold {preset}: {wall:.2f} s, {result.status} ${result.comparable_cost:,.4f}/h")
    print("  steps: " + ", ".join(f"{k} {v:.2f}" for k, v in result.timings.items() if v >= 0.05))
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def _cold_process(checkout: str, preset: str) -> tuple[float, float, dict[str, Any], float]:
    """Wall and CPU seconds (user + system, the process and its children) of one ``planning solve --preset P
    --json`` in a fresh process run from ``checkout``, its JSON and the 1-minute load average when it started. The
    CPU seconds are the figure to compare on a shared machine: the wall time is mostly other users' work."""
    import json
    import resource
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": checkout, "PLANNING_RESULT_CACHE": "off"}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "from planning.cli import main; main()", "solve", "--preset", preset,
                          "--json"], cwd=checkout, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(out.stdout), load


def _answer(doc: dict[str, Any], limited: set[str]) -> tuple[Any, ...]:
    """What must not change: the plan's cost and every baseline's cost, served fractions, GPUs and note (of the
    baselines not in ``limited``: stopped by their own time limit in either run, so load-dependent)."""
    return (doc["cost_per_hour"], doc["status"],
            tuple((b["name"], b["cost_per_hour"], b["served_by_group"], b["gpus"], b["note"], b["feasible"])
                  for b in doc["baselines"] if b["name"] not in limited))


def side_by_side(other: str, presets: list[str], runs: int) -> None:
    """Cold solves in fresh processes, this checkout and ``other`` alternately (see the module docstring)."""
    here = str(Path(__file__).resolve().parent.parent)
    figures: dict[tuple[str, str], list[tuple[float, float, float, float, float]]] = defaultdict(list)
    for run in range(runs):
        for preset in presets:
            answers = {}
            for which, checkout in ([("before", other), ("after", here)] if run % 2 == 0
                                    else [("after", here), ("before", other)]):
                secs, cpu, doc, load = _cold_process(checkout, preset)
                t = doc["timings"]
                figures[(preset, which)].append((secs, t.get("allocation_seconds", 0.0),
                                                 t.get("baselines_seconds", 0.0), cpu, load))
                answers[which] = doc
                limited = [b["name"] for b in doc["baselines"] if b.get("time_limited")]
                print(f"run {run + 1} {preset:15} {which:6} {secs:7.2f} s, CPU {cpu:.2f} s (allocation {t.get('allocation_seconds', 0):.2f}"
                      f", baselines {t.get('baselines_seconds', 0):.2f}) load {load:.1f}, {doc['status']} "
                      f"{doc['cost_per_hour']:.6f} $/h" + (f"; time-limited: {limited}" if limited else ""), flush=True)
            limited = {b["name"] for doc in answers.values() for b in doc["baselines"] if b.get("time_limited")}
            same = _answer(answers["before"], limited) == _answer(answers["after"], limited)
            print(f"      {preset}: {'the same plan cost and baselines' if same else 'DIFFERENT ANSWERS'}"
                  + (f" (time-limited in either, not compared: {sorted(limited)})" if limited else ""))
    print("medians (wall, allocation, baselines, CPU of the process; load averages at the starts):")
    for (preset, which), rows in figures.items():
        med = [statistics.median(r[i] for r in rows) for i in range(4)]
        print(f"  {preset:15} {which:6} {med[0]:7.2f} s  allocation {med[1]:6.2f} s  baselines {med[2]:6.2f} s  "
              f"CPU {med[3]:6.2f} s (runs {', '.join(f'{r[0]:.2f}' for r in rows)}; CPU "
              f"{', '.join(f'{r[3]:.2f}' for r in rows)}; load {', '.join(f'{r[4]:.1f}' for r in rows)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="coral-extended")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="solve each variant cold too (timed) and compare costs")
    parser.add_argument("--no-baselines", action="store_true", help="what-ifs without their baselines")
    parser.add_argument("--catalog-wide", action="store_true", help="also time catalog-wide cold")
    parser.add_argument("--profile", action="store_true", help="profile one cold solve instead")
    parser.add_argument("--what-ifs", default="", help="comma-separated words: only the what-ifs whose label has one")
    parser.add_argument("--what-ifs-only", action="store_true", help="no re-solve and no sweep")
    parser.add_argument("--side-by-side", metavar="DIR", help="cold solves in fresh processes, here and in DIR")
    parser.add_argument("--sweep-only", action="store_true", help="the 10-point demand sweep alone")
    parser.add_argument("--point-limit", type=float, help="the sweep's time limit per point (s)")
    parser.add_argument("--sweep-no-baselines", action="store_true", help="the sweep's plan rows only")
    parser.add_argument("--no-memo", action="store_true",
                        help="the what-ifs re-plan every baseline (no baseline memo filled by the base)")
    parser.add_argument("--no-relations", action="store_true",
                        help="what-ifs warm from the base's columns only, never proven by relation to it")
    args = parser.parse_args()
    if args.side_by_side:
        side_by_side(args.side_by_side, [args.preset, "catalog-wide"], args.runs)
        return
    opts = RunOptions(args.check, args.catalog_wide, not args.no_baselines,
                      tuple(w for w in args.what_ifs.split(",") if w), args.what_ifs_only, args.sweep_only,
                      api.SweepOptions(not args.sweep_no_baselines, args.point_limit), not args.no_relations,
                      not args.no_memo)
    if args.profile:
        with Busy(args.busy):
            print(load_line(args.busy))
            profile_cold(args.preset)
        return
    figures: dict[str, list[float]] = defaultdict(list)
    with Busy(args.busy):
        for run in range(args.runs):
            print(f"run {run + 1}/{args.runs} — {load_line(args.busy)}")
            for name, secs in one_run(args.preset, opts).items():
                figures[name].append(secs)
        print(f"medians of {args.runs} ({args.preset}, --busy {args.busy}) — {load_line(args.busy)}")
    for name, values in figures.items():
        print(f"  {name:32} {statistics.median(values):8.3f} s   (runs: {', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
