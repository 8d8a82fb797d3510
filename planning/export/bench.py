"""The benchmark command that measures one exported instance at the plan's own workload, writing a file that
``planning measurements import`` reads as is (issue 40 §4; docs/measurements.md "Close the loop").

``vllm bench serve`` (vllm/benchmarks/serve.py at the pinned version) with the random dataset at the scenario's mean
prompt and output lengths (``--ignore-eos`` so every request generates them), the instance copy's planned request
rate (its share of the planned load, converted from the group's unit to req/s), the SLOs as ``--goodput``, and
``--metadata`` carrying what no benchmark file says (GPU, count, TP, engine version, the plan instance), so the
result imports without flags.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planning.measurements.schema import MEASURED_BAND
from planning.result import InstancePlan

BENCH_PROMPTS_MIN = 200  # requests of one run: at least this many, and at least two minutes at the planned rate
BENCH_SECONDS = 120.0
BENCH_PROMPTS_MAX = 5000


@dataclass(frozen=True)
class Workload:
    """One model's mean request and SLOs in a scenario."""

    input_len: float
    output_len: float
    ttft_ms: float | None
    tpot_ms: float | None


def workloads(scenario: Mapping[str, Any] | None) -> dict[str, Workload]:
    """Per model id of a plan's stored scenario (``PlanResult.scenario``): its mean lengths and SLOs."""
    out: dict[str, Workload] = {}
    for m in (scenario or {}).get("models", []) or []:
        demand, slo = m.get("demand") or {}, m.get("slo") or {}
        buckets = demand.get("histogram") or []
        if buckets and not demand.get("input_len"):
            total = sum(float(b.get("rate_rps", 0.0)) for b in buckets) or 1.0
            inp = sum(float(b.get("rate_rps", 0.0)) * float(b.get("input_len", 0.0)) for b in buckets) / total
            outp = sum(float(b.get("rate_rps", 0.0)) * float(b.get("output_len", 0.0)) for b in buckets) / total
        else:
            inp, outp = float(demand.get("input_len") or 0.0), float(demand.get("output_len") or 0.0)
        if inp >= 1 and outp >= 1:
            out[str(m.get("id"))] = Workload(inp, outp, slo.get("prefill_ms"), slo.get("decode_ms"))
    return out


def planned_rate(inst: InstancePlan, wl: Workload) -> float:
    """Requests/s one copy of ``inst`` is planned to serve (its capacity when the plan leaves it unloaded).

    A histogram plan (Mélange's request classes) says it directly: ``class_rps`` are the req/s of each class over
    all copies. Its ``throughput`` is not a req/s of the mix (it is the capacity the load fraction is measured
    in), so a command built on it would run an A100 at 343 req/s for a plan that sends it 8."""
    if inst.class_rps:
        return sum(rate for _, _, rate in inst.class_rps) / max(inst.count, 1)
    per_copy = inst.throughput * (inst.load / inst.count if inst.count and inst.load > 0 else 1.0)
    per_request = wl.input_len if inst.phase == "prefill" else wl.output_len if inst.phase == "decode" else 1.0
    return per_copy / max(per_request, 1e-12)


def node_setup(inst: InstancePlan, tp: int | None) -> dict[str, str]:
    """``--metadata`` of an instance on one node shape: GPU, count and TP (empty when it spans several shapes)."""
    if len(inst.usage) != 1 or sum(inst.usage.values()) != 1:
        return {}
    (gpu, count), = inst.gpus.items()
    return {"gpu": str(gpu), "count": str(count), "tp": str(tp or count)}


def bench_command(idx: int, inst: InstancePlan, wl: Workload, model_ref: str, engine_version: str,
                  tp: int | None = None, base_url: str = "http://127.0.0.1:8000") -> str:
    """The ``vllm bench serve`` command measuring one copy of plan instance ``idx`` at its planned workload."""
    rate = planned_rate(inst, wl)
    prompts = int(min(BENCH_PROMPTS_MAX, max(BENCH_PROMPTS_MIN, math.ceil(rate * BENCH_SECONDS))))
    meta = {**node_setup(inst, tp), "engine": "vllm", "engine_version": engine_version, "instance": str(idx)}
    args = ["vllm", "bench", "serve", "--backend", "vllm", "--base-url", base_url, "--model", model_ref,
            "--dataset-name", "random", "--random-input-len", str(round(wl.input_len)), "--random-output-len",
            str(round(wl.output_len)), "--ignore-eos", "--num-prompts", str(prompts), "--request-rate", f"{rate:.4g}",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    goodput = [f"{k}:{v:g}" for k, v in (("ttft", wl.ttft_ms), ("tpot", wl.tpot_ms)) if v]
    if goodput:
        args += ["--goodput", *goodput]
    args += ["--save-result", "--result-filename", f"measured-instance-{idx}.json", "--metadata",
             *[f"{k}={v}" for k, v in meta.items()]]
    return shlex.join(args)


def measured_lines(inst: InstancePlan, provenance: Mapping[str, str]) -> tuple[str, ...]:
    """Header lines of an instance planned on your measurements: the band and each fit with its source files."""
    if inst.provenance != MEASURED_BAND:
        return ()
    nodes = {(n.count, n.gpu) for st in inst.stages for n in st.nodes}
    fits = [v for k, v in provenance.items() if k.startswith(f"{MEASURED_BAND} {inst.model} ")
            and any(f" {c}x{g} " in f"{k} " for c, g in nodes)]
    return (f"perf numbers: {MEASURED_BAND}", *(f"  {f}" for f in fits))


def bench_lines(idx: int, inst: InstancePlan, scenario: Mapping[str, Any] | None, model_ref: str,
                engine_version: str, tps: Sequence[int] = (),
                provenance: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Header lines of a recipe: the band of an instance planned on your measurements (its fits and files), how to
    measure this instance and feed the result back (none without lengths)."""
    measured = measured_lines(inst, provenance or {})
    wl = workloads(scenario).get(inst.model)
    if wl is None:
        return measured
    cmd = bench_command(idx, inst, wl, model_ref, engine_version, tps[0] if len(set(tps)) == 1 else None)
    return (*measured, "measure it once it serves (planned workload; writes a file `planning measurements import` reads as is):",
            f"  {cmd}",
            "  then: planning validate-plan PLAN.json measured-instance-*.json")
