"""CLI: `planning allocate FILE` solves an explicit allocation problem (JSON) and runs the baselines."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``allocate`` sub-command."""
    p = subparsers.add_parser("allocate", help="solve an explicit allocation problem (JSON, see docs/allocation.md)")
    p.add_argument("file", type=Path)
    p.add_argument("--objective", choices=["cost", "served"])
    p.add_argument("--budget", type=float, help="USD per hour")
    p.add_argument("--solver", choices=["highs", "cbc"])
    p.add_argument("--time-limit", type=float)
    p.add_argument("--dump-model", help="write the model (.lp or .mps)")
    p.add_argument("--baselines", action="store_true", help="also run homo, homo-ilp, single-type, memp")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Solve, print a summary or JSON; exit 0 when a plan was found, 1 otherwise."""
    from planning.allocate.io import problem_from_dict, result_to_dict
    from planning.allocate.solve import solve_allocation
    from planning.cli import print_json
    from planning.errors import PlanningError, quote
    from planning.safeio import Limits, load_json_file

    data = load_json_file(args.file, field="FILE", limits=Limits(max_bytes=64_000_000, max_nodes=5_000_000),
                          what="allocation problem (JSON)")
    if not isinstance(data, dict):
        raise PlanningError("FILE", f"must hold a JSON object, got {type(data).__name__}.",
                            'write {"templates": [...], "offers": [...], "classes": [...]} (docs/allocation.md).')
    try:
        problem = problem_from_dict(data)
    except PlanningError:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # wrong types inside the entries
        raise PlanningError("FILE", f"is not a valid allocation problem ({type(exc).__name__}: "
                            f"{quote(str(exc), 160, bare=True)}).",
                            "check the entries' types against docs/allocation.md.") from None
    changes: dict[str, Any] = {}
    for attr, key in (("objective", "objective"), ("budget", "budget_per_hour"), ("solver", "solver"),
                      ("time_limit", "time_limit_s"), ("dump_model", "dump_model")):
        if getattr(args, attr) is not None:
            changes[key] = getattr(args, attr)
    if changes.get("solver") == "cbc" and problem.builder == "matrix":
        changes["builder"] = "pulp"
    problem = replace(problem, **changes)
    result = solve_allocation(problem)
    payload = result_to_dict(result)
    if args.baselines:
        from planning.baselines import run_all_baselines

        payload["baselines"] = [
            {"name": b.name, "cost_per_hour": b.cost_per_hour, "served_fraction": b.served_fraction_min,
             "served_by_group": dict(b.served_fraction), "feasible": b.feasible, "note": b.note}
            for b in run_all_baselines(problem)
        ]
    if args.json:
        print_json(payload)
    else:
        print(f"status {result.status}  cost/h {result.cost_per_hour}  penalty/h {result.penalty_per_hour}  "
              f"alpha {result.alpha}  gap {result.gap}")
        for (t, r), n in sorted(result.counts.items()):
            print(f"  {n:4d} × {t} @ {r}")
        for m in result.messages:
            print(f"  {m}")
        for b in payload.get("baselines", []):
            print(f"  baseline {b['name']}: cost/h {b['cost_per_hour']:.2f} served {100 * b['served_fraction']:.0f} % — {b['note']}")
    return 0 if result.has_plan else 1
