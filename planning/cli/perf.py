"""`planning perf`: whole-model estimate on one node (times, memory fit, best throughputs, provenance)."""

from __future__ import annotations

import argparse
from pathlib import Path

from planning.perf.model import PerfEstimate, PerfModel, ServingPoint
from planning.perf.profiles import load_profiles


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``perf`` sub-command."""
    p = subparsers.add_parser("perf", help="estimate prefill/decode time and throughput of a model on one node",
                              description="Roofline + calibration estimate for a whole model on one node.")
    p.add_argument("--model", required=True, help="model id, e.g. llama-3-8b")
    p.add_argument("--gpu", required=True, help="GPU id, e.g. H100")
    p.add_argument("--count", type=int, default=1, help="GPUs in the node (default 1)")
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel degree (default: all GPUs if valid)")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp8", "mxfp4"], default=None, help="weight dtype")
    p.add_argument("--batch", type=int, default=None,
                   help="requests in the batch for the prefill/decode times (default 1; see the serving block)")
    p.add_argument("--input-len", type=int, required=True, help="prompt tokens per request")
    p.add_argument("--output-len", type=int, default=None, help="output tokens per request (default 0)")
    p.add_argument("--ttft", type=float, default=None,
                   help="TTFT SLO in ms (max prefill tokens/s and the serving operating point)")
    p.add_argument("--tpot", type=float, default=None,
                   help="per-token SLO in ms (max decode tokens/s and the serving operating point)")
    p.add_argument("--profiles", type=Path, default=None, help="measured profile CSV that overrides the model")
    p.add_argument("--scheduling", choices=["chunked", "prefill-first"], default="chunked",
                   help="engine step scheduling of the serving block: chunked prefill (vLLM V1, SGLang, TensorRT-LLM; "
                        "default) or prefill-first (no chunked prefill, e.g. vLLM <= 0.5, TGI 2)")
    p.add_argument("--request-rate", type=float, default=None,
                   help="also report the node at this load (requests/s, Poisson): TTFT under load (the wait for the "
                        "step in progress and the prompts ahead, then the chunked prefill) and TPOT")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``planning perf``; returns the exit code."""
    profiles = load_profiles(args.profiles) if args.profiles else None
    pm = PerfModel(profiles=profiles)
    est = pm.estimate(args.model, args.gpu, args.count, args.tp, args.dtype, batch=args.batch,
                      input_len=args.input_len, output_len=args.output_len, ttft_ms=args.ttft, tpot_ms=args.tpot,
                      scheduling=args.scheduling)
    at_rate = None
    if args.request_rate is not None:
        at_rate = pm.serving(args.model, args.gpu, args.count, est.tp, args.dtype, input_len=args.input_len,
                             output_len=max(args.output_len or 1, 1), scheduling=args.scheduling,
                             request_rate=args.request_rate)
    if args.json:
        from planning.cli import print_json

        data = est.to_dict()
        if args.request_rate is not None:
            data["serving_at_rate"] = at_rate.to_dict() if at_rate is not None else None
        print_json(data)
    else:
        print(format_estimate(est))
        if args.request_rate is not None:
            print(format_at_rate(args.request_rate, at_rate))
    return 0


def format_at_rate(rate: float, sv: ServingPoint | None) -> str:
    """The node at an offered load: TTFT under that load and TPOT, or why there is no steady state."""
    label = f"at {rate:g} req/s"
    if sv is None:
        return (f"  {label:<24}no steady state: the node cannot sustain this rate (the running batch "
                "would outgrow its KV cache or sequence cap, or the prompt work its steps)")
    return (f"  {label:<24}TTFT {sv.ttft_ms:,.0f} ms under load, TPOT {sv.tpot_ms:,.1f} ms; "
            f"{sv.batch} sequences running, memory {sv.memory_gb:.1f} of {sv.capacity_gb:.0f} GB")


def format_estimate(e: PerfEstimate) -> str:
    """Human-readable summary with provenance and ± band per number."""
    def num(key: str, value: float, unit: str) -> str:
        b = e.band[key]
        spread = f"±{100 * b:.0f} %" if b < 1 else f"÷/× {1 + b:.1f}"  # a band is a factor 1 + b either way
        return f"{value:,.1f} {unit}  ({spread}, {e.provenance[key]})"

    m = e.memory
    lines = [
        f"{e.model_id} on {e.count}x{e.gpu_id} (tp={e.tp}, {e.dtype}), batch {e.batch}, "
        f"input {e.input_len}, output {e.output_len}",
        f"  prefill (whole batch)   {num('prefill_ms', e.prefill_ms, 'ms')}",
        f"  decode step (mean)      {num('decode_step_ms', e.decode_step_ms, 'ms')}",
        f"  memory                  {'fits' if e.fits else 'DOES NOT FIT'}: {m.total_gb:.1f} of {m.capacity_gb:.1f} GB "
        f"(weights {m.weights_gb:.1f}, KV {m.kv_cache_gb:.1f}, activations {m.activations_gb:.1f}, "
        f"reserve {m.reserve_gb:.1f}); max decode batch {m.max_decode_batch}",
        f"  max prefill tokens/s    {num('max_prefill_tokens_per_s', e.max_prefill_tokens_per_s, 'tok/s')} "
        f"at batch {e.best_prefill_batch}" + (f" under TTFT {e.ttft_ms:g} ms" if e.ttft_ms else " (no TTFT given)"),
        f"  max decode tokens/s     {num('max_decode_tokens_per_s', e.max_decode_tokens_per_s, 'tok/s')} "
        f"at batch {e.best_decode_batch}" + (f" under TPOT {e.tpot_ms:g} ms" if e.tpot_ms else " (no TPOT given)"),
    ]
    sv = e.serving
    if sv is None:
        lines.append("  serving (aggregated)    none: the model does not fit or no batch meets the SLOs")
    else:
        slo = ", ".join(x for x in (f"TTFT {e.ttft_ms:g} ms" if e.ttft_ms else "",
                                    f"TPOT {e.tpot_ms:g} ms" if e.tpot_ms else "") if x) or "no SLO: peak"
        lines.append(f"  serving (aggregated)    {num('serving', sv.max_output_tokens_per_s, 'output tok/s')}, "
                     f"{sv.max_requests_per_s:,.2f} req/s ({slo})")
        lines.append(f"                          at batch {sv.batch}: TTFT {sv.ttft_ms:,.0f} ms, TPOT {sv.tpot_ms:,.1f} ms, "
                     f"memory {sv.memory_gb:.1f} of {sv.capacity_gb:.0f} GB; limited by {sv.limited_by}")
    lines += [f"  note: {n}" for n in e.notes]
    return "\n".join(lines)
