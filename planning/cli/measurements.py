"""`planning measurements`: import the user's own benchmark files, list them, fit the perf model to them."""

from __future__ import annotations

import argparse
import math
from typing import Any

from planning.measurements.readers import FORMATS, Setup
from planning.measurements.schema import DTYPES, ENGINES


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``measurements`` sub-command and its actions."""
    p = subparsers.add_parser(
        "measurements", help="import your own serving benchmarks (vLLM, GuideLLM, CSV), list them, fit the model",
        description="Your benchmark files, as `vllm bench serve --save-result`, GuideLLM (`guidellm benchmark "
                    "--output-path x.json` up to 0.3, `guidellm run --output kind=json,path=x.json` from 0.8) or a "
                    "plain CSV write them, stored under $PLANNING_HOME/measurements; `fit` corrects the perf model "
                    "for each (model, GPU, count, TP, engine) so the simulator reproduces them "
                    "(docs/measurements.md).")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    imp = sub.add_parser("import", help="read, check and store benchmark files")
    imp.add_argument("files", nargs="+", help="vLLM result JSON, GuideLLM report JSON (`guidellm benchmark` ≤ 0.3, "
                     "`guidellm run` 0.8) or CSV files")
    imp.add_argument("--model", help="catalog model id (when the file names none, or another name)")
    imp.add_argument("--gpu", help="GPU id the run used (no benchmark file says it)")
    imp.add_argument("--count", type=int, help="GPUs in the node (default: --tp)")
    imp.add_argument("--tp", type=int, help="tensor-parallel degree (default: --count)")
    imp.add_argument("--engine", choices=ENGINES, help="serving engine (default vllm)")
    imp.add_argument("--engine-version", help="engine version, e.g. 0.9.2 (sets its default scheduling)")
    imp.add_argument("--dtype", choices=DTYPES, help="weights dtype (default: the model's own)")
    imp.add_argument("--instance", help="the plan instance this run measured (for validate-plan)")
    imp.add_argument("--format", choices=FORMATS, default="auto", help="file format (default: by content)")
    imp.add_argument("--json", action="store_true", help="print JSON")
    imp.set_defaults(func=run_import)
    ls = sub.add_parser("list", help="the stored measurements")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_list)
    fit = sub.add_parser("fit", help="fit the perf model's corrections to the stored measurements")
    fit.add_argument("--no-loo", action="store_true", help="skip the leave-one-out figure (faster)")
    fit.add_argument("--json", action="store_true", help="print JSON")
    fit.set_defaults(func=run_fit)
    wi = sub.add_parser("what-if", help="plan a scenario without and with your measurements; print the plan diff")
    wi.add_argument("scenario", help="scenario YAML/JSON")
    wi.add_argument("--json", action="store_true", help="print JSON")
    wi.set_defaults(func=run_what_if)
    val = subparsers.add_parser(
        "validate-plan", help="measured vs predicted per plan instance; flag the misses and re-plan with them",
        description="Compare the benchmark results of a deployed plan's instances (the `vllm bench serve` command "
                    "in each exported recipe writes them) with the planner's predictions, flag the instances that "
                    "miss, and re-solve the plan's scenario on the perf model corrected by the measurements.")
    val.add_argument("plan", help="PLAN.json (planning solve --json)")
    val.add_argument("results", nargs="+", help="benchmark result files of its instances")
    val.add_argument("--instance", help="the plan instance of results that do not name one")
    val.add_argument("--gpu", help="GPU id, for results that do not say it")
    val.add_argument("--tp", type=int, help="tensor-parallel degree, for results that do not say it")
    val.add_argument("--no-replan", action="store_true", help="only compare; do not re-solve")
    val.add_argument("--json", action="store_true", help="print JSON")
    val.set_defaults(func=run_validate)


def _setup(args: argparse.Namespace) -> Setup:
    return Setup(model=args.model, gpu=args.gpu, count=args.count, tp=args.tp, engine=args.engine,
                 engine_version=args.engine_version, dtype=args.dtype, instance=args.instance)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def run_import(args: argparse.Namespace) -> int:
    """Execute ``planning measurements import``."""
    from planning import api
    from planning.cli import print_json

    rep = api.import_measurements(args.files, _setup(args), fmt=args.format)
    if args.json:
        print_json({"added": rep.added, "total": rep.total, "store": str(rep.store),
                    "points": [m.as_row() for m in rep.points]})
        return 0
    for m in rep.points:
        print(f"  {m.label} [{m.engine} {m.engine_version or '(version unstated)'}, {m.dtype}]: "
              f"TTFT {_fmt(m.ttft_ms_mean)} ms, ITL {_fmt(m.itl_ms_mean)} ms, "
              f"TPOT {_fmt(m.tpot_ms_mean)} ms, {_fmt(m.output_tokens_per_s)} output tok/s")
    print(f"{len(rep.points)} point(s) read, {rep.added} new; {rep.total} stored in {rep.store}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    """Execute ``planning measurements list``."""
    from planning import api
    from planning.cli import print_json

    frame = api.measurements_frame()
    if args.json:
        print_json(frame.to_dict("records"))
        return 0
    if frame.empty:
        print("no measurements stored; import some with `planning measurements import FILE --gpu ...`.")
        return 0
    cols = ["model", "gpu", "count", "tp", "engine", "concurrency", "request_rate", "ttft_ms_mean", "itl_ms_mean",
            "tpot_ms_mean", "output_tokens_per_s", "source", "file"]
    print(frame[cols].to_string(index=False))
    return 0


def run_fit(args: argparse.Namespace) -> int:
    """Execute ``planning measurements fit``."""
    from planning import api
    from planning.cli import print_json

    fits = api.fit_measurements(loo=not args.no_loo, keep=True)  # later solves plan on the trusted ones
    frame = api.fit_frame(fits)
    if args.json:
        print_json({"settings": frame.to_dict("records"), "points": api.points_frame(fits).to_dict("records")})
        return 0
    if frame.empty:
        print("no measurements stored; import some first.")
        return 0
    for row in frame.to_dict("records"):
        loo = row["error_leave_one_out"]
        loo_text = "-" if loo is None else f"{100 * loo:.1f} %"
        print(f"{row['model']} on {row['shape']} TP{row['tp']} ({row['engine']}, {row['points']} point(s)): "
              f"prefill ×{row['prefill_factor']:.3f}, decode ×{row['decode_factor']:.3f}, "
              f"step {row['step_ms_added']:+.2f} ms (fitted: {row['fitted'] or 'none'}); "
              f"median error {100 * row['error_before']:.1f} % → "
              f"{100 * row['error_after']:.1f} % (leave-one-out {loo_text}); "
              f"{'trusted: plans use it' if row['trusted'] else 'not trusted: leave-one-out does not beat the model'}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Execute ``planning validate-plan``."""
    from planning import api
    from planning.cli import print_json

    plan = api.load_plan(args.plan)
    setup = Setup(gpu=args.gpu, tp=args.tp, instance=args.instance)
    report = api.validate_plan(plan, args.results, setup, replan=not args.no_replan)
    diff = api.plan_diff(plan, report.replanned) if report.replanned is not None else None
    if args.json:
        print_json({"instances": report.frame().to_dict("records"), "missing": report.missing,
                    "note": report.note, "diff": None if diff is None else diff.to_dict("records"),
                    "replanned_cost_per_hour": None if report.replanned is None else report.replanned.cost_per_hour})
        return 0
    for c in report.checks:
        flag = "MISSES" if c.misses else "ok"
        print(f"instance {c.instance} ({c.point.model} on {c.point.count}x{c.point.gpu}, {c.point.file}): {flag}; "
              f"TTFT {_fmt(c.ttft_ms[0])} ms measured vs {_fmt(c.ttft_ms[1])} predicted, TPOT "
              f"{_fmt(c.tpot_ms[0])} vs {_fmt(c.tpot_ms[1])} ms, {_fmt(c.output_tokens_per_s[0])} vs "
              f"{_fmt(c.output_tokens_per_s[1])} output tok/s"
              + (f", {100 * c.point.slo_attainment:.1f} % of requests within the SLOs"
                 if c.point.slo_attainment is not None else "") + (f" — {'; '.join(c.reasons)}" if c.reasons else ""))
    print(report.note)
    if diff is not None:
        print(diff.to_string(index=False))
    return 0


def run_what_if(args: argparse.Namespace) -> int:
    """Execute ``planning measurements what-if``."""
    from planning import api
    from planning.cli import print_json

    answer = api.measurements_what_if(api.load_scenario(args.scenario))
    diff = answer.diff()
    lines = api.measured_lines(answer.fits)
    if args.json:
        print_json({"without_cost_per_hour": answer.without.cost_per_hour,
                    "with_cost_per_hour": answer.with_measurements.cost_per_hour, "corrections": lines,
                    "diff": diff.to_dict("records")})
        return 0
    print("\n".join(lines) or "no trusted fit: the plan with your measurements is the plan without them.")
    print(diff.to_string(index=False))
    return 0
