"""Plan a scenario end to end: offers → perf tables → template libraries → allocation ILP → baselines → PlanResult.

Groups and units
----------------
Disaggregated mode (Coral) plans two groups per model: ``{model}/prefill`` (rate in prompt tokens/s, SLO =
prefill latency) and ``{model}/decode`` (rate in output tokens/s, SLO = per-token latency). Aggregated mode
(Mélange) plans one group ``{model}/aggregated`` in requests/s: an instance that reaches T_p prompt tokens/s and
T_d output tokens/s on the same nodes serves ``1 / (I/T_p + O/T_d)`` requests/s of mean size (I, O), i.e. it
time-shares its nodes between the two phases (both under their SLOs).

Workload classes
----------------
A plain demand is one class per group. A request-size histogram gives one class per bucket; a template's
placement is optimised for the group's mean request, and its throughput for bucket q is that same placement
evaluated on the perf tables of bucket q's sizes (min over stages of the stage's summed T̂).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from planning.catalog.schema import Catalog, ModelSpec
from planning.errors import PlanningError, UnknownIdError
from planning.offers import ResolvedOffer, resolve_offers
from planning.result import (
    BaselineSummary,
    CapacityUse,
    CostLine,
    GroupService,
    InstancePlan,
    NodeBox,
    PlanResult,
    StagePlan,
)
from planning.scenario import ModelRequest, Scenario

ProgressFn = Callable[[float, str], None]
DEFAULT_PREFILL_BUDGET_MS = 10_000.0  # aggregated mode without a TTFT target: prefill must still finish in 10 s
MAX_CLASSES_PER_GROUP = 16


class CancelToken(Protocol):
    def is_set(self) -> bool: ...


class Cancelled(Exception):
    """The caller cancelled the solve."""


UNITS = {"prefill": "prompt tok/s", "decode": "output tok/s", "aggregated": "req/s"}


@dataclass(frozen=True)
class WorkClass:
    """One demand class: id, rate in the group's unit, and the mean request sizes it represents."""

    id: str
    rate: float
    input_len: float
    output_len: float


@dataclass(frozen=True)
class Group:
    """One (model, phase) to serve."""

    model: str
    phase: str
    slo_ms: float
    classes: tuple[WorkClass, ...]

    @property
    def id(self) -> str:
        return f"{self.model}/{self.phase}"

    @property
    def unit(self) -> str:
        return UNITS[self.phase]

    @property
    def demand(self) -> float:
        return sum(c.rate for c in self.classes)


@dataclass(frozen=True)
class TemplateRecord:
    """A serving template of one group with its placement and per-class throughputs."""

    id: str
    group: str
    usage: Mapping[str, int]
    throughput: Mapping[str, float]
    stages: tuple[StagePlan, ...]
    homogeneous: bool
    gpu_types: tuple[str, ...]
    provenance: str = "roofline"
    explicit: bool = False


@dataclass
class EngineContext:
    """Loaded, reusable singletons for one solve (catalog, perf model, template cache)."""

    catalog: Catalog
    perf: Any
    cache_dir: Path | None = None
    timings: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------------------
# groups and classes


def _buckets(req: ModelRequest) -> list[tuple[float, float, float]]:
    """(input_len, output_len, rate_rps) per class; histograms merged down to MAX_CLASSES_PER_GROUP buckets."""
    d = req.demand
    if not d.histogram:
        return [(d.input_len, d.output_len, d.rate_rps)]
    buckets = sorted(((b.input_len, b.output_len, b.rate_rps) for b in d.histogram if b.rate_rps > 0),
                     key=lambda b: -b[2])
    if len(buckets) > MAX_CLASSES_PER_GROUP:
        keep, rest = buckets[: MAX_CLASSES_PER_GROUP - 1], buckets[MAX_CLASSES_PER_GROUP - 1:]
        r = sum(b[2] for b in rest)
        keep.append((sum(b[0] * b[2] for b in rest) / r, sum(b[1] * b[2] for b in rest) / r, r))
        buckets = keep
    return buckets


def plan_groups(scenario: Scenario) -> list[Group]:
    """The (model, phase) groups of a scenario with their demand classes (see module docstring)."""
    groups: list[Group] = []
    for req in scenario.models:
        buckets = _buckets(req)
        phases = ("prefill", "decode") if scenario.mode == "disaggregated" else ("aggregated",)
        for phase in phases:
            classes = []
            for i, (inp, out, rps) in enumerate(buckets):
                cid = f"{req.id}/{phase}" if len(buckets) == 1 else f"{req.id}/{phase}/b{i}"
                rate = rps * inp if phase == "prefill" else rps * out if phase == "decode" else rps
                classes.append(WorkClass(cid, rate, inp, out))
            if phase == "prefill":
                slo = float(req.slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
            elif phase == "decode":
                slo = float(req.slo.decode_ms or 0.0)
            else:
                slo = float(req.slo.decode_ms or 0.0)
            groups.append(Group(req.id, phase, slo, tuple(classes)))
    return groups


def resolve_models(scenario: Scenario, catalog: Catalog) -> dict[str, ModelSpec]:
    """Catalog specs of the scenario's models (custom ones from their HF config).

    Raises
    ------
    UnknownIdError
        A model id not in the catalog and without ``custom_config``.
    """
    from planning.catalog.models import model_from_hf_config

    out: dict[str, ModelSpec] = {}
    for i, req in enumerate(scenario.models):
        if req.custom_config is not None:
            out[req.id] = model_from_hf_config(dict(req.custom_config), req.id)
        elif req.id in catalog.models:
            out[req.id] = catalog.models[req.id]
        else:
            raise UnknownIdError(f"models[{i}].id", req.id, catalog.models)
    return out


# --------------------------------------------------------------------------------------------------------------
# template libraries


def _check_cancel(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled by the user")


def stages_from_placement(placement: Sequence[Mapping[str, Any]], node_shapes: Sequence[str] = (),
                          table_row: Callable[[str, int, int], float] | None = None) -> tuple[StagePlan, ...]:
    """StagePlans in pipeline order from ``[{"layers": j, "shapes": [...]}, ...]`` (the library's layout) or
    ``[{"layers": j, "nodes": [k, ...]}, ...]`` where k indexes ``node_shapes``."""
    stages: list[StagePlan] = []
    start = 0
    n_stages = len(placement)
    for st in placement:
        j = int(st["layers"])
        boxes = []
        members = st["shapes"] if "shapes" in st else [node_shapes[int(k)] for k in st["nodes"]]
        for shape in members:
            count, _, gpu = shape.partition("x")
            thr = table_row(shape, n_stages, j) if table_row is not None else 0.0
            boxes.append(NodeBox(shape=shape, gpu=gpu, count=int(count), throughput=float(thr)))
        stages.append(StagePlan(layers=j, layer_start=start, layer_end=start + j, nodes=tuple(boxes)))
        start += j
    return tuple(stages)


def evaluate_stages(stages: Sequence[StagePlan], tables: np.ndarray, shape_index: Mapping[str, int]) -> float:
    """Throughput of a fixed placement on other perf tables: min over stages of the stage's summed T̂_j."""
    s = len(stages)
    if s == 0 or s > tables.shape[1]:
        return 0.0
    worst = float("inf")
    for st in stages:
        total = sum(float(tables[shape_index[b.shape], s - 1, st.layers - 1]) for b in st.nodes)
        worst = min(worst, total)
    return 0.0 if worst == float("inf") else worst


def _explicit_records(scenario: Scenario, groups: Sequence[Group]) -> list[TemplateRecord]:
    by_id = {g.id: g for g in groups}
    class_ids = {c.id: g.id for g in groups for c in g.classes}
    out = []
    for i, t in enumerate(scenario.explicit_templates):
        gid = f"{t.model}/{t.phase}"
        if gid not in by_id:
            raise PlanningError(f"explicit_templates[{i}]", f"group {gid!r} is not planned in this scenario.",
                                f"use a model and phase of: {', '.join(by_id)}.")
        for q in t.throughput:
            if class_ids.get(q) != gid:
                raise PlanningError(f"explicit_templates[{i}].throughput.{q}", "is not a class of this template's group.",
                                    f"use class ids of {gid}: {', '.join(c.id for c in by_id[gid].classes)}.")
        gpus = tuple(sorted({s.partition("x")[2] for s in t.usage}))
        out.append(TemplateRecord(id=t.id, group=gid, usage=dict(t.usage), throughput=dict(t.throughput), stages=(),
                                  homogeneous=len(t.usage) == 1, gpu_types=gpus, provenance="given", explicit=True))
    return out


def _node_mem_gb(catalog: Catalog, shape: str) -> float:
    count, _, gpu = shape.partition("x")
    return catalog.gpus[gpu].memory_gb * int(count)


def _workload(inp: float, out: float) -> Any:
    from planning.perf import Workload

    return Workload(input_len=inp, output_len=out)


def _phase_tables(ctx: EngineContext, spec: ModelSpec, shapes: Sequence[str], phase: str, slo_ms: float,
                  inp: float, out: float, max_stages: int) -> np.ndarray:
    return np.asarray(ctx.perf.stage_tables(spec, list(shapes), phase, slo_ms, _workload(inp, out), max_stages))


def _library_records(ctx: EngineContext, scenario: Scenario, spec: ModelSpec, group: Group, phase: str,
                     slo_ms: float, shapes: Sequence[str], progress: ProgressFn | None,
                     cancel: CancelToken | None) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Placements of one (model, phase, SLO) over all node multisets (cached library) + the mean-size tables."""
    from planning.templates.library import LibraryCache, build_library

    mean_in = sum(c.rate * c.input_len for c in group.classes) / max(group.demand, 1e-12) if group.demand else group.classes[0].input_len
    mean_out = sum(c.rate * c.output_len for c in group.classes) / max(group.demand, 1e-12) if group.demand else group.classes[0].output_len
    opts = scenario.options
    tables = _phase_tables(ctx, spec, shapes, phase, slo_ms, mean_in, mean_out, opts.max_stages)
    frame = build_library(
        shapes=list(shapes), shape_mem_gb=[_node_mem_gb(ctx.catalog, s) for s in shapes], tables=tables,
        weight_gb=spec.weight_bytes() / 1e9, layers=spec.layers, nmax=opts.nmax, rho=opts.rho,
        progress=(lambda done, total: progress(done / max(total, 1), f"{spec.id} {phase}")) if progress else None,
        cancel=(lambda: cancel.is_set()) if cancel is not None else None, workers=opts.workers,
        cache=LibraryCache(ctx.cache_dir) if ctx.cache_dir is not None else None,
    )
    rows = frame.to_dicts()
    for row in rows:
        row["placement"] = json.loads(row.pop("stages_json"))
    return rows, tables


def build_group_templates(ctx: EngineContext, scenario: Scenario, specs: Mapping[str, ModelSpec],
                          groups: Sequence[Group], shapes: Sequence[str], progress: ProgressFn | None = None,
                          cancel: CancelToken | None = None) -> list[TemplateRecord]:
    """Template records of every group (generated libraries + explicit templates)."""
    records: list[TemplateRecord] = _explicit_records(scenario, groups)
    if not scenario.generate_templates:
        return records
    shape_index = {s: i for i, s in enumerate(shapes)}
    n = len(groups)
    for gi, group in enumerate(groups):
        _check_cancel(cancel)

        def sub_progress(f: float, msg: str, gi: int = gi) -> None:
            if progress is not None:
                progress((gi + f) / n, f"templates: {msg}")

        spec = specs[group.model]
        req = scenario.model(group.model)
        if group.phase in ("prefill", "decode"):
            rows, tables = _library_records(ctx, scenario, spec, group, group.phase, group.slo_ms, shapes, sub_progress, cancel)
            for row in rows:
                stages = stages_from_placement(row["placement"], (), _table_lookup(tables, shape_index))
                if len(group.classes) == 1:
                    thr = {group.classes[0].id: float(row["throughput"])}
                else:
                    thr = {}
                    for c in group.classes:
                        t_c = _phase_tables(ctx, spec, shapes, group.phase, group.slo_ms, c.input_len, c.output_len,
                                            scenario.options.max_stages)
                        thr[c.id] = evaluate_stages(stages, t_c, shape_index)
                records.append(_record(row, group, thr, stages, ctx))
        else:  # aggregated: join prefill and decode libraries on the node multiset
            prefill_slo = float(req.slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
            p_rows, _p_tab = _library_records(ctx, scenario, spec, group, "prefill", prefill_slo, shapes,
                                             lambda f, m: sub_progress(f / 2, m), cancel)
            d_rows, d_tab = _library_records(ctx, scenario, spec, group, "decode", group.slo_ms, shapes,
                                             lambda f, m: sub_progress(0.5 + f / 2, m), cancel)
            p_by_id = {r["template_id"]: r for r in p_rows}
            for row in d_rows:
                prow = p_by_id.get(row["template_id"])
                if prow is None:
                    continue
                d_st = stages_from_placement(row["placement"], (), _table_lookup(d_tab, shape_index))
                p_st = stages_from_placement(prow["placement"])
                thr = {}
                for c in group.classes:
                    if len(group.classes) == 1:
                        tp, td = float(prow["throughput"]), float(row["throughput"])
                    else:
                        tp = evaluate_stages(p_st, _phase_tables(ctx, spec, shapes, "prefill", prefill_slo, c.input_len,
                                                                 c.output_len, scenario.options.max_stages), shape_index)
                        td = evaluate_stages(d_st, _phase_tables(ctx, spec, shapes, "decode", group.slo_ms, c.input_len,
                                                                 c.output_len, scenario.options.max_stages), shape_index)
                    thr[c.id] = 0.0 if tp <= 0 or td <= 0 else 1.0 / (c.input_len / tp + c.output_len / td)
                records.append(_record(row, group, thr, d_st, ctx))
    return records


_PROV_RANK = {"measured": 0, "calibrated": 1, "roofline": 2}


def gpu_provenance(ctx: EngineContext, gpu: str) -> tuple[str, float, float]:
    """(provenance, ±prefill band, ±decode band) of the perf numbers for one GPU type."""
    cal = ctx.perf.gpu_calibration(gpu)
    return str(cal.provenance), float(cal.band_prefill), float(cal.band_decode)


def template_provenance(ctx: EngineContext, gpus: Sequence[str]) -> str:
    """The weakest provenance among a template's GPU types (roofline < calibrated < measured)."""
    provs = [gpu_provenance(ctx, g)[0] for g in gpus]
    return max(provs, key=lambda p: _PROV_RANK.get(p, 2)) if provs else "roofline"


def _table_lookup(tables: np.ndarray, shape_index: Mapping[str, int]) -> Callable[[str, int, int], float]:
    def lookup(shape: str, n_stages: int, layers: int) -> float:
        return float(tables[shape_index[shape], n_stages - 1, layers - 1])

    return lookup


def _record(row: Mapping[str, Any], group: Group, thr: Mapping[str, float], stages: tuple[StagePlan, ...],
            ctx: EngineContext) -> TemplateRecord:
    usage = {str(s): int(c) for s, c in zip(row["shapes"], row["counts"], strict=True)}  # homogeneous = one shape
    gpus = tuple(sorted({s.partition("x")[2] for s in usage}))
    provenance = template_provenance(ctx, gpus)
    return TemplateRecord(id=str(row["template_id"]), group=group.id, usage=usage, throughput=dict(thr),
                          stages=stages, homogeneous=len(usage) == 1, gpu_types=gpus, provenance=str(provenance))


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=_json_default)


# --------------------------------------------------------------------------------------------------------------
# allocation and result


def allocation_problem(scenario: Scenario, groups: Sequence[Group], records: Sequence[TemplateRecord],
                       offers: Sequence[ResolvedOffer], *, objective: str | None = None,
                       dump_model: str | None = None) -> Any:
    """The allocation model's explicit inputs (``planning.allocate.AllocationProblem``)."""
    from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass

    templates = tuple(
        TemplateOption(id=r.id if r.explicit else f"{r.group}:{r.id}", group=r.group, usage=r.usage,
                       throughput=r.throughput, homogeneous=r.homogeneous, gpu_types=r.gpu_types)
        for r in records if any(v > 0 for v in r.throughput.values()))
    classes = tuple(WorkloadClass(id=c.id, group=g.id, rate=c.rate) for g in groups for c in g.classes)
    current = {(c.template_id, c.region): c.count for c in scenario.current}
    known = {t.id for t in templates}
    for i, (tid, _region) in enumerate(current):
        if tid not in known:
            raise PlanningError(f"current[{i}].template_id", f"{tid!r} is not a template of this scenario.",
                                "use ids from `planning templates` (\"model/phase:template\").")
    return AllocationProblem(
        templates=templates,
        offers=tuple(Offer(region=o.region, shape=o.shape, price_per_hour=o.price_per_hour, available=o.available)
                     for o in offers),
        classes=classes, current=current, K=scenario.options.K,
        objective=cast(Any, objective or scenario.objective.kind),
        budget_per_hour=scenario.objective.budget_per_hour, solver=cast(Any, scenario.options.solver),
        time_limit_s=scenario.options.time_limit_s, mip_rel_gap=scenario.options.mip_rel_gap,
        dump_model=str(dump_model) if dump_model else None,
    )


def _plan_result(scenario: Scenario, groups: Sequence[Group], records: Sequence[TemplateRecord],
                 offers: Sequence[ResolvedOffer], alloc: Any, baselines: Sequence[BaselineSummary],
                 timings: Mapping[str, float], perf_provenance: Mapping[str, str]) -> PlanResult:
    rec_by_tid = {(r.id if r.explicit else f"{r.group}:{r.id}"): r for r in records}
    offer_by_key = {(o.region, o.shape): o for o in offers}
    group_by_id = {g.id: g for g in groups}
    instances: list[InstancePlan] = []
    lines: list[CostLine] = []
    load: dict[tuple[str, str], float] = {}
    for (cid, tid, region), rate in alloc.assignment.items():
        rec = rec_by_tid[tid]
        t = rec.throughput.get(cid, 0.0)
        if t > 0:
            load[(tid, region)] = load.get((tid, region), 0.0) + rate / t
    for (tid, region), n in sorted(alloc.counts.items()):
        if n <= 0:
            continue
        rec = rec_by_tid[tid]
        group = group_by_id[rec.group]
        price = sum(offer_by_key[(region, s)].price_per_hour * c for s, c in rec.usage.items())
        gpus: dict[str, int] = {}
        for s, c in rec.usage.items():
            cnt, _, gpu = s.partition("x")
            gpus[gpu] = gpus.get(gpu, 0) + int(cnt) * c
        main_thr = max(rec.throughput.values()) if rec.throughput else 0.0
        instances.append(InstancePlan(
            model=group.model, phase=group.phase, template_id=rec.id, region=region, count=int(n), usage=dict(rec.usage),
            gpus=gpus, throughput=main_thr if len(group.classes) > 1 else rec.throughput.get(group.classes[0].id, 0.0),
            throughput_unit=group.unit, load=min(float(n), load.get((tid, region), 0.0)), cost_per_hour=price * n,
            homogeneous=rec.homogeneous, stages=rec.stages, provenance=rec.provenance))
        for s, c in rec.usage.items():
            lines.append(CostLine(group.model, group.phase, region, s, c * int(n),
                                  offer_by_key[(region, s)].price_per_hour * c * int(n)))
    penalty = float(alloc.penalty_per_hour or 0.0)
    if penalty > 0:
        lines.append(CostLine("(all)", "(init penalty)", "(all)", "(all)", 0, penalty, kind="penalty"))
    used: dict[tuple[str, str], int] = {k: int(v) for k, v in alloc.nodes_used.items()}
    capacity = tuple(CapacityUse(o.region, o.shape, o.gpu, used.get((o.region, o.shape), 0), o.available, o.price_per_hour)
                     for o in offers)
    served_rate: dict[str, float] = {}
    for (cid, _tid, _r), rate in alloc.assignment.items():
        served_rate[cid] = served_rate.get(cid, 0.0) + rate
    service = tuple(GroupService(g.model, g.phase, g.demand, sum(min(served_rate.get(c.id, 0.0), c.rate) for c in g.classes), g.unit)
                    for g in groups)
    provisioning = float(alloc.cost_per_hour or 0.0)
    total = provisioning + penalty
    adjusted = tuple(
        BaselineSummary(**{**b.__dict__, "savings_pct": (100.0 * (1 - total / b.cost_per_hour)
                                                          if b.feasible and b.cost_per_hour > 0 and alloc.has_plan else None)})
        for b in baselines)
    diagnostics = [*alloc.messages]
    for d in alloc.diagnostics:
        diagnostics.append(f"{d.group}: at most {d.alone_fraction:.1%} of demand alone, {d.joint_fraction:.1%} jointly"
                           + (f"; binding: {', '.join(d.binding)}" if d.binding else ""))
    counts: dict[str, int] = {}
    for r in records:
        counts[r.group] = counts.get(r.group, 0) + 1
    served_fraction = min((s.fraction for s in service), default=1.0) if alloc.has_plan else 0.0
    return PlanResult(
        status=alloc.status, objective=alloc.objective, cost_per_hour=total, provisioning_per_hour=provisioning,
        penalty_per_hour=penalty, served_fraction=served_fraction, mip_gap=alloc.gap, instances=tuple(instances),
        cost_lines=tuple(lines), capacity=capacity, service=service, baselines=adjusted, timings=dict(timings),
        provenance=dict(perf_provenance), diagnostics=tuple(diagnostics), template_counts=counts,
        scenario=scenario.to_dict(),
        message="" if alloc.has_plan else "No plan: see diagnostics for the best achievable fraction per model.",
    )


def _baselines(problem: Any, scenario: Scenario, groups: Sequence[Group], specs: Mapping[str, ModelSpec],
               catalog: Catalog, cancel: CancelToken | None) -> list[BaselineSummary]:
    from planning.baselines import run_all_baselines

    out = []
    model_size = {g.id: specs[g.model].weight_bytes() for g in groups}
    request_rate = {g.id: scenario.model(g.model).demand.rate_rps for g in groups}
    gpu_memory = {gid: gpu.memory_gb for gid, gpu in catalog.gpus.items()}
    for b in run_all_baselines(problem, model_size=model_size, gpu_memory_gb=gpu_memory, request_rate=request_rate):
        _check_cancel(cancel)
        out.append(BaselineSummary(name=b.name, cost_per_hour=float(b.cost_per_hour) + float(b.penalty_per_hour),
                                   served_fraction=float(b.served_fraction_min), feasible=bool(b.feasible),
                                   served_by_group=dict(b.served_fraction), gpus=dict(b.gpus_used), note=str(b.note)))
    return out


def default_context(cache_dir: Path | None = None) -> EngineContext:
    """Catalog + perf model loaded from the shipped data (and user overrides under PLANNING_HOME)."""
    from planning.catalog import load_catalog
    from planning.perf import PerfModel

    catalog = load_catalog()
    return EngineContext(catalog=catalog, perf=PerfModel(catalog=catalog), cache_dir=cache_dir)


def solve(scenario: Scenario, *, context: EngineContext | None = None, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None, dump_model: str | Path | None = None,
          with_baselines: bool = True) -> PlanResult:
    """Plan ``scenario``: cheapest cluster (or most demand served) with placements and baselines.

    Parameters
    ----------
    scenario:
        A validated Scenario.
    context:
        Loaded catalog/perf model/cache (default: shipped data, cache under PLANNING_HOME).
    progress:
        ``progress(fraction, message)`` called while templates are built and the ILP runs.
    cancel:
        Anything with ``is_set()``; checked between steps → :class:`Cancelled`.
    dump_model:
        Write the allocation model to this ``.lp``/``.mps`` path.

    Returns
    -------
    PlanResult
        Never None: infeasible plans carry a status and diagnostics.

    Raises
    ------
    PlanningError
        Inputs that cannot be planned (unknown ids, nothing purchasable), with the fix.
    Cancelled
        When ``cancel`` is set.
    """
    t0 = time.perf_counter()
    ctx = context or default_context()
    timings: dict[str, float] = {}
    offers = resolve_offers(scenario, ctx.catalog)
    specs = resolve_models(scenario, ctx.catalog)
    groups = plan_groups(scenario)
    shapes = sorted({o.shape for o in offers}, key=lambda s: (s.partition("x")[2], int(s.partition("x")[0])))
    timings["resolve_seconds"] = time.perf_counter() - t0
    if progress:
        progress(0.02, "building serving templates")
    t1 = time.perf_counter()
    records = build_group_templates(ctx, scenario, specs, groups, shapes,
                                    (lambda f, m: progress(0.02 + 0.78 * f, m)) if progress else None, cancel)
    timings["templates_seconds"] = time.perf_counter() - t1
    _check_cancel(cancel)
    if progress:
        progress(0.8, "solving the allocation ILP")
    t2 = time.perf_counter()
    from planning.allocate import solve_allocation

    problem = allocation_problem(scenario, groups, records, offers, dump_model=str(dump_model) if dump_model else None)
    alloc = solve_allocation(problem)
    timings["allocation_seconds"] = time.perf_counter() - t2
    _check_cancel(cancel)
    t3 = time.perf_counter()
    baselines = _baselines(problem, scenario, groups, specs, ctx.catalog, cancel) if with_baselines else []
    timings["baselines_seconds"] = time.perf_counter() - t3
    timings["total_seconds"] = time.perf_counter() - t0
    if progress:
        progress(1.0, "done")
    provenance = {}
    for gpu in sorted({g for r in records if not r.explicit for g in r.gpu_types}):
        prov, band_p, band_d = gpu_provenance(ctx, gpu)
        provenance[gpu] = f"{prov} (±{band_p:.0%} prefill, ±{band_d:.0%} decode)"
    if any(r.explicit for r in records):
        provenance["explicit templates"] = "given in the scenario"
    return _plan_result(scenario, groups, records, offers, alloc, baselines, timings, provenance)
