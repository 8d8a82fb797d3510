"""CLI: ``planning export PLAN.json|SCENARIO|--preset NAME --format skypilot|kubernetes|all --out DIR`` (docs/deploy.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from planning import api
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import atomic_write_text


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg, unused-ignore]
    p = sub.add_parser("export", help="write deployable files for a plan (SkyPilot task YAML, Kubernetes manifests)")
    p.add_argument("source", nargs="?", type=Path, help="a plan JSON (from `planning solve --json`) or a scenario file")
    p.add_argument("--preset", help="plan a shipped preset first (see `planning presets`)")
    p.add_argument("--format", choices=("skypilot", "kubernetes", "all"), default="skypilot")
    p.add_argument("--out", type=Path, help="directory to write the files to (printed to stdout when omitted)")
    p.add_argument("--no-alternative", action="store_true",
                   help="do not price the plan that deploys as planned (one more solve) when an instance is exported "
                        "without its planned KV transfer")
    p.add_argument("--simulate", action="store_true",
                   help="simulate the plan and the plan as the files deploy it side by side (SLO attainment and "
                        "goodput of each model whose KV transfer is lost)")
    p.set_defaults(func=_export)


def _plan_from_args(args: argparse.Namespace) -> PlanResult:
    if args.preset and args.source:
        raise PlanningError("source", "both a file and --preset were given.", "give one of them.")
    if args.preset:
        return api.solve(api.load_preset_scenario(args.preset))
    if args.source is None:
        raise PlanningError("source", "no plan or scenario given.", "pass PLAN.json, a scenario file, or --preset NAME.")
    path: Path = args.source
    if not path.is_file():
        raise PlanningError("source", f"{path} is not a file.", "check the path.")
    if api.is_plan_json(path):
        return api.load_plan(path)
    return api.solve(api.load_scenario(path))


def _export(args: argparse.Namespace) -> int:
    plan = _plan_from_args(args)
    if not plan.instances:
        print(f"error: the plan has no instances (status {plan.status}); nothing to deploy.", file=sys.stderr)
        return 1
    files = api.export_plan(plan, args.format)
    for line in api.export_preview(plan, price_alternative=not args.no_alternative,
                                   simulate=args.simulate).lines():
        print(line, file=sys.stderr)  # before any file is written: what differs from the plan and what it costs
    if args.out is None:
        for f in files:
            sys.stdout.write(f"--- # {f.name} ({f.deployable})\n{f.text}")
        return 0
    if args.out.exists() and not args.out.is_dir():
        raise PlanningError("--out", f"{args.out} is a file, not a directory.", "give a directory path.")
    args.out.mkdir(parents=True, exist_ok=True)
    for f in files:
        atomic_write_text(args.out / f.name, f.text)
    manual = sum(f.deployable == "manual" for f in files)
    print(f"wrote {len(files)} file(s) to {args.out}" + (f"; {manual} need manual steps (see their comments)" if manual else ""))
    differ = [f.name for f in files if f.notes]
    if differ:
        print(f"note: {len(differ)} file(s) say so in their headers ('differs from the plan'): "
              f"{', '.join(differ[:4])}{' …' if len(differ) > 4 else ''}", file=sys.stderr)
    return 0
