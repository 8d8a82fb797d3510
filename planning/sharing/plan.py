"""The shared plan: low-rate models packed onto shared GPUs, popular models on dedicated templates, one budget.

With ``method="exact"`` and the cost objective, :mod:`planning.sharing.joint_plan` decides the split, the packing
and the dedicated templates in one model (``options.sharing_split: joint``, the default) or solves the threshold
split exactly (``threshold``), over the one availability. The steps below are the KVPR heuristic's, and the
fallback of the exact method under a budget, the served objective or histogram demand.

Steps (documented in docs/sharing.md):
1. Split the scenario's models: mean rate below ``options.sharing_threshold_rps`` (all when None) → shared;
   models that fit on no single-GPU node type with their KV pool also stay dedicated.
2. Profile each shared model (``planning.sharing.profiles``) on every single-GPU node type the scenario offers.
3. Pack them: ``kvpr`` (Prism Alg. 1 sized per node type) or ``exact`` (the packing MILP), within availability.
4. Solve the popular models with the existing allocation ILP (``planning.api.solve`` on a scenario holding only
   them) with the whole availability and the budget left after the shared nodes. When the two parts' nodes fit
   the availability together, the pair is the joint optimum of the split (each part is optimal on its own and
   neither took anything from the other): status ``optimal`` when both parts are. Otherwise the parts compete
   for nodes (``planning.sharing.joint_contend``): with the cost objective a Lagrangian bound prices the
   contended nodes at their value to the packing LP and its dedicated plan suggests the split; the orders
   (popular models first, shared nodes first) are tried while needed; the cheapest pair is kept, with the bound.
5. Report one cost and one GPU count covering both parts, and each shared node's models and memory split.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from planning.catalog.schema import parse_shape
from planning.context import (
    Cancelled,
    CancelToken,
    Deadline,
    EngineContext,
    ProgressFn,
    check_cancel,
    engine_context,
    time_left,
)
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import ModelRequest, Objective, Scenario
from planning.sharing.packing import NodeType, Packing, TailModel, exact_packing, fits, kvpr_packing
from planning.sharing.parts import node_usage as _node_usage
from planning.sharing.parts import part_bound as _part_bound
from planning.sharing.parts import plan_usage as _plan_usage
from planning.sharing.parts import resolve_parts as _resolve
from planning.sharing.parts import shared_nodes as _shared_nodes
from planning.sharing.parts import tail_models as _tail_models
from planning.sharing.profiles import (
    ModelProfile,
    model_profile,
    perf_with_specs,
    usable_memory_gb,
)
from planning.sharing.result import SharedNode, SharingResult

if TYPE_CHECKING:
    from planning.offers import ResolvedOffer
    from planning.perf import PerfModel


def models_subset(scenario: Scenario, keep: Sequence[str]) -> tuple[ModelRequest, ...]:
    """The scenario's models in ``keep``, each still resolvable on its own: a variant whose base is another model
    of the scenario that is not kept gets that base's definition (its catalog id, or its ``custom_config``),
    since it shares the architecture, not the weights."""
    by_id = {m.id: m for m in scenario.models}
    out = []
    for m in scenario.models:
        if m.id not in keep:
            continue
        base = by_id.get(m.base) if m.base is not None else None
        while base is not None and base.id not in keep and base.custom_config is None and base.base in by_id:
            base = by_id[str(base.base)]  # a variant of a variant: follow the chain to a definition
        if base is not None and base.id not in keep:
            m = (replace(m, base=None, custom_config=base.custom_config) if base.custom_config is not None
                 else replace(m, base=base.base or base.id))
        out.append(m)
    return tuple(out)


def split_models(scenario: Scenario, threshold_rps: float | None) -> tuple[list[str], list[str]]:
    """(shared, dedicated) model ids by mean rate: below the threshold → shared; None → all shared."""
    shared = [m.id for m in scenario.models if threshold_rps is None or m.demand.rate_rps < threshold_rps]
    return shared, [m.id for m in scenario.models if m.id not in shared]


def _node_types(offers: Sequence[ResolvedOffer], perf: PerfModel) -> list[NodeType]:
    types = []
    for o in offers:
        count, gpu = parse_shape(o.shape)
        if count == 1 and o.available > 0:
            types.append(NodeType(f"{o.region} {o.shape}", float(o.price_per_hour), int(o.available),
                                  usable_memory_gb(perf, gpu)))
    return types


# The last scenario's profiles (strong references: an identity match is the same objects): the exact path profiles
# every model once to see how fast this machine is, and the joint model then reads them instead of profiling again.
_LAST_PROFILES: list[tuple[EngineContext, Scenario, list[NodeType], dict[str, ModelProfile]]] = []


def shared_profiles(scenario: Scenario, ctx: EngineContext, model_ids: Sequence[str],
                    cancel: CancelToken | None = None) -> tuple[list[ModelProfile], list[NodeType]]:
    """Profiles of ``model_ids`` on the scenario's single-GPU node types, and those node types (``cancel`` is
    checked before each model: profiling 40 models takes seconds on a busy machine). Profiles of the same
    scenario object with the same context are computed once."""
    last = _LAST_PROFILES[0] if _LAST_PROFILES else None
    if last is not None and last[0] is ctx and last[1] is scenario:
        _ctx, _sc, types, known = last
    else:
        offers, specs = _resolve(scenario, ctx.catalog)
        types, known = _node_types(offers, perf_with_specs(ctx.perf, specs)), {}
        _LAST_PROFILES[:] = [(ctx, scenario, types, known)]
    missing = [mid for mid in model_ids if mid not in known]
    if missing:
        _offers, specs = _resolve(scenario, ctx.catalog)
        perf = perf_with_specs(ctx.perf, specs)
        gpus = sorted({t.key.split(" ")[1].split("x", 1)[1] for t in types})
        for mid in missing:
            check_cancel(cancel, f"profiling the shared models ({mid})")
            known[mid] = model_profile(scenario.model(mid), specs[mid], perf, gpus)
    return [known[mid] for mid in model_ids], list(types)


def pack(scenario: Scenario, ctx: EngineContext, model_ids: Sequence[str], method: str,
         cancel: CancelToken | None = None) -> tuple[Packing, list[ModelProfile], list[NodeType]]:
    """Profile and pack ``model_ids`` with ``method`` ("kvpr" or "exact") on the scenario's single-GPU nodes
    (the exact MILP gets the time left on ``cancel``'s deadline, at most ``options.time_limit_s``).

    Raises
    ------
    PlanningError
        Unknown method, no single-GPU node type offered, or a model that fits on none of them.
    """
    if method not in ("kvpr", "exact"):
        raise PlanningError("options.sharing", f"unknown packing {method!r}.", "use kvpr or exact.")
    profiles, types = shared_profiles(scenario, ctx, model_ids, cancel)
    if model_ids and not types:
        raise PlanningError("shapes", "offers no single-GPU node with availability for shared models.",
                            "add a 1-GPU shape (e.g. 1xL40S, 1xH100) or set options.sharing: off.")
    return pack_tail(scenario, _tail_models(profiles, types), types, method, cancel), profiles, types


def pack_tail(scenario: Scenario, tail: Sequence[TailModel], types: Sequence[NodeType], method: str,
              cancel: CancelToken | None = None) -> Packing:
    """:func:`pack`'s packing of profiled models: KVPR, the compact MILP, or from ``COLUMN_PACKING_MIN`` models ×
    types the column generation (half the time left)."""
    if method == "kvpr":
        return kvpr_packing(tail, types)
    limit = scenario.options.time_limit_s
    if len(tail) * len(types) >= COLUMN_PACKING_MIN:
        from planning.sharing.joint_plan import column_packing

        return column_packing(tail, types, time_limit_s=0.5 * time_left(cancel, limit, 0.4), cancel=cancel)
    return exact_packing(tail, types, time_limit_s=time_left(cancel, limit, 0.2), mip_rel_gap=scenario.options.mip_rel_gap)


def _fits_together(offers: Sequence[ResolvedOffer], *usages: Mapping[tuple[str, str], int]) -> bool:
    """Whether the summed node counts stay within every (region, shape)'s availability."""
    from planning.sharing.joint_contend import contended

    return not contended(offers, *usages)


def solve_shared(scenario: Scenario, *, method: str | None = None, context: EngineContext | None = None,
                 solve_dedicated: Callable[[Scenario], PlanResult] | None = None,
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                 baselines: bool = True) -> SharingResult:
    """Plan ``scenario`` with GPU sharing for its low-rate models (module docstring).

    Parameters
    ----------
    scenario:
        A validated Scenario; ``options.sharing_threshold_rps`` picks the shared models.
    method:
        ``"kvpr"`` or ``"exact"`` (default: ``options.sharing``; ``"off"`` there means ``"kvpr"``).
    context:
        An engine context (catalog + perf model); default ``planning.context.engine_context()``.
    solve_dedicated:
        ``f(scenario) -> PlanResult`` for the popular models (default ``planning.pipeline.solve`` under ``context``).
    progress, cancel:
        As for ``planning.api.solve`` (cancel is checked between the steps and inside the dedicated solve).
        ``options.time_limit_s`` bounds the whole call: the packing MILP and each dedicated solve get the time
        left (a dedicated solve at its limit returns its best plan, status ``feasible``); past the limit the
        re-solve of coupled parts is skipped and the other order (popular models first) is used if it fits.
    baselines:
        Also run the dedicated plan's baselines (False: a timeline epoch, which shows none; the answer's plan is
        then not solved again for them).

    Returns
    -------
    SharingResult: status ``optimal``/``feasible`` when both parts have a plan.

    Raises
    ------
    PlanningError
        Inputs the sharing step cannot plan (no single-GPU node type, a model fitting nowhere), with the fix.
    """
    def step(fraction: float, message: str) -> None:
        check_cancel(cancel, message)
        if progress is not None:
            progress(fraction, message)

    t0 = time.perf_counter()
    deadline = Deadline(scenario.options.time_limit_s, cancel)  # one limit for the whole call
    ctx = context or engine_context()
    method = method or (scenario.options.sharing if scenario.options.sharing != "off" else "kvpr")
    from planning.sharing.joint_plan import solve_joint_sharing, supported

    why_not = supported(scenario)
    threshold = scenario.options.sharing_threshold_rps
    shared_ids, dedicated_ids = split_models(scenario, threshold)
    notes: list[str] = []
    call = _Call(scenario, ctx, method, threshold, deadline, t0, step, solve_dedicated, progress, cancel, baselines)
    if method == "exact" and why_not is None:  # one model decides the split (or solves the threshold's exactly)
        first: SharingResult | None = None  # a KV-pressure plan first, when the time left is short (below)
        try:
            t_prof = time.perf_counter()
            shared_profiles(scenario, ctx, [m.id for m in scenario.models], deadline)
            left = deadline.remaining_s()
            if left is not None and EXACT_PER_PROFILE * (time.perf_counter() - t_prof) > left:
                step(0.0, "sharing: a first plan by KV-pressure packing (the joint model may not finish in the "
                          "time left on this machine)")
                first = _solve_shared(replace(call, method="kvpr"), list(shared_ids), list(dedicated_ids), [])
            exact = cast(SharingResult, solve_joint_sharing(scenario, ctx, split=scenario.options.sharing_split,
                                                            solve_dedicated=solve_dedicated, progress=progress,
                                                            cancel=deadline, baselines=baselines))
        except Cancelled as exc:
            if not deadline.timed_out() or exc.reason != "time limit":
                raise
            if first is None or first.status not in PLANNED:
                return _no_plan_in_time(scenario, method, threshold, shared_ids, dedicated_ids, notes, exc, t0)
            return _first_plan(first, f"at {exc.detail or 'a step'}", scenario.options.time_limit_s)
        if first is not None and first.status in PLANNED and (
                exact.status not in PLANNED or first.cost_per_hour < exact.cost_per_hour - 1e-9):
            return _first_plan(first, f"with status {exact.status}", scenario.options.time_limit_s)
        return exact
    step(0.0, "profiling the shared models")
    if method == "exact" and why_not is not None:
        notes.append(f"the joint sharing model does not plan {why_not}: the threshold split was solved part by part.")
    try:
        return _solve_shared(call, shared_ids, dedicated_ids, notes)
    except Cancelled as exc:
        if not deadline.timed_out() or exc.reason != "time limit":
            raise
        return _no_plan_in_time(scenario, method, threshold, shared_ids, dedicated_ids, notes, exc, t0)


PLANNED = ("optimal", "feasible")
# A cold exact sharing solve costs 15–25 times its profile step (long-tail: 6.7 CPU-s against 0.3): when the time
# left is below that multiple of what the profiles took here, a KV-pressure plan (about 1 CPU-s once the profiles
# exist) is made first, so a busy machine or a short limit still gets a plan.
EXACT_PER_PROFILE = 15.0


def _first_plan(first: SharingResult, how: str, limit_s: float) -> SharingResult:
    """The KV-pressure plan made first, returned because the joint model stopped ``how`` without a cheaper plan:
    status ``feasible`` (the heuristic packing has no bound) and a note with the fix."""
    return replace(first, status="feasible", gap=None, bound_per_hour=None, notes=(
        *first.notes, f"the joint sharing model stopped {how} within the time limit ({limit_s:g} s) without a "
        "cheaper plan: this is the KV-pressure packing's plan, made first (no proven gap). Fix: raise "
        "options.time_limit_s for the joint model's plan."))


def _no_plan_in_time(scenario: Scenario, method: str, threshold: float | None, shared_ids: Sequence[str],
                     dedicated_ids: Sequence[str], notes: Sequence[str], exc: Cancelled, t0: float) -> SharingResult:
    """The answer when the time limit came before both parts (or the joint model) had a plan: status
    ``time_limit``, no plan, the step it stopped at and the fix."""
    return SharingResult(sharing=method, status="time_limit", threshold_rps=threshold, shared_nodes=(),
                         shared_cost_per_hour=0.0, shared_status="time_limit", shared_gap=None, dedicated=None,
                         shared_models=tuple(shared_ids), dedicated_models=tuple(dedicated_ids),
                         timings={"total_seconds": time.perf_counter() - t0},
                         notes=(*notes, f"time limit {scenario.options.time_limit_s:g} s reached at {exc.detail or 'a step'} "
                          "before a plan was found; no plan. Fix: raise options.time_limit_s."))


@dataclass(frozen=True)
class _Call:
    """What one :func:`solve_shared` call passes to its part-by-part body: the scenario and context, the method
    and threshold, the deadline and start time, the progress step, and the caller's dedicated solve, progress,
    cancel token and baselines switch."""

    scenario: Scenario
    ctx: EngineContext
    method: str
    threshold: float | None
    deadline: Deadline
    t0: float
    step: Callable[[float, str], None]
    solve_dedicated: Callable[[Scenario], PlanResult] | None
    progress: ProgressFn | None
    cancel: CancelToken | None
    baselines: bool = True


@dataclass
class _Parts:
    """The two parts as the body settles them: the packing and its nodes, the dedicated plan, the summed bound,
    whether the parts were coupled without proof, and the contention's statistics."""

    packing: Packing
    nodes: tuple[SharedNode, ...]
    dedicated: PlanResult | None = None
    bound: float | None = None  # each part's proven bound with every node available, added (cost objective)
    coupled: bool = False
    stats: dict[str, float] = field(default_factory=dict)  # the contention's (joint_contend)
    dedicated_started: float = 0.0  # perf_counter when the dedicated part began


def _solve_shared(call: _Call, shared_ids: list[str], dedicated_ids: list[str], notes: list[str]) -> SharingResult:
    """The body of :func:`solve_shared` under its deadline (a time limit raises ``Cancelled`` before a plan)."""
    scenario, method, threshold = call.scenario, call.method, call.threshold
    profiles, types = shared_profiles(scenario, call.ctx, shared_ids, call.deadline)
    # models that fit on no single-GPU node with their KV pool (or miss their TTFT alone) stay dedicated
    too_big = [m.id for m in _tail_models(profiles, types) if not any(fits([m], t) for t in types)]
    if too_big:
        notes.append(f"{len(too_big)} low-rate models fit on no single-GPU node (memory, compute, TTFT) and stay "
                     f"dedicated: {', '.join(too_big)}.")
        shared_ids = [m for m in shared_ids if m not in too_big]
        dedicated_ids = [m.id for m in scenario.models if m.id not in shared_ids]
    t1 = time.perf_counter()
    call.step(0.1, f"packing {len(shared_ids)} models onto shared GPUs ({method})")
    packing, profiles, types = pack(scenario, call.ctx, shared_ids, method, call.deadline) if shared_ids else (
        Packing((), 0.0, "optimal", method), [], [])
    parts = _Parts(packing, _shared_nodes(packing, profiles, types))
    timings = {"profile_seconds": t1 - call.t0, "packing_seconds": time.perf_counter() - t1}
    notes.extend(packing.notes)
    if not packing.feasible:  # no packing: proven (infeasible) or none found in time (time_limit)
        late = packing.status == "time_limit"
        return SharingResult(sharing=method, status="time_limit" if late else "infeasible", threshold_rps=threshold,
                             shared_nodes=(), shared_cost_per_hour=math.inf, shared_status=packing.status,
                             shared_gap=packing.gap, dedicated=None, shared_models=tuple(shared_ids),
                             dedicated_models=tuple(dedicated_ids), timings=timings, notes=(*notes, (
                                 "no packing of the shared models was found before the time limit; raise "
                                 "options.time_limit_s.") if late else "the shared models cannot be packed within "
                             "availability."))
    if dedicated_ids:
        over_budget = _dedicated_part(call, parts, (profiles, types), dedicated_ids, notes)
        if over_budget is not None:
            return SharingResult(sharing=method, status="infeasible", threshold_rps=threshold,
                                 shared_nodes=parts.nodes, shared_cost_per_hour=packing.cost_per_hour,
                                 shared_status=packing.status, shared_gap=packing.gap, dedicated=None,
                                 shared_models=tuple(shared_ids), dedicated_models=tuple(dedicated_ids),
                                 timings=timings, notes=(*notes, over_budget))
        timings["dedicated_seconds"] = time.perf_counter() - parts.dedicated_started
    return _shared_answer(call, parts, (shared_ids, dedicated_ids), notes, timings)


def _dedicated_part(call: _Call, parts: _Parts, profiled: tuple[list[ModelProfile], list[NodeType]],
                    dedicated_ids: list[str], notes: list[str]) -> str | None:
    """The popular models' plan beside the packing (updates ``parts``; the contention settled by
    ``joint_contend.settle`` when they compete for nodes); the reason when the budget leaves them nothing."""
    from planning.sharing.joint_contend import Contest, pack_on, settle, shared_lp

    scenario, method, deadline = call.scenario, call.method, call.deadline
    profiles, types = profiled
    packing = parts.packing
    offers, _ = _resolve(scenario, call.ctx.catalog)
    sub = replace(scenario, models=models_subset(scenario, dedicated_ids))
    budget = scenario.objective.budget_per_hour
    if budget is not None:
        left = budget - packing.cost_per_hour
        if left <= 0:
            return (f"the shared nodes alone cost ${packing.cost_per_hour:,.2f}/h, above the budget "
                    f"${budget:,.2f}/h.")
        sub = replace(sub, objective=Objective(scenario.objective.kind, left))
        notes.append(f"budget: ${packing.cost_per_hour:,.2f}/h to shared nodes, ${left:,.2f}/h left for "
                     "the dedicated models (sequential: shared part first).")
    parts.dedicated_started = time.perf_counter()
    call.step(0.5, f"dedicated templates for {len(dedicated_ids)} popular models")
    solve_part = _part_solver(call)
    # the popular models' optimum with every node available; its baselines only when it is the answer (below)
    free = solve_part(sub, 0.5, False)
    parts.dedicated = free
    packing_free = packing  # the shared part's packing with every node available
    if scenario.objective.kind == "cost" and budget is None:  # each part's bound with every node, added
        parts.bound = _part_bound(packing_free.cost_per_hour, packing_free.gap, packing_free.bound_per_hour) \
            + _part_bound(free.cost_per_hour, free.mip_gap, None) if free.has_plan else None
    if free.instances and not _fits_together(offers, _node_usage(parts.nodes), _plan_usage(free)):
        call.step(0.7, "the two parts compete for nodes: re-solving on what each leaves the other")
        if free.status == "optimal" and packing_free.status == "optimal" and scenario.objective.kind == "cost":
            parts.bound = packing_free.cost_per_hour + free.cost_per_hour
            notes.append(f"lower bound ${parts.bound:,.2f}/h: each part's optimum with every node available, added.")
        contest = Contest(scenario, sub, offers,
                          pack_on=lambda taken: pack_on(taken, scenario, profiles, types, method, deadline),
                          solve_part=solve_part,
                          shared_lp=lambda d: shared_lp(packing_free, profiles, types, method, deadline, d),
                          deadline=deadline, baselines=call.baselines)
        settled = settle(contest, packing, parts.nodes, free, parts.bound)
        parts.packing, parts.nodes, parts.dedicated, parts.bound = (settled.packing, settled.nodes, settled.dedicated,
                                                                    settled.bound)
        notes.extend(settled.notes)
        parts.coupled, parts.stats = not settled.optimal, settled.stats
    if (parts.dedicated is free and free.has_plan and call.solve_dedicated is None and call.baselines
            and not deadline.expired()):
        again = solve_part(sub, 0.9, True)  # the free plan is the answer: solved again with its baselines
        if again.has_plan and again.cost_per_hour <= free.cost_per_hour * (1 + 1e-9) + 1e-9:
            parts.dedicated = again
    return None


def _part_solver(call: _Call) -> Callable[[Scenario, float, bool], PlanResult]:
    """``f(part, progress from, with baselines) -> PlanResult``: the caller's dedicated solve, or
    ``pipeline.solve`` under the call's context with the time left (at least ``MIN_PART_S``)."""
    from planning.pipeline import solve as solve_plan

    deadline, progress = call.deadline, call.progress

    def solve_part(part: Scenario, lo: float, with_baselines: bool = True) -> PlanResult:
        if call.solve_dedicated is not None:
            return call.solve_dedicated(part)
        check_cancel(deadline, "the dedicated models' plan")
        left = time_left(deadline, part.options.time_limit_s, MIN_PART_S)  # the dedicated solve's own limit
        part = replace(part, options=replace(part.options, time_limit_s=left))
        return solve_plan(part, context=call.ctx, cancel=call.cancel, progress=(
            lambda f, m: progress(lo + 0.2 * f, m)) if progress is not None else None,
            with_baselines=with_baselines and call.baselines)

    return solve_part


def _shared_answer(call: _Call, parts: _Parts, ids: tuple[list[str], list[str]], notes: list[str],
                   timings: dict[str, float]) -> SharingResult:
    """The SharingResult of the settled parts: its status, the notes on low attainment and KVPR, the gap."""
    scenario, method = call.scenario, call.method
    shared_ids, dedicated_ids = ids
    packing, nodes, dedicated, bound = parts.packing, parts.nodes, parts.dedicated, parts.bound
    ok_dedicated = dedicated is None or dedicated.status in ("optimal", "feasible")
    status = ("optimal" if packing.status == "optimal" and not parts.coupled
              and (dedicated is None or dedicated.status == "optimal")
              else "feasible") if ok_dedicated else (dedicated.status if dedicated is not None else "infeasible")
    low = sorted((m.attainment_estimate, m.model) for n in nodes for m in n.models if m.attainment_estimate < 0.99)
    if low:
        notes.append(f"{len(low)} shared models have an estimated TTFT attainment below 99 % (analytic M/M/1 "
                     f"estimate; lowest {low[0][1]} {low[0][0]:.1%}): check them in the simulator.")
    if method == "kvpr":
        notes.append("shared part: KVPR heuristic (Prism Alg. 1), not proven optimal; use --sharing exact to compare.")
    timings["total_seconds"] = time.perf_counter() - call.t0
    total = packing.cost_per_hour + (dedicated.cost_per_hour if dedicated is not None else 0.0)
    if not dedicated_ids and scenario.objective.kind == "cost" and scenario.objective.budget_per_hour is None:
        bound = _part_bound(packing.cost_per_hour, packing.gap, packing.bound_per_hour)
    gap = (max(0.0, (total - bound) / total) if bound is not None and math.isfinite(bound) and ok_dedicated
           and total > 0 else None)
    if gap is not None and status == "optimal":
        gap = 0.0
    return SharingResult(sharing=method, status=status, threshold_rps=call.threshold, shared_nodes=nodes,
                         shared_cost_per_hour=packing.cost_per_hour, shared_status=packing.status,
                         shared_gap=packing.gap, dedicated=dedicated, shared_models=tuple(shared_ids),
                         dedicated_models=tuple(dedicated_ids), timings=timings, notes=tuple(notes),
                         bound_per_hour=bound if bound is not None and math.isfinite(bound) else None, gap=gap,
                         stats=parts.stats)


COLUMN_PACKING_MIN = 2_000
"""Models × node types from which the exact packing is solved by column generation (``joint_plan.column_packing``)
instead of the compact MILP of ``planning.sharing.packing`` (whose symmetric node copies grow with the product)."""
MIN_PART_S = 0.5
"""A dedicated solve gets at least this many seconds (its own anytime incumbent needs a moment)."""


def threshold_sweep(scenario: Scenario, thresholds: Sequence[float | None], *, method: str = "kvpr",
                    context: EngineContext | None = None, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None, backend: str | None = None,
                    workers: int = 0) -> list[dict[str, Any]]:
    """Cost and GPUs of the shared plan as the sharing threshold varies (for a what-if slider).

    Each threshold is an independent shared plan (its split, packing and dedicated part), so the points fan out
    like ``planning.api.sweep``'s: here one after another by default (the engine's warm tables make a point after
    the first cheap), on the process pool with ``workers`` ≥ 2, or as Ray tasks with ``backend="ray"``; the rows
    are the same on every backend.

    Parameters
    ----------
    scenario:
        The scenario; its ``options.sharing_threshold_rps`` is replaced by each value (None = share all).
    thresholds:
        Rates in req/s.
    method:
        ``"kvpr"`` (fast) or ``"exact"``.
    context:
        The engine context of the points solved here (the pool's and Ray's workers use their own).
    progress, cancel, backend, workers:
        As for ``planning.api.sweep``.

    Returns
    -------
    One dict per threshold, of the checked plan (``sharing.checked.solve_checked``: the shared plan, or the plan
    without sharing when that is cheaper or the shared GPUs miss an SLO): threshold_rps, status, cost_per_hour,
    shared_cost_per_hour, gpus, shared_gpus, shared_models (count), returned (``"shared"`` or ``"dedicated"``),
    and the shared plan's own cost and shared models (sharing_plan_cost_per_hour, sharing_plan_models), returned
    or not.
    """
    from planning.parallel import FanOut, fan_out

    points = [(scenario.to_dict(), th, method) for th in thresholds]
    labels = [f"sharing threshold {th:g} req/s" if th is not None else "sharing threshold: none" for th in thresholds]
    return list(fan_out(threshold_point, points, labels, FanOut(
        backend, workers, progress, cancel, what="sharing threshold sweep",
        here=lambda point, cancel=None: threshold_point(point, cancel=cancel, context=context))))


def threshold_point(point: tuple[dict[str, Any], float | None, str], cancel: CancelToken | None = None,
                    context: EngineContext | None = None) -> dict[str, Any]:
    """One threshold sweep point (scenario as a dict, threshold, method) → its row (a task of any backend)."""
    data, th, method = point
    scenario = Scenario.from_dict(data)
    from planning.sharing.checked import solve_checked

    variant = replace(scenario, options=replace(scenario.options, sharing_threshold_rps=th))
    res = solve_checked(variant, method=method, context=context or engine_context(), cancel=cancel)
    returned = str(res.comparison.get("returned", "shared"))
    lost = returned == "dedicated"  # the shared plan lost: its figures are the comparison's
    return {"threshold_rps": th, "status": res.status, "cost_per_hour": res.cost_per_hour,
            "shared_cost_per_hour": res.shared_cost_per_hour, "gpus": res.n_gpus,
            "shared_gpus": len(res.shared_nodes), "shared_models": len(res.shared_models), "returned": returned,
            "sharing_plan_cost_per_hour": res.comparison.get("cost_per_hour") if lost else res.cost_per_hour,
            "sharing_plan_models": int(res.comparison.get("shared_models") or 0) if lost else len(res.shared_models)}
