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

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from planning.perf import PerfModel

_PROV_RANK = {"measured": 0, "calibrated": 1, "given": 0, "roofline": 2}


@dataclass(frozen=True, eq=False)
class TemplateSet:
    """Templates of one group. Row i: ``ids[i]`` uses ``usage[i, k]`` nodes of ``shapes[k]`` and serves
    ``throughput[i, c]`` of class ``group.classes[c]`` (when it serves only that class).

    ``stages_json[i]`` is the placement in pipeline order (``[{"layers": j, "shapes": [...]}]``; empty for
    explicit templates); ``stage_tables`` the mean-request T̂ tables used to label each node's throughput;
    ``notices`` one-line sentences for the plan's diagnostics (a damaged template cache file that was rebuilt).
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
    notices: tuple[str, ...] = ()

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


def gpu_provenance(ctx: EngineContext, gpu: str) -> str:
    """Provenance of the perf numbers for one GPU type: measured, calibrated or roofline (their bands:
    ``PerfModel.kind_bands``)."""
    return str(ctx.perf.gpu_calibration(gpu).provenance)


def _provenance_column(ctx: EngineContext, shapes: Sequence[str], usage: np.ndarray) -> tuple[str, ...]:
    """Weakest provenance among each template's GPU types, vectorized over rows."""
    names = ["measured", "calibrated", "roofline"]
    rank = np.array([_PROV_RANK.get(gpu_provenance(ctx, shape_gpu(s)), 2) for s in shapes])
    if usage.size == 0:
        return ()
    worst = np.where(usage > 0, rank[None, :], -1).max(axis=1)
    return tuple(names[int(r)] for r in worst)


def _node_mem_gb(catalog: Catalog, shape: str) -> float:
    count, gpu = parse_shape(shape)
    return catalog.gpus[gpu].memory_gb * count


@dataclass(frozen=True)
class PerfPoint:
    """Where one group reads the perf model: its model, the candidate shapes, its phase and SLO, the deepest
    pipeline, and (aggregated) the TTFT budget."""

    spec: ModelSpec
    shapes: tuple[str, ...]
    phase: str
    slo_ms: float
    max_stages: int
    ttft_ms: float | None = None


@dataclass(frozen=True)
class DecodePoint:
    """Where a decode group's batch curves are stacked: its model, the shapes (rows of its tables), its SLO, the
    mean request (input, output tokens) and the deepest pipeline."""

    spec: ModelSpec
    shapes: tuple[str, ...]
    slo_ms: float
    sizes: tuple[float, float]
    max_stages: int


def _tables(ctx: EngineContext, point: PerfPoint, inp: float, out: float) -> np.ndarray:
    from planning.perf import Workload

    return np.asarray(ctx.perf.stage_tables(point.spec, list(point.shapes), point.phase, point.slo_ms,
                                            Workload(input_len=inp, output_len=out), point.max_stages,
                                            ttft_ms=point.ttft_ms))


def mean_sizes(group: Group) -> tuple[float, float]:
    total = group.demand
    if total <= 0:
        return group.classes[0].input_len, group.classes[0].output_len
    return (sum(c.rate * c.input_len for c in group.classes) / total,
            sum(c.rate * c.output_len for c in group.classes) / total)


def _library(ctx: EngineContext, scenario: Scenario, point: PerfPoint, sizes: tuple[float, float],
             progress: ProgressFn | None, cancel: CancelToken | None,
             single_shape: bool = False) -> tuple[pl.DataFrame, np.ndarray, tuple[str, ...]]:
    """Exact placements over all node multisets of one (model, phase, SLO) (Parquet-cached), its T̂ tables and the
    cache's notices (a damaged file discarded and rebuilt), each prefixed with the library's model/phase."""
    from planning.templates.library import LibraryCache, LibraryRun, build_library

    opts = scenario.options
    spec, phase, shapes = point.spec, point.phase, point.shapes
    notices: list[str] = []
    tables = _tables(ctx, point, sizes[0], sizes[1])
    run = LibraryRun(
        progress=(lambda fraction, count: progress(fraction, f"{spec.id}/{phase} ({count})")) if progress else None,
        cancel=cancel,
        workers=opts.workers or (os.cpu_count() or 1),
        # the single-shape library is rebuilt each time (cheap; its T̂ tables are the perf model's, memoised)
        cache=LibraryCache(ctx.cache_dir) if ctx.cache_dir is not None and not single_shape else None,
        single_shape=single_shape,
        notice=lambda line: notices.append(f"{spec.id}/{phase}: {line}."),
    )
    frame = build_library(
        shapes=list(shapes), shape_mem_gb=[_node_mem_gb(ctx.catalog, s) for s in shapes], tables=tables,
        weight_gb=spec.weight_bytes() / 1e9, layers=spec.layers, nmax=opts.nmax, rho=opts.rho, run=run,
    )
    return frame, tables, tuple(notices)


def usage_matrix(frame: pl.DataFrame, shapes: Sequence[str]) -> np.ndarray:
    """(n, K) node counts from the library's parallel ``shapes``/``counts`` list columns.

    Read row by row in Python rather than by a polars query: the frames are small (tens of rows) and asked for
    hundreds of times a solve (see :mod:`planning.templates.frame`)."""
    n = frame.height
    usage = np.zeros((n, len(shapes)), dtype=np.int32)
    if n == 0:
        return usage
    index = {s: k for k, s in enumerate(shapes)}
    for row, (names, counts) in enumerate(zip(frame.get_column("shapes").to_list(),
                                              frame.get_column("counts").to_list(), strict=True)):
        for name, count in zip(names, counts, strict=True):
            usage[row, index[name]] = count
    return usage


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
    n_stages, stage_row, stage_depth, stage_layers, node_stage, node_shape = _explode(stages_json, shapes)
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


def _explode(stages_json: Sequence[str], shapes: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Placements as flat arrays: per template its stage count; per stage its template row, depth and layers; per
    node its stage and shape index. Parsed with :mod:`json` row by row (small batches, asked for often: no polars
    query, see :mod:`planning.templates.frame`)."""
    index = {s: k for k, s in enumerate(shapes)}
    n_stages: list[int] = []
    stage_row: list[int] = []
    stage_depth: list[int] = []
    stage_layers: list[int] = []
    node_stage: list[int] = []
    node_shape: list[int] = []
    for row, text in enumerate(stages_json):
        stages = (json.loads(text) if text else None) or []
        n_stages.append(len(stages))
        for stage in stages:
            stage_row.append(row)
            stage_depth.append(len(stages))
            stage_layers.append(int(stage["layers"]))
            names = stage.get("shapes") or ()
            node_stage.extend([len(stage_row) - 1] * len(names))
            node_shape.extend(index[name] for name in names)
    return tuple(np.asarray(v, dtype=np.int64) for v in (n_stages, stage_row, stage_depth, stage_layers,
                                                          node_stage, node_shape))


COMMON_BATCH_CHUNK = 512  # templates per vectorised block of common_batch_throughput (~(nodes x 200) floats each)


def common_batch_throughput(perf: PerfModel, point: DecodePoint, stages_json: Sequence[str], tables: np.ndarray,
                            curves: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Decode throughput of each placement when every stage runs the same micro-batch (tokens/s per template);
    :func:`common_batch` also gives the micro-batch."""
    return common_batch(perf, point, stages_json, tables, curves)[0]


def common_batch(perf: PerfModel, point: DecodePoint, stages_json: Sequence[str], tables: np.ndarray,
                 curves: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(decode throughput, micro-batch) of each placement when every stage runs the same micro-batch: tokens/s per
    template and the sequences m of one micro-batch over a whole stage (split over its nodes by their shares).

    The T̂ tables let each stage pick its own best batch, and a template's throughput is min over stages of the
    summed T̂. A pipeline runs one micro-batch of m sequences through all stages, a stage's nodes taking shares
    w_i = T̂_i / Σ T̂ of it (weighted round-robin; what the simulator runs), so its rate is
    max_m m / max_s max_i τ_i(m · w_i), τ_i the node's step time at that batch (inf where it does not fit or
    misses the per-stage budget). A stage bound by KV at a small batch (2×H100 holding 50 layers of qwen3-32b:
    181 sequences) then caps a faster stage's batch too (1×A100 with 14 layers: 8,963 tok/s at its own 362,
    8,627 at 181). Never above the separable value.
    """

    n = len(stages_json)
    out = np.zeros(n)
    best_m = np.zeros(n)
    if n == 0:
        return out, best_m
    shapes = point.shapes
    bgrid, dp, tau = curves if curves is not None else stacked_batch_curves(perf, point.spec, shapes, point.slo_ms,
                                                                            point.sizes, point.max_stages)
    n_stages, stage_row, stage_depth, stage_layers, node_stage, node_shape = _explode(stages_json, shapes)
    depth_ok = (stage_depth >= 1) & (stage_depth <= tables.shape[1]) & (stage_layers >= 1) & \
        (stage_layers <= tables.shape[2])
    d = np.clip(stage_depth, 1, tables.shape[1]) - 1
    j = np.clip(stage_layers, 1, tables.shape[2]) - 1
    nd, nj = d[node_stage], j[node_stage]
    t_hat = tables[node_shape, nd, nj]
    stage_sum = np.bincount(node_stage, weights=t_hat, minlength=len(stage_row))
    w = np.where(stage_sum[node_stage] > 0, t_hat / np.where(stage_sum[node_stage] > 0, stage_sum[node_stage], 1.0), 0.0)
    node_tau = tau[node_shape, nd, nj]  # (nodes, B)
    node_dp = dp[node_shape, nd, nj]  # data-parallel copies in the node
    feasible = np.isfinite(node_tau)
    node_bmax = np.where(feasible.any(axis=1), bgrid[np.where(feasible, np.arange(bgrid.size), 0).max(axis=1)], 0.0)
    mmax = float(bgrid[-1]) * float(np.max(dp)) * max(1, int(np.bincount(node_stage).max()))
    m_grid = np.unique(np.concatenate([np.round(np.geomspace(1.0, max(mmax, 1.0), 96)),
                                       *(bgrid * k for k in (1, 2, 4, 8))]))
    separable = np.zeros(n)
    has = n_stages > 0
    starts = np.concatenate(([0], np.cumsum(n_stages)[:-1]))
    stage_min = np.minimum.reduceat(np.where(depth_ok, stage_sum, 0.0), starts[has]) if has.any() else np.zeros(0)
    separable[has] = stage_min
    # nodes and stages are laid out template by template: process contiguous blocks of templates
    node_start = np.concatenate(([0], np.cumsum(np.bincount(node_stage, minlength=len(stage_row)))))
    stage_start = np.concatenate(([0], np.cumsum(n_stages)))
    for lo in range(0, n, COMMON_BATCH_CHUNK):
        hi = min(n, lo + COMMON_BATCH_CHUNK)
        s0, s1 = stage_start[lo], stage_start[hi]
        if s1 == s0:
            continue
        n0, n1 = node_start[s0], node_start[s1]
        # The largest common micro-batch, where the first node reaches its largest feasible batch: m / τ(m) grows
        # with m (a decode step's time is affine in the batch), so it is the usual optimum; the grid covers the rest.
        wn, dpn = w[n0:n1], np.maximum(node_dp[n0:n1], 1.0)
        with np.errstate(divide="ignore"):
            cap = np.where(wn > 0, node_bmax[n0:n1] * dpn / np.where(wn > 0, wn, 1.0), np.inf)
        cap_stage = np.minimum.reduceat(cap, node_start[s0:s1] - n0)
        rows = np.arange(lo, hi)
        tmpl_has = n_stages[rows] > 0
        m_star = np.minimum.reduceat(cap_stage, stage_start[rows[tmpl_has]] - s0)  # (templates,)
        m_star = np.where(np.isfinite(m_star), m_star, 1.0)
        tmpl_of_node = np.repeat(np.repeat(np.arange(m_star.size), n_stages[rows[tmpl_has]]),
                                 np.diff(node_start[s0:s1 + 1]))
        b = np.concatenate([m_grid[None, :] * wn[:, None], (m_star[tmpl_of_node] * wn)[:, None]], axis=1) / dpn[:, None]
        b = np.maximum(b, 1.0)
        idx = np.searchsorted(bgrid, b - 1e-9)  # first grid batch >= b; past the last feasible one: inf
        over = idx >= bgrid.size
        hi_i = np.minimum(idx, bgrid.size - 1)
        lo_i = np.maximum(hi_i - 1, 0)
        t_hi = np.take_along_axis(node_tau[n0:n1], hi_i, axis=1)
        t_lo = np.take_along_axis(node_tau[n0:n1], lo_i, axis=1)
        g_hi, g_lo = bgrid[hi_i], bgrid[lo_i]
        frac = np.where(g_hi > g_lo, (b - g_lo) / np.where(g_hi > g_lo, g_hi - g_lo, 1.0), 1.0)
        with np.errstate(invalid="ignore"):
            t = np.where(np.isfinite(t_hi), t_lo + (t_hi - t_lo) * frac, np.inf)  # step time is ~linear in b
        t = np.where(over, np.inf, t)
        t = np.where(w[n0:n1, None] > 0, t, 0.0)  # a node with no share takes no micro-batch
        st_tau = np.maximum.reduceat(t, node_start[s0:s1] - n0, axis=0)  # (stages, M)
        st_tau = np.where(depth_ok[s0:s1, None], st_tau, np.inf)
        pipe = np.maximum.reduceat(st_tau, stage_start[rows[tmpl_has]] - s0, axis=0)  # (templates, M + 1)
        m_all = np.concatenate([np.broadcast_to(m_grid, (m_star.size, m_grid.size)), m_star[:, None]], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            thr = np.where(np.isfinite(pipe) & (pipe > 0), m_all / pipe, 0.0)
        out[rows[tmpl_has]] = thr.max(axis=1)
        best_m[rows[tmpl_has]] = np.take_along_axis(m_all, thr.argmax(axis=1)[:, None], axis=1)[:, 0]
    return np.minimum(out, separable), np.where(out > 0, best_m, 0.0)


def stacked_batch_curves(perf: PerfModel, spec: ModelSpec, shapes: Sequence[str], slo_ms: float,
                         sizes: tuple[float, float],
                         max_stages: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batches (B,), dp (K, S, L), tau (K, S, L, B)) of every shape: ``PerfModel.decode_batch_curves`` stacked."""
    from planning.perf import Workload

    wl = Workload(input_len=sizes[0], output_len=sizes[1])
    return perf.stacked_decode_curves(spec, list(shapes), slo_ms, wl, max_stages)


def common_batch_corrector(perf: PerfModel, spec: ModelSpec, shapes: Sequence[str], slo_ms: float,
                           sizes: tuple[float, float], max_stages: int,
                           tables: np.ndarray) -> Callable[[list[str]], np.ndarray]:
    """``stages_json`` list -> common-batch decode throughput (the on-demand search's ``MultisetSpace.correct``);
    the curves are stacked once."""
    stacked: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def correct(stages_json: list[str]) -> np.ndarray:
        if not stacked:
            stacked.append(stacked_batch_curves(perf, spec, shapes, slo_ms, sizes, max_stages))
        return common_batch_throughput(perf, DecodePoint(spec, tuple(shapes), slo_ms, sizes, max_stages),
                                       stages_json, tables, stacked[0])

    return correct


def _generated_set(ctx: EngineContext, scenario: Scenario, spec: ModelSpec, group: Group, shapes: Sequence[str],
                   progress: ProgressFn | None, cancel: CancelToken | None, single_shape: bool = False) -> TemplateSet:
    opts = scenario.options
    sizes = mean_sizes(group)
    # aggregated: one instance serves whole requests (continuous batching + chunked prefill), T̂ in requests/s
    # from the perf model's serving model under TPOT = the group SLO and the model's TTFT (perf "aggregated" phase).
    ttft = None
    if group.phase == "aggregated":
        ttft = float(scenario.model(group.model).slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
    point = PerfPoint(spec, tuple(shapes), group.phase, group.slo_ms, opts.max_stages, ttft)
    frame, tables, notices = _library(ctx, scenario, point, sizes, progress, cancel, single_shape)
    stages_json = tuple(frame["stages_json"].to_list())
    if len(group.classes) == 1:
        thr = frame["throughput"].to_numpy().reshape(-1, 1)
    else:
        class_tables = [_tables(ctx, point, c.input_len, c.output_len) for c in group.classes]
        thr = _per_class(stages_json, class_tables, shapes)
    if group.phase == "decode" and len(stages_json):
        # One micro-batch size through all stages (docs/perf-model.md Sec. 3c item 9): scale each template's
        # rate by its common-batch / separable ratio at the group's mean request size.
        sep = frame["throughput"].to_numpy()
        common = common_batch_throughput(ctx.perf, DecodePoint(spec, tuple(shapes), group.slo_ms, sizes,
                                                               opts.max_stages), stages_json, tables)
        ratio = np.where(sep > 0, np.minimum(common / np.where(sep > 0, sep, 1.0), 1.0), 1.0)
        thr = thr * ratio[:, None]
    usage = usage_matrix(frame, shapes)
    return TemplateSet(group, tuple(shapes), tuple(frame["template_id"].to_list()), usage, thr, stages_json,
                       _provenance_column(ctx, shapes, usage), stage_tables=tables, notices=notices)


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


def quick_template_sets(ctx: EngineContext, resolved: ResolvedScenario,
                        cancel: CancelToken | None = None) -> list[TemplateSet]:
    """Explicit templates + per group only its single-shape templates (n nodes of one shape): a few dozen rows per
    group instead of the library's thousands, the first plan of an anytime solve on the library path (the plan
    these sets allow is feasible for the full problem: every row is also a library row).

    Raises
    ------
    Cancelled
        When ``cancel`` is set between groups or inside a build.
    """
    scenario, specs, groups, shapes = resolved.scenario, resolved.specs, resolved.groups, resolved.shapes
    sets = explicit_sets(scenario, groups)
    if not scenario.generate_templates:
        return sets
    for group in groups:
        check_cancel(cancel, f"library build: {group.id} (single-shape templates)")
        sets.append(_generated_set(ctx, scenario, specs[group.model], group, shapes, None, cancel, single_shape=True))
    return sets


def additive_cost_bound(ctx: EngineContext, resolved: ResolvedScenario, sets: Sequence[TemplateSet]) -> float:
    """A lower bound on the cost of any plan serving all demand, from the T̂ tables alone (no library needed).

    A template's throughput for class c is at most Σ_{k∈M} v_k(c), v_k(c) = max_S max_j j·T̂_j(k)/L on class c's
    tables (every stage b with j_b layers has T ≤ Σ_{k∈b} T̂_{j_b}(k); summed over stages with weights j_b, L·T ≤
    Σ_k max_j j·T̂_j(k)), and costs Σ_{k∈M} p̂_k with p̂_k the shape's cheapest price (× (1 + K) when nothing runs
    yet). An instance serving rate r_c of class c spends at least r_c / T_c of its capacity, so serving D_c costs at
    least D_c · min_k p̂_k / v_k(c); explicit templates add their own cost / throughput. A demanded group also runs
    at least one instance of its own, so it costs at least the cheapest node. Availability is relaxed.
    −inf when some demanded class has no template that can serve it (no plan, no bound to give)."""
    scenario, shapes = resolved.scenario, resolved.shapes
    factor = 1.0 if scenario.current else 1.0 + scenario.options.K
    prices = resolved.price_matrix(shapes)
    with np.errstate(invalid="ignore"):
        cheapest = np.where(np.isnan(prices), np.inf, factor * np.nan_to_num(prices)).min(axis=0)
    price_of = dict(zip(shapes, cheapest.tolist(), strict=True))
    explicit: dict[str, list[TemplateSet]] = {}
    for ts in sets:
        if ts.explicit:
            explicit.setdefault(ts.group.id, []).append(ts)
    total = 0.0
    one_node = float(cheapest.min()) if cheapest.size else np.inf  # every instance has at least one node
    for group in resolved.groups:
        spec = resolved.specs[group.model]
        group_total = 0.0
        ttft = float(scenario.model(group.model).slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS) \
            if group.phase == "aggregated" else None
        for ci, c in enumerate(group.classes):
            if c.rate <= 0:
                continue
            ratio = np.inf
            if scenario.generate_templates:
                point = PerfPoint(spec, tuple(shapes), group.phase, group.slo_ms, scenario.options.max_stages, ttft)
                tab = _tables(ctx, point, c.input_len, c.output_len)
                L = tab.shape[2]
                v = (tab * np.arange(1, L + 1)).max(axis=2).max(axis=1) / L  # (K,)
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = np.where(v > 0, cheapest / np.where(v > 0, v, 1.0), np.inf)
                ratio = float(r.min()) if r.size else np.inf
            for ts in explicit.get(group.id, []):
                for i in range(len(ts)):
                    thr = float(ts.throughput[i, ci])
                    cost = sum(price_of.get(sh, np.inf) * n for sh, n in ts.usage_dict(i).items())
                    if thr > 0 and np.isfinite(cost):
                        ratio = min(ratio, cost / thr)
            if not np.isfinite(ratio):
                return -np.inf
            group_total += c.rate * ratio
        if group.demand > 0:  # a demanded group runs at least one instance of its own
            group_total = max(group_total, one_node if not explicit.get(group.id) else 0.0)
        total += group_total
    return float(total)


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
