"""A timeline planned with GPU sharing (issue 29 §3): each distinct epoch is the scenario's shared plan.

A scenario with ``options.sharing`` (kvpr | exact) plans its low-rate models on shared GPUs
(:func:`planning.sharing.checked.solve_checked`: the shared plan, or the plan without sharing when that is
cheaper or the shared GPUs miss an SLO in simulation); the timeline's template-based epochs (``engine``)
plan dedicated instances only. With K = 0 (no initialization penalty: platform-100's) the epochs do not chain, so
each epoch's plan is the shared plan of the epoch's demand alone: the epoch scenario holds every model's rate and
request sizes of that epoch and the epoch's availability, and each distinct one (an hourly week repeats its days)
is solved once, here or on the backend (``planning.parallel.run_tasks``, as ``fanout``), merged in epoch order,
so every backend gives the sequential plans; the static peak problem is one of them, so an epoch equal to it
gives it its plan. An epoch whose shared solve raises is that epoch's "no plan" (status ``error``) with its
error and fix, and the others are kept. Churn counts nodes per (region, shape) started and stopped between
consecutive epochs (shared nodes and the dedicated plan's nodes). The static peak plan is the shared plan of
every model's peak rate on the scarcest availability. Not covered (the caller plans dedicated instances and says
so): K > 0 (a shared node's start-up would need the running nodes in the packing), the look-ahead and offline
policies, histogram demand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from planning.context import CancelToken, EngineContext, ProgressFn
from planning.scenario import Demand, Scenario
from planning.timeline.demand import DemandSeries, at

if TYPE_CHECKING:
    from planning.timeline.loop import Horizon


def unsupported(scenario: Scenario, series: Mapping[str, DemandSeries], K: float, policies: Sequence[str]) -> str | None:
    """Why the shared route cannot plan this timeline (None: it can; "" when the scenario does not share)."""
    if scenario.options.sharing == "off":
        return ""
    if K != 0:
        return f"K = {K:g} (the shared route plans epochs that do not chain: K = 0)"
    if tuple(policies) != ("myopic",):
        return "the look-ahead and offline policies (the shared route plans each epoch on its own)"
    if any(s.buckets for s in series.values()):
        return "histogram demand"
    return None


def epoch_scenario(scenario: Scenario, series: Mapping[str, DemandSeries], e: int) -> Scenario:
    """``scenario`` with every series' model at epoch ``e``'s rate and request sizes (others keep theirs)."""
    return _at(scenario, series, lambda s: at(s, e))


def peak_scenario(scenario: Scenario, series: Mapping[str, DemandSeries], n_epochs: int) -> Scenario:
    """Every series' model at its peak rate (at that epoch's request sizes)."""
    return _at(scenario, series, lambda s: at(s, max(range(n_epochs), key=lambda k: s.rate_rps[at(s, k)])))


def _at(scenario: Scenario, series: Mapping[str, DemandSeries], index: Callable[[DemandSeries], int]) -> Scenario:
    models = []
    for m in scenario.models:
        s = series.get(m.id)
        if s is None:
            models.append(m)
            continue
        i = index(s)
        models.append(replace(m, demand=Demand(rate_rps=max(float(s.rate_rps[i]), 1e-9), input_len=s.input_len[i],
                                               output_len=s.output_len[i])))
    return replace(scenario, models=tuple(models), current=())


@dataclass(frozen=True)
class SharedEpoch:
    """What the timeline keeps of one epoch's shared plan (small: it travels back from the workers)."""

    status: str
    has_plan: bool
    cost_per_hour: float
    gap: float | None
    nodes: dict[tuple[str, str], int]  # (region, shape) -> nodes bought, shared and dedicated
    gpus: dict[str, int]
    cost_by_model: dict[str, float]
    served: dict[str, float]  # per model: the dedicated plan's worst phase; shared models 1 when packed
    shared_models: int
    shared_nodes: int
    seconds: float
    notes: tuple[str, ...] = ()
    error: str = ""  # the solve raised: what and the fix (status ``error``, no plan)


def summarize(res: Any, seconds: float) -> SharedEpoch:
    """A ``SharingResult`` as a :class:`SharedEpoch`."""
    nodes: dict[tuple[str, str], int] = {}
    cost_by_model: dict[str, float] = {}
    served: dict[str, float] = {}
    for n in res.shared_nodes:
        nodes[(n.region, n.shape)] = nodes.get((n.region, n.shape), 0) + 1
        for sm in n.models:  # a shared node's price split by compute load
            share = sm.load / n.load if n.load > 0 else 1.0 / len(n.models)
            cost_by_model[sm.model] = cost_by_model.get(sm.model, 0.0) + n.price_per_hour * share
    packed = res.shared_status in ("optimal", "feasible") and bool(res.shared_nodes or not res.shared_models)
    for m in res.shared_models:
        served[m] = 1.0 if packed else 0.0
    plan = res.dedicated
    if plan is not None:
        for inst in plan.instances:
            for shape, k in inst.usage.items():
                nodes[(inst.region, shape)] = nodes.get((inst.region, shape), 0) + int(k) * int(inst.count)
        for line in plan.cost_lines:
            if line.kind in ("provisioning", "transfer"):
                cost_by_model[line.model] = cost_by_model.get(line.model, 0.0) + line.cost_per_hour
        for s in plan.service:
            served[s.model] = min(served.get(s.model, 1.0), float(s.fraction))
    has_plan = res.status in ("optimal", "feasible")
    if not has_plan:  # a part without a plan (e.g. the time limit): nothing is bought, nothing served
        nodes, cost_by_model, served = {}, {}, {m: 0.0 for m in served}
    return SharedEpoch(str(res.status), has_plan, float(res.cost_per_hour) if has_plan else 0.0, res.gap,
                       nodes, dict(res.gpus()) if has_plan else {}, cost_by_model, served, len(res.shared_models),
                       len(res.shared_nodes), seconds, tuple(res.notes))


def solve_epochs(scenarios: Sequence[Scenario], ctx: EngineContext, *, workers: int = 1, backend: str | None = None,
                 cancel: CancelToken | None = None, progress: ProgressFn | None = None
                 ) -> tuple[list[SharedEpoch], int]:
    """The shared plan of every scenario, each distinct one solved once (here, on the process pool or as Ray
    tasks); returns them in order and how many were distinct.

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    PlanningError
        Ray missing or unreachable, or work lost on a Ray cluster after its retries (an epoch whose worker process
        died in the pool and again alone is that epoch's "no plan" with the error).
    """
    import json

    from planning.parallel import FanOut
    from planning.timeline.engine import describe_failure
    from planning.timeline.fanout import Distinct, run_distinct

    keys = [json.dumps(s.to_dict(), sort_keys=True, default=str) for s in scenarios]
    first: dict[str, int] = {}
    cache = str(ctx.cache_dir) if ctx.cache_dir is not None else None
    return run_distinct([first.setdefault(k, i) for i, k in enumerate(keys)], Distinct(
        here=lambda e: _solve(scenarios[e], ctx, cancel), task=shared_epoch_task,
        item=lambda e: (scenarios[e].to_dict(), cache), crashed=lambda _e, exc: failed(describe_failure(exc), 0.0),
        label="shared plan"), FanOut(backend, workers, progress, cancel, what="shared timeline epochs"))


def _solve(scenario: Scenario, ctx: EngineContext, cancel: CancelToken | None = None) -> SharedEpoch:
    """One epoch's shared plan; a solve that raises (anything but ``Cancelled``) is this epoch's "no plan" with
    its error and fix, so the other epochs are kept."""
    from planning.context import Cancelled
    from planning.sharing.checked import solve_checked
    from planning.timeline.engine import describe_failure

    t0 = time.perf_counter()
    try:  # checked: never dearer than the epoch without sharing, no SLO miss kept; an epoch shows no baselines
        res = solve_checked(scenario, method=None, context=ctx, cancel=cancel, baselines=False)
    except Cancelled:
        raise
    except Exception as exc:  # reported on this epoch, the horizon goes on
        return failed(describe_failure(exc), time.perf_counter() - t0)
    return summarize(res, time.perf_counter() - t0)


def failed(error: str, seconds: float) -> SharedEpoch:
    """The :class:`SharedEpoch` of an epoch whose solve raised: nothing bought, nothing served."""
    return SharedEpoch("error", False, 0.0, None, {}, {}, {}, {}, 0, 0, seconds, (), error)


_CONTEXTS: dict[str | None, EngineContext] = {}


def shared_epoch_task(item: tuple[dict[str, Any], str | None]) -> SharedEpoch:
    """One epoch's shared plan on a worker: (epoch scenario dict, the driver's template cache directory)."""
    from pathlib import Path

    from planning.context import default_context

    data, cache = item
    ctx = _CONTEXTS.get(cache)
    if ctx is None:
        ctx = _CONTEXTS[cache] = default_context(cache_dir=Path(cache) if cache else None)
    return _solve(Scenario.from_dict(data), ctx)


def failed_notes(epochs: Sequence[Any]) -> list[str]:
    """The note naming the epochs whose solve raised (each has no plan; the others were planned)."""
    bad = [ep for ep in epochs if ep.error]
    if not bad:
        return []
    listed = ", ".join(str(ep.index) for ep in bad[:12]) + (" …" if len(bad) > 12 else "")
    return [f"{len(bad)} of {len(epochs)} epochs failed and have no plan (epochs {listed}); the other epochs are "
            f"planned, the horizon total is not stated. Epoch {bad[0].index}: {bad[0].error}"]


def churn(new: Mapping[tuple[str, str], int], old: Mapping[tuple[str, str], int]) -> tuple[int, int]:
    """Nodes started and stopped between two epochs' node counts per (region, shape)."""
    started = sum(max(0, n - old.get(k, 0)) for k, n in new.items())
    stopped = sum(max(0, n - new.get(k, 0)) for k, n in old.items())
    return started, stopped


def run(hz: Horizon, peak: Scenario | None, *, ctx: EngineContext, availability_source: str,
        notes: Sequence[str] = (), progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Any:
    """The timeline of shared plans: ``hz.scns[e]`` (the epoch's availability) at epoch ``e``'s demand, and the
    static peak plan (``peak``: the scarcest availability; None: skipped). Returns a ``TimelineResult``."""
    from planning.offers import resolve_offers
    from planning.timeline.result import EpochResult, MethodEpoch, TimelineResult

    scenario, scns, series, demand = hz.scenario, hz.scns, hz.series, hz.demand
    K, epoch_hours, workers, backend = hz.K, hz.epoch_hours, hz.opts.workers, hz.opts.backend

    t0 = time.perf_counter()
    models = tuple(m.id for m in scenario.models)
    problems = [epoch_scenario(s, series, e) for e, s in enumerate(scns)]
    if peak is not None:
        problems.append(peak_scenario(peak, series, len(scns)))
    solved, distinct = solve_epochs(problems, ctx, workers=workers, backend=backend, cancel=cancel,
                                    progress=(lambda f, m: progress(0.05 + 0.9 * f, m)) if progress else None)
    t_epochs = time.perf_counter() - t0
    static = solved.pop() if peak is not None else None
    epochs = []
    prev: dict[tuple[str, str], int] = {}
    out_notes = list(notes)
    start = demand[0].start_hour
    for e, (scn, ep) in enumerate(zip(problems[: len(scns)], solved, strict=True)):
        started, stopped = churn(ep.nodes, prev)
        gpus_available: dict[str, int] = {}
        for o in resolve_offers(scns[e], ctx.catalog):
            gpus_available[o.gpu] = gpus_available.get(o.gpu, 0) + int(o.gpu_count) * int(o.available)
        methods = {}
        if static is not None:
            methods["static peak"] = MethodEpoch(
                cost_per_hour=static.cost_per_hour, served_fraction={m: 1.0 for m in models} if static.has_plan
                else {m: 0.0 for m in models}, feasible=static.has_plan, nodes_started=sum(static.nodes.values())
                if e == 0 else 0, nodes_stopped=0, gpus=static.gpus)
        epochs.append(EpochResult(
            index=e, start=start + e * epoch_hours, label=f"{start + e * epoch_hours:g}h", status=ep.status,
            has_plan=ep.has_plan, objective="cost", alpha=1.0, cost_per_hour=ep.cost_per_hour,
            provisioning_per_hour=ep.cost_per_hour, penalty_per_hour=0.0, cost_by_model=ep.cost_by_model,
            served_fraction={m: ep.served.get(m, 1.0 if ep.has_plan else 0.0) for m in models}, goodput_tok_s={},
            demand_rps={m: scn.model(m).demand.rate_rps for m in models}, gpus=ep.gpus,
            gpus_available=dict(sorted(gpus_available.items())), nodes_started=started, nodes_stopped=stopped,
            instances=sum(ep.nodes.values()), seconds=ep.seconds, methods=methods, gap=ep.gap if ep.has_plan else None,
            error=ep.error))
        prev = ep.nodes
    if static is not None and static.error:
        out_notes.append(f"the shared static peak plan has no plan: {static.error}")
    elif static is not None and not static.has_plan:
        out_notes.append("no shared static plan serves every model's peak within the scarcest availability.")
    out_notes.extend(failed_notes(epochs))
    lost = [ep.index for ep in epochs if not ep.has_plan and not ep.error]
    if lost:
        out_notes.append(f"{len(lost)} epochs have no shared plan (e.g. epoch {lost[0]}): their cost is unknown.")
    uncertified = [ep for ep in epochs if ep.has_plan and (ep.gap is None or ep.gap > 0)]
    if uncertified:
        worst = max((ep.gap for ep in uncertified if ep.gap is not None), default=None)
        out_notes.append(f"sharing ({scenario.options.sharing}): {len(uncertified)} of {len(epochs)} epoch plans are "
                         "not proven optimal" + (f" (worst proven gap {worst:.2%})." if worst is not None else
                                                 " (no bound for the shared part)."))
        if not lost and all(ep.gap is not None for ep in epochs):  # each epoch's bound, added: the horizon's
            total = sum(ep.cost_per_hour for ep in epochs) * epoch_hours
            bound = sum(ep.cost_per_hour * (1.0 - float(ep.gap or 0.0)) for ep in epochs) * epoch_hours
            out_notes.append(f"the horizon's total ${total:,.2f} is within {(total - bound) / total:.2%} of its proven "
                             f"lower bound ${bound:,.2f} (each epoch's bound, added).")
    return TimelineResult(
        policy="myopic", horizon_epochs=1,
        policy_info={"myopic": {"label": f"shared plan per epoch ({scenario.options.sharing})", "status": "feasible",
                                "bound": None, "gap": None, "seconds": t_epochs, "myopic_epochs": [],
                                "available": True}},
        scenario_name=scenario.name, epoch_hours=epoch_hours, K=K, models=models, epochs=tuple(epochs),
        static_peak_cost_per_hour=static.cost_per_hour if static is not None else 0.0,
        static_peak_feasible=bool(static is not None and static.has_plan),
        demand_sources={s.model: s.source for s in demand}, availability_source=availability_source, spot={},
        timings={"templates_seconds": 0.0, "epochs_seconds": t_epochs, "static_seconds": 0.0,
                 "independent_epochs_seconds": t_epochs, "distinct_epoch_problems": float(distinct),
                 "shared_epochs": 1.0, "total_seconds": time.perf_counter() - t0},
        notes=tuple(out_notes))
