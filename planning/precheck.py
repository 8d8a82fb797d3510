"""Infeasible said at once: each model's SLO against the fastest any offered GPU can be, before any library build.

The bound (issue 37 §4)
-----------------------
A serving template of group g = (model, phase) holds the model's L layers in S pipeline stages; stage s runs j_s
consecutive layers on one node of shape k_s and must finish a step within the per-stage budget ``B / S``, where B
is the phase's cycle budget of its SLO (``perf.model.cycle_budget_s``: prefill TTFT / h_p, disaggregated decode
((O − 1)·TPOT − t_KV) / (O·h_d)). A stage's step time in the T̂ tables (``perf/tables.py``) is, at batch b,

    t_s = nf(j_s)·t_full(k_s, b) + (j_s − nf(j_s))·t_slide(k_s, b) + step(k_s) + send(k_s, b)·[S > 1]

with nf(j) the most full-attention layers in any j consecutive ones, and it needs ``t_s ≤ B / S`` and the
memory to fit. Summing over the stages, any template with a positive rate has

    B ≥ Σ_s t_s ≥ F·τ_full + (L − F)·τ_slide + τ_step  =: C

where F = nf(L) (every full layer is in some stage), and τ_full, τ_slide, τ_step are the smallest per-layer and
per-step times over every offered shape, every tensor-parallel split its node allows, and every batch (batch 1
is the fastest); memory and the activation send are left out. C is therefore a lower bound on the cycle of any
template on the offered GPUs, and the SLO it maps to (prefill ``C·h_p``; decode ``(C·h_d·O + t_KV) / (O − 1)``
with the smallest hand-off t_KV over the shapes; ``C·h_d`` when O ≤ 1) is a lower bound on the SLO any plan can
meet. A group whose SLO is below it for every request size of its demand cannot be served: the solve answers
``infeasible`` at once, naming the bound, the fastest offer and the fix, instead of building libraries that hold
no usable template. The aggregated phase (Mélange's continuous batching) and groups with explicit templates (their
throughputs are given, not modelled) are not checked here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from planning.context import EngineContext
from planning.errors import PlanningError
from planning.groups import Group
from planning.perf import Workload
from planning.perf.model import handoff_s
from planning.resolve import ResolvedScenario, resolve_scenario
from planning.result import PlanResult
from planning.scenario import Scenario

CHECKED_PHASES = ("prefill", "decode")
SLO_NAME = {"prefill": ("TTFT", "prefill_ms"), "decode": ("TPOT", "decode_ms")}


@dataclass(frozen=True)
class SloBound:
    """The lowest SLO (ms) any offered template could meet for one group at one request size, and the offered
    shape whose node is fastest per layer (the one the message names)."""

    group: str
    phase: str
    slo_ms: float
    bound_ms: float
    fastest: str
    input_len: float
    output_len: float

    @property
    def refused(self) -> bool:
        return self.slo_ms < self.bound_ms * (1.0 - 1e-9)  # strictly below, beyond float noise


def slo_bound(ctx: EngineContext, resolved: ResolvedScenario, group: Group, input_len: float,
              output_len: float) -> SloBound | None:
    """The SLO lower bound of ``group`` at one request size over the offered shapes (module docstring); None for
    a phase not checked or when nothing is offered."""
    if group.phase not in CHECKED_PHASES or not resolved.shapes or not (group.slo_ms and group.slo_ms > 0):
        return None
    perf = ctx.perf
    spec = resolved.specs[group.model]
    wl = Workload(input_len=input_len, output_len=output_len)
    settings = perf.calibration.settings
    batches = perf._grid(group.phase, wl)  # the tables' own batch grid and node curves (perf/model.py)
    t_full = t_slide = step = handoff = math.inf
    fastest, fastest_cycle = resolved.shapes[0], math.inf
    arch = None
    for shape in resolved.shapes:
        count, _dev, prec, net, arch = perf._node(spec, shape, None)
        if group.phase == "decode":
            handoff = min(handoff, handoff_s(arch, prec, net, input_len, settings))
        for tp in perf.tp_options(spec, count):
            c = perf._node_curves(spec, shape, tp, group.phase, wl, batches)  # the tables read the same
            full, slide = float(np.min(c.t_full)), float(np.min(c.t_slide))
            t_full, t_slide, step = min(t_full, full), min(t_slide, slide), min(step, float(c.step_s))
            cycle = _cycle(arch.full_in_window, arch.layers, full, slide, float(c.step_s))
            if cycle < fastest_cycle:
                fastest, fastest_cycle = shape, cycle
    if arch is None or not math.isfinite(t_full):
        return None
    cycle = _cycle(arch.full_in_window, arch.layers, t_full, t_slide, step)
    if group.phase == "prefill":
        bound_s = cycle * settings.prefill_headroom
    elif output_len <= 1.0:
        bound_s = cycle * settings.decode_headroom
    else:
        bound_s = (cycle * settings.decode_headroom * output_len + handoff) / (output_len - 1.0)
    return SloBound(group.id, group.phase, float(group.slo_ms), bound_s * 1e3, fastest, input_len, output_len)


def _cycle(full_in_window: np.ndarray, layers: int, t_full: float, t_slide: float, step: float) -> float:
    """Σ over all layers of the per-layer time plus one step (a lower bound on any pipeline's cycle)."""
    n_full = float(full_in_window[-1])
    if t_slide > t_full:  # never seen; the bound stays a bound if sliding layers were dearer
        t_slide = t_full
    slide = (layers - n_full) * t_slide if layers > n_full else 0.0  # no sliding layers: their time never counts
    return n_full * t_full + slide + step


def refusals(ctx: EngineContext, resolved: ResolvedScenario) -> list[SloBound]:
    """The groups with demand whose SLO is below the bound at every request size of their demand (each group's
    least demanding size is the one reported). A group with explicit templates is not checked: their
    throughputs are given, not the perf model's."""
    given = {(t.model, t.phase) for t in resolved.scenario.explicit_templates}  # their throughputs are the user's
    out = []
    for g in resolved.groups:
        if (g.model, g.phase) in given:
            continue
        sizes = [(c.input_len, c.output_len) for c in g.classes if c.rate > 0]
        bounds = [b for inp, outp in sizes if (b := slo_bound(ctx, resolved, g, inp, outp)) is not None]
        if bounds and len(bounds) == len(sizes) and all(b.refused for b in bounds):
            out.append(min(bounds, key=lambda b: b.bound_ms))
    return out


def precheck(scenario: Scenario, ctx: EngineContext) -> PlanResult | None:
    """The ``infeasible`` PlanResult when some model's SLO is below what any offered GPU reaches (the cost
    objective: every model must be served), else None (the solve goes on). A few batch-1 step-time curves per
    offered shape, no template library: well under a second for a few models (~0.1 s for one), seconds for
    platform-100's hundred. Nothing is remembered between calls: a caller that already checked says so to the solve
    (``pipeline.Reuse.prechecked``; the CLI checks before ``api.solve``).

    Raises
    ------
    PlanningError
        What ``resolve_scenario`` raises (unknown ids, nothing purchasable), with its fix.
    """
    found = _refused(scenario, ctx)
    return None if found is None else found[0]


def precheck_error(scenario: Scenario, ctx: EngineContext) -> PlanningError | None:
    """:func:`precheck` for callers that return no PlanResult (the timeline): a PlanningError naming the first
    refused SLO's field (``models[i].slo.decode_ms``) whose text is the solve's ``infeasible`` message, with its
    fix; None when the scenario passes.

    Raises
    ------
    PlanningError
        What ``resolve_scenario`` raises (unknown ids, nothing purchasable), with its fix.
    """
    found = _refused(scenario, ctx)
    return None if found is None else PlanningError(found[1], found[0].message)


def _refused(scenario: Scenario, ctx: EngineContext) -> tuple[PlanResult, str] | None:
    """The refusal (the ``infeasible`` PlanResult and the first refused SLO's field), or None."""
    if scenario.objective.kind != "cost":  # the served objective plans the rest; a refused model shows as unserved
        return None
    t0 = time.perf_counter()
    resolved = resolve_scenario(scenario, ctx.catalog)
    refused = refusals(ctx, resolved)
    if not refused:
        return None
    index = {m.id: i for i, m in enumerate(scenario.models)}
    lines, diagnostics = [], []
    for b in refused:
        i = index.get(b.group.split("/", 1)[0], 0)
        fix = meetable_slo(ctx, resolved, b)
        other = None if fix is not None else _other_cause(ctx, resolved, b)
        lines.append(_sentence(b, i, fix, other))
        diagnostics.append(_diagnostic(b, i, fix))
        if other:
            diagnostics.append(other)
    elapsed = time.perf_counter() - t0
    message = "; ".join(lines[:3]) + (f"; and {len(lines) - 3} more" if len(lines) > 3 else "") + "."
    first = refused[0]
    field = f"models[{index.get(first.group.split('/', 1)[0], 0)}].slo.{SLO_NAME[first.phase][1]}"
    return PlanResult(status="infeasible", objective=scenario.objective.kind, cost_per_hour=0.0,
                      provisioning_per_hour=0.0, penalty_per_hour=0.0, served_fraction=0.0, mip_gap=None,
                      timings={"precheck_seconds": elapsed, "total_seconds": elapsed}, scenario=scenario.to_dict(),
                      message=message, diagnostics=tuple(diagnostics)), field


FIX_STEPS = (1.0, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0)  # the suggested SLO: the first of bound × these a template meets


def meetable_slo(ctx: EngineContext, resolved: ResolvedScenario, b: SloBound) -> float | None:
    """The smallest of ``bound × FIX_STEPS`` (up to a tenth of a ms) at which a pipeline of identical offered
    nodes holds the model and meets the SLO (``explain.holdable``: the T̂ tables, nmax, ρ), so the fix works;
    None when none does within twice the bound (memory may bind: the full solve's diagnostics say what)."""
    from planning.explain import holdable

    spec = resolved.specs[b.group.split("/", 1)[0]]
    for f in FIX_STEPS:
        ms = math.ceil(b.bound_ms * f * 10) / 10
        if holdable(ctx, spec, resolved.shapes, b.phase, ms, (b.input_len, b.output_len), resolved.scenario):
            return ms
    return None


def _other_cause(ctx: EngineContext, resolved: ResolvedScenario, b: SloBound) -> str | None:
    """When no template meets even twice the bound: ``explain``'s sentence for the group (the tightest SLO a
    template meets, or the memory that binds and its fix). Slower (a bisection over the tables), and rare."""
    from planning.explain import slo_or_memory

    group = next(g for g in resolved.groups if g.id == b.group)
    spec = resolved.specs[group.model]
    return slo_or_memory(ctx, resolved.scenario, spec, group, resolved.shapes, (b.input_len, b.output_len))


def _sentence(b: SloBound, i: int, fix: float | None, other: str | None = None) -> str:
    """``infeasible: TPOT 1 ms < the 11.4 ms the fastest offer (8xH200) reaches for llama-3-70b …. Fix: …``."""
    name, field = SLO_NAME[b.phase]
    model = b.group.split("/", 1)[0]
    bound = math.ceil(b.bound_ms * 10) / 10  # up to a tenth of a ms: the bound, never below it
    if fix is not None:
        relax = f"relax models[{i}].slo.{field} to ≥ {fix:g} ms (a template meets it)"
    elif other and "Fix: " in other:
        relax = f"relax models[{i}].slo.{field} above {bound:g} ms and {other.split('Fix: ', 1)[1].rstrip('.')}"
    else:
        relax = f"relax models[{i}].slo.{field} above {bound:g} ms"
    return (f"infeasible: {name} {b.slo_ms:g} ms < the {bound:g} ms the fastest offer ({b.fastest}) reaches for "
            f"{model} even at batch 1 (a lower bound: memory, pipelining and queueing only add to it). Fix: {relax}, "
            "or offer a faster GPU")


def _diagnostic(b: SloBound, i: int, fix: float | None) -> str:
    """The group's line in the diagnostics (the words ``explain`` uses for an SLO that binds)."""
    name, field = SLO_NAME[b.phase]
    what = f"{name} ({b.phase})"
    relax = f"relax models[{i}].slo.{field} to ≥ {fix:g} ms" if fix is not None else \
        f"relax models[{i}].slo.{field} above {math.ceil(b.bound_ms * 10) / 10:g} ms"
    return (f"{b.group}: SLO binds — no template meets the {what} SLO of {b.slo_ms:g} ms: even at batch 1, with "
            f"memory and queueing left out, the fastest offered node per layer ({b.fastest}) needs "
            f"{b.bound_ms:.2f} ms (found before any template library was built). Fix: {relax}, or add faster shapes.")
