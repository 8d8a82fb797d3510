"""Plan a scenario end to end, one step per line: resolve → template sets → allocation → baselines → PlanResult.

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

Progress (``progress(fraction, message)``, messages start with the step's name): on demand ``pricing`` (column
generation rounds with the LP bound, group bounds), ``fixing`` and ``ILP`` 2–90 %; on the library path
``library build`` 2–80 %, ``reduction``/``ILP`` 80–90 %; then ``baselines`` 90–98 %, ``diagnostics`` 98–100 %.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from planning.allocate.certify import Allocation, allocation_problem, baseline_problem, solve_certified
from planning.allocate.incumbent import Anytime
from planning.allocate.ondemand_sets import SingleRows
from planning.allocate.problem import AllocationProblem, AllocationResult
from planning.allocate.warm import WarmStart
from planning.assemble import build_plan_result, time_limit_result
from planning.baselines.memo import BaselineMemo
from planning.catalog.schema import shape_gpu
from planning.context import (
    Cancelled,
    CancelToken,
    Deadline,
    EngineContext,
    ProgressFn,
    check_cancel,
    default_context,
    plan_listener,
    sub_progress,
)
from planning.explain import explain_result
from planning.precheck import precheck
from planning.relations import BasePlan, answer, lower_bound
from planning.resolve import ResolvedScenario, resolve_scenario
from planning.result import BaselineSummary, PlanResult
from planning.resultcache import ResultCache, cache_key, code_digest, is_final
from planning.scenario import Scenario
from planning.templates.engine_plan import with_engine_plans
from planning.templates.sets import (
    TemplateSet,
    additive_cost_bound,
    build_template_sets,
    gpu_provenance,
    quick_template_sets,
)

if TYPE_CHECKING:
    from planning.baselines.beside import EarlyStart


@dataclass(frozen=True)
class Reuse:
    """What a solve may reuse from earlier ones: ``cache`` answers a question already asked
    (:mod:`planning.resultcache`, final plans only), ``warm`` starts the on-demand engine from a neighbouring
    plan's columns (:class:`planning.allocate.warm.WarmStart`: a what-if's base, a sweep's previous point). Neither
    changes the answer: a warm solve is still certified over every template. ``base`` is a plan already made
    (a what-if's base): a variant whose optimum follows from it (:mod:`planning.relations`: prices × f, a dropped
    GPU type or region the plan does not use) is answered from it at once, labelled how it was proven.
    ``prechecked`` says the caller ran :func:`planning.precheck.precheck` on this scenario and context and it
    passed (the CLI checks before it imports the solve): the solve does not compute the bound again.
    ``baselines`` holds baseline answers by the inputs each reads (:mod:`planning.baselines.memo`: a what-if
    re-plans only the baselines it changes); None: the one beside ``cache``'s folder, none without a cache."""

    cache: ResultCache | None = None
    warm: WarmStart | None = None
    prechecked: bool = False
    base: BasePlan | None = None
    baselines: BaselineMemo | None = None

    def memo(self) -> BaselineMemo | None:
        """The baseline memo this solve reads and fills: ``baselines``, else the process's memo of the result
        cache's folder (``results/baselines``) under the engine's code digest, else None."""
        if self.baselines is not None or self.cache is None:
            return self.baselines
        from planning.baselines.memo import memo_in, salt_of

        return memo_in(self.cache.folder / "baselines", salt_of(code_digest()))


def solve(scenario: Scenario, *, context: EngineContext | None = None, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None, dump_model: str | Path | None = None,
          with_baselines: bool = True, finance: bool = True, reuse: Reuse | None = None) -> PlanResult:
    """Plan ``scenario``: cheapest cluster (or most demand served) with placements and baselines.

    Parameters
    ----------
    scenario:
        A validated Scenario.
    context:
        Loaded catalog/perf model/cache (default: shipped data, no template cache).
    progress:
        ``progress(fraction, message)`` naming the current step (see the module docstring).
    cancel:
        A :class:`planning.context.CancelToken`; checked between and inside steps → :class:`Cancelled`.
    dump_model:
        Write the allocation model to this ``.lp``/``.mps`` path (never answered from the cache).
    with_baselines:
        Also run the baselines (they take about as long as the plan's ILP).
    finance:
        A scenario with owned pools, reservations, spot pools or a finance horizon goes through
        :func:`planning.finance.plan.solve_finance` (commitment sizing, then this plan of the design hour with the
        commitments, the bill); False plans the design hour as the offers stand.
    reuse:
        A result cache and/or a warm start (:class:`Reuse`; default: neither).

    Returns
    -------
    PlanResult
        Never None: infeasible plans carry a status and diagnostics. A cached answer has
        ``stats["result_cache_hit"] == 1``.

    Raises
    ------
    PlanningError
        Inputs that cannot be planned (unknown ids, nothing purchasable), with the fix.
    Cancelled
        When ``cancel`` is set (or its deadline passes).
    """
    ctx = context or default_context()
    reuse = reuse or Reuse()
    key = None
    if reuse.cache is not None and dump_model is None:
        t0 = time.perf_counter()
        key = cache_key(scenario, ctx, with_baselines=with_baselines, finance=finance)
        hit = reuse.cache.get(key, scenario)
        if hit is not None:
            if progress:
                progress(1.0, "done: the same question was answered before (result cache)")
            return replace(hit, timings={**hit.timings, "result_cache_seconds": time.perf_counter() - t0})
    related = answer(reuse.base, scenario, with_baselines=with_baselines, catalog=ctx.catalog) \
        if reuse.base and not dump_model else None
    if related is not None:  # proven by its relation to the base plan, in milliseconds
        if progress:
            progress(1.0, f"done: {related.message}")
        if key is not None and reuse.cache is not None and is_final(related, scenario):
            reuse.cache.put(key, related)  # so that it can be the base of the next what-if (api.nearest_base)
        return related
    if with_baselines:
        start_baseline_workers(scenario)  # they spawn while the precheck and the groups' tables are built
    refused = None if reuse.prechecked else precheck(scenario, ctx)  # an SLO no offered GPU reaches: at once
    if refused is not None:
        return refused
    if finance and scenario.has_finance:
        from planning.finance.plan import solve_finance

        result = solve_finance(scenario, context=ctx, plan_hour=solve, progress=progress, cancel=cancel,
                               dump_model=dump_model, with_baselines=with_baselines)
    else:
        result = _plan(scenario, ctx, _Run(progress, cancel, dump_model, with_baselines, reuse.warm,
                                           lower_bound(reuse.base, scenario), reuse.memo(), plan_listener(progress)))
    if key is not None and reuse.cache is not None and is_final(result, scenario):
        reuse.cache.put(key, result)
    return result


def start_baseline_workers(scenario: Scenario) -> None:
    """Spawn the processes a solve of ``scenario`` runs its baselines on, without waiting
    (:func:`planning.baselines.beside.prewarm`; nothing when they run here): a solve with baselines calls it before
    its precheck, so that they start up while this process checks the SLOs and builds the groups' tables, and can
    place the single-GPU-type templates beside it (``planning.templates.placing``). The CLI runs its precheck
    before it, without the solver's imports, so that a refused scenario is answered at once."""
    from planning.baselines.beside import prewarm, workers_for

    prewarm(workers_for(scenario.options.workers))


@dataclass(frozen=True)
class _Run:
    """How one plan runs: its progress, cancel token, model dump, baselines, warm start and a lower bound known
    before it starts (a tightened what-if's base optimum, :func:`planning.relations.lower_bound`)."""

    progress: ProgressFn | None
    cancel: CancelToken | None
    dump_model: str | Path | None
    with_baselines: bool
    warm: WarmStart | None = None
    bound: float | None = None
    memo: BaselineMemo | None = None
    on_plan: Callable[[PlanResult], None] | None = None  # each better plan before the proof (plan_listener)


class _Laps:
    """Seconds per step, in ``timings`` (``lap(name)``: the time since the previous lap)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.start = self.clock = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = now - self.clock
        self.clock = now

    def total(self) -> float:
        return time.perf_counter() - self.start


def _plan(scenario: Scenario, ctx: EngineContext, run: _Run) -> PlanResult:
    """The plan of one design hour: resolve → allocation (on demand, else the library) → baselines → result.

    With baselines on two or more processes, those that read only single-GPU-type templates start on the pool
    as soon as those templates exist, beside the allocation (:class:`planning.baselines.beside.EarlyStart`); the
    ones not yet begun are dropped when the plan ends another way (a time limit, a cancel, an error)."""
    deadline = Deadline(scenario.options.time_limit_s, run.cancel)  # ONE deadline for every step (docs/allocation.md)
    if not run.with_baselines:
        return _plan_steps(scenario, ctx, run, deadline, None)
    from planning.baselines.beside import EarlyStart, workers_for

    early = EarlyStart(workers_for(scenario.options.workers), deadline, memo=run.memo)
    try:
        return _plan_steps(scenario, ctx, run, deadline, early)
    finally:
        early.close()


def _plan_steps(scenario: Scenario, ctx: EngineContext, run: _Run, deadline: Deadline,
                early: EarlyStart | None) -> PlanResult:
    """:func:`_plan`'s steps, with the solve's ``deadline`` and the baselines started ``early`` (or None)."""
    laps = _Laps()
    limit = scenario.options.time_limit_s
    where = _Where(run.progress)
    resolved = resolve_scenario(scenario, ctx.catalog)
    laps.lap("resolve_seconds")
    objective = scenario.objective
    anytime = Anytime(served=objective.kind == "served",
                      budget=objective.budget_per_hour if objective.kind == "cost" else None, on_change=where.emit)
    anytime.shown = _bill_hour(resolved)
    where.anytime = anytime
    if run.on_plan is not None:
        anytime.on_change = _Publisher(run.on_plan, ctx, resolved, anytime, where.emit)
    if run.bound is not None and objective.kind == "cost":
        anytime.raise_bound(run.bound, "the base plan's optimum (this what-if only removes plans)")
    stopped_at = ""
    try:
        allocation, sets = _allocate(ctx, resolved, run, _Step(deadline, where, anytime, laps, early))
    except Cancelled as exc:
        if exc.reason != "time limit" or not deadline.timed_out():
            raise  # the caller's cancel: the job runner records it as cancelled
        stopped_at = exc.detail if ": " in exc.detail else where.step  # the most precise of the two
        if anytime.best is None:
            return time_limit_result(scenario, limit, stopped_at, laps.total())
        allocation = anytime.allocation(stopped_at)
        assert allocation.sets is not None
        sets = allocation.sets
        laps.lap("allocation_seconds")
    laps.timings.update(allocation.timings)
    check_cancel(run.cancel)
    baselines: list[BaselineSummary] = []
    if run.with_baselines:
        where.report(0.90, "baselines: single-GPU-type and memory-proportional plans")
        baselines = run_baselines(ctx, resolved, baseline_problem(resolved, sets, allocation.masks), deadline,
                                  early, memo=run.memo)
    laps.lap("baselines_seconds")
    where.report(0.98, "diagnostics: assembling the plan")
    laps.timings["total_seconds"] = laps.total()
    stats = {**allocation.stats, **_anytime_stats(anytime)}
    result = build_plan_result(resolved, sets, allocation.result, baselines, timings=laps.timings,
                               provenance=perf_provenance(ctx, sets), stats=stats)
    result = with_engine_plans(result, resolved.scenario, resolved.specs, ctx.perf)  # the limits its engines run with
    if stopped_at:
        result = replace(result, stopped_at=stopped_at)
    result = _explained(result, ctx, resolved, sets, deadline, baselines)
    result = _with_message(result, allocation, limit, stopped_at)
    result = replace(result, timings={**result.timings, "total_seconds": laps.total()})
    if run.progress:
        run.progress(1.0, "done")
    return result


@dataclass(frozen=True)
class _Step:
    """What the allocation step shares with the rest of the plan: the deadline, the progress relay, the incumbent,
    the step timer and the baselines to start once their templates exist."""

    deadline: Deadline
    where: _Where
    anytime: Anytime
    laps: _Laps
    early: EarlyStart | None = None

    def single_rows(self, resolved: ResolvedScenario) -> SingleRows:
        """What the on-demand engine does with the single-GPU-type sets: start the baselines on them, placing
        them on the baselines' pool too while it has nothing else to do (none without ``early``)."""
        pool = self.early.pool() if self.early is not None and not resolved.scenario.current else None
        return SingleRows(lambda single: self.start_baselines(resolved, single), pool)

    def start_baselines(self, resolved: ResolvedScenario, sets: Sequence[TemplateSet]) -> None:
        """Start the baselines that read only the single-GPU-type rows of ``sets`` (nothing without ``early``)."""
        if self.early is not None and not resolved.scenario.current:  # running instances: only after (the rows)
            self.early.start(allocation_problem(resolved, sets, masks=[ts.single_gpu_type for ts in sets]))


def _allocate(ctx: EngineContext, resolved: ResolvedScenario, run: _Run,
              step: _Step) -> tuple[Allocation, list[TemplateSet]]:
    """The allocation and its template sets: on demand when the scenario allows it, else over the libraries
    (a quick plan over the single-shape templates first, so a time limit in the build still has a plan)."""
    deadline, where, anytime = step.deadline, step.where, step.anytime
    check_cancel(deadline)
    where.report(0.02, "pricing: serving templates on demand" if resolved.scenario.options.templates == "on-demand"
                 else "library build: serving templates")
    allocation = on_demand_allocation(ctx, resolved, sub_progress(where.report, 0.02, 0.90), deadline, anytime,
                                      run.warm, step.single_rows(resolved),
                                      with_baselines=run.with_baselines)
    if allocation is not None and allocation.sets is not None:  # None: the scenario needs the library path
        step.laps.lap("allocation_seconds")
        return allocation, allocation.sets
    quick = quick_template_sets(ctx, resolved, deadline)
    if resolved.scenario.objective.kind == "cost":  # a bound before any library: a time limit in the build has a gap
        anytime.raise_bound(additive_cost_bound(ctx, resolved, quick),
                            "additive throughput bound (availability relaxed)")
    quick_plan(resolved, quick, deadline, anytime)
    sets = build_template_sets(ctx, resolved, sub_progress(where.report, 0.02, 0.80), deadline)
    step.laps.lap("templates_seconds")
    step.start_baselines(resolved, sets)
    check_cancel(deadline)
    allocation = solve_certified(resolved, sets, dump_model=str(run.dump_model) if run.dump_model else None,
                                 progress=sub_progress(where.report, 0.80, 0.90), cancel=deadline, anytime=anytime)
    step.laps.lap("allocation_seconds")
    return allocation, sets


def _explained(result: PlanResult, ctx: EngineContext, resolved: ResolvedScenario, sets: Sequence[TemplateSet],
               deadline: Deadline, baselines: Sequence[BaselineSummary]) -> PlanResult:
    """``result`` with its causes and fixes (SLO / memory / budget / capacity) and notes on what a time limit
    left undone (baselines not run, diagnostics not computed)."""
    limit = resolved.scenario.options.time_limit_s
    notes: list[str] = []
    skipped = [b.name for b in baselines if not b.ran]
    if skipped:
        notes.append(f"Time limit {limit:g} s reached before the baselines {', '.join(skipped)} ran: they are "
                     "listed as not run. Fix: raise options.time_limit_s to compare against them.")
    try:
        result = explain_result(result, ctx, resolved, sets, deadline)
    except Cancelled as exc:
        if exc.reason != "time limit" or not deadline.timed_out():
            raise
        notes.append(f"Time limit {limit:g} s reached during the diagnostics: causes and fixes were not computed. "
                     "Fix: raise options.time_limit_s.")
    return replace(result, diagnostics=(*result.diagnostics, *notes)) if notes else result


def _with_message(result: PlanResult, allocation: Allocation, limit: float, stopped_at: str) -> PlanResult:
    """The sentence a time limit owes the user: no plan at all, or the best plan found and its proven gap."""
    if result.status == "time_limit" and not allocation.result.has_plan:
        return replace(result, message=f"time limit {limit:g} s reached in the allocation ILP before any plan "
                       f"was found; no plan. Fix: raise options.time_limit_s above {limit:g} s, or loosen "
                       "options.mip_rel_gap.")
    if allocation.stats.get("proven_short") == 1.0:
        return replace(result, message="No plan: the available nodes cannot serve all demand (proven over every "
                       "template); see diagnostics for the offers it is short of and the fix.")
    if result.status == "feasible" and result.instances and not result.message:
        gap = f" (proven gap {result.mip_gap:.2%} to the best bound)" if result.mip_gap is not None else \
            " (no bound proven yet)"
        where_ = f" at step {stopped_at!r}" if stopped_at else ""
        return replace(result, message=f"time limit {limit:g} s reached{where_} before the plan was proven "
                       f"optimal: this is the best plan found{gap}. Fix: raise options.time_limit_s for a "
                       "certified optimum.")
    return result


def _anytime_stats(anytime: Anytime) -> dict[str, float]:
    """Time to the first feasible plan and to the returned plan, and the best bound (for benchmarks)."""
    out: dict[str, float] = {}
    if anytime.first_plan_s is not None:
        out["anytime_first_plan_seconds"] = anytime.first_plan_s
    if anytime.best is not None:
        out["anytime_plan_seconds"] = anytime.best.found_s
    if math.isfinite(anytime.bound):
        out["anytime_bound"] = anytime.bound
    return out


def _bill_hour(resolved: ResolvedScenario) -> Callable[[AllocationResult], float]:
    """The $/h a plan's bill shows for an allocation (:func:`planning.assemble.build_plan_result` then
    :attr:`planning.result.PlanResult.bill`'s design hour: provisioning + KV transfer + committed), for the
    progress line's "best plan $X/h" to say the figure the best-so-far box says."""
    from planning.billing import bill_of
    from planning.finance.accounting import committed_per_hour

    committed = committed_per_hour(resolved.offers)
    return lambda alloc: bill_of(float(alloc.cost_per_hour or 0.0), float(alloc.transfer_per_hour), committed,
                                 []).per_hour


@dataclass
class _Publisher:
    """``Anytime.on_change`` of a solve whose caller listens for plans: the progress line as always, then, when
    the incumbent is a new one, the best plan so far as a ``PlanResult`` (status ``feasible``, its proven gap
    then, no baselines, no diagnostics) to ``on_plan``. A listener that fails is dropped, never the solve."""

    on_plan: Callable[[PlanResult], None] | None
    ctx: EngineContext
    resolved: ResolvedScenario
    anytime: Anytime
    emit: Callable[[], None]
    sent: object = None

    def __call__(self) -> None:
        self.emit()
        best = self.anytime.best
        if best is None or best is self.sent or self.on_plan is None:
            return
        self.sent = best
        gap = self.anytime.gap()
        alloc = replace(best.alloc, status="feasible", gap=gap)
        try:
            result = build_plan_result(self.resolved, list(best.sets), alloc, [], timings={},
                                       provenance=perf_provenance(self.ctx, best.sets), stats={})
            self.on_plan(replace(result, message=f"best plan so far, found after {best.found_s:.1f} s, " + (
                f"within {gap:.2%} of the best bound" if gap is not None else "no bound proven yet")
                + "; the solver is still proving it."))
        except Exception:  # a listener's failure (a full disk) must not end the solve
            self.on_plan = None


class _Where:
    """Forwards progress and remembers the current step's message (what a time limit stopped); once a plan exists,
    every message ends with the incumbent and its gap ("… · best plan $81.79/h, gap 2.9 %")."""

    def __init__(self, progress: ProgressFn | None) -> None:
        self.progress = progress
        self.step = "resolving the scenario"
        self.fraction = 0.0
        self.anytime: Anytime | None = None

    def report(self, fraction: float, message: str) -> None:
        self.step = message
        self.fraction = fraction
        self.emit()

    def emit(self) -> None:
        """Send the current step again (the incumbent or the bound moved)."""
        if self.progress is None:
            return
        plan = self.anytime is not None and self.anytime.best is not None
        self.progress(self.fraction, f"{self.step} · {self.anytime.summary()}" if plan and self.anytime else self.step)


def run_baselines(ctx: EngineContext, resolved: ResolvedScenario, problem: AllocationProblem,
                  cancel: CancelToken | None = None, early: EarlyStart | None = None,
                  memo: BaselineMemo | None = None) -> list[BaselineSummary]:
    """Every applicable baseline on ``problem`` (see :func:`planning.baselines.run_all_baselines`), beside each
    other on ``options.workers`` processes (:mod:`planning.baselines.beside`: the same answers), with the time
    left on ``cancel``'s deadline: the plan is never delayed by them; those it leaves no time for come back with
    ``ran=False`` and the note "not run: time limit". Those ``early`` started on this problem's single-GPU-type
    part beside the allocation are collected, not run again; ``memo``: answers already known come from it
    (:mod:`planning.baselines.memo`).

    Raises
    ------
    Cancelled
        When the caller's ``cancel`` is set.
    """
    from planning.baselines import run_all_baselines
    from planning.baselines.beside import workers_for
    from planning.finance.accounting import committed_per_hour

    groups = resolved.groups
    committed = committed_per_hour(resolved.offers)  # owned + held reservations, as the plan's comparable cost
    model_size = {g.id: resolved.specs[g.model].weight_bytes() for g in groups}
    request_rate = {g.id: resolved.scenario.model(g.model).demand.rate_rps for g in groups}
    gpu_memory = {gid: gpu.memory_gb for gid, gpu in ctx.catalog.gpus.items()}
    out = []
    for b in run_all_baselines(problem, cancel=cancel, workers=workers_for(resolved.scenario.options.workers),
                               early=early, memo=memo, model_size=model_size, gpu_memory_gb=gpu_memory,
                               request_rate=request_rate):
        if b.details.get("skipped"):
            out.append(BaselineSummary(name=b.name, cost_per_hour=0.0, served_fraction=0.0, feasible=False,
                                       note=NOT_RUN, ran=False))
            continue
        # provisioning only, like the plan's comparable_cost: the greedy Homo carries no penalty and the ILP
        # baselines' K × new-node allowance is not a bill, so adding it made savings the penalty's size
        out.append(BaselineSummary(name=b.name, cost_per_hour=float(b.cost_per_hour) + committed,
                                   served_fraction=float(b.served_fraction_min), feasible=bool(b.feasible),
                                   served_by_group=dict(b.served_fraction), gpus=dict(b.gpus_used), note=str(b.note),
                                   time_limited=bool(b.details.get("time_limited", False))))
    return out


NOT_RUN = "not run: time limit"
"""The note of a baseline the solve's time limit left no time for (``BaselineSummary.ran`` is False)."""


def perf_provenance(ctx: EngineContext, sets: Sequence[TemplateSet]) -> dict[str, str]:
    """Where the perf numbers of each GPU type come from (measured, calibrated, roofline) and their bands.

    The bands are the ones every estimate carries (``PerfModel.kind_bands``: the validation set's p90 error for the
    GPU's class and the models' dtypes, never below the roofline band for a GPU without calibration data), the
    widest over the scenario's model dtypes; not the kernel-level fit errors, which were narrower than what the
    plan-level caption said for the same GPUs.
    """
    provenance = {}
    dtypes = sorted({getattr(ctx.catalog.models.get(ts.group.model), "dtype", None) or "bf16"
                     for ts in sets if not ts.explicit}) or ["bf16"]
    for gpu in sorted({shape_gpu(s) for ts in sets if not ts.explicit for s in ts.shapes}):
        kinds = [ctx.perf.kind_bands(gpu, d) for d in dtypes]
        band_p, band_d = max(k["ttft"] for k in kinds), max(k["tpot"] for k in kinds)
        provenance[gpu] = f"{gpu_provenance(ctx, gpu)} (±{band_p:.0%} prefill, ±{band_d:.0%} decode)"
    if any(ts.explicit for ts in sets):
        provenance["explicit templates"] = "given in the scenario"
    return provenance


def quick_plan(resolved: ResolvedScenario, sets: Sequence[TemplateSet], cancel: CancelToken | None,
               anytime: Anytime) -> None:
    """The library path's first plan: the allocation ILP over the single-shape templates only (Homo's templates,
    :func:`planning.templates.sets.quick_template_sets`), offered to ``anytime`` before the full library is built;
    it gets a share of the time left (``ondemand.incumbent_limit``) and stops within 1 % of its own optimum."""
    from planning.allocate.ondemand import INCUMBENT_GAP, incumbent_limit
    from planning.allocate.solve import solve_allocation

    check_cancel(cancel, "library build: the single-shape templates' plan")
    problem = allocation_problem(resolved, sets)
    if not problem.templates:
        return
    limit = incumbent_limit(cancel, problem.time_limit_s)
    alloc = solve_allocation(replace(problem, time_limit_s=limit, mip_rel_gap=max(problem.mip_rel_gap, INCUMBENT_GAP)),
                             diagnose=False)
    anytime.offer(alloc, sets, None, f"ILP over the {len(problem.templates):,} single-shape templates")


def on_demand_allocation(ctx: EngineContext, resolved: ResolvedScenario, progress: ProgressFn | None,
                         cancel: CancelToken | None, anytime: Anytime | None = None, warm: WarmStart | None = None,
                         on_single: SingleRows | Callable[[list[TemplateSet]], None] | None = None,
                         with_baselines: bool = True) -> Allocation | None:
    """With ``options.templates: on-demand``: the allocation by column generation over a priced multiset search
    (:func:`planning.allocate.ondemand.solve_on_demand`), certified over all templates without enumerating them,
    started from ``warm``'s columns when given; None when the scenario needs the library path (served objective,
    histogram classes, aggregated mode, explicit templates, running instances, a budget below the cost optimum)
    or the option is off. ``on_single`` gets the groups' single-GPU-type template sets before pricing
    (``ondemand.single_type_sets``: the pipeline starts the baselines that read only those); ``with_baselines``
    False leaves those out and answers an LP proven short of the demand (``allocate.ondemand_short``)."""
    if resolved.scenario.options.templates != "on-demand":
        return None
    from planning.allocate.ondemand import solve_on_demand

    return solve_on_demand(ctx, resolved, progress, cancel, anytime, warm, on_single, with_baselines)
