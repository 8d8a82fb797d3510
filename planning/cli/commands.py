"""CLI sub-commands of the planning engine: solve, templates, sweep, validate, presets.

``planning.api`` (pandas, the solvers, the template machinery: most of the CLI's start-up) is imported inside the
commands that use it, so ``planning solve`` answers a scenario the precheck refuses (an SLO no offered GPU reaches,
``planning.precheck``) before importing it (issue 37 §4: ≤ 2 s in a fresh process). ``planning solve`` itself goes
through ``planning.api_measurements.solve_scenario`` (what ``api.solve`` delegates to), never ``planning.api``: a
plan needs none of the face's frames, so a command-line solve loads no pandas (issue 41 §3, the fresh process).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from planning.errors import PlanningError
from planning.parallel import BACKENDS, set_default_backend
from planning.result import PlanResult
from planning.scenario import Objective, Scenario, atomic_write_text, load_scenario


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg, unused-ignore]
    p = sub.add_parser("solve", help="plan a scenario: templates, allocation ILP, baselines")
    scenario_args(p)
    p.add_argument("--objective", choices=("cost", "served"), help="override the scenario's objective")
    p.add_argument("--budget", type=float, metavar="USD", help="$/h budget (implies --objective served)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the PlanResult as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print a Markdown report")
    p.add_argument("--out", type=Path, help="also write the output to this file (atomically)")
    p.add_argument("--dump-model", type=Path, metavar="FILE", help="write the allocation model (.lp or .mps)")
    p.add_argument("--bill", type=Path, metavar="FILE",
                   help="write the year's bill as CSV (month × model × region × kind; scenarios with finance inputs)")
    p.add_argument("--sharing", choices=("off", "kvpr", "exact"),
                   help="pack low-rate models onto shared GPUs (default: the scenario's options.sharing)")
    p.set_defaults(func=_solve)

    p = sub.add_parser("templates", help="build (or load cached) serving-template libraries of a scenario")
    scenario_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--limit", type=int, default=20, help="rows to print per (model, phase) in text mode")
    p.set_defaults(func=_templates)

    p = sub.add_parser("sweep", help="cost of the plan and of every baseline as demand or SLOs scale",
                       description="Solve the scenario at each multiplier (demand × x or SLOs × x) and print the "
                                   "cost of the mixed plan and of each baseline. --backend ray solves the points as "
                                   "Ray tasks (PLANNING_RAY_ADDRESS for an existing cluster).")
    scenario_args(p)
    p.add_argument("--kind", choices=("demand", "slo"), default="demand", help="what the multipliers scale")
    p.add_argument("--values", required=True, metavar="X,X,…", help="multipliers, e.g. 0.5,1,2")
    p.add_argument("--workers", type=int, default=0, help="Ray tasks at a time on a local instance (0: one per core)")
    p.add_argument("--point-limit", type=float, metavar="S", help="time limit per point in seconds (below the "
                   "scenario's own); a point it stops keeps its best plan, shown with its proven gap")
    p.add_argument("--no-baselines", action="store_true", help="the plan's cost only, no baselines")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--out", type=Path, help="also write the output to this file (atomically)")
    p.set_defaults(func=_sweep)

    p = sub.add_parser("validate", help="check a scenario file and print what is wrong and how to fix it")
    scenario_args(p)
    p.set_defaults(func=_validate)

    p = sub.add_parser("presets", help="list the shipped preset scenarios")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_presets)


def scenario_args(p: argparse.ArgumentParser) -> None:
    """The SCENARIO / --preset / --variant arguments every scenario command takes."""
    p.add_argument("scenario", nargs="?", type=Path, help="scenario YAML/JSON file")
    p.add_argument("--preset", help="use a shipped preset instead of a file (see `planning presets`)")
    p.add_argument("--variant", action="append", default=[], metavar="KIND=VALUE",
                   help="a what-if change, repeatable: demand=2[@MODEL], drop-gpu=L40S, drop-region=REGION, "
                        "price=-20, availability=0.5, slo=0.8, budget=100, term=3 (reservation years), interruptions=2 "
                        "(spot rates × 2)")
    p.add_argument("--backend", choices=BACKENDS, help="where library builds, on-demand pricing searches and sweep "
                   "points run: the embedded process pool (default) or Ray (pip install 'planning[ray]'; PLANNING_RAY_ADDRESS for a cluster)")


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario named by a FILE argument or ``--preset`` (exactly one), with any ``--variant`` applied;
    ``--backend`` becomes the process's default backend."""
    if getattr(args, "backend", None):
        set_default_backend(args.backend)
    if args.preset and args.scenario:
        raise PlanningError("scenario", "both a file and --preset were given.", "give one of them.")
    if args.preset:
        from planning.catalog.presets import load_preset

        scenario = Scenario.from_dict(load_preset(args.preset))  # api.load_preset_scenario, without its imports
    elif args.scenario is None:
        raise PlanningError("scenario", "no scenario given.", "pass a file, or --preset NAME (see `planning presets`).")
    else:
        scenario = load_scenario(args.scenario)
    if not args.variant:
        return scenario
    from planning import api

    variants = [api.parse_variant(text) for text in args.variant]
    return api.apply_variants(scenario, variants)


def _emit(text: str, out: Path | None) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if out is not None:
        atomic_write_text(out, text, field="--out")


def _solve(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    if args.budget is not None or args.objective is not None:
        kind = args.objective or ("served" if args.budget is not None else scenario.objective.kind)
        budget = args.budget if args.budget is not None else scenario.objective.budget_per_hour
        scenario = replace(scenario, objective=Objective.from_dict({"kind": kind, "budget_per_hour": budget}, "objective"))
    if (args.sharing or scenario.options.sharing) != "off":
        from planning import api

        shared = api.solve_shared(scenario, method=args.sharing)
        _emit(shared.to_json() if args.json else shared.summary(), args.out)
        return 0 if shared.status in ("optimal", "feasible") else 4 if shared.status == "slo_miss" else 1
    if args.dump_model:  # before the solve: HiGHS crashes the process on a path it cannot write
        from planning.allocate.problem import check_dump_path

        check_dump_path(args.dump_model, "--dump-model")
    result, checked = precheck_first(scenario)
    if result is None:  # api.solve's own part, not planning.api: a solve needs none of its frames (pandas)
        from planning import api_measurements

        result = api_measurements.solve_scenario(scenario, dump_model=args.dump_model, prechecked=checked)
    if args.bill is not None:
        from planning.api_finance import bill_csv

        atomic_write_text(args.bill, bill_csv(result), field="--bill")
    if args.json:
        _emit(result.to_json(), args.out)  # api.result_json
    elif args.markdown:
        _emit(result.to_markdown(), args.out)
    else:
        from planning.report import terminal_summary

        _emit(terminal_summary(result), args.out)  # api.result_summary
    if result.status == "slo_miss":
        return 4  # a plan that fails an SLO check (planning.checks)
    return 0 if result.status in ("optimal", "feasible") or result.instances else 1  # a time-limited plan is a plan


def refused_at_once(scenario: Scenario) -> PlanResult | None:
    """The ``infeasible`` answer of the precheck (:func:`precheck_first`), or None."""
    return precheck_first(scenario)[0]


def precheck_first(scenario: Scenario) -> tuple[PlanResult | None, bool]:
    """The ``infeasible`` answer of the precheck (``planning.precheck``: an SLO below what any offered GPU reaches)
    on the engine context ``api.solve`` would plan on, without importing the solve's machinery (None when the
    scenario passes), and whether it was checked: not when the solve plans on a perf model the user's measurement
    fits correct (``measurements.apply.planned_settings``, the rule ``api.solve`` follows; it runs the precheck on
    that model itself)."""
    from planning.context import engine_context
    from planning.measurements.apply import planned_settings
    from planning.precheck import precheck

    if planned_settings(scenario):
        return None, False  # api_measurements.plan_context corrects the perf model: its precheck is api.solve's own
    return precheck(scenario, engine_context()), True


def _templates(args: argparse.Namespace) -> int:
    from planning import api

    scenario = scenario_from_args(args)
    frame = api.build_templates(scenario)
    if args.json:
        sys.stdout.write(frame.to_json(orient="records", indent=2) + "\n")
        return 0
    for key, sub in frame.groupby(["model", "phase"], sort=True):
        model, phase = str(key[0]), str(key[1])
        n = len(sub)
        top = sub.sort_values("tokens_per_dollar", ascending=False).head(args.limit)
        print(f"\n{model} / {phase}: {n} templates (top {len(top)} by throughput per $)")
        print(top[["template_id", "n_gpus", "throughput", "unit", "cost_per_hour", "region"]].to_string(index=False))
    return 0


def _parse_values(text: str) -> list[float]:
    values = []
    for part in text.split(","):
        try:
            x = float(part)
        except ValueError:
            raise PlanningError("--values", f"{part.strip()[:40]!r} is not a number.", "write e.g. 0.5,1,2.") from None
        if not (0 < x < 1e6):
            raise PlanningError("--values", f"{x:g} is not a positive multiplier below 1e6.", "write e.g. 0.5,1,2.")
        values.append(x)
    if len(values) > 200:
        raise PlanningError("--values", f"{len(values)} points.", "sweep at most 200 points.")
    return values


def _sweep(args: argparse.Namespace) -> int:
    from planning import api

    scenario = scenario_from_args(args)
    if args.workers < 0:
        raise PlanningError("--workers", f"must be ≥ 0, got {args.workers}.", "give 0 (one per core) or more.")
    if args.point_limit is not None and not (0 < args.point_limit < math.inf):
        raise PlanningError("--point-limit", f"must be a positive number of seconds, got {args.point_limit:g}.",
                            "give e.g. --point-limit 30, or leave it out to use the scenario's time limit.")
    options = api.SweepOptions(baselines=not args.no_baselines, point_limit_s=args.point_limit)
    frame = api.sweep(scenario, args.kind, _parse_values(args.values), workers=args.workers, options=options)
    if args.json:
        _emit(frame.to_json(orient="records", indent=2), args.out)
    else:
        table = frame.pivot_table(index="x", columns="method", values="cost_per_hour", aggfunc="first", sort=True)
        notes = api.sweep_notes(frame)
        _emit(f"{scenario.name}: $/h by {args.kind} multiplier (blank: infeasible)\n"
              + table.to_string(float_format=lambda v: f"{v:,.2f}", na_rep="")
              + ("\nnot proven: " + "; ".join(notes) if notes else
                 "\nevery point proven (the plan optimal, each baseline within its gap)"), args.out)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from planning import api

    scenario = scenario_from_args(args)
    warnings = api.validate(scenario)
    print(f"{scenario.name}: valid ({len(scenario.models)} models, mode {scenario.mode}).")
    for w in warnings:
        print(f"warning: {w}")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from planning import api

    rows = api.preset_summaries()
    if args.json:
        from planning.cli import print_json

        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['name']:<16} {row['description']}")
    return 0
