"""The engine limits each plan instance counts on (``result.EnginePlan``), from the T̂ entries its template uses.

A T̂ entry is a rate at an operating point: a batch per engine copy, a step time within the stage's budget and (for
aggregated nodes) a step token budget. A deployment of the plan must run its engines there, or it is not the plan:
an engine that admits every sequence its KV cache holds runs a TPOT-bound decode instance past the batch whose
step fits the SLO; one that sizes its activation workspace for 8,192 tokens holds less KV than the plan counted.
So every instance carries the limits of its entries, which ``planning export`` writes as vLLM flags and the
simulator runs:

- **decode**: every stage runs one micro-batch of m sequences (``sets.common_batch``: the rate the template is
  priced at), S of them in flight, so the instance runs ``batch = S·m`` sequences; it admits at most
  ``batch + kv_sigmas·√batch`` (the KV room its tables keep for the running count's fluctuation, docs/perf-model.md
  Sec. 3c item 7) and a step carries one token per sequence (``--max-num-batched-tokens`` = ``--max-num-seqs``:
  the activation workspace is that of the batch, as the tables count it);
- **aggregated**: each stage's entries run B sequences per copy (``PerfModel.stage_point``), the pipeline the
  smallest stage batch m, ``batch = S·m``; every engine step carries at most T tokens, the smallest T(S, j) of
  its nodes (the largest prompt chunk whose step keeps TPOT / S / ``aggregated_headroom`` on every stage), decodes
  included, which is what holds the batch and the step where the plan has them; each engine admits at most
  ``min(max_num_seqs, T)`` sequences (so ``max_num_seqs`` is that over the instance's engines);
- **prefill**: batches of whole prompts up to the engine's token budget (``max_batched_tokens``, whose activation
  workspace the prefill tables reserve); ``batch`` is the prompts per batch of the first stage's entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from planning.catalog.schema import ModelSpec
from planning.groups import DEFAULT_PREFILL_BUDGET_MS, plan_groups
from planning.perf import PerfModel, Workload
from planning.perf.tables import fluctuation_spread, step_elasticity
from planning.result import EnginePlan, PlanResult, StagePlan
from planning.scenario import Scenario
from planning.templates.sets import DecodePoint, common_batch, mean_sizes


def _slots(batch: float, sigmas: float, elasticity: float) -> int:
    """Sequences an instance running ``batch`` admits: the batch plus the KV room its tables keep,
    ``sigmas · √(batch / (1 − e))`` (``perf.tables.kv_room``; e the step's elasticity in the batch)."""
    spread = float(fluctuation_spread(elasticity))
    return max(1, math.floor(batch + sigmas * math.sqrt(batch * spread) + 1e-9))


def _decode_elasticity(perf: PerfModel, spec: ModelSpec, stages: Sequence[StagePlan], slo_ms: float,
                       wl: Workload, depth: int, tables: np.ndarray, micro: float) -> float:
    """The largest step elasticity among the nodes of a decode pipeline at the common micro-batch ``micro`` (each
    node's share of it per copy), on the grid interval it falls in, as its table entry measured it. ``tables``
    has a row per shape of the pipeline, in sorted order (as :func:`engine_plan` builds them)."""
    worst = 0.0
    index = {sh: k for k, sh in enumerate(sorted({n.shape for st in stages for n in st.nodes}))}
    n_stages = len(stages)
    for st in stages:
        rates = [float(tables[index[n.shape], n_stages - 1, st.layers - 1]) for n in st.nodes]
        total = sum(rates)
        for node, rate in zip(st.nodes, rates, strict=True):
            if total <= 0 or rate <= 0:
                continue
            grid, dp, tau = perf.decode_batch_curves(spec, node.shape, slo_ms, wl, depth)
            b = micro * rate / total / float(dp[n_stages - 1, st.layers - 1])
            row = np.asarray(tau[n_stages - 1, st.layers - 1], dtype=float)
            k = int(np.searchsorted(grid, b - 1e-9))
            if 0 < k < grid.size and np.isfinite(row[k]) and np.isfinite(row[k - 1]):
                worst = max(worst, float(step_elasticity(grid[k - 1:k + 1], row[k - 1:k + 1])[1]))
    return worst


def engine_plan(perf: PerfModel, spec: ModelSpec, stages: Sequence[StagePlan], phase: str, slo_ms: float,
                sizes: tuple[float, float], max_stages: int, ttft_ms: float | None = None) -> EnginePlan | None:
    """The engine limits of one instance of ``stages`` (module docstring); None without a placement or where a
    stage's entry is 0 (a placement the tables cannot run)."""
    if not stages or not all(st.nodes for st in stages):
        return None
    settings = perf.calibration.settings
    n_stages = len(stages)
    depth = max(max_stages, n_stages)
    wl = Workload(input_len=sizes[0], output_len=sizes[1])
    sigmas = float(settings.kv_sigmas)
    if phase == "decode":
        shapes = sorted({n.shape for st in stages for n in st.nodes})
        tables = perf.stage_tables(spec, shapes, "decode", slo_ms, wl, depth)
        layout = json.dumps([{"layers": st.layers, "shapes": [n.shape for n in st.nodes]} for st in stages])
        thr, micro = common_batch(perf, DecodePoint(spec, tuple(shapes), slo_ms, sizes, depth), [layout], tables)
        if thr[0] <= 0 or micro[0] <= 0:
            return None
        batch = n_stages * float(micro[0])
        e = _decode_elasticity(perf, spec, stages, slo_ms, wl, depth, tables, float(micro[0]))
        seqs = _slots(batch, sigmas, e)
        return EnginePlan("decode", round(batch, 3), seqs, seqs, sigmas, round(1e3 * batch / float(thr[0]), 3),
                          round(e, 4))
    points = []
    for st in stages:
        row = [perf.stage_point(spec, n.shape, phase, slo_ms, wl, (n_stages, st.layers),
                                ttft_ms=ttft_ms if phase == "aggregated" else None) for n in st.nodes]
        if any(p is None for p in row):
            return None
        points.append([p for p in row if p is not None])
    step_ms = 1e3 * n_stages * max(p.step_s for row in points for p in row)
    if phase == "aggregated":
        stage_batch = min(sum(p.batch * p.dp for p in row) for row in points)
        batch = n_stages * stage_batch
        tokens = min(p.step_tokens for row in points for p in row)
        e = max(p.elasticity for row in points for p in row)
        schedulers = min(sum(p.dp for p in row) for row in points)  # engine copies of the narrowest stage
        # Every running sequence takes a token of its engine's step, so the step budget T already keeps the step
        # (and the batch) where the plan has it; the sequence cap only says so to the engine (vLLM requires
        # max_num_seqs <= max_num_batched_tokens). A cap at the decode batch would also count the prompts being
        # prefilled, which the plan does not (demystifying: 65 % of llama-3-70b's requests met their SLOs).
        seqs = schedulers * min(int(settings.max_num_seqs), int(tokens))
        return EnginePlan("aggregated", round(batch, 3), seqs, int(tokens), sigmas, round(step_ms, 3), round(e, 4))
    first = sum(p.batch * p.dp for p in points[0])
    return EnginePlan("prefill", round(first, 3), int(settings.max_num_seqs), int(settings.max_batched_tokens), 0.0,
                      round(step_ms, 3))


def with_engine_plans(result: PlanResult, scenario: Scenario, specs: Mapping[str, ModelSpec],
                      perf: PerfModel) -> PlanResult:
    """``result`` with every placed instance's :class:`~planning.result.EnginePlan` (others keep None)."""
    if not result.instances:
        return result
    groups = {(g.model, g.phase): g for g in plan_groups(scenario)}
    instances = []
    for inst in result.instances:
        group = groups.get((inst.model, inst.phase))
        plan = None
        if group is not None and inst.model in specs and inst.stages:
            ttft = float(scenario.model(inst.model).slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
            plan = engine_plan(perf, specs[inst.model], inst.stages, inst.phase, group.slo_ms, mean_sizes(group),
                               scenario.options.max_stages, ttft)
        instances.append(replace(inst, engine=plan))
    return replace(result, instances=tuple(instances))
