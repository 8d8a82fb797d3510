"""A shared plan that checks itself: never dearer than the plan without sharing, never "feasible" with an SLO miss.

:func:`solve_checked` (what ``planning.api.solve_shared`` runs) makes the shared plan (:func:`solve_shared`, KVPR or
exact), the dedicated plan of every model (sharing off, the plain answer), and simulates the shared GPUs request by
request (``simulate_sharing``, 600 s, seed 0: about a second on long-tail). Its checks
(:mod:`planning.checks`): shared ≤ dedicated (both ``cost_per_hour``: the nodes of both parts, the dedicated
part's start-up allowance counted alike); per shared model the simulated SLO attainment ≥ 99 % (the analytic M/M/1
estimate beside it); the dedicated part's own checks; the proven gap. ``options.time_limit_s`` bounds the whole
call: ``SHARED_SHARE`` of it for the shared plan, what is left of it for the plan without sharing. Every sharing
caller uses it: ``planning.api.solve_shared``, a timeline epoch with sharing, each threshold sweep point.

Which plan is returned (the rule, docs/sharing.md "Checks"):
1. the shared plan when it passes every cost and SLO check;
2. else the dedicated plan when it has a plan and passes its SLO checks; the shared plan becomes the
   ``comparison`` with why it lost ("dearer by $15.73/h", "6 models below 99 % attainment");
3. else the cheaper of the two that has a plan, with status ``slo_miss`` when it fails an SLO check.
A heuristic's plan (KVPR) is thus never returned dearer than the plan without sharing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from planning.checks import ATTAINMENT_TARGET, NA, attainment_check, gap_check, not_dearer, settle_status
from planning.context import CancelToken, Deadline, EngineContext, ProgressFn, check_cancel, time_left
from planning.result import Check, PlanResult
from planning.scenario import Scenario
from planning.sharing.plan import solve_shared
from planning.sharing.result import SharingResult

SIM_DURATION_S = 600.0
SIM_SEED = 0


SHARED_SHARE = 0.9
"""Of the caller's ``options.time_limit_s``, the share the shared plan may use — only its safety net: it stops on
work (``joint.JointWork``), and a plan the clock stopped is flagged ``time_limited`` (so most of the limit goes to
it: at 60 %, platform-100's shared plan, 72 s of 120, was cut short at load 9, where its work takes ~71 s); the
plan without sharing (the comparison) gets what is left of the same limit, at least ``MIN_DEDICATED_S``, and is
flagged ``comparison.time_limited`` when its limit stops it: the whole checked solve keeps to the caller's one
limit."""
MIN_DEDICATED_S = 0.5


def solve_checked(scenario: Scenario, *, method: str | None, context: EngineContext,
                  solve_dedicated: Callable[[Scenario], PlanResult] | None = None,
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                  baselines: bool = True) -> SharingResult:
    """The shared plan and the dedicated plan of every model, checked; the better one returned (module docstring).

    Parameters
    ----------
    scenario:
        The scenario (``options.sharing_threshold_rps`` picks the shared models; ``options.time_limit_s`` bounds
        the whole call: ``SHARED_SHARE`` of it for the shared plan, what is left for the plan without sharing).
    method:
        ``"kvpr"`` or ``"exact"`` (default: ``options.sharing``).
    context:
        The engine context (catalog, perf model).
    solve_dedicated:
        ``f(scenario) -> PlanResult``: the plain solve, for the plan without sharing (default:
        ``planning.pipeline.solve`` under ``context``); its scenario carries the time left as its limit.
    progress, cancel:
        As for ``planning.api.solve_shared``.
    baselines:
        The dedicated plans' baselines (False: a timeline epoch, which shows none).

    Returns
    -------
    SharingResult with ``checks`` and ``comparison``.
    """
    limit = scenario.options.time_limit_s
    deadline = Deadline(limit, cancel)  # the caller's one limit, for both solves
    part = replace(scenario, options=replace(scenario.options, time_limit_s=SHARED_SHARE * limit))
    shared = solve_shared(part, method=method, context=context, progress=progress, cancel=cancel,
                          baselines=baselines)
    check_cancel(cancel, "the plan without sharing (the comparison)")
    if not shared.shared_nodes and shared.dedicated is not None and set(shared.dedicated_models) >= \
            {m.id for m in scenario.models}:
        dedicated: PlanResult | None = shared.dedicated  # nothing was shared: it is the plain answer
    else:
        plain = replace(scenario, options=replace(scenario.options, sharing="off",
                                                  time_limit_s=time_left(deadline, limit, MIN_DEDICATED_S)))
        dedicated = (solve_dedicated or _plain_solver(context, cancel, baselines))(plain)
    attainment = simulated_attainment(shared, scenario, context)
    return replace(plain_flagged(choose(shared, dedicated, attainment), dedicated), scenario=scenario.to_dict())


def plain_flagged(result: SharingResult, dedicated: PlanResult | None) -> SharingResult:
    """The plan without sharing stopped by its time limit (a wall clock, not work) depends on the machine's speed:
    flag the comparison (``comparison["time_limited"]``), or the answer when that plan is the one returned."""
    if dedicated is None or not (dedicated.stopped_at or dedicated.status == "time_limit"):
        return result
    if result.comparison.get("returned") == "dedicated":
        return replace(result, time_limited=True)
    return replace(result, comparison={**result.comparison, "time_limited": True})


def _plain_solver(context: EngineContext, cancel: CancelToken | None, baselines: bool
                  ) -> Callable[[Scenario], PlanResult]:
    """``pipeline.solve`` under ``context``: the plan without sharing, for a caller below the face."""
    from planning.pipeline import solve

    return lambda plain: solve(plain, context=context, cancel=cancel, with_baselines=baselines)


def simulated_attainment(result: SharingResult, scenario: Scenario, context: EngineContext) -> dict[str, float]:
    """Per shared model, its SLO attainment in the request-level simulation of the shared GPUs (empty: none)."""
    if not result.shared_nodes:
        return {}
    from planning.sharing.simulate import SharedSimOptions, simulate_sharing

    sim = simulate_sharing(result, scenario, SharedSimOptions(SIM_DURATION_S, SIM_SEED), context=context)
    return {m.model: float(m.attainment) for m in sim.models}


def sharing_checks(result: SharingResult, dedicated: PlanResult | None,
                   attainment: Mapping[str, float]) -> tuple[Check, ...]:
    """The checks of a shared plan: against the dedicated plan, per shared model its SLO attainment (simulated
    when ``attainment`` has it, else the analytic estimate), the dedicated part's own checks, the proven gap."""
    if result.status not in ("optimal", "feasible", "slo_miss"):
        return (Check("a plan exists", "served", "failed", {}, "", f"no shared plan ({result.status}).",
                      "see the notes."),)
    out = [vs_dedicated(result, dedicated)]
    for node in result.shared_nodes:
        for m in node.models:
            name = f"SLO attainment {m.model}"
            if m.model in attainment:
                c = attainment_check(name, attainment[m.model], f"simulated: shared GPUs, {SIM_DURATION_S:g} s, "
                                     f"seed {SIM_SEED}")
                out.append(replace(c, figures={**c.figures, "analytic estimate": m.attainment_estimate}))
            else:
                out.append(attainment_check(name, m.attainment_estimate, "analytic M/M/1 TTFT estimate"))
    if result.dedicated is not None:
        out += [c for c in result.dedicated.checks if c.kind in ("slo", "served")]
    requested = float(dict(result.dedicated.scenario.get("options") or {}).get("mip_rel_gap", 1e-3)) \
        if result.dedicated is not None else 1e-3
    out.append(gap_check(result.gap, requested, "time-limited" if result.time_limited else ""))
    return tuple(out)


def vs_dedicated(result: SharingResult, dedicated: PlanResult | None) -> Check:
    """shared ≤ dedicated (the plan of every model without sharing), like for like."""
    name = "shared ≤ dedicated"
    if dedicated is None or not dedicated.has_plan:
        why = "was not computed" if dedicated is None else f"has no plan ({dedicated.status})"
        return Check(name, "cost", NA, {"plan $/h": result.cost_per_hour}, "", f"the plan without sharing {why}.")
    return not_dearer(name, result.cost_per_hour, dedicated.cost_per_hour, alt_label="dedicated",
                      basis="like for like: every model served, nodes of both parts",
                      cause=f"the {result.sharing} plan costs ${result.cost_per_hour - dedicated.cost_per_hour:,.2f}/h "
                            "more than serving every model on dedicated templates.",
                      fix="return the dedicated plan (done), or use --sharing exact.")


def choose(shared: SharingResult, dedicated: PlanResult | None, attainment: Mapping[str, float]) -> SharingResult:
    """The returned plan by the rule of the module docstring, with its checks and the comparison."""
    checks = sharing_checks(shared, dedicated, attainment)
    lost = [c for c in checks if c.failed and c.kind in ("cost", "slo")]
    planned = shared.status in ("optimal", "feasible")
    ded_ok = dedicated is not None and dedicated.has_plan and not any(c.kind == "slo" and c.failed
                                                                      for c in dedicated.checks)
    ded_cost = dedicated.cost_per_hour if dedicated is not None and dedicated.has_plan else None
    if planned and not lost:
        comparison = {"plan": "dedicated (no sharing)", "cost_per_hour": ded_cost,
                      "status": dedicated.status if dedicated is not None else "not computed",
                      "why": "dearer than the shared plan" if ded_cost is not None else "not computed",
                      "returned": "shared"}
        return replace(shared, checks=checks, comparison=comparison)
    if dedicated is not None and ded_ok:
        return dedicated_answer(shared, dedicated, _why(shared, lost))
    status = settle_status(shared.status, checks)
    return replace(shared, status=status, checks=checks, comparison={
        "plan": "dedicated (no sharing)", "cost_per_hour": ded_cost,
        "status": dedicated.status if dedicated is not None else "not computed",
        "why": "no plan that meets every SLO" if dedicated is not None else "not computed", "returned": "shared"})


def _why(shared: SharingResult, lost: list[Check]) -> str:
    """Why the shared plan lost, in words: dearer by how much, which models miss their SLO."""
    if shared.status not in ("optimal", "feasible"):
        return f"no shared plan ({shared.status})"
    parts = [c.cause.rstrip(".") for c in lost if c.kind == "cost"]
    slo = sorted((float(c.figures.get("attainment") or 0.0), c.name.removeprefix("SLO attainment ")) for c in lost
                 if c.kind == "slo")
    if slo:
        parts.append(f"{len(slo)} models below {ATTAINMENT_TARGET:.0%} SLO attainment (lowest {slo[0][1]} "
                     f"{slo[0][0]:.1%})")
    return "; ".join(parts)


def dedicated_answer(shared: SharingResult, dedicated: PlanResult, why: str) -> SharingResult:
    """The dedicated plan as the answer, the shared plan shown as the comparison that lost and why."""
    ids = tuple(sorted({i.model for i in dedicated.instances} | set(shared.shared_models) | set(shared.dedicated_models)))
    cost = shared.cost_per_hour if math.isfinite(shared.cost_per_hour) else None
    lost = Check(f"{shared.sharing} sharing plan", "cost", NA,
                 {"shared $/h": cost, "dedicated $/h": dedicated.cost_per_hour}, "the comparison that lost",
                 f"the {shared.sharing} plan lost: {why}. The dedicated plan is returned.")
    note = (f"the {shared.sharing} sharing plan" + (f" (${cost:,.2f}/h, {shared.status})" if cost is not None else "")
            + f" lost to the plan without sharing (${dedicated.cost_per_hour:,.2f}/h): {why}; returned the plan "
            "without sharing.")
    return SharingResult(
        sharing=shared.sharing, status=dedicated.status, threshold_rps=shared.threshold_rps, shared_nodes=(),
        shared_cost_per_hour=0.0, shared_status="none", shared_gap=None, dedicated=dedicated, shared_models=(),
        dedicated_models=ids, timings=dict(shared.timings), notes=(*shared.notes, note), split="dedicated", gap=dedicated.mip_gap if dedicated.status
        == "feasible" else (0.0 if dedicated.status == "optimal" else None),
        bound_per_hour=None, checks=(lost, *dedicated.checks),
        comparison={"plan": f"{shared.sharing} sharing", "cost_per_hour": cost, "status": shared.status, "why": why,
                    "returned": "dedicated", "shared_models": len(shared.shared_models),
                    "time_limited": shared.time_limited})
