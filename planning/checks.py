"""The checks every result carries: never dearer than an alternative it computed, SLOs met, demand served, gap.

Each check (:class:`planning.result.Check`) names what it compares, the figures, how they were obtained, and —
when it fails — the cause and the fix. Made where the result is made: :func:`plan_checks` by
``assemble.build_plan_result`` (every plan: pipeline, finance, what-ifs, timeline epochs), the sharing checks by
``sharing.plan`` and the policy checks by the timeline. The status rule (:func:`settle_status`): a plan is
``optimal`` or ``feasible`` only when every SLO check passes; otherwise its status is ``slo_miss`` (a plan that
exists and misses a latency target; the CLI exits with 4).

Rules
-----
* cost ≤ alternative: like for like only — the plan's ``comparable_cost`` (provisioning + KV transfer + committed)
  against a baseline's ``cost_per_hour`` (the same three), and only when both serve the same demand
  (``result.savings_pct`` is not None); otherwise not applicable. Tolerance :data:`COST_TOL` (relative).
* SLO attainment ≥ :data:`ATTAINMENT_TARGET` per model: simulated when a simulation was run
  (:func:`with_simulation`; ``api.simulated_checks`` on the Plan page), else the analytic estimate — for a
  dedicated plan each instance's planned engine step (``EnginePlan.step_ms``: the prefill pipeline's latency, the
  decode cycle per token) against the model's TTFT / TPOT when the result carries engine plans, otherwise the
  templates' construction (every stage's step within SLO / S at the planned throughput, said so in the basis); for
  shared GPUs the request-level simulation (``sharing.checked``) or the M/M/1 TTFT estimate.
* served fraction: 100 % under the cost objective; under a budget the share it buys (a shortfall is a failed
  check with the budget that would serve all, when the diagnostics name it).
* proven gap ≤ the requested ``options.mip_rel_gap`` (failed when a time limit stopped the solve above it; not
  applicable when nothing bounds it, e.g. a heuristic).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from planning.result import Check, GroupService, PlanResult, savings_pct

PASSED, FAILED, NA = "passed", "failed", "not-applicable"
ATTAINMENT_TARGET = 0.99  # share of requests within their SLOs (the simulator's headroom target)
COST_TOL = 1e-6  # relative: costs closer than this are equal
STEP_TOL = 0.01  # relative: a planned step within 1 % of its SLO meets it (tables are rounded to 3 decimals)
SLO_MISS = "slo_miss"


def not_dearer(name: str, plan: float, alternative: float, *, alt_label: str, basis: str = "like for like",
               cause: str = "", fix: str = "") -> Check:
    """The check "plan ≤ alternative" ($/h), passed within :data:`COST_TOL`."""
    ok = plan <= alternative * (1.0 + COST_TOL) + COST_TOL
    figures = {"plan $/h": plan, f"{alt_label} $/h": alternative}
    if ok:
        return Check(name, "cost", PASSED, figures, basis)
    return Check(name, "cost", FAILED, figures, basis,
                 cause or f"the plan costs ${plan - alternative:,.2f}/h more than {alt_label}.", fix)


def settle_status(status: str, checks: Iterable[Check]) -> str:
    """``status`` after the checks: a planned status (optimal, feasible) with a failed SLO check is ``slo_miss``;
    ``slo_miss`` whose SLO checks now pass (a simulation cleared them) is ``feasible``."""
    miss = any(c.kind == "slo" and c.failed for c in checks)
    if status in ("optimal", "feasible") and miss:
        return SLO_MISS
    return "feasible" if status == SLO_MISS and not miss else status


def with_checks(result: PlanResult) -> PlanResult:
    """``result`` with its :func:`plan_checks` and the status they allow (:func:`settle_status`)."""
    checks = plan_checks(result)
    return replace(result, checks=checks, status=settle_status(result.status, checks))


def plan_checks(result: PlanResult, attainment: Mapping[str, float] | None = None) -> tuple[Check, ...]:
    """Every check of a dedicated plan: against each baseline, per model its SLO, the served fraction, the gap.

    Parameters
    ----------
    result:
        The plan (its scenario, baselines, instances with their engine plans).
    attainment:
        Per model, the simulated SLO attainment (None: the analytic estimate is used).
    """
    if not result.has_plan:
        return (Check("a plan exists", "served", FAILED, {}, "", result.message or f"no plan ({result.status}).",
                      "see the diagnostics."),)
    out = [baseline_check(result, b) for b in result.baselines]
    out += slo_checks(result, attainment)
    out.append(served_check(result))
    out.append(gap_check(result.mip_gap, _requested_gap(result.scenario), result.stopped_at))
    return tuple(out)


def baseline_check(result: PlanResult, b: Any) -> Check:
    """plan ≤ baseline ``b`` (a :class:`~planning.result.BaselineSummary`), like for like."""
    name = f"cost ≤ {b.name}"
    if not b.ran:
        return Check(name, "cost", NA, {}, "", "the baseline did not run (time limit).")
    if not b.feasible:
        return Check(name, "cost", NA, {"plan $/h": result.comparable_cost}, "",
                     f"{b.name} cannot meet the demand ({b.served_fraction:.1%} served): no like-for-like cost.")
    if savings_pct(result.comparable_cost, b.cost_per_hour, result.served_fraction, b.served_fraction) is None:
        return Check(name, "cost", NA, {"plan served": result.served_fraction, f"{b.name} served": b.served_fraction},
                     "", "the two serve different demand: their costs are not comparable.")
    stopped = result.status != "optimal" and (result.stopped_at or (result.mip_gap or 0.0) > 0)
    cause = (f"the solve stopped before the optimum (gap {result.mip_gap or 0:.2%}"
             + (f", at {result.stopped_at}" if result.stopped_at else "") + ") with a plan dearer than "
             f"{b.name}." if stopped else f"{b.name} found a cheaper plan over templates the plan's solve also had.")
    fix = ("raise options.time_limit_s (or loosen nothing: the baseline's plan is a valid answer)." if stopped else
           "report it with the scenario (planning solve --json): the certified plan should never lose.")
    return not_dearer(name, result.comparable_cost, b.cost_per_hour, alt_label=b.name,
                      basis="like for like: same demand, same cost components", cause=cause, fix=fix)


def slo_checks(result: PlanResult, attainment: Mapping[str, float] | None = None) -> list[Check]:
    """One SLO check per model of the plan: simulated attainment when given, else the analytic step estimate."""
    models = [str(m.get("id")) for m in result.scenario.get("models", ())] or sorted({i.model for i in result.instances})
    slos = {str(m.get("id")): dict(m.get("slo") or {}) for m in result.scenario.get("models", ())}
    out = []
    for model in models:
        name = f"SLO attainment {model}"
        if attainment is not None and model in attainment:
            out.append(attainment_check(name, attainment[model], "simulated"))
            continue
        out.append(_analytic_slo(name, result, model, slos.get(model, {})))
    return out


def attainment_check(name: str, attainment: float, basis: str, target: float = ATTAINMENT_TARGET) -> Check:
    """attainment ≥ target (both shares of requests)."""
    figures = {"attainment": attainment, "target": target}
    if math.isfinite(attainment) and attainment >= target - 1e-12:
        return Check(name, "slo", PASSED, figures, basis)
    return Check(name, "slo", FAILED, figures, basis,
                 f"{attainment:.1%} of requests meet their SLOs ({basis}), below the {target:.0%} target.",
                 "give the model more capacity (a dedicated plan, a lower utilisation) or relax its SLO; check it in "
                 "the simulator.")


def _analytic_slo(name: str, result: PlanResult, model: str, slo: Mapping[str, Any]) -> Check:
    """The worst planned engine step of ``model``'s instances against its SLO (prefill: TTFT, else TPOT)."""
    worst: tuple[float, float, float, str] | None = None  # (ratio, step, slo, phase)
    for inst in result.instances:
        if inst.model != model or inst.engine is None or inst.engine.step_ms <= 0:
            continue
        target = slo.get("prefill_ms") if inst.phase == "prefill" else slo.get("decode_ms")
        if not target:
            continue
        ratio = inst.engine.step_ms / float(target)
        if worst is None or ratio > worst[0]:
            worst = (ratio, inst.engine.step_ms, float(target), inst.phase)
    if worst is None:
        return Check(name, "slo", PASSED, {}, "analytic estimate: every template is sized to the SLO (per-stage "
                     "budget SLO / S); no engine step to compare")
    ratio, step, target, phase = worst
    what = "TTFT" if phase == "prefill" else "TPOT"
    figures = {"planned step ms": step, f"{what} SLO ms": target}
    basis = f"analytic estimate: planned {phase} engine step at its batch, no simulation run"
    if ratio <= 1.0 + STEP_TOL:
        return Check(name, "slo", PASSED, figures, basis)
    return Check(name, "slo", FAILED, figures, basis,
                 f"the planned {phase} step {step:,.1f} ms exceeds the {what} SLO {target:,.0f} ms.",
                 f"relax {model}'s {what} SLO to ≥ {step:,.0f} ms or offer faster GPUs.")


def served_check(result: PlanResult) -> Check:
    """The served fraction: all demand under the cost objective; under a budget the share it buys."""
    figures = {"served": result.served_fraction, "demand": 1.0}
    if result.served_fraction >= 1.0 - 1e-4:
        return Check("served fraction", "served", PASSED, figures, "served ÷ demanded, the least-served model")
    short = _least_served(result.service)
    return Check("served fraction", "served", FAILED, figures, "served ÷ demanded, the least-served model",
                 f"the plan serves {result.served_fraction:.1%} of the demand" + (f" ({short})" if short else "")
                 + (" within the budget." if result.objective == "served" else "."),
                 "raise the budget or the availability; the diagnostics name the budget that serves 100 %.")


def _least_served(service: Sequence[GroupService]) -> str:
    worst = min(service, key=lambda s: s.fraction, default=None)
    return f"{worst.model}/{worst.phase} at {worst.fraction:.1%}" if worst is not None else ""


def gap_check(gap: float | None, requested: float, stopped_at: str = "", *, name: str = "proven gap") -> Check:
    """The proven gap against the requested one; not applicable when nothing bounds it."""
    if gap is None or not math.isfinite(gap):
        return Check(name, "gap", NA, {"gap": None}, "", "no lower bound is proven for this plan (a heuristic, or a "
                     "time limit before any bound).")
    figures = {"gap": gap, "requested gap": requested}
    if gap <= requested + 1e-9:
        return Check(name, "gap", PASSED, figures, "(plan − proven bound) ÷ plan")
    return Check(name, "gap", FAILED, figures, "(plan − proven bound) ÷ plan",
                 f"the solve stopped at gap {gap:.2%}" + (f" ({stopped_at})" if stopped_at else "")
                 + f", above the requested {requested:.2%}: the optimum may be up to that much cheaper.",
                 "raise options.time_limit_s.")


def _requested_gap(scenario: Mapping[str, Any]) -> float:
    options = dict(scenario.get("options") or {})
    return float(options.get("mip_rel_gap", 1e-3))


def with_simulation(result: PlanResult, attainment: Mapping[str, float]) -> PlanResult:
    """``result`` with its SLO checks replaced by simulated ones (per model attainment from a simulation of this
    plan) and the status they allow."""
    checks = tuple(c for c in result.checks if c.kind != "slo")
    checks += tuple(slo_checks(result, attainment))
    return replace(result, checks=checks, status=settle_status(result.status, checks))


def failed(checks: Iterable[Check]) -> list[Check]:
    """The failed checks (each a warning with its cause and fix)."""
    return [c for c in checks if c.failed]


# ---------------------------------------------------------------------------------------------- timeline policies
def _policy_bound(totals: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The proven lower bound on every policy's horizon total: the offline MILP's bound (its total when certified)."""
    off = totals.get("offline") or {}
    if off.get("status") == "optimal" and off.get("total_cost") is not None:
        return float(off["total_cost"])
    bound = off.get("bound")
    return float(bound) if bound is not None and math.isfinite(float(bound)) else None


def _gap(total: float | None, bound: float | None) -> float | None:
    if total is None or bound is None or total <= 0:
        return None
    return max(0.0, (total - bound) / total)


def policy_rows(totals: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per timeline policy: ``best_found`` (its schedule's horizon total), ``proven_bound`` (the offline
    MILP's lower bound, which bounds every policy), ``gap`` to it, and ``proof`` in words — "optimum (gap 0)" only
    at gap 0, else "best found, 7.70 % above the proven bound" — with its month cost, churn and worst served."""
    bound = _policy_bound(totals)
    rows = []
    for name, t in totals.items():
        total = t.get("total_cost")
        gap = _gap(total, bound)
        if total is None:
            proof = "no schedule"
        elif gap is not None and gap <= 1e-6:
            proof = "optimum (gap 0)"
        elif gap is not None:
            proof = f"best found, {gap:.2%} above the proven bound"
        else:
            proof = "best found, no bound proven" if name == "offline" else "no bound (offline not run)"
        churn = t.get("churn") or {}
        rows.append({"policy": t.get("label", name), "best_found": total, "proven_bound": bound, "gap": gap,
                     "proof": proof, "month_cost": t.get("total_cost_month"),
                     "nodes_started": churn.get("nodes_started"), "nodes_stopped": churn.get("nodes_stopped"),
                     "min_served_fraction": t.get("min_served_fraction")})
    return rows


def policy_checks(totals: Mapping[str, Mapping[str, Any]]) -> tuple[Check, ...]:
    """look-ahead ≤ myopic (the rolling horizon never loses to the epoch-by-epoch plan it can see), the offline
    schedule ≤ every other (it starts from them), and each policy's gap to the proven bound."""
    out: list[Check] = []

    def total(name: str) -> float | None:
        value = (totals.get(name) or {}).get("total_cost")
        return None if value is None else float(value)

    def label(name: str) -> str:
        return str((totals.get(name) or {}).get("label", name))

    pairs = [("lookahead", "myopic"), ("offline", "myopic"), ("offline", "lookahead")]
    for a, b in pairs:
        if a not in totals or b not in totals:
            continue
        ta, tb = total(a), total(b)
        name = f"{label(a)} ≤ {label(b)}"
        if ta is None or tb is None:
            out.append(Check(name, "cost", NA, {}, "", "one of the two has no schedule."))
            continue
        fix = ("raise --offline-time-limit (its MILP starts from the other schedules, so it should never lose)"
               if a == "offline" else "raise --horizon or the look-ahead's time limit; report the scenario if it "
               "persists")
        out.append(not_dearer(name, ta, tb, alt_label=label(b), basis="horizon totals, same prices and K",
                              cause=f"{label(a)} costs ${ta - tb:,.2f} more over the horizon than {label(b)}.",
                              fix=fix))
    bound = _policy_bound(totals)
    if "offline" in totals:
        off = totals.get("offline") or {}
        gap = _gap(total("offline"), bound)
        out.append(gap_check(gap, 1e-6, "" if off.get("status") == "optimal" else "offline time limit",
                             name=f"proven gap of {label('offline')}"))
    return tuple(out)


# ---------------------------------------------------------------------------------------------- determinism
# wall-clock figures and what this process's caches saved (templates placed by this call): they differ run to run
VOLATILE_KEYS = ("timings", "seconds", "wall_s", "found_s", "templates_placed_now")


def stable_dict(value: Any) -> Any:
    """A result's dict without its wall-clock figures (``timings``, keys ending in ``seconds``) and cache counts
    (:data:`VOLATILE_KEYS`): what must be equal, bit for bit, between two solves of the same input (issue 37 §6).

    An answer stopped by its own wall-clock limit carries ``time_limited: true``; its figures of that moment, which a
    faster or busier machine does not share, stay out:

    * one that names them in ``time_limited_figures`` (a commitment sizing whose proof stopped before its gap: the
      bound, gap, cut and step counts, the stop message) loses those keys and keeps the rest — its plan, which is
      still compared;
    * one that names none (a baseline whose ILP a wall clock stopped: its cost and nodes are that moment's
      incumbent) keeps its name, ``ran`` and the flag only.
    """
    if isinstance(value, Mapping):
        if value.get("time_limited") is True:
            anytime = value.get("time_limited_figures")
            if anytime is None:
                return {k: value[k] for k in ("name", "ran", "time_limited") if k in value}
            value = {k: v for k, v in value.items() if k not in set(anytime)}
        return {k: stable_dict(v) for k, v in value.items()
                if not (k in VOLATILE_KEYS or str(k).endswith("_seconds"))}
    if isinstance(value, list | tuple):
        return [stable_dict(v) for v in value]
    return value
