"""The timeline's template sets generated on demand: columns priced per distinct epoch demand, not full libraries.

A full template library enumerates every placement of every group (coral-extended's llama-3-70b decode alone:
202,080 templates), although an epoch's plan uses a handful. Here each distinct epoch problem (class rates and
availability, ``fanout.epoch_key``; a repeated day has 24) goes through the on-demand engine that
:func:`planning.api.solve` uses for one plan (``planning.allocate.ondemand``: LP column generation priced by a
multiset search, reduced-cost fixing, the ILP; certified over all templates), with ``scenario.current`` empty, so
every instance is priced as new at (1 + K)·p. The columns an epoch's plan uses start the next epoch's column
generation (a warm start: fewer pricing rounds, the same certified answer). The static peak plan's problem
(per class the horizon's maximum rate, the scarcest availability) is solved the same way.

The timeline then plans on the union of these columns (the **pool**): per group, every template of every epoch's
fixing ILP (all columns within the certificate's reduced-cost threshold of that epoch's LP optimum) plus every
single-shape template (the homogeneous baselines' columns, as the library route has them).
Myopic epochs with running instances ν′, the look-ahead horizon MILPs and the static plan are the library route's
models over the pool. What the pool route certifies: with K = 0 (no running-instance discount) each epoch's plan is
the on-demand optimum over all templates; with K > 0 an epoch whose plan is best over all templates at the new
instance price is in the pool, and a plan that keeps running instances keeps pool columns, but a column that is
only best when paired with a running one could be missing, so ``tests/timeline/test_columns.py`` checks on
coral-core that every epoch costs what the library route's costs (it does, to the cent). The offline optimum
(a lower bound for every policy, proven over every template) keeps the library route
(``TimelineOptions.templates``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planning.context import CancelToken, EngineContext, ProgressFn, check_cancel
from planning.groups import Group
from planning.resolve import ResolvedScenario, resolve_scenario
from planning.scenario import Scenario
from planning.templates.sets import TemplateSet


def supported(design: Scenario, ctx: EngineContext) -> bool:
    """Whether the on-demand engine plans this design's epochs (single-class disaggregated cost groups, no
    explicit templates, no spot share cap): ``planning.allocate.pricing.supported``."""
    from planning.allocate.pricing import supported as engine_supported

    return engine_supported(resolve_scenario(replace(design, current=()), ctx.catalog))


SMALL_LIBRARY_MULTISETS = 50_000  # "auto" keeps the library route up to this many multisets of ≤ Nmax nodes


def small_library(design: Scenario, ctx: EngineContext) -> bool:
    """Whether every group's library is small: at most ``SMALL_LIBRARY_MULTISETS`` multisets of ≤ Nmax nodes over
    the offered shapes, C(S + Nmax, Nmax), an upper bound on its templates (coral-core: 18,564, its library builds in
    ~1 s; coral-extended: 230,230, 202,080 templates for llama-3-70b decode)."""
    import math

    shapes = resolve_scenario(replace(design, current=()), ctx.catalog).shapes
    return math.comb(len(shapes) + design.options.nmax, design.options.nmax) <= SMALL_LIBRARY_MULTISETS


@dataclass
class _Pool:
    """Per group id: template id → (shape-aligned usage, throughput, stages, provenance), in first-seen order."""

    shapes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    first: dict[str, TemplateSet] = field(default_factory=dict)
    rows: dict[str, dict[str, tuple[np.ndarray, float, str, str]]] = field(default_factory=dict)

    def add(self, ts: TemplateSet, mask: np.ndarray | None) -> None:
        gid = ts.group.id
        shapes = self.shapes.setdefault(gid, ts.shapes)
        self.first.setdefault(gid, ts)
        mine = self.rows.setdefault(gid, {})
        keep = np.ones(len(ts), dtype=bool) if mask is None else np.asarray(mask, dtype=bool) | ts.single_shape
        col = [ts.shapes.index(s) if s in ts.shapes else -1 for s in shapes]
        if set(ts.shapes) - set(shapes):
            raise ValueError(f"{gid}: an epoch's templates use shapes the first epoch's do not")  # one design
        for i in np.flatnonzero(keep):
            tid = ts.ids[i]
            if tid in mine:
                continue
            usage = np.array([ts.usage[i, k] if k >= 0 else 0 for k in col], dtype=ts.usage.dtype)
            mine[tid] = (usage, float(ts.throughput[i, 0]), ts.stages_json[i], ts.provenance[i])

    def sets(self, groups: Sequence[Group]) -> list[TemplateSet]:
        out = []
        for g in groups:
            ts, rows = self.first[g.id], self.rows[g.id]
            ids = tuple(sorted(rows))  # the library's row order (sorted ids), whatever order the epochs found them
            usage = np.stack([rows[i][0] for i in ids]) if ids else np.zeros((0, len(self.shapes[g.id])), np.int64)
            out.append(TemplateSet(g, self.shapes[g.id], ids, usage,
                                   np.array([[rows[i][1]] for i in ids], dtype=float).reshape(-1, 1),
                                   tuple(rows[i][2] for i in ids), tuple(rows[i][3] for i in ids),
                                   stage_tables=ts.stage_tables))
        return out


def padded_rows(ts: TemplateSet, rows: Sequence[int], nmax: int) -> np.ndarray:
    """Template rows as the multiset search's padded rows (shape indices ascending, padded with len(shapes))."""
    K = len(ts.shapes)
    out = np.full((len(rows), nmax), K, dtype=np.int64)
    for j, i in enumerate(rows):
        r = np.repeat(np.arange(K), ts.usage[i])
        out[j, : r.size] = r
    return out


@dataclass(frozen=True)
class PoolResult:
    """The pool's template sets, and how they were found."""

    sets: list[TemplateSet]
    problems: int  # distinct problems solved (epochs + the static peak)
    certified: int  # of them, certified optimal over all templates
    seconds: float
    templates: int  # rows in the pool (all groups)
    used: dict[str, set[str]] = field(default_factory=dict)  # group id -> template ids some problem's plan uses

    def horizon_rows(self) -> list[np.ndarray]:
        """Per pool set, the rows the look-ahead MILPs plan on: the templates some epoch's certified plan uses,
        plus the single-shape ones (a few per shape). A step's MILP over every pool column was too large to
        solve in the time (coral-extended: more than 16,000 (template, region) pairs within its fixing
        threshold, a child ILP of 1.1 GB for one step)."""
        return [np.array([tid in self.used.get(ts.group.id, set()) for tid in ts.ids], dtype=bool) | ts.single_shape
                for ts in self.sets]


def build_pool(ctx: EngineContext, design: Scenario, groups: Sequence[Group], problems: Sequence[tuple[Scenario,
               Sequence[Group]]], *, progress: ProgressFn | None = None,
               cancel: CancelToken | None = None) -> PoolResult | None:
    """Solve every distinct ``(epoch scenario, epoch groups)`` problem with the on-demand engine (``current``
    ignored), each warm-started with the columns of the plan before, and return the pool over ``groups`` (the
    design groups). None when some problem falls outside the on-demand engine (the caller builds libraries).

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    """
    from planning.allocate.ondemand import solve_on_demand
    from planning.timeline.fanout import epoch_key

    t0 = time.perf_counter()
    nmax = design.options.nmax
    seen: set[tuple[object, ...]] = set()
    todo = []
    for scn, gs in problems:
        key = epoch_key(scn, gs)
        if key not in seen:
            seen.add(key)
            todo.append((scn, gs))
    pool = _Pool()
    warm: dict[str, np.ndarray] = {}
    certified = 0
    plan_ids: dict[str, set[str]] = {}
    resolved_by_avail: dict[tuple[object, ...], ResolvedScenario] = {}
    for n, (scn, gs) in enumerate(todo):
        check_cancel(cancel, "timeline: on-demand columns")
        if progress:
            progress(n / len(todo), f"finding serving setups for demand level {n + 1} of {len(todo)}")
        avail = tuple(scn.availability_overrides)
        base = resolved_by_avail.get(avail)
        if base is None:
            base = resolved_by_avail[avail] = resolve_scenario(replace(scn, current=()), ctx.catalog)
        resolved = replace(base, groups=tuple(gs))
        alloc = solve_on_demand(ctx, resolved, cancel=cancel, warm=warm)
        if alloc is None or alloc.sets is None:
            if alloc is None and not _lp_infeasible_ok(resolved):
                return None
            continue  # no plan meets this demand: the epoch's served fallback runs on the pool
        certified += int(alloc.stats.get("reduction_certified", 0.0) == 1.0)
        masks: list[np.ndarray | None] = list(alloc.masks) if alloc.masks else [None] * len(alloc.sets)
        used: dict[str, list[int]] = {}
        for ts, mask in zip(alloc.sets, masks, strict=True):
            pool.add(ts, mask)
            for (tkey, _region), cnt in alloc.result.counts.items():
                row = ts.row_of.get(str(tkey))
                if row is not None and cnt > 0:
                    used.setdefault(ts.group.id, []).append(row)
                    plan_ids.setdefault(ts.group.id, set()).add(ts.ids[row])
        warm = {ts.group.id: padded_rows(ts, sorted(set(used.get(ts.group.id, []))), nmax) for ts in alloc.sets}
    if any(g.id not in pool.first for g in groups):
        return None  # no problem had a plan: nothing to pool (the library route reports the diagnostics)
    sets = pool.sets(groups)
    return PoolResult(sets, len(todo), certified, time.perf_counter() - t0, sum(len(ts) for ts in sets), plan_ids)


def _lp_infeasible_ok(resolved: ResolvedScenario) -> bool:
    """An unsupported problem returns None before any LP; an infeasible one (demand above availability) too: tell
    them apart (the first needs the library route, the second only lacks a plan)."""
    from planning.allocate.pricing import supported as engine_supported

    return engine_supported(resolved)
