"""Determinism and self-checks on every preset (issue 37 §6, §1, §2): prints one row per preset, backend and mode.

Each preset is solved ``--runs`` times (default 3) per backend (``--backends process,ray``; default the process
pool), each run in a fresh process with its own ``PYTHONHASHSEED`` and ``options.workers`` cycling 1, 2, 1, …,
``PLANNING_BACKEND`` set to the backend and the result cache off (``PLANNING_RESULT_CACHE=off``: every run
solves). ``--time-limit S`` replaces every preset's ``options.time_limit_s``, so that on a busy machine the
finished solves are compared. ``--fresh`` gives every run an empty ``PLANNING_HOME``, so template libraries are
built anew — through the backend — instead of read from the cache. The plan's JSON without its wall-clock figures
(``planning.checks.stable_dict``) must be the same bytes in every run of every backend. Each row also says whether
the returned plan passed its checks: no failed cost check (dearer than an alternative it computed) and no
"optimal"/"feasible" with a failed SLO check. ``--sharing kvpr,exact`` adds one run per preset and sharing mode
(first backend) for the checks.

    python -m benchmarks.check_plans                       # every preset, 3 runs on the process pool
    python -m benchmarks.check_plans --presets coral-core,long-tail --sharing kvpr,exact
    python -m benchmarks.check_plans --presets coral-core --backends process,ray --fresh
    python -m benchmarks.check_plans --presets platform-100 --time-limit 1800   # finished solves, under load

Prints figures and a verdict per preset; exits 1 when a preset's runs differ or a returned plan fails a cost or
SLO check, 2 when nothing failed but some preset's runs were time-limited and differ ("time-limited, not
comparable": no determinism claim either way; rerun it with a ``--time-limit`` at which its proof completes), 0
when every preset was verified. Runs a time limit stopped may differ: the incumbent at a wall-clock deadline
depends on the machine's speed (a run is time-limited when an answer in it other than a baseline or the sharing
comparison carries ``time_limited`` — a commitment sizing whose proof stopped before its gap, a shared plan whose
safety-net clock bound — or a time limit stopped it at a step, or a plain solve is not ``optimal``; a sharing run's
engine stops on work, so its "feasible" with a proven gap and no flag is compared like an optimum). What a time
limit stopped is flagged ``time_limited`` and its figures of that moment stay out of the digest (``stable_dict``):
a baseline whose ILP a wall clock stopped (its far safety net or the solve's deadline; its ILPs otherwise stop on
work, HiGHS nodes, the same in every run) keeps only its name and the flag, a sizing whose proof stopped keeps its
plan and drops its bound, gap and cut counts. "same": ``yes`` every run's whole result is the same bytes; ``plan``
the plan is, and a comparison a clock stopped (a baseline time-limited or not run) differs; ``limit`` the plans
differ and a time limit stopped some run (the verdict line says "time-limited, not comparable"); ``NO`` they differ
otherwise (a comparison differing with no clock to blame included). "cost $/h": ``cost_per_hour`` (the nodes and
the start-up allowance, as the shared plan's total: a preset's rows count the same components); "bill $/h": the
bill per hour the Plan page's "Cost per hour", the report's headline and the JSON's ``bill`` show (what is paid:
reservations and owned capacity included; ``h``: a finance preset's horizon, its mean hour); a sharing run's is
the whole plan's (the shared GPUs and the dedicated part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

CHILD = r"""
import json, sys
from dataclasses import replace
from planning import api
from benchmarks.check_plans import summary

name, workers, sharing, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
scenario = api.load_preset_scenario(name)
scenario = replace(scenario, options=replace(scenario.options, workers=workers))
if limit:
    scenario = replace(scenario, options=replace(scenario.options, time_limit_s=float(limit)))
mode = sharing if sharing != "own" else scenario.options.sharing
res = api.solve_shared(scenario, method=mode) if mode != "off" else api.solve(scenario)
print(json.dumps(summary(res.to_dict(), mode)))
"""


def summary(data: dict[str, Any], mode: str) -> dict[str, Any]:
    """What a child reports of one result's dict (``to_dict()`` of a ``PlanResult``, or of a ``SharingResult`` when
    ``mode`` is a sharing mode): its digests' texts (``stable``: the whole result, ``plan``: without its
    comparisons, both through ``planning.checks.stable_dict``), its figures and its failed checks.

    ``cost`` is ``cost_per_hour`` (nodes + start-up allowance, as the shared plan's total: the rows of one preset
    count the same components); ``bill`` the bill per hour the Plan page's "Cost per hour", the report's headline
    and the JSON's ``bill`` show (``planning.billing``: what is paid, reservations and owned capacity included; the
    horizon's mean hour for a finance preset; a sharing run's covers both parts); ``limited``: a time limit stopped something in the plan; ``comparisons_limited``: one stopped a
    comparison (a baseline flagged ``time_limited``, or not run)."""
    from planning.checks import stable_dict

    data = json.loads(json.dumps(data, default=float))
    (data.get("scenario") or {}).get("options", {}).pop("workers", None)  # the one input that differs on purpose
    checks = data.get("checks", [])
    plan = {k: v for k, v in data.items() if k not in ("baselines", "checks")}  # the plan without its comparisons
    sharing = dict(plan.get("sharing") or {})
    compared = sharing.pop("comparison", None) or {}  # the plan without sharing (or the shared plan that lost)
    if "sharing" in plan:
        plan["sharing"] = sharing
    bill = data.get("bill") or {}
    return {"stable": json.dumps(stable_dict(data), sort_keys=True, default=float),
            "plan": json.dumps(stable_dict(plan), sort_keys=True, default=float),
            "cost": data.get("cost_per_hour"), "bill": bill.get("per_hour"), "bill_basis": bill.get("basis"),
            "status": data.get("status"), "mode": mode, "stopped_at": data.get("stopped_at") or "",
            "cost_failed": [c["name"] for c in checks if c["status"] == "failed" and c["kind"] == "cost"],
            "slo_failed": [c["name"] for c in checks if c["status"] == "failed" and c["kind"] == "slo"],
            "limited": _flagged(plan),
            "comparisons_limited": compared.get("time_limited") is True or any(
                b.get("time_limited") or b.get("ran") is False for b in data.get("baselines") or []),
            "returned": compared.get("returned")}


def _flagged(value: Any) -> bool:
    """Whether some answer in ``value`` carries ``time_limited: true``."""
    if isinstance(value, dict):
        return value.get("time_limited") is True or any(_flagged(v) for v in value.values())
    return isinstance(value, list) and any(_flagged(v) for v in value)


def run_child(preset: str, workers: int, sharing: str, seed: int, backend: str = "process",
              how: argparse.Namespace | None = None) -> dict[str, Any]:
    """One solve in a fresh process (the result cache off; ``how.fresh``: an empty ``PLANNING_HOME``;
    ``how.time_limit``: the scenario's limit replaced); its digests, cost, status, failed checks and wall time."""
    fresh = bool(how and how.fresh)
    limit = str(how.time_limit) if how is not None and how.time_limit else ""
    home = tempfile.mkdtemp(prefix="check-plans-") if fresh else None
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PLANNING_BACKEND": backend, "PLANNING_RESULT_CACHE": "off",
           **({"PLANNING_HOME": home} if home else {})}
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, preset, str(workers), sharing, limit], env=env,
                             check=False, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{preset} (workers {workers}, {backend}) exited {out.returncode}: {out.stderr[-3000:]}")
    finally:
        if home:
            shutil.rmtree(home, ignore_errors=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["digest"] = hashlib.sha256(row.pop("stable").encode()).hexdigest()[:16]
    row["plan_digest"] = hashlib.sha256(row.pop("plan").encode()).hexdigest()[:16]
    row["seconds"] = time.perf_counter() - t0
    row["backend"] = backend
    return row


PASS, FAIL, NOT_COMPARABLE = "pass", "FAIL", "time-limited, not comparable"


def sameness(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The "same" word for ``rows`` (every run of one preset and mode, all backends) and its verdict: ``PASS``,
    ``FAIL`` or ``NOT_COMPARABLE`` (the plans differ and a time limit stopped some run: the incumbent at a
    wall-clock deadline depends on the machine's speed, so the runs say nothing about determinism)."""
    if len({r["digest"] for r in rows}) == 1:
        return "yes", PASS
    if len({r["plan_digest"] for r in rows}) == 1:
        # the plan is the same and a comparison differs: only a clock excuses that (a baseline's safety net or the
        # solve's deadline); the baselines' ILPs stop on work, the same in every run
        return ("plan", PASS) if any(r.get("comparisons_limited") for r in rows) else ("NO", FAIL)
    if any(time_limited(r) for r in rows):  # a time limit stopped some run
        return "limit", NOT_COMPARABLE
    return "NO", FAIL


def time_limited(r: dict[str, Any]) -> bool:
    """Whether a wall clock stopped something in run ``r``'s plan: flagged ``time_limited`` or stopped at a step by
    the time limit; a plain solve (mode ``off``) also whenever it is not ``optimal`` (its stops are on the clock).
    A sharing run says so itself: its engine stops on work, so "feasible" with a proven gap and no flag is the
    same plan on every machine and is compared."""
    return bool(r["limited"] or r.get("stopped_at") or r["status"] == "time_limit"
                or (r.get("mode", "off") == "off" and r["status"] != "optimal"))


def verdict_line(preset: str, verdict: str, rows: list[dict[str, Any]]) -> str:
    """One line per preset saying what its runs show; a time-limited preset names the limit to raise."""
    if verdict != NOT_COMPARABLE:
        return f"{preset}: {verdict}"
    statuses = ", ".join(sorted({r["status"] for r in rows}))
    where = "; ".join(sorted({r["stopped_at"] for r in rows if r.get("stopped_at")}))
    return (f"{preset}: {NOT_COMPARABLE} ({len({r['plan_digest'] for r in rows})} plans in {len(rows)} runs, "
            f"status {statuses}; a time limit stopped a run" + (f", at: {where}" if where else "") + "). Fix: "
            f"rerun with --time-limit S at which every run ends optimal (the longest run here took "
            f"{max(r['seconds'] for r in rows):.0f} s).")


def exit_code(verdicts: list[str]) -> int:
    """1 when any preset failed, 2 when none did but one was not comparable, 0 when every preset passed."""
    return 1 if FAIL in verdicts else 2 if NOT_COMPARABLE in verdicts else 0


def checked(r: dict[str, Any]) -> bool:
    """No failed cost check, and no "optimal"/"feasible" with a failed SLO check."""
    return not r["cost_failed"] and not (r["slo_failed"] and r["status"] in ("optimal", "feasible"))


def bill_text(r: dict[str, Any]) -> str:
    """The bill $/h of a row as the Plan page shows it (cents), with ``h`` for a horizon's mean hour; "—" without."""
    if r.get("bill") is None:
        return "—"
    return f"{r['bill']:,.2f}" + ("h" if r.get("bill_basis") == "horizon" else "")


def print_row(preset: str, r: dict[str, Any], runs: int, same: str, digests: str) -> None:
    ok = checked(r)
    cost = "—" if r["cost"] is None else f"{r['cost']:,.2f}"
    print(f"{preset:<16} {r['mode']:<6} {r['backend']:<7} {runs:>4} {same:>5} {r['status']:<9} {cost:>9} "
          f"{bill_text(r):>10} {'ok' if ok else 'FAILED':<8} {r['returned'] or '—'!s:<10} {r['s_median']:>6.1f}  "
          f"{digests}" + ("" if ok else f"  cost: {r['cost_failed']} slo: {r['slo_failed']}"))
    sys.stdout.flush()


def check_preset(preset: str, args: argparse.Namespace) -> tuple[str, str]:
    """Every run of ``preset`` (each backend, then each extra sharing mode); prints its rows; its verdict
    (``PASS``, ``FAIL`` or ``NOT_COMPARABLE``; a failed cost or SLO check is a ``FAIL`` whatever the digests) and
    the line that says it."""
    backends = args.backends.split(",")
    own: dict[str, list[dict[str, Any]]] = {}
    for i, backend in enumerate(backends):
        own[backend] = [run_child(preset, 1 + (r % 2), "own", i * args.runs + r, backend, args)
                        for r in range(args.runs)]
    every = [r for rows in own.values() for r in rows]
    same, verdict = sameness(every)
    ok = True
    for rows in own.values():
        seconds = sorted(r["seconds"] for r in rows)
        first = {**rows[0], "s_median": seconds[len(seconds) // 2]}
        ok &= all(checked(r) for r in rows)
        print_row(preset, first, len(rows), same, " ".join(dict.fromkeys(r["digest"] for r in rows)))
    for mode in filter(None, args.sharing.split(",")):
        r = run_child(preset, 1, mode, 0, backends[0], args)
        ok &= checked(r)
        print_row(preset, {**r, "s_median": r["seconds"]}, 1, "—", r["digest"])
    verdict = verdict if ok else FAIL
    return verdict, verdict_line(preset, verdict, every)


def main(argv: list[str] | None = None) -> int:
    from planning import api

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", help="comma-separated presets (default: every preset)")
    parser.add_argument("--runs", type=int, default=3, help="runs per backend (workers 1, 2, 1, …)")
    parser.add_argument("--backends", default="process", help="comma-separated: process, ray (every run compared)")
    parser.add_argument("--fresh", action="store_true", help="each run with an empty PLANNING_HOME (no caches)")
    parser.add_argument("--sharing", default="", help="extra sharing modes, one run each, e.g. kvpr,exact")
    parser.add_argument("--time-limit", type=float, default=0.0, metavar="S",
                        help="replace every preset's options.time_limit_s (a limit no run reaches: finished "
                             "solves compared on a busy machine; 0: the preset's own)")
    args = parser.parse_args(argv)
    presets = args.presets.split(",") if args.presets else [r["name"] for r in api.preset_summaries()]
    print(f"{'preset':<16} {'mode':<6} {'backend':<7} {'runs':>4} {'same':>5} {'status':<9} {'cost $/h':>9} "
          f"{'bill $/h':>10} {'checks':<8} {'returned':<10} {'s/run':>6}  digests")
    verdicts = [check_preset(preset, args) for preset in presets]
    print()
    for _verdict, line in verdicts:
        print(line)
    return exit_code([v for v, _ in verdicts])


if __name__ == "__main__":
    raise SystemExit(main())
