"""Determinism and self-checks on every preset (issue 37 §6, §1, §2): prints one row per preset and sharing mode.

Each preset is solved ``--runs`` times (default 3), each run in a fresh process with its own ``PYTHONHASHSEED``
and ``options.workers`` cycling 1, 2, 1, …; the plan's JSON without its wall-clock figures
(``planning.checks.stable_dict``) must be the same bytes every time. Each row also says whether the returned plan
passed its checks: no failed cost check (dearer than an alternative it computed) and no "optimal"/"feasible" with a
failed SLO check. ``--sharing kvpr,exact`` adds one run per preset and sharing mode for the checks.

    python -m benchmarks.check_plans                       # every preset, 3 runs
    python -m benchmarks.check_plans --presets coral-core,long-tail --sharing kvpr,exact

Prints figures; exits 1 when a preset's runs differ or a returned plan fails a cost or SLO check. Runs a time
limit stopped (status not optimal) may differ: the incumbent at a wall-clock deadline depends on the machine's speed;
they are marked "limit", not counted as a failure. A baseline whose ILP stopped at its own 15 s limit carries
``time_limited`` and only its name and that flag enter the digest (``stable_dict``), so such a baseline no longer
makes two runs differ. "plan": the plan is the same bytes, a baseline differs otherwise ($/h: ``cost_per_hour``,
the nodes and the start-up allowance, as the shared plan's total).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

CHILD = r"""
import json, sys
from dataclasses import replace
from planning import api
from planning.checks import stable_dict

name, workers, sharing = sys.argv[1], int(sys.argv[2]), sys.argv[3]
scenario = api.load_preset_scenario(name)
scenario = replace(scenario, options=replace(scenario.options, workers=workers))
mode = sharing if sharing != "own" else scenario.options.sharing
if mode != "off":
    res = api.solve_shared(scenario, method=mode)
    data, cost, status = res.to_dict(), res.cost_per_hour, res.status
else:
    res = api.solve(scenario)
    data, cost, status = res.to_dict(), res.cost_per_hour, res.status  # as the shared plan's: nodes + start-up
(data.get("scenario") or {}).get("options", {}).pop("workers", None)  # the one input that differs on purpose
checks = data.get("checks", [])
bad = [c["name"] for c in checks if c["status"] == "failed" and c["kind"] == "cost"]
slo = [c["name"] for c in checks if c["status"] == "failed" and c["kind"] == "slo"]
plan = {k: v for k, v in data.items() if k not in ("baselines", "checks")}  # the plan without its comparisons
print(json.dumps({"stable": json.dumps(stable_dict(data), sort_keys=True, default=float),
                  "plan": json.dumps(stable_dict(plan), sort_keys=True, default=float), "cost": cost,
                  "status": status, "mode": mode, "cost_failed": bad, "slo_failed": slo,
                  "returned": (data.get("sharing") or {}).get("comparison", {}).get("returned")}))
"""


def run_child(preset: str, workers: int, sharing: str, seed: int) -> dict[str, Any]:
    """One solve in a fresh process; its digest, cost, status and failed checks."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, preset, str(workers), sharing], env=env, check=True,
                         capture_output=True, text=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["digest"] = hashlib.sha256(row.pop("stable").encode()).hexdigest()[:16]
    row["plan_digest"] = hashlib.sha256(row.pop("plan").encode()).hexdigest()[:16]
    row["seconds"] = time.perf_counter() - t0
    return row


def main(argv: list[str] | None = None) -> int:
    from planning import api

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", help="comma-separated presets (default: every preset)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sharing", default="", help="extra sharing modes, one run each, e.g. kvpr,exact")
    args = parser.parse_args(argv)
    presets = args.presets.split(",") if args.presets else [r["name"] for r in api.preset_summaries()]
    ok = True
    print(f"{'preset':<16} {'mode':<6} {'runs':>4} {'same':>5} {'status':<9} {'$/h':>9} {'checks':<8} "
          f"{'returned':<10} {'s/run':>6}  digest")
    for preset in presets:
        rows = [run_child(preset, 1 + (r % 2), "own", r) for r in range(args.runs)]
        rows += [run_child(preset, 1, mode, 0) for mode in filter(None, args.sharing.split(","))]
        own = rows[: args.runs]
        same = len({r["digest"] for r in own}) == 1
        plan_same = len({r["plan_digest"] for r in own}) == 1  # the baselines aside (their ILPs stop at 15 s)
        timed = not plan_same and any(r["status"] != "optimal" for r in own)  # a time limit stopped some run
        ok &= plan_same or timed
        for i, r in enumerate([own[0], *rows[args.runs:]]):
            checked = not r["cost_failed"] and not (r["slo_failed"] and r["status"] in ("optimal", "feasible"))
            ok &= checked
            runs = f"{len(own)}" if i == 0 else "1"
            print(f"{preset:<16} {r['mode']:<6} {runs:>4} {('yes' if same else 'plan' if plan_same else 'limit' if timed else 'NO') if i == 0 else '—':>5} "
                  f"{r['status']:<9} {r['cost']:>9.2f} {'ok' if checked else 'FAILED':<8} {r['returned'] or '—'!s:<10} "
                  f"{r['seconds']:>6.1f}  {r['digest']}" + (f"  cost: {r['cost_failed']} slo: {r['slo_failed']}"
                                                            if not checked else ""))
            sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
