"""`planning simulate`: check a plan (or a scenario, planned first) with the request-level simulator, or run a
single node closed-loop like a serving benchmark."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from planning.errors import PlanningError
from planning.safeio import json_safe
from planning.simulate.metrics import BenchmarkResult, HeadroomResult, SimResult
from planning.simulate.run import ROUTERS

if TYPE_CHECKING:
    from planning.result import PlanResult
    from planning.scenario import Scenario
    from planning.sharing.result import SharingResult


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` sub-command."""
    p = subparsers.add_parser(
        "simulate", help="simulate a plan's requests (SLO attainment, goodput, latencies) or one node closed-loop",
        description="Discrete-event simulation driven by the planner's perf model. Give a PLAN.json (from "
                    "`planning solve --json`), a scenario file or --preset (planned first); or --model/--gpu with "
                    "--input-len/--output-len/--concurrency for a closed-loop single-node benchmark.")
    p.add_argument("source", nargs="?", help="PLAN.json or a scenario YAML/JSON")
    p.add_argument("--preset", help="a shipped preset scenario (see `planning presets`)")
    p.add_argument("--trace", type=Path, help="trace file (Azure CSV, Mooncake JSONL/CSV, plain CSV), rescaled "
                                              "to each model's planned rate")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply every model's rate (default 1)")
    p.add_argument("--duration", type=float, default=600.0, help="arrival window in seconds (default 600)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--router", choices=ROUTERS, default="proportional", help="how requests spread over instances")
    p.add_argument("--headroom", action="store_true", help="also find the highest demand scale with ≥ 99 %% attainment")
    p.add_argument("--model", help="benchmark mode: model id")
    p.add_argument("--gpu", help="benchmark mode: GPU id")
    p.add_argument("--count", type=int, default=1, help="benchmark mode: GPUs in the node (default 1)")
    p.add_argument("--tp", type=int, default=None, help="benchmark mode: tensor-parallel degree")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp8", "mxfp4"], default=None, help="benchmark mode: dtype")
    p.add_argument("--input-len", type=int, help="benchmark mode: prompt tokens per request")
    p.add_argument("--output-len", type=int, help="benchmark mode: output tokens per request")
    p.add_argument("--concurrency", type=int, help="benchmark mode: concurrent clients")
    p.add_argument("--requests", type=int, default=None, help="benchmark mode: requests (default 10 × concurrency)")
    p.add_argument("--chunk-tokens", type=int, default=None,
                   help="tokens per engine step with chunked prefill (vLLM max_num_batched_tokens; default: a "
                        "plan's aggregated instances take the largest step that meets the TPOT SLO, capped by the "
                        "perf model's engine setting; benchmark mode takes that setting, else 2048)")
    p.add_argument("--max-seqs", type=int, default=None,
                   help="largest decode batch per engine copy (default: the perf model's setting, else 1024)")
    p.add_argument("--scheduling", choices=("chunked", "prefill-first"), default="chunked",
                   help="benchmark mode: chunked prefill (default) or whole prompts as steps of their own that "
                        "stall the decodes (vLLM before 0.6, TGI 2)")
    p.add_argument("--sharing", choices=("kvpr", "exact"), default=None,
                   help="plan a scenario with GPU sharing for its low-rate models first, then simulate the shared "
                        "GPUs request by request and the dedicated plan as usual")
    p.add_argument("--admission", choices=("moore-hodgson", "fcfs"), default="moore-hodgson",
                   help="with --sharing: admission order on a shared GPU (default moore-hodgson, Prism Alg. 2)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _load_plan_or_scenario(path: Path) -> PlanResult | SharingResult | Scenario:
    """A saved plan (a JSON with ``instances`` and ``status``; with shared GPUs a SharingResult), else a Scenario."""
    from planning import api

    if not path.is_file():
        raise PlanningError("source", f"file {str(path)!r} does not exist.", "give a PLAN.json or scenario path.")
    return api.load_any_plan(path) if api.is_plan_json(path) else api.load_scenario(path)


def run(args: argparse.Namespace) -> int:
    """Execute ``planning simulate``; returns the exit code."""
    from planning import api
    from planning.cli import print_json

    if args.model or args.gpu:
        missing = [n for n in ("model", "gpu", "input_len", "output_len", "concurrency") if getattr(args, n) is None]
        if missing:
            raise PlanningError(missing[0].replace("_", "-"), "is required in benchmark mode.",
                                "give --model, --gpu, --input-len, --output-len and --concurrency.")
        bench = api.simulate_benchmark(args.model, args.gpu, count=args.count, tp=args.tp, dtype=args.dtype,
                                       input_len=args.input_len, output_len=args.output_len,
                                       concurrency=args.concurrency, requests=args.requests,
                                       chunk_tokens=args.chunk_tokens, max_seqs=args.max_seqs,
                                       scheduling=args.scheduling)
        if args.json:
            print_json(bench.to_dict())
        else:
            print(format_benchmark(bench))
        return 0
    if args.preset and args.source:
        raise PlanningError("source", "both a file and --preset were given.", "give one of them.")
    if args.preset:
        target: PlanResult | SharingResult | Scenario = api.load_preset_scenario(args.preset)
    elif args.source:
        target = _load_plan_or_scenario(Path(args.source))
    else:
        raise PlanningError("source", "nothing to simulate.", "give PLAN.json, a scenario file, --preset NAME, or "
                                                               "--model/--gpu for a benchmark.")
    from planning.sharing.result import SharingResult

    trace = api.load_trace(args.trace) if args.trace else None
    if args.sharing or isinstance(target, SharingResult):
        return _run_shared(args, target)
    result = api.simulate(target, duration_s=args.duration, rate_scale=args.rate_scale, seed=args.seed,
                          router=args.router, trace=trace, chunk_tokens=args.chunk_tokens, max_seqs=args.max_seqs)
    room = api.simulate_headroom(target, duration_s=args.duration, seed=args.seed, router=args.router, trace=trace,
                                 chunk_tokens=args.chunk_tokens, max_seqs=args.max_seqs) if args.headroom else None
    if args.json:
        payload = result.to_dict()
        if room is not None:
            payload["headroom"] = room.to_dict()
        print_json(json_safe(payload))
    else:
        print(format_result(result, room))
    return 0


def _shared_plan(args: argparse.Namespace, target: PlanResult | SharingResult | Scenario
                 ) -> tuple[SharingResult, Scenario]:
    """The shared plan to simulate and its whole scenario: a saved one as it is, or a scenario planned with
    ``--sharing``."""
    from planning import api
    from planning.scenario import Scenario
    from planning.sharing.result import SharingResult

    if isinstance(target, SharingResult):
        if args.sharing and args.sharing != target.sharing:
            raise PlanningError("--sharing", f"the saved plan was made with sharing {target.sharing!r}, not "
                                f"{args.sharing!r}.", "drop --sharing to simulate the saved plan, or give the "
                                                      "scenario to plan it again.")
        if not target.scenario:
            raise PlanningError("plan", "the saved plan with shared GPUs carries no whole scenario (it was saved "
                                "by an older version).", "plan it again: `planning solve SCENARIO --sharing "
                                                         f"{target.sharing} --json --out plan.json`.")
        return target, Scenario.from_dict(target.scenario)
    if not isinstance(target, Scenario):
        raise PlanningError("--sharing", "needs a scenario or a saved plan with shared GPUs, not a plan without "
                            "sharing.", "give a scenario file or --preset, or drop --sharing.")
    plan = api.solve_shared(target, method=args.sharing)
    if plan.status == "infeasible":
        raise PlanningError("--sharing", "the shared plan is infeasible: " + " ".join(plan.notes),
                            "raise availability or lower the sharing threshold.")
    return plan, target


def _run_shared(args: argparse.Namespace, target: PlanResult | SharingResult | Scenario) -> int:
    """A plan with shared GPUs (saved, or a scenario planned with ``--sharing``): simulate the shared nodes and the
    dedicated plan."""
    from planning import api
    from planning.cli import print_json

    if args.trace or args.headroom:
        raise PlanningError("--sharing", "does not take --trace or --headroom (shared GPUs run Poisson or on/off "
                            "bursts at each model's rate).", "drop --trace/--headroom.")
    plan, scenario = _shared_plan(args, target)
    shared = api.simulate_shared(plan, scenario, duration_s=args.duration, seed=args.seed, admission=args.admission,
                                 rate_scale=args.rate_scale)
    dedicated = (api.simulate(plan.dedicated, duration_s=args.duration, rate_scale=args.rate_scale, seed=args.seed,
                              router=args.router, chunk_tokens=args.chunk_tokens, max_seqs=args.max_seqs)
                 if plan.dedicated is not None and plan.dedicated.instances else None)
    if args.json:
        print_json(json_safe({"sharing": plan.sharing, "cost_per_hour": plan.cost_per_hour, "gpus": plan.n_gpus,
                            "shared": shared.to_dict(),
                            "dedicated": dedicated.to_dict() if dedicated is not None else None}))
        return 0
    lines = [f"Shared plan ({plan.sharing}): ${plan.cost_per_hour:,.2f}/h on {plan.n_gpus} GPUs "
             f"({len(plan.shared_nodes)} shared GPUs for {len(plan.shared_models)} models)",
             f"Shared GPUs ({args.admission} admission, {shared.duration_s:g} s, seed {shared.seed}): "
             f"{shared.requests:,} requests, {shared.attainment:.2%} within SLO, worst model "
             f"{shared.min_attainment:.2%}", "",
             f"{'model':<20} {'GPU':>5} {'node':>4} {'reqs':>6} {'attain':>7} {'TTFT p50/p99 ms':>16} {'TPOT p99 ms':>11}"]
    for m in sorted(shared.models, key=lambda m: (m.attainment, m.model)):
        lines.append(f"{m.model:<20} {m.gpu:>5} {m.node:>4} {m.requests:>6,} {m.attainment:>7.2%} "
                     f"{m.ttft_ms_p50:>7.0f}/{m.ttft_ms_p99:>7.0f} {m.tpot_ms_p99:>11.1f}")
    if dedicated is not None:
        lines += ["", "Dedicated plan of the popular models:", format_result(dedicated)]
    print("\n".join(lines))
    return 0


def format_result(r: SimResult, room: HeadroomResult | None = None) -> str:
    """Human-readable summary of a simulated plan."""
    lines = [f"Simulated {r.requests:,} requests ({r.arrivals}, {r.duration_s:g} s, rate × {r.rate_scale:g}, "
             f"seed {r.seed}, {r.router} router) in {r.wall_s:.1f} s",
             f"SLO attainment {r.attainment:.2%}, goodput {r.goodput_tokens_per_s:,.0f} output tok/s", ""]
    lines.append(f"{'model':<16} {'reqs':>7} {'attain':>7} {'TTFT p50/p90/p99 ms':>24} {'SLO':>6} "
                 f"{'TPOT p50/p90/p99 ms':>22} {'SLO':>5} {'goodput tok/s':>14}")
    for m in r.models:
        lines.append(f"{m.model:<16} {m.requests:>7,} {m.attainment:>7.2%} "
                     f"{m.ttft_ms.p50:>8.0f}/{m.ttft_ms.p90:>7.0f}/{m.ttft_ms.p99:>7.0f} "
                     f"{(m.slo_ttft_ms or float('nan')):>6.0f} "
                     f"{m.tpot_ms.p50:>6.1f}/{m.tpot_ms.p90:>6.1f}/{m.tpot_ms.p99:>6.1f} "
                     f"{(m.slo_tpot_ms or float('nan')):>6.0f} {m.goodput_tokens_per_s:>14,.0f}")
    lines += ["", f"{'instance':<60} {'reqs':>7} {'busy':>6} {'KV mean':>8} {'KV peak':>8} {'batch':>6} {'peak':>5}"]
    for i in r.instances:
        lines.append(f"{i.name:<60} {i.requests:>7,} {i.utilisation:>6.1%} {i.kv_mean:>8.1%} {i.kv_peak:>8.1%} "
                     f"{i.mean_batch:>6.1f} {i.peak_batch:>5}")
    sat = r.saturated()
    if sat:
        lines += ["", "Saturated: " + ", ".join(i.name for i in sat)]
    for b in r.bottlenecks():
        lines.append(f"Below 99 %: {b['model']} ({b['attainment']:.2%}) misses mostly in {b['phase']}; most loaded: "
                     f"{b['instance']} (busy {b['utilisation']:.0%}, KV peak {b['kv_peak']:.0%})")
    if room is not None:
        lines += ["", f"Headroom: attainment stays ≥ {room.target:.0%} up to {room.scale:.2f} × the planned demand"]
    lines += [f"note: {n}" for n in r.notes]
    return "\n".join(lines)


def format_benchmark(b: BenchmarkResult) -> str:
    """Human-readable closed-loop benchmark summary."""
    return "\n".join([
        f"{b.model} on {b.count}x{b.gpu} (tp={b.tp}, {b.dtype}), input {b.input_len}, output {b.output_len}, "
        f"concurrency {b.concurrency}, {b.requests} requests (simulated in {b.wall_s:.2f} s)",
        f"  TTFT       mean {b.ttft_ms_mean:,.1f} ms  p50 {b.ttft_ms_p50:,.1f}  p90 {b.ttft_ms_p90:,.1f}  "
        f"p99 {b.ttft_ms_p99:,.1f}",
        f"  ITL        mean {b.itl_ms_mean:,.2f} ms  p90 {b.itl_ms_p90:,.2f}",
        f"  E2E        mean {b.e2e_latency_ms_mean:,.0f} ms",
        f"  throughput {b.output_tokens_per_s:,.0f} output tok/s, {b.total_tokens_per_s:,.0f} total tok/s, "
        f"{b.requests_per_s:,.2f} req/s",
    ])
