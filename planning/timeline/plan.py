"""Epoch re-planning over a horizon (Coral Sec. 4.3, 5.1, 6.4) and its comparison with static and homogeneous plans.

Sets: epochs e = 0..E−1 of length h hours; groups g = (model, phase) with classes q; templates τ; regions r.
Parameters per epoch: class rates λ_q(e) (from the demand series), availability A_r(c, e) (series or the
scenario's), prices p_r(c) (spot offers at the risk-adjusted price), K (initialization penalty factor).
Per epoch e the allocation ILP of :mod:`planning.allocate` is solved with the running instances ν′ = ν(e−1):

    min Σ_{τ,r} ν_r(τ)·p_r(τ) + I_r(τ)   s.t.  I_r(τ) ≥ (ν_r(τ) − ν′_r(τ))·p_r(τ)·K,  I ≥ 0,
        Σ_τ U_c(τ)·ν_r(τ) ≤ A_r(c, e),   demand of every class served,  ν ∈ ℤ≥0

and, when it is infeasible, the max-served objective (largest uniform fraction α of every class, then the
cheapest plan serving α; Coral Sec. 6.4's uniform scale-down). Epoch cost = (provisioning + penalty) × h:
with K = start-up time / adjustment interval, K·p·h is the start-up time paid for each new instance.

Comparisons over the same epochs: (a) the adaptive plan above; (b) one static plan sized for the peak (per
class the maximum rate over the horizon, availability the minimum over epochs), held all horizon, paying
its start-up once; (c) homogeneous baselines (Coral's Homo greedy, Homo-ILP) re-planned per epoch with their
own previous instances as ν′ (their start-up cost is charged with the same K·p rule).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from planning.baselines.registry import PER_EPOCH as BASELINES
from planning.context import CancelToken, EngineContext, ProgressFn
from planning.errors import PlanningError
from planning.groups import Group
from planning.precheck import precheck_error
from planning.progress_words import planning_period
from planning.resolve import resolve_scenario
from planning.scenario import Demand, Scenario, SizeBucket
from planning.timeline import engine, loop, policies, shared
from planning.timeline.availability import (
    AvailabilitySeries,
    SpotOptions,
    spot_offers,
    with_availability,
)
from planning.timeline.demand import DemandSeries, align, at
from planning.timeline.pace import Pace
from planning.timeline.result import EpochResult, TimelineResult

MAX_CLASSES = 16


@dataclass(frozen=True)
class TimelineOptions:
    """How to re-plan: epoch length comes from the demand series; ``K`` None keeps the scenario's."""

    K: float | None = None
    rate_scale: float = 1.0
    goodput_fallback: bool = True
    baselines: tuple[str, ...] = BASELINES
    static_peak: bool = True
    spot: SpotOptions = field(default_factory=SpotOptions)
    # planning policies (``planning.timeline.policies``): the first plans the epochs in full detail, the others are
    # compared beside it; horizon None = the scenario's options.lookahead_epochs
    policies: tuple[str, ...] = ("myopic",)
    horizon: int | None = None
    offline_time_limit_s: float = 600.0
    # with the look-ahead first: the offline MILP on a thread beside it and the loop (``planning.timeline.beside``);
    # False: after the look-ahead, on this thread, its pairs in the offline's ILP
    offline_beside: bool = True
    # with myopic first: the look-ahead on a thread beside the epoch loop (``beside.Beside``); False: before it
    lookahead_beside: bool = True
    # epochs that do not chain (K = 0, myopic): each distinct problem solved once, on this many processes (1: here)
    # or as Ray tasks (backend "ray"; None: the default backend); ``planning.timeline.fanout``
    workers: int = 1
    backend: str | None = None
    # serving templates: "auto" | "on-demand" (priced per distinct epoch demand) | "library" (``template_route``)
    templates: str = "auto"

    def __post_init__(self) -> None:
        from planning.timeline.policies import POLICIES

        if not self.policies or len(set(self.policies)) != len(self.policies) or any(
                p not in POLICIES for p in self.policies):
            raise PlanningError("--policy", f"{list(self.policies)} is not a list of distinct policies.",
                                f"use one or more of {', '.join(POLICIES)}.")
        if self.horizon is not None and not (isinstance(self.horizon, int) and 1 <= self.horizon <= 168):
            raise PlanningError("--horizon", f"must be a whole number of epochs in 1..168, got {self.horizon!r}.",
                                "e.g. --horizon 3.")
        if not (isinstance(self.workers, int) and 0 <= self.workers <= 256):
            raise PlanningError("--workers", f"must be a whole number in 0..256, got {self.workers!r}.",
                                "e.g. --workers 2 (0: one per core).")
        if self.templates not in ("auto", "on-demand", "library"):
            raise PlanningError("templates", f"must be auto, on-demand or library, got {self.templates!r}.",
                                "e.g. templates='on-demand'.")
        if not (math.isfinite(self.offline_time_limit_s) and self.offline_time_limit_s > 0):
            raise PlanningError("offline_time_limit_s", f"must be > 0, got {self.offline_time_limit_s!r}.",
                                "give seconds, e.g. 600.")
        if self.K is not None and not (math.isfinite(self.K) and self.K >= 0):
            raise PlanningError("K", f"must be a finite number ≥ 0, got {self.K!r}.", "Coral uses K = 0.1.")
        if not (math.isfinite(self.rate_scale) and self.rate_scale >= 0):
            raise PlanningError("rate_scale", f"must be ≥ 0, got {self.rate_scale!r}.", "e.g. --rate-scale 2.")
        for b in self.baselines:
            if b not in BASELINES:
                raise PlanningError("baselines", f"unknown baseline {b!r}.", f"use {', '.join(BASELINES)}.")


# ------------------------------------------------------------------------------------------------ demand → groups
def _limit_buckets(s: DemandSeries) -> DemandSeries:
    """At most MAX_CLASSES buckets: the smallest (by horizon rate) are merged into one (rate-weighted sizes)."""
    if len(s.buckets) <= MAX_CLASSES:
        return s
    import numpy as np

    rates = np.asarray(s.bucket_rates)
    total = rates.sum(axis=0)
    order = np.argsort(-total, kind="stable")
    keep, rest = order[: MAX_CLASSES - 1], order[MAX_CLASSES - 1:]
    w = total[rest]
    merged = (float(np.average([s.buckets[i][0] for i in rest], weights=w + 1e-12)),
              float(np.average([s.buckets[i][1] for i in rest], weights=w + 1e-12)))
    buckets = (*tuple(s.buckets[i] for i in keep), merged)
    mat = np.concatenate([rates[:, keep], rates[:, rest].sum(axis=1, keepdims=True)], axis=1)
    return replace(s, buckets=buckets, bucket_rates=tuple(tuple(float(x) for x in row) for row in mat))


def design_scenario(scenario: Scenario, series: Mapping[str, DemandSeries]) -> Scenario:
    """The scenario the libraries are built for: each series' model gets its horizon-mean request size (or its
    fixed histogram buckets at horizon-mean rates); models without a series keep their demand."""
    models = []
    for m in scenario.models:
        s = series.get(m.id)
        if s is None:
            models.append(m)
            continue
        mean_rate = sum(s.rate_rps) / len(s)
        if s.buckets:
            n = len(s)
            rates = [sum(row[k] for row in s.bucket_rates) / n for k in range(len(s.buckets))]
            hist = tuple(SizeBucket(input_len=b[0], output_len=b[1], rate_rps=max(r, 1e-9))
                         for b, r in zip(s.buckets, rates, strict=True))
            total = sum(b.rate_rps for b in hist)
            demand = Demand(rate_rps=total, input_len=sum(b.rate_rps * b.input_len for b in hist) / total,
                            output_len=sum(b.rate_rps * b.output_len for b in hist) / total, histogram=hist)
        else:
            inp, out = s.design_sizes()
            demand = Demand(rate_rps=max(mean_rate, 1e-9), input_len=inp, output_len=out)
        models.append(replace(m, demand=demand))
    unknown = sorted(set(series) - {m.id for m in scenario.models})
    if unknown:
        raise PlanningError("--demand", f"{unknown[0]!r} is not a model of scenario {scenario.name!r}.",
                            f"use one of {', '.join(m.id for m in scenario.models)}.")
    return replace(scenario, models=tuple(models), current=scenario.current)


def _phase_rate(phase: str, rps: float, inp: float, out: float) -> float:
    return rps * inp if phase == "prefill" else rps * out if phase == "decode" else rps


def epoch_groups(design: Sequence[Group], series: Mapping[str, DemandSeries], e: int) -> list[Group]:
    """The design groups (same class ids and order) with epoch ``e``'s rates."""
    out = []
    for g in design:
        s = series.get(g.model)
        if s is None:
            out.append(g)
            continue
        i = at(s, e)
        if s.buckets:
            index = {(round(b[0], 6), round(b[1], 6)): k for k, b in enumerate(s.buckets)}
            classes = []
            for c in g.classes:
                k = index.get((round(c.input_len, 6), round(c.output_len, 6)))
                rps = s.bucket_rates[i][k] if k is not None else 0.0
                classes.append(replace(c, rate=_phase_rate(g.phase, rps, c.input_len, c.output_len)))
            out.append(replace(g, classes=tuple(classes)))
        else:
            c = g.classes[0]
            out.append(replace(g, classes=(replace(c, rate=_phase_rate(g.phase, s.rate_rps[i], s.input_len[i],
                                                                        s.output_len[i])),)))
    return out


def _peak_groups(per_epoch: Sequence[Sequence[Group]]) -> list[Group]:
    first = per_epoch[0]
    out = []
    for gi, g in enumerate(first):
        classes = tuple(replace(c, rate=max(groups[gi].classes[ci].rate for groups in per_epoch))
                        for ci, c in enumerate(g.classes))
        out.append(replace(g, classes=classes))
    return out


# ------------------------------------------------------------------------------------------------ the timeline
def run_timeline(scenario: Scenario, demand: Sequence[DemandSeries], *, availability: AvailabilitySeries | None = None,
                 options: TimelineOptions | None = None, context: EngineContext,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> TimelineResult:
    """Plan every epoch of the horizon and compare with a static peak plan and homogeneous baselines.

    Parameters
    ----------
    scenario:
        Models, SLOs, regions, shapes, prices, options (K, solver). Models without a demand series keep their
        scenario demand in every epoch.
    demand:
        One series per model (same epoch length); the horizon is the longest series.
    availability:
        Node counts per epoch (None: the scenario's counts throughout).
    options:
        K override, rate scale, goodput fallback, baselines, static plan, spot.
    context:
        Engine context (catalog, perf model, template cache).
    progress, cancel:
        ``progress(fraction, message)``; ``cancel.is_set()`` checked between epochs → ``Cancelled``.

    Returns
    -------
    TimelineResult
        An epoch whose solve raised has no plan (status ``error``, its error and fix); the notes name it.

    Raises
    ------
    PlanningError
        Bad inputs (unknown model, mismatched epochs), naming the field and the fix; an SLO below what any offered
        GPU reaches (``planning.precheck``, on the design scenario, before any library is built), with the
        ``infeasible`` message ``planning solve`` gives.
    Cancelled
        When ``cancel`` is set.
    """
    opts = options or TimelineOptions()
    t_start, started = time.perf_counter(), time.monotonic()
    hz, design, notes = _horizon(scenario, demand, availability, opts, context)
    refused = precheck_error(design, context)  # an SLO no offered GPU reaches: said at once, before any library
    if refused is not None:
        raise refused
    why = shared.unsupported(design, hz.series, hz.K, opts.policies)
    if why is None:  # the scenario shares GPUs and its epochs do not chain: each epoch is its shared plan
        # the static peak on an epoch's own scenario when one has the scarcest availability: an epoch equal to the
        # peak problem is then one distinct problem with it, solved once
        peak = next((hz.scns[e] for e in range(hz.n_epochs) if hz.avail[e] == hz.peak_avail), hz.peak_scn)
        return shared.run(hz, peak if opts.static_peak else None, ctx=context, notes=notes,
                          availability_source=_availability_source(availability), progress=progress, cancel=cancel)
    if why:
        notes.append(f"sharing ({design.options.sharing}) is not applied in this timeline: it does not plan {why}; "
                     "every model is planned on dedicated instances.")
    timings: dict[str, float] = {}
    prep, pool = _templates(hz, design, context, progress, cancel, timings)
    horizon = opts.horizon or design.options.lookahead_epochs
    pace = Pace(progress, hz.n_epochs, lookahead_steps=hz.n_epochs if "lookahead" in opts.policies else 0,
                offline_limit_s=opts.offline_time_limit_s if "offline" in opts.policies else 0.0,
                horizon=opts.horizon or design.options.lookahead_epochs, start=started,
                repeats=tuple(e > 0 and hz.problem(e) == hz.problem(e - 1) for e in range(hz.n_epochs)))
    runs = _policy_schedules(prep, design, hz, horizon, pace, cancel,
                             pool.horizon_rows() if pool is not None else None)
    try:
        distinct = _independent(runs, hz, progress, cancel, timings)
        t0 = time.perf_counter()
        epochs = loop.run_epochs(prep, hz, runs.epoch, pace, cancel)
        timings["epochs_seconds"] = time.perf_counter() - t0
        runs.finish(pace, horizon)
    except BaseException:
        for part in (runs.beside, runs.ahead):
            if part is not None:
                part.abandon()
        raise
    notes.extend(n for sch in runs.schedules.values() for n in sch.notes)
    epochs = _compare_policies(prep, runs, epochs, hz, horizon)
    t0 = time.perf_counter()
    static = loop.StaticPeak()
    if opts.static_peak:
        epochs, static = loop.static_peak(prep, hz, epochs, runs.solved_alone, cancel)
        if static.from_epoch is not None:
            timings["static_from_epoch"] = float(static.from_epoch)
    timings["static_seconds"] = time.perf_counter() - t0
    notes.extend([static.note] if static.note else [])
    notes.extend(loop.closing_notes(epochs, scenario.options.time_limit_s))
    if progress:
        progress(1.0, "done")
    return TimelineResult(
        policy=opts.policies[0], horizon_epochs=horizon if "lookahead" in opts.policies else 1,
        policy_info=runs.info(horizon), scenario_name=scenario.name, epoch_hours=hz.epoch_hours, K=hz.K,
        models=hz.models, epochs=tuple(epochs), static_peak_cost_per_hour=static.cost_per_hour,
        static_peak_feasible=static.feasible, demand_sources={s.model: s.source for s in demand},
        availability_source=_availability_source(availability),
        spot={"enabled": True, "preemption_per_hour": opts.spot.preemption_per_hour,
              "restart_hours": opts.spot.restart_hours, "uptime": opts.spot.uptime} if opts.spot.enabled else {},
        timings={**timings, **_pool_timings(pool), **{f"{p}_seconds": sch.seconds for p, sch in runs.schedules.items()},
                 "distinct_epoch_problems": float(distinct), "total_seconds": time.perf_counter() - t_start},
        notes=tuple(notes))


def _availability_source(availability: AvailabilitySeries | None) -> str:
    return availability.source if availability is not None else "scenario (constant)"


def _horizon(scenario: Scenario, demand: Sequence[DemandSeries], availability: AvailabilitySeries | None,
             opts: TimelineOptions, context: EngineContext) -> tuple[loop.Horizon, Scenario, list[str]]:
    """The epochs' problems (availability, rates), the static peak problem, the design scenario the templates are
    built for, and the notes on approximations made on the way.

    Raises
    ------
    PlanningError
        Mismatched series, a series of a model the scenario does not have.
    """
    n_epochs = align(demand)
    series = {s.model: _limit_buckets(s.scaled(opts.rate_scale) if opts.rate_scale != 1 else s) for s in demand}
    K = scenario.options.K if opts.K is None else float(opts.K)
    base = replace(scenario, options=replace(scenario.options, K=K), current=())
    if opts.spot.enabled:
        base = replace(base, offers=base.offers + spot_offers(base, opts.spot, context.catalog))
    design = design_scenario(base, series)
    resolved_design = resolve_scenario(design, context.catalog)
    known = [(o.region, o.shape) for o in resolved_design.offers]
    default_avail = {(o.region, o.shape): o.available for o in resolved_design.offers}
    per_epoch_groups = tuple(epoch_groups(resolved_design.groups, series, e) for e in range(n_epochs))
    avail_at = [dict(availability.at(e)) if availability is not None else {} for e in range(n_epochs)]
    effective = [tuple((k, int(a.get(k, default_avail[k]))) for k in sorted(known)) for a in avail_at]
    peak_avail = {k: min(a.get(k, default_avail[k]) for a in avail_at) for k in known}
    hz = loop.Horizon(
        scenario=scenario, opts=opts, demand=tuple(demand), series=series, epoch_hours=demand[0].epoch_hours, K=K,
        models=tuple(m.id for m in scenario.models),
        price={(o.region, o.shape): o.price_per_hour for o in resolved_design.offers},
        scns=tuple(with_availability(design, avail_at[e], known) for e in range(n_epochs)), groups=per_epoch_groups,
        avail=tuple(effective), peak_scn=with_availability(design, peak_avail, known),
        peak_groups=_peak_groups(per_epoch_groups), peak_avail=tuple((k, int(peak_avail[k])) for k in sorted(known)))
    notes: list[str] = []
    merged = [f"{s.model} ({len(s.buckets)} buckets)" for s in demand if len(s.buckets) > MAX_CLASSES]
    if merged:  # an approximation the user should see: the smallest buckets share one request size
        notes.append(f"{', '.join(merged)}: the {MAX_CLASSES - 1} buckets with the most traffic are planned as "
                     f"given and the rest are merged into one class (rate-weighted sizes), so the histogram plan is "
                     f"approximate; give at most {MAX_CLASSES} buckets for an exact one.")
    unknown_keys = sorted({k for a in avail_at for k in a} - set(known))
    if unknown_keys:
        notes.append(f"availability rows for {len(unknown_keys)} (region, shape) pairs the scenario does not buy were "
                     f"ignored, e.g. {unknown_keys[0][1]} in {unknown_keys[0][0]}.")
    return hz, design, notes


def _templates(hz: loop.Horizon, design: Scenario, context: EngineContext, progress: ProgressFn | None,
               cancel: CancelToken | None, timings: dict[str, float]) -> tuple[engine.Prepared, Any]:
    """The serving templates every epoch plans with: priced on demand per distinct epoch problem (the on-demand
    pool) or the design's libraries, built once; records ``templates_seconds``."""
    t0 = time.perf_counter()
    pool = None
    if template_route(hz.opts, design, context) == "on-demand":
        from planning.timeline.columns import build_pool

        if progress:
            progress(0.01, "finding serving setups for each distinct demand level")
        problems = [(hz.scns[e], hz.groups[e]) for e in range(hz.n_epochs)]
        if hz.opts.static_peak:
            problems.append((hz.peak_scn, hz.peak_groups))
        design_groups = resolve_scenario(design, context.catalog).groups
        pool = build_pool(context, design, design_groups, problems, cancel=cancel,
                          progress=(lambda f, m: progress(0.01 + 0.29 * f, m)) if progress else None)
    if pool is None and progress:
        progress(0.01, "serving templates (built once for every epoch)")
    prep = engine.prepare(design, context, (lambda f, m: progress(0.01 + 0.29 * f, m)) if progress else None, cancel,
                          sets=pool.sets if pool is not None else None)
    timings["templates_seconds"] = time.perf_counter() - t0
    return prep, pool


def _independent(runs: _Runs, hz: loop.Horizon, progress: ProgressFn | None, cancel: CancelToken | None,
                 timings: dict[str, float]) -> int:
    """With K = 0 and the myopic policy first, the epochs do not chain: each distinct problem solved once, fanned
    out (``planning.timeline.fanout``); returns how many problems were solved (the epochs otherwise)."""
    t0 = time.perf_counter()
    distinct = hz.n_epochs
    if hz.K == 0 and hz.opts.policies[0] == "myopic":  # no penalty: the epochs do not chain (fanout docstring)
        from planning.timeline.fanout import solve_independent

        runs.independent, distinct = solve_independent(
            runs.prep, hz.scns, hz.groups, goodput_fallback=hz.opts.goodput_fallback, workers=hz.opts.workers,
            backend=hz.opts.backend, cancel=cancel,
            progress=(lambda f, m: progress(0.3 + 0.3 * f, m)) if progress else None)
    timings["independent_epochs_seconds"] = time.perf_counter() - t0
    return distinct

def template_route(opts: TimelineOptions, design: Scenario, context: EngineContext) -> str:
    """``"on-demand"`` (columns priced per distinct epoch demand, ``planning.timeline.columns``) or ``"library"``
    (every group's full template library). ``"auto"``: on demand when the scenario asks for it
    (``options.templates``), the engine supports it, no offline optimum is asked for (its bound is proven over
    every template, so it keeps the library) and the libraries are not small (``columns.small_library``: there the
    library is built in about a second, coral-core's published figures stay the library's)."""
    if opts.templates == "library":
        return "library"
    from planning.timeline.columns import small_library, supported

    if opts.templates == "auto" and (design.options.templates != "on-demand" or "offline" in opts.policies
                                     or small_library(design, context)):
        return "library"
    return "on-demand" if supported(design, context) else "library"


def _pool_timings(pool: object | None) -> dict[str, float]:
    from planning.timeline.columns import PoolResult

    if not isinstance(pool, PoolResult):
        return {"templates_on_demand": 0.0}
    return {"templates_on_demand": 1.0, "pool_problems": float(pool.problems), "pool_certified": float(pool.certified),
            "pool_templates": float(pool.templates), "pool_seconds": pool.seconds}



# ------------------------------------------------------------------------------------------------ policies
@dataclass
class _Runs:
    """The policies' schedules and how the first (the detailed one) plans an epoch."""

    prep: engine.Prepared
    scns: list[Scenario]
    groups: list[list[Group]]
    opts: TimelineOptions
    cancel: CancelToken | None
    schedules: dict[str, policies.Schedule]
    myopic_solves: dict[int, engine.EpochSolve]
    independent: list[engine.EpochSolve] = field(default_factory=list)  # K = 0: every epoch, solved on its own
    memo: dict[tuple[object, ...], engine.EpochSolve] = field(default_factory=dict)
    last: tuple[int, engine.EpochSolve] | None = None  # the last myopic epoch planned and its plan
    beside: Any = None  # the offline MILP running on a thread (``beside.OfflineBeside``), until ``finish``
    ahead: Any = None  # the look-ahead running on a thread beside the loop (``beside.Beside``), until ``finish``
    ahead_memo: dict[tuple[object, ...], engine.EpochSolve] = field(default_factory=dict)  # its myopic fallbacks

    def finish(self, pace: Pace, horizon: int) -> None:
        """Wait for the offline MILP running beside (reported on a timer while waited for) and keep its schedule,
        never dearer than the look-ahead's; the look-ahead's first when it runs beside the loop."""
        if self.ahead is not None:
            self.schedules["lookahead"] = self.ahead.join()
            self.ahead = None
            self.schedules = {p: self.schedules[p] for p in self.opts.policies if p in self.schedules}
        if self.beside is None:
            return
        label = policies.policy_label("offline", horizon)
        with pace.offline(f"{label}: planning {len(self.scns)} epochs together (at most "
                          f"{self.opts.offline_time_limit_s:g} s)"):
            self.schedules["offline"] = self.beside.result(self.schedules.get("lookahead"))
        self.beside = None
        self.schedules = {p: self.schedules[p] for p in self.opts.policies if p in self.schedules}

    def epoch(self, e: int, prev: dict[tuple[str, str], int]) -> engine.EpochSolve:
        """Epoch ``e`` of the first policy: the myopic ILP, or the precomputed schedule's counts."""
        primary = self.opts.policies[0]
        if primary == "myopic" and self.independent:
            return self.independent[e]
        sch = self.schedules.get(primary)
        if primary == "myopic" or sch is None or not sch.counts:
            return self.myopic_epoch(e, prev)
        if e in self.myopic_solves:  # a look-ahead step planned myopically (its horizon was short of nodes)
            return self.myopic_solves[e]
        status = "optimal" if sch.status == "optimal" else "feasible"
        return policies.fixed_epoch(self.prep, self.scns[e], self.groups[e], sch.counts[e], prev, status, sch.gap,
                                    sch.seconds / max(1, len(sch.counts)))

    def myopic_epoch(self, e: int, prev: Mapping[tuple[str, str], int], *, apart: bool = False,
                     cancel: CancelToken | None = None) -> engine.EpochSolve:
        """Epoch ``e``'s allocation ILP with ``prev`` running; an epoch with the same rates, availability and
        running instances as one solved before (a repeated day settles into the same hours) reuses its answer.
        ``apart``: a fallback of the look-ahead running beside the loop, with its own memo and never held."""
        from planning.timeline.fanout import epoch_key

        key = (epoch_key(self.scns[e], self.groups[e]), tuple(sorted(prev.items())))
        memo = self.ahead_memo if apart else self.memo
        solved = memo.get(key)
        if solved is None:
            solved = (None if apart else self._held(e, prev)) or engine.solve_epoch_alone(
                self.prep, replace(self.scns[e], current=engine.current_of(prev)), self.groups[e],
                goodput_fallback=self.opts.goodput_fallback, cancel=cancel or self.cancel)
            memo[key] = solved
        if not apart:
            self.last = (e, solved)
        return solved

    def _held(self, e: int, prev: Mapping[tuple[str, str], int]) -> engine.EpochSolve | None:
        """Epoch ``e``'s plan without a solve when it has epoch e − 1's problem (rates, availability) and starts
        from e − 1's optimal plan: that plan, kept, is optimal for ``e`` too (``policies.held_epoch``)."""
        from planning.timeline.fanout import epoch_key

        if self.last is None or self.last[0] != e - 1 or e == 0:
            return None
        before = self.last[1]
        if epoch_key(self.scns[e], self.groups[e]) != epoch_key(self.scns[e - 1], self.groups[e - 1]):
            return None
        return policies.held_epoch(self.prep, self.scns[e], self.groups[e], before, prev)

    def solved_alone(self, e: int) -> engine.EpochSolve | None:
        """Epoch ``e``'s solve from nothing running, when one was made (the fan-out's, or the myopic loop's)."""
        if self.independent:
            return self.independent[e]
        from planning.timeline.fanout import epoch_key

        return self.memo.get((epoch_key(self.scns[e], self.groups[e]), ()))

    def info(self, horizon: int) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for p in self.opts.policies:
            sch = self.schedules.get(p)
            out[p] = {"label": policies.policy_label(p, horizon), "status": sch.status if sch else "feasible",
                      "bound": sch.bound if sch else None, "gap": sch.gap if sch else None,
                      "seconds": sch.seconds if sch else None, "myopic_epochs": list(sch.myopic_epochs) if sch else [],
                      "available": bool(sch is None or sch.counts)}
        return out


def _policy_schedules(prep: engine.Prepared, design: Scenario, hz: loop.Horizon, horizon: int,
                      pace: Pace, cancel: CancelToken | None, rows: list[Any] | None = None) -> _Runs:
    """The look-ahead and offline schedules asked for (the myopic one is the epoch loop's, or computed here when
    it is only compared); their steps' times go to ``pace`` (the progress line and its estimate of the time
    left)."""
    scns, groups, opts, hours, K = list(hz.scns), list(hz.groups), hz.opts, hz.epoch_hours, hz.K
    runs = _Runs(prep, scns, groups, opts, cancel, {}, {})
    wanted = [p for p in opts.policies if p != "myopic"]
    if not wanted and opts.policies[0] == "myopic":
        return runs
    for p in opts.policies:
        policies.check_supported(design, groups[0], p)
    adapter = policies.HorizonAdapter.build(prep, scns, groups, hours, K, rows) if wanted else None
    limit, gap = design.options.time_limit_s, design.options.mip_rel_gap

    def myopic(t: int, prev: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
        solved = runs.myopic_epoch(t, prev)
        runs.myopic_solves[t] = solved
        return dict(solved.counts)

    def myopic_schedule() -> policies.Schedule:
        t0 = time.perf_counter()
        prev: dict[tuple[str, str], int] = {}
        counts = []
        for t in range(len(scns)):
            solved = runs.myopic_epoch(t, prev)
            prev = dict(solved.counts)
            counts.append(prev)
        return policies.Schedule("myopic", counts, seconds=time.perf_counter() - t0)

    # look-ahead before offline: the offline MILP starts from the best other schedule (never dearer than it); with
    # both asked for and the look-ahead first it runs on a thread beside the look-ahead and the loop instead
    # (``planning.timeline.beside``), compared with the look-ahead's schedule when both are done (``finish``)
    if "lookahead" in wanted and "offline" in wanted and opts.policies[0] != "offline" and opts.offline_beside:
        from planning.timeline.beside import OfflineBeside

        assert adapter is not None
        runs.beside = OfflineBeside.start(adapter, time_limit_s=opts.offline_time_limit_s, mip_rel_gap=gap,
                                          cancel=cancel)
        pace.offline_beside_started()
    for p in sorted(wanted, key=lambda q: q == "offline"):
        assert adapter is not None
        label = policies.policy_label(p, horizon)
        if p == "offline" and runs.beside is not None:
            continue
        if p == "lookahead":
            pace.lookahead_started(f"{label}: planning {len(scns)} epochs")

            def step(t: int, label: str = label) -> None:
                pace.step_done(f"{label}: {planning_period(t + 1, len(scns), hours)}")
            if opts.policies[0] == "myopic" and opts.lookahead_beside:  # beside the loop (``beside.Beside``)
                from planning.timeline.beside import lookahead_beside

                def apart(t: int, prev: dict[tuple[str, str], int], token: CancelToken) -> dict[tuple[str, str], int]:
                    return dict(runs.myopic_epoch(t, prev, apart=True, cancel=token).counts)
                runs.ahead = lookahead_beside(adapter, horizon, limit, gap, on_epoch=step, myopic=apart, cancel=cancel)
                pace.lookahead_beside = True
                continue
            runs.schedules[p] = policies.lookahead(adapter, horizon, time_limit_s=limit, mip_rel_gap=gap,
                                                   myopic=myopic, cancel=cancel, on_epoch=step)
        else:
            start = runs.schedules.get("lookahead")
            if start is None or not start.counts:
                start = runs.schedules.setdefault("myopic", myopic_schedule())
            with pace.offline(f"{label}: planning {len(scns)} epochs together (at most "
                              f"{opts.offline_time_limit_s:g} s)"):
                runs.schedules[p] = policies.offline(adapter, time_limit_s=opts.offline_time_limit_s,
                                                     mip_rel_gap=gap, cancel=cancel, start=start.counts or None)
    if "myopic" in opts.policies[1:] and "myopic" not in runs.schedules:  # compared only: the loop's counts
        runs.schedules["myopic"] = myopic_schedule()
    runs.schedules = {p: runs.schedules[p] for p in opts.policies if p in runs.schedules}
    return runs


def _compare_policies(prep: engine.Prepared, runs: _Runs, epochs: list[EpochResult], hz: loop.Horizon,
                      horizon: int) -> list[EpochResult]:
    """Every policy after the first as a method of each epoch, priced like the epochs themselves."""
    groups, price, K, models = list(hz.groups), hz.price, hz.K, hz.models
    node_cache: dict[str, int] = {}
    out = list(epochs)
    for p in runs.opts.policies[1:]:
        sch = runs.schedules.get(p)
        if sch is None or not sch.counts:
            continue
        label = policies.policy_label(p, horizon)
        for e, m in enumerate(policies.schedule_method(prep, sch, groups, price, K, models, node_cache)):
            out[e] = replace(out[e], methods={label: m, **out[e].methods})
    return out
