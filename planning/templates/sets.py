"""Columnar serving templates per (model, phase) group: usage and throughput as arrays, placements parsed lazily.

The coral-extended library holds about a million templates; keeping them as arrays (a usage matrix over shapes
and a throughput matrix over the group's demand classes) lets the allocation model and the baselines work on
them without one Python object per template. Placements stay JSON text until an instance is shown.

Two different "one of a kind" columns: ``single_shape`` (one node shape per template, Coral's Homo: each
replica on one config type) and ``single_gpu_type`` (one GPU type, possibly several node sizes of it; the
baselines' templates). :func:`template_costs` prices templates per region; the Templates view and the
allocation's LP reduction both price with it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from planning.catalog.schema import Catalog, ModelSpec, parse_shape, shape_gpu
from planning.context import CancelToken, EngineContext, ProgressFn, check_cancel
from planning.errors import PlanningError
from planning.groups import DEFAULT_PREFILL_BUDGET_MS, Group
from planning.resolve import ResolvedScenario
from planning.result import StagePlan
from planning.scenario import ExplicitTemplate, Scenario
from planning.templates.stages import stages_from_json

_PROV_RANK = {"measured": 0, "calibrated": 1, "given": 0, "roofline": 2}


@dataclass(frozen=True, eq=False)
class TemplateSet:
    """Templates of one group. Row i: ``ids[i]`` uses ``usage[i, k]`` nodes of ``shapes[k]`` and serves
    ``throughput[i, c]`` of class ``group.classes[c]`` (when it serves only that class).

    ``stages_json[i]`` is the placement in pipeline order (``[{"layers": j, "shapes": [...]}]``; empty for
    explicit templates); ``stage_tables`` the mean-request T̂ tables used to label each node's throughput.
    """

    group: Group
    shapes: tuple[str, ...]
    ids: tuple[str, ...]
    usage: np.ndarray
    throughput: np.ndarray
    stages_json: tuple[str, ...]
    provenance: tuple[str, ...]
    explicit: bool = False
    stage_tables: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def key(self, i: int) -> str:
        """Template id used in the allocation model (unique across groups)."""
        return self.ids[i] if self.explicit else f"{self.group.id}:{self.ids[i]}"

    @cached_property
    def row_of(self) -> dict[str, int]:
        return {self.key(i): i for i in range(len(self.ids))}

    @cached_property
    def single_shape(self) -> np.ndarray:
        """One node shape per template (Coral's Homo: each replica on one config type)."""
        return np.asarray((self.usage > 0).sum(axis=1) == 1)

    @cached_property
    def single_gpu_type(self) -> np.ndarray:
        """One GPU type per template (any node sizes of it): the templates single-type baselines may use."""
        return np.asarray(self.n_gpu_types == 1)

    @cached_property
    def n_gpu_types(self) -> np.ndarray:
        """Distinct GPU types per template."""
        gpus = sorted(set(self.shape_gpus))
        of = np.array([gpus.index(g) for g in self.shape_gpus], dtype=np.int64)
        per_type = np.zeros((len(self), len(gpus)), dtype=bool)
        for k, g in enumerate(of):
            per_type[:, g] |= self.usage[:, k] > 0
        return np.asarray(per_type.sum(axis=1), dtype=np.int64)

    @cached_property
    def shape_gpus(self) -> tuple[str, ...]:
        return tuple(shape_gpu(s) for s in self.shapes)

    def usage_dict(self, i: int) -> dict[str, int]:
        return {self.shapes[k]: int(n) for k, n in enumerate(self.usage[i]) if n > 0}

    def gpu_types(self, i: int) -> tuple[str, ...]:
        return tuple(sorted({self.shape_gpus[k] for k in np.flatnonzero(self.usage[i] > 0)}))

    def gpus(self, i: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for shape, n in self.usage_dict(i).items():
            cnt, gpu = parse_shape(shape)
            out[gpu] = out.get(gpu, 0) + cnt * n
        return out

    def throughput_dict(self, i: int) -> dict[str, float]:
        return {c.id: float(self.throughput[i, j]) for j, c in enumerate(self.group.classes)}

    def stages(self, i: int) -> tuple[StagePlan, ...]:
        """Row i's placement as StagePlans, each node labelled with its T̂ from the mean-request tables."""
        return stages_from_json(self.stages_json[i], self.stage_tables, self.shapes)


# ------------------------------------------------------------------------------------------------------------
# building


def gpu_provenance(ctx: EngineContext, gpu: str) -> tuple[str, float, float]:
    """(provenance, ±prefill band, ±decode band) of the perf numbers for one GPU type."""
    cal = ctx.perf.gpu_calibration(gpu)
    return str(cal.provenance), float(cal.band_prefill), float(cal.band_decode)


def _provenance_column(ctx: EngineContext, shapes: Sequence[str], usage: np.ndarray) -> tuple[str, ...]:
    """Weakest provenance among each template's GPU types, vectorized over rows."""
    names = ["measured", "calibrated", "roofline"]
    rank = np.array([_PROV_RANK.get(gpu_provenance(ctx, shape_gpu(s))[0], 2) for s in shapes])
    if usage.size == 0:
        return ()
    worst = np.where(usage > 0, rank[None, :], -1).max(axis=1)
    return tuple(names[int(r)] for r in worst)


def _node_mem_gb(catalog: Catalog, shape: str) -> float:
    count, gpu = parse_shape(shape)
    return catalog.gpus[gpu].memory_gb * count


def _tables(ctx: EngineContext, spec: ModelSpec, shapes: Sequence[str], phase: str, slo_ms: float,
            inp: float, out: float, max_stages: int, ttft_ms: float | None = None) -> np.ndarray:
    from planning.perf import Workload

    return np.asarray(ctx.perf.stage_tables(spec, list(shapes), phase, slo_ms, Workload(input_len=inp, output_len=out),
                                            max_stages, ttft_ms=ttft_ms))


def _mean_sizes(group: Group) -> tuple[float, float]:
    total = group.demand
    if total <= 0:
        return group.classes[0].input_len, group.classes[0].output_len
    return (sum(c.rate * c.input_len for c in group.classes) / total,
            sum(c.rate * c.output_len for c in group.classes) / total)


def _library(ctx: EngineContext, scenario: Scenario, spec: ModelSpec, phase: str, slo_ms: float,
             sizes: tuple[float, float], shapes: Sequence[str], progress: ProgressFn | None,
             cancel: CancelToken | None, ttft_ms: float | None = None) -> tuple[pl.DataFrame, np.ndarray]:
    """Exact placements over all node multisets of one (model, phase, SLO) (Parquet-cached) + its T̂ tables."""
    from planning.templates.library import LibraryCache, build_library

    opts = scenario.options
    tables = _tables(ctx, spec, shapes, phase, slo_ms, sizes[0], sizes[1], opts.max_stages, ttft_ms)
    frame = build_library(
        shapes=list(shapes), shape_mem_gb=[_node_mem_gb(ctx.catalog, s) for s in shapes], tables=tables,
        weight_gb=spec.weight_bytes() / 1e9, layers=spec.layers, nmax=opts.nmax, rho=opts.rho,
        progress=(lambda fraction, count: progress(fraction, f"{spec.id}/{phase} ({count})")) if progress else None,
        cancel=cancel,
        workers=opts.workers or (os.cpu_count() or 1),
        cache=LibraryCache(ctx.cache_dir) if ctx.cache_dir is not None else None,
    )
    return frame, tables


def usage_matrix(frame: pl.DataFrame, shapes: Sequence[str]) -> np.ndarray:
    """(n, K) node counts from the library's parallel ``shapes``/``counts`` list columns."""
    n = frame.height
    usage = np.zeros((n, len(shapes)), dtype=np.int32)
    if n == 0:
        return usage
    index = {s: k for k, s in enumerate(shapes)}
    ex = frame.select(pl.int_range(pl.len()).alias("row"), "shapes", "counts").explode(["shapes", "counts"])
    rows = ex["row"].to_numpy()
    cols = ex["shapes"].replace_strict(index, return_dtype=pl.Int64).to_numpy()
    usage[rows, cols] = ex["counts"].to_numpy()
    return usage


_STAGES_DTYPE = pl.List(pl.Struct({"layers": pl.Int64, "shapes": pl.List(pl.String)}))


def _per_class(stages_json: Sequence[str], class_tables: Sequence[np.ndarray], shapes: Sequence[str]) -> np.ndarray:
    """Throughput of each fixed placement under each class's tables (histogram demand), vectorised.

    Same value as :func:`evaluate_stages` per (template, class): min over stages of the stage's summed T̂_j on
    that class's tables; 0 for an empty placement or one deeper than the tables. The placements are exploded
    once into (template, stage, node) rows; every class is then one gather and two segment reductions.
    """
    n, n_classes = len(stages_json), len(class_tables)
    out = np.zeros((n, n_classes))
    if n == 0 or n_classes == 0:
        return out
    index = {s: k for k, s in enumerate(shapes)}
    parsed = pl.DataFrame({"stages": pl.Series([t or "[]" for t in stages_json], dtype=pl.String).str.json_decode(_STAGES_DTYPE)})
    n_stages = parsed["stages"].list.len().fill_null(0).to_numpy().astype(np.int64)
    st = (parsed.with_columns(pl.int_range(pl.len()).alias("row"), pl.col("stages").list.len().alias("depth"))
          .explode("stages").drop_nulls("stages").unnest("stages")
          .with_columns(pl.int_range(pl.len()).alias("stage")))
    nodes = st.select("stage", "shapes").explode("shapes").drop_nulls("shapes")
    node_stage = nodes["stage"].to_numpy().astype(np.int64)
    node_shape = nodes["shapes"].replace_strict(index, return_dtype=pl.Int64).to_numpy()
    stage_row = st["row"].to_numpy().astype(np.int64)
    stage_depth = st["depth"].to_numpy().astype(np.int64)
    stage_layers = st["layers"].to_numpy().astype(np.int64)
    tables = np.stack([np.asarray(t, dtype=float) for t in class_tables])  # (C, K, S_max, L)
    deep_ok = stage_depth <= tables.shape[2]
    layer_ok = (stage_layers >= 1) & (stage_layers <= tables.shape[3])
    node_depth = np.minimum(stage_depth[node_stage], tables.shape[2]) - 1
    node_layers = np.clip(stage_layers[node_stage], 1, tables.shape[3]) - 1
    gathered = tables[:, node_shape, node_depth, node_layers]  # (C, nodes)
    stage_sum = np.zeros((n_classes, len(stage_row)))
    for c in range(n_classes):
        stage_sum[c] = np.bincount(node_stage, weights=gathered[c], minlength=len(stage_row))
    stage_sum[:, ~(deep_ok & layer_ok)] = 0.0
    has = n_stages > 0
    starts = np.concatenate(([0], np.cumsum(n_stages)[:-1]))[has]
    out[has] = np.minimum.reduceat(stage_sum, starts, axis=1).T
    return out


def _generated_set(ctx: EngineContext, scenario: Scenario, spec: ModelSpec, group: Group, shapes: Sequence[str],
                   progress: ProgressFn | None, cancel: CancelToken | None) -> TemplateSet:
    opts = scenario.options
    sizes = _mean_sizes(group)
    # aggregated: one instance serves whole requests (continuous batching + chunked prefill), T̂ in requests/s
    # from the perf model's serving model under TPOT = the group SLO and the model's TTFT (perf "aggregated" phase).
    ttft = None
    if group.phase == "aggregated":
        ttft = float(scenario.model(group.model).slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
    frame, tables = _library(ctx, scenario, spec, group.phase, group.slo_ms, sizes, shapes, progress, cancel, ttft)
    stages_json = tuple(frame["stages_json"].to_list())
    if len(group.classes) == 1:
        thr = frame["throughput"].to_numpy().reshape(-1, 1)
    else:
        class_tables = [_tables(ctx, spec, shapes, group.phase, group.slo_ms, c.input_len, c.output_len,
                                opts.max_stages, ttft) for c in group.classes]
        thr = _per_class(stages_json, class_tables, shapes)
    usage = usage_matrix(frame, shapes)
    return TemplateSet(group, tuple(shapes), tuple(frame["template_id"].to_list()), usage, thr, stages_json,
                       _provenance_column(ctx, shapes, usage), stage_tables=tables)


def explicit_sets(scenario: Scenario, groups: Sequence[Group]) -> list[TemplateSet]:
    """The scenario's explicit templates, one set per group that has any.

    Raises
    ------
    PlanningError
        A template for a group the scenario does not plan, or a throughput for another group's class.
    """
    by_id = {g.id: g for g in groups}
    rows: dict[str, list[tuple[int, ExplicitTemplate]]] = {}
    for i, t in enumerate(scenario.explicit_templates):
        gid = f"{t.model}/{t.phase}"
        if gid not in by_id:
            raise PlanningError(f"explicit_templates[{i}]", f"group {gid!r} is not planned in this scenario.",
                                f"use a model and phase of: {', '.join(by_id)}.")
        cls = {c.id for c in by_id[gid].classes}
        for q in t.throughput:
            if q not in cls:
                raise PlanningError(f"explicit_templates[{i}].throughput.{q}", "is not a class of this template's group.",
                                    f"use class ids of {gid}: {_class_id_range(by_id[gid])}.")
        rows.setdefault(gid, []).append((i, t))
    out = []
    for gid, items in rows.items():
        group = by_id[gid]
        shapes = tuple(sorted({s for _, t in items for s in t.usage}))
        usage = np.array([[t.usage.get(s, 0) for s in shapes] for _, t in items], dtype=np.int32)
        thr = np.array([[float(t.throughput.get(c.id, 0.0)) for c in group.classes] for _, t in items])
        out.append(TemplateSet(group, shapes, tuple(t.id for _, t in items), usage, thr, tuple("" for _ in items),
                               tuple("given" for _ in items), explicit=True))
    return out


def _class_id_range(group: Group) -> str:
    """The group's class ids for a message: all of them when few, else the first and last (b0 … b{n-1})."""
    ids = [c.id for c in group.classes]
    return ", ".join(ids) if len(ids) <= 4 else f"{ids[0]}, {ids[1]} … {ids[-1]} (histogram entries in the order written)"


def build_template_sets(ctx: EngineContext, resolved: ResolvedScenario, progress: ProgressFn | None = None,
                        cancel: CancelToken | None = None) -> list[TemplateSet]:
    """Template sets of every group: explicit ones + generated libraries (unless ``generate_templates`` is off).

    Raises
    ------
    PlanningError
        Explicit templates for groups the scenario does not plan.
    Cancelled
        When ``cancel`` is set between groups or inside a library build.
    """
    scenario, specs, groups, shapes = resolved.scenario, resolved.specs, resolved.groups, resolved.shapes
    sets = explicit_sets(scenario, groups)
    if not scenario.generate_templates:
        return sets
    n = len(groups)
    for gi, group in enumerate(groups):
        check_cancel(cancel, f"library build: {group.id}")

        def sub(f: float, msg: str, gi: int = gi) -> None:
            if progress is not None:
                progress((gi + f) / n, f"library build: {msg}")

        sets.append(_generated_set(ctx, scenario, specs[group.model], group, shapes, sub, cancel))
    return sets


def template_costs(usage: np.ndarray, prices: np.ndarray) -> np.ndarray:
    """$/h of each template in each region: ``(n, R)`` = Σ_k usage[i, k] · prices[r, k], ``inf`` where a
    template uses a shape the region does not sell (``prices`` is ``(R, K)`` with NaN = not sold)."""
    n, regions = usage.shape[0], prices.shape[0]
    costs = np.full((n, regions), np.inf)
    used = usage > 0
    for r in range(regions):
        sold = ~np.isnan(prices[r])
        ok = ~(used & ~sold[None, :]).any(axis=1)
        costs[ok, r] = usage[ok] @ np.nan_to_num(prices[r])
    return costs
