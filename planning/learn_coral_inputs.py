"""The inputs behind Coral Fig. 1(a)'s check: each stage of the paper's mix as the performance model runs it.

Qwen3-235B's prefill on the paper's mix (3×1xL40S + 3×2xH100) is held by its slowest stage. Per stage this module
restates what the stage tables read there: the prompts of one step, the tokens entering each MoE layer, the expert
time of one layer under the measured fused-MoE kernel (``data/moe_kernels.csv``, docs/perf-model.md Sec. 1b) and
under the roofline term it replaced (perf v4), and which curve was read. The check's sentence is computed from it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from planning.perf.results import Workload
from planning.perf.roofline import moe_roofline_time, resolve_precision


def mix_stages(stages_json: str, model_id: str, slo_ms: float, sizes: tuple[float, float]) -> list[dict[str, Any]]:
    """One row per stage of a placed prefill pipeline (``stages_json`` as the template frame stores it).

    Row keys: ``stage``, ``node`` (shape × replicas), ``layers``, ``tp``, ``prompts a step``, ``tokens a step``,
    ``stage prompt tok/s`` (all its replicas), ``experts ms/layer`` (measured kernel, as it runs), ``roofline
    ms/layer`` (perf v4's term), ``measured ÷ roofline``, ``binds`` ("yes" on the slowest stage), ``kernel`` (the
    curve read, from ``PerfModel.kernel_notes``)."""
    from planning.catalog import load_catalog
    from planning.perf import PerfModel

    perf = PerfModel(load_catalog())
    spec = perf.model(model_id)
    arch = perf._layer_arch(spec)
    wl = Workload(input_len=sizes[0], output_len=sizes[1])
    stages = json.loads(stages_json)
    rows: list[dict[str, Any]] = []
    for i, st in enumerate(stages, start=1):
        shape = str(st["shapes"][0])
        point = perf.stage_point(spec, shape, "prefill", slo_ms, wl, (len(stages), int(st["layers"])))
        if point is None:
            continue
        gpu_id = shape.split("x", 1)[1]
        dev = perf.device(gpu_id)
        prec = resolve_precision(spec, None, perf.gpu(gpu_id))
        tokens = np.array([point.batch * sizes[0]])
        measured = float(dev.moe.seconds(dev, arch, prec, point.tp, tokens)[0]) if dev.moe is not None else float("nan")
        roof = float(moe_roofline_time(dev, arch, prec, point.tp, tokens)[0])
        notes = perf.kernel_notes(model_id, gpu_id, point.tp)
        rows.append({"stage": i, "node": f"{shape} × {len(st['shapes'])}", "layers": int(st["layers"]),
                     "tp": point.tp, "prompts a step": round(point.batch, 2), "tokens a step": int(tokens[0]),
                     "stage prompt tok/s": round(point.throughput * len(st["shapes"])),
                     "experts ms/layer": round(1e3 * measured, 2), "roofline ms/layer": round(1e3 * roof, 2),
                     "measured ÷ roofline": round(measured / roof, 2), "binds": "",
                     "kernel": notes[0] if notes else ""})
    if rows:
        slowest = min(r["stage prompt tok/s"] for r in rows)
        for r in rows:
            r["binds"] = "yes" if r["stage prompt tok/s"] <= slowest * 1.005 else ""
    return rows


def mix_cause(ours: float, paper: float, tolerance: float, rows: list[dict[str, Any]]) -> str:
    """The check's sentence: the disagreement in numbers, then the stages' kernels that make it (computed)."""
    head = f"Disagrees with the paper: {ours:.3f} against {paper:g} ± {tolerance:g}."
    bind = [r for r in rows if r["binds"]]
    l40s = [r for r in rows if "L40S" in r["node"]]
    h100 = [r for r in rows if "H100" in r["node"]]
    if not (bind and l40s and h100):
        return head + " The paper's mix could not be restated stage by stage here."

    def kernel(r: dict[str, Any]) -> str:
        return (f"{r['node']} ({r['layers']} layers, TP {r['tp']}): {r['tokens a step']:,} tokens a step, experts "
                f"{r['experts ms/layer']:.2f} ms a layer, {r['measured ÷ roofline']:.2f}× the roofline")

    slowest = min(r["stage prompt tok/s"] for r in rows)
    l40s_layers = sum(r["layers"] for r in l40s)
    total = sum(r["layers"] for r in rows)
    nearest = min(l40s, key=lambda r: r["stage prompt tok/s"])
    held = ", ".join(sorted({f"{r['node']} ({r['layers']} layers)" for r in bind}))
    return (f"{head} The input that differs, computed stage by stage: Qwen3-235B's experts are vLLM's fused-MoE "
            f"kernels measured on each GPU at this model's own shape, TP and BF16 (read as measured, nothing scaled from another shape), slower than "
            f"perf v4's roofline term on both GPUs: {'; '.join(kernel(r) for r in l40s[-1:] + h100[:1])}. The mix "
            f"is held by its {held} stages at {slowest:,} prompt tok/s: its L40S stages take only {l40s_layers} of "
            f"the {total} layers (the slowest of them, {nearest['node']} with {nearest['layers']} layers, runs "
            f"{nearest['stage prompt tok/s']:,}), so the H100 pairs carry the rest. The H100's kernel also prices "
            "every pure-H100 setup, so it largely cancels in the ratio; the L40S's enters only the mix. Coral "
            "measured its own vLLM runs (kernels, versions and tuning not published), in which the L40S stages "
            "evidently ran nearer the H100's speed than the kernels measured here.")
