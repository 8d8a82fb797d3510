"""The finance solve: size the commitments over the horizon, plan the design hour with them, and bill the year.

``planning.pipeline.solve`` routes a scenario with finance inputs (owned pools, reservations, spot pools, a
horizon or demand profile) here:

1. **Commitment sizing** (when the scenario has ``status: decide`` reservations or a demand profile): the
   two-stage MILP of :mod:`planning.finance.commitments` over the horizon's epochs (solved by
   :mod:`planning.finance.sizing`), certified over every template of the libraries; with reservations to
   decide, also the same horizon all on demand (no new reservation) and all reserved (no on-demand or spot
   node), for the totals shown beside it.
2. **The design hour's plan**: the scenario's own demand (the profile's peak) planned by the ordinary pipeline
   with the decided reservations as held ones, so the Plan page, baselines, report and exports are those of
   the capacity the company would run, with its costs by pricing kind.
3. **The bill** (:mod:`planning.finance.bill`), commitments to sign, idle committed capacity, spot risk and the
   assumptions, in ``PlanResult.finance``.

One deadline (``options.time_limit_s``) covers everything: the sizing gets 55 % of it (its R = 0 step is the
"all on-demand" comparison), "all reserved" up to the 65 % mark (75 % when "all on-demand" needs its own run),
the design hour's plan the rest less 5 % held back for the work that follows a deadline (baselines, assembly);
each stops with its incumbent and proven gap (status ``feasible``) at its limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from planning.context import (
    Cancelled,
    CancelToken,
    Deadline,
    EngineContext,
    ProgressFn,
    check_cancel,
    sub_progress,
)
from planning.finance.accounting import idle_capacity
from planning.finance.bill import bill_rows, committed_pools, epoch_list, summarise
from planning.finance.commitments import Candidate, Sizing, candidates_of, epochs_of
from planning.finance.risk import lost_share, risk_of
from planning.finance.sizing import size
from planning.offers import ResolvedOffer, reservation_terms
from planning.pools import HOURS_PER_YEAR, kind_of
from planning.resolve import ResolvedScenario, resolve_scenario
from planning.result import CommitmentLine, PlanResult
from planning.scenario import Reservation, Scenario
from planning.templates.sets import TemplateSet

SIZING_SHARE = 0.55
COMPARISON_SHARE = 0.10
RESERVE_SHARE = 0.05  # held back for what runs after a step's deadline (baselines, assembly) on a busy machine
PROOF_FIGURES = ("bound_usd", "gap", "message", "stats")  # a sizing's figures of the moment its time limit stopped it


def solve_finance(scenario: Scenario, *, context: EngineContext, plan_hour: Callable[..., PlanResult],
                  progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                  dump_model: str | Path | None = None, with_baselines: bool = True) -> PlanResult:
    """Size the commitments, plan the design hour with them and bill the horizon (module docstring).

    ``plan_hour`` is the ordinary plan of one hour, :func:`planning.pipeline.solve` (which routes here and passes
    itself, so this room never imports the pipeline): called with ``finance=False`` and the decided reservations.

    Raises
    ------
    PlanningError
        Bad finance inputs (unknown shapes, reservations of shapes not sold, inconsistent terms), naming the
        field and the fix.
    Cancelled
        When the caller's ``cancel`` is set.
    """
    from planning.templates.sets import build_template_sets

    t0 = time.perf_counter()
    limit = scenario.options.time_limit_s
    report = progress or (lambda _f, _m: None)
    resolved = resolve_scenario(scenario, context.catalog)  # validates pools and reservations first
    candidates = candidates_of(scenario, context.catalog)
    epochs = epochs_of(scenario)
    sizing: Sizing | None = None
    compare: dict[str, Sizing] = {}
    notes: list[str] = []
    sets: list[TemplateSet] = []
    if candidates or scenario.finance.profile is not None:
        deadline = _sub(limit * SIZING_SHARE, cancel)
        report(0.01, "sizing: serving templates for the horizon's epochs")
        try:
            sets = build_template_sets(context, resolved, sub_progress(report, 0.01, 0.2), deadline)
        except Cancelled:
            if not deadline.timed_out():
                raise  # the caller's cancel
            sets = []
            notes.append(f"Time limit: the sizing's share ({limit * SIZING_SHARE:,.0f} s of {limit:g} s) ran out while "
                         "building the serving-template libraries, so no commitment was sized and the bill is the "
                         "design hour's. Fix: raise options.time_limit_s (libraries are cached for the next run).")
    if sets:
        sizing = size(resolved, sets, epochs, candidates, cancel=deadline, progress=sub_progress(report, 0.2, 0.5))
        if candidates:  # the sizing solved R = 0 on its way (every epoch certified): that is all on-demand
            compare["all on-demand"] = sizing.no_reservation or size(
                resolved, sets, epochs, (), cancel=_until(t0, limit * (SIZING_SHARE + COMPARISON_SHARE), cancel),
                progress=sub_progress(report, 0.5, 0.55), label="all on-demand")
            compare["all reserved"] = size(resolved, sets, epochs, candidates, drop_kinds=("on_demand", "spot"),
                                           cancel=_until(t0, limit * (SIZING_SHARE + COMPARISON_SHARE * (
                                               1 if sizing.no_reservation else 2)), cancel),
                                           progress=sub_progress(report, 0.55, 0.6), label="all reserved")
        if not sizing.has_plan and candidates:
            notes.append(f"Commitment sizing found no plan ({sizing.status}: {sizing.message or 'no plan'}); no "
                         "reservation is proposed. Fix: raise options.time_limit_s, or check that every epoch's "
                         "demand can be served.")
    check_cancel(cancel, "finance")
    decided = with_decisions(scenario, candidates, sizing.counts if sizing is not None and sizing.has_plan else {})
    left = max(1.0, limit * (1 - RESERVE_SHARE) - (time.perf_counter() - t0))
    hour = replace(decided, options=replace(decided.options, time_limit_s=left))
    result = plan_hour(hour, context=context, progress=sub_progress(report, 0.6, 1.0), cancel=cancel,
                       dump_model=dump_model, with_baselines=with_baselines, finance=False)
    resolved_hour = resolve_scenario(hour, context.catalog)
    if sizing is not None and sizing.has_plan and candidates:
        notes.append(sizing_note(sizing, candidates, len(epochs), scenario.options.mip_rel_gap))
    finance = finance_view(scenario, resolved_hour, result, candidates, sizing, compare, notes,
                           committed_before=resolved.offers)
    lines = commitment_lines(scenario, context, candidates, sizing)
    result = replace(result, scenario=scenario.to_dict(), commitments=lines, finance=finance,
                     diagnostics=(*result.diagnostics, *notes))
    report(1.0, "done")
    return result


def _until(t0: float, at: float, cancel: CancelToken | None) -> Deadline:
    """A deadline ``at`` seconds after ``t0`` (a fixed point of the whole solve's budget, so one step that ends
    late does not push the next ones past the limit), joined with the caller's token."""
    return _sub(at - (time.perf_counter() - t0), cancel)


def _sub(seconds: float, cancel: CancelToken | None) -> Deadline:
    """A deadline of ``seconds`` joined with the caller's token (its own expiry is a time limit, not a cancel)."""
    return Deadline(max(0.5, seconds), cancel)


def with_decisions(scenario: Scenario, candidates: tuple[Candidate, ...], counts: dict[str, int]) -> Scenario:
    """The scenario with each ``decide`` reservation replaced by a held one of the decided size (none when 0)."""
    decided = {c.index: int(counts.get(c.id, 0)) for c in candidates}
    out: list[Reservation] = []
    for i, res in enumerate(scenario.reservations):
        if res.status == "held":
            out.append(res)
        elif decided.get(i, 0) > 0:
            c = next(c for c in candidates if c.index == i)
            scale = scenario.price_scale  # the terms are scaled already; resolving scales given prices again
            out.append(replace(res, status="held", count=decided[i], upfront_usd=c.terms.upfront_usd / scale,
                               hourly_usd=c.terms.hourly_usd / scale, source=c.terms.source))
    return replace(scenario, reservations=tuple(out))


def commitment_lines(scenario: Scenario, context: EngineContext, candidates: tuple[Candidate, ...],
                     sizing: Sizing | None) -> tuple[CommitmentLine, ...]:
    """Held reservations and the sizing's reservations to sign, with break-even and utilisation over the horizon."""
    from planning.catalog.availability import cheapest_configs

    rows = cheapest_configs(context.catalog, "on_demand")
    use = _pool_use(sizing) if sizing is not None and sizing.has_plan else {}
    hours = sum(e.hours for e in sizing.epochs) if sizing is not None else 0.0
    held_nodes: dict[tuple[str, str], int] = {}
    for res in scenario.reservations:
        if res.status == "held":
            held_nodes[(res.region, res.shape)] = held_nodes.get((res.region, res.shape), 0) + int(res.count or 0)
    out = []
    for i, res in enumerate(scenario.reservations):
        row = rows.get((res.region, res.shape))
        od = row.price_on_demand * scenario.price_scale if row is not None else 0.0
        if res.status == "held":
            terms = reservation_terms(res, od, f"reservations[{i}]", scenario.price_scale)
            count, status = int(res.count or 0), "held"
        else:
            c = next(c for c in candidates if c.index == i)
            count = int(sizing.counts.get(c.id, 0)) if sizing is not None and sizing.has_plan else 0
            if count == 0:
                continue
            terms, status = c.terms, "sign"
        pool = (f"{res.region}/reserved", res.shape)
        total_nodes = held_nodes.get((res.region, res.shape), 0) + sum(
            int(sizing.counts.get(c.id, 0)) for c in candidates if (c.region, c.shape) == (res.region, res.shape)
        ) if sizing is not None else count
        util = use.get(pool, 0.0) / (total_nodes * hours) if total_nodes and hours and use else None
        out.append(CommitmentLine(res.region, res.shape, count, terms.term_years, terms.upfront_usd, terms.hourly_usd,
                                  status, terms.effective_hourly, od, terms.effective_hourly / od if od else 0.0,
                                  util, terms.source))
    return tuple(out)


def time_limited(sizing: Sizing) -> bool:
    """True when the sizing's proof stopped before closing the requested gap (status ``feasible`` with a plan):
    by the wall clock, its safety net (``stopped_by == "clock"``: its plan, bound, gap and counts are those of
    that moment, which a faster or busier machine does not share), or by its work budget (``"work"``: the same
    on every machine). Either way its proof figures stay out of the digest (``checks.stable_dict``)."""
    return sizing.has_plan and sizing.status == "feasible"


def sizing_note(sizing: Sizing, candidates: tuple[Candidate, ...], n_epochs: int, requested_gap: float) -> str:
    """The diagnostics' line on the sizing: the commitments to sign and how well they are proven. A proof its
    time limit stopped quotes no gap here (the figure of that moment: ``finance.sizing.gap``, flagged
    ``time_limited``), so the note reads the same on every machine."""
    signed = [f"{n} × {c.shape} ({c.region}, {c.terms.term_years:g} y)" for c in candidates
              if (n := sizing.counts.get(c.id, 0))]
    if time_limited(sizing) and sizing.stopped_by == "work":
        gap = (f"the proof's work budget (cut rounds, master nodes) ran out above the requested {requested_gap:.1%} "
               "gap, the same on every machine (the proven gap: the finance summary; raise options.mip_rel_gap "
               "to accept it)")
    elif time_limited(sizing):
        gap = (f"time-limited: the wall clock stopped the proof above the requested {requested_gap:.1%} gap, so "
               "this plan depends on the machine's speed and load (the proven gap: the finance summary; raise "
               "options.time_limit_s to let it finish)")
    else:
        gap = f"proven within {sizing.gap:.1%} of the optimum" if sizing.gap is not None else "no bound proven"
    return (f"Commitment sizing over {n_epochs} epochs: " + (", ".join(signed) + " to sign" if signed else
            "no reservation pays off") + f"; {gap} ({sizing.certified_over}).")


def _pool_use(sizing: Sizing) -> dict[tuple[str, str], float]:
    """Node-hours over the horizon each reserved (pool, shape) serves in the sizing's plan."""
    out: dict[tuple[str, str], float] = {}
    for plan, epoch in zip(sizing.plans, sizing.epochs, strict=True):
        for (region, shape), n in plan.nodes.items():
            if kind_of(region) == "reserved":
                out[(region, shape)] = out.get((region, shape), 0.0) + n * epoch.hours
    return out


def _total(sizing: Sizing, fixed_over_horizon: float) -> dict[str, Any]:
    """A sizing's horizon total (its value + the fixed costs every variant pays) with status and proven gap."""
    ok = sizing.has_plan
    return {"status": sizing.status, "total_usd": sizing.value + fixed_over_horizon if ok else None,
            "bound_usd": sizing.bound + fixed_over_horizon if ok and math.isfinite(sizing.bound) else None,
            "gap": sizing.gap if ok else None, "commitments": dict(sizing.counts), "message": sizing.message,
            "certified_over": sizing.certified_over if ok else "", "seconds": sizing.stats.get("seconds"),
            "stats": {k: v for k, v in sizing.stats.items() if isinstance(v, float)},
            "time_limited": time_limited(sizing), "stopped_by": sizing.stopped_by,
            **({"time_limited_figures": list(PROOF_FIGURES)}
                                                    if time_limited(sizing) else {})}


def finance_view(scenario: Scenario, resolved: ResolvedScenario, result: PlanResult, candidates: tuple[Candidate, ...],
                 sizing: Sizing | None, compare: dict[str, Sizing], notes: list[str],
                 committed_before: tuple[ResolvedOffer, ...] | None = None) -> dict[str, Any]:
    """``PlanResult.finance``: idle committed capacity, spot risk, the sizing and its comparisons, the bill, and
    every assumption behind them.

    ``resolved`` is the design hour's (the decided reservations held); ``committed_before`` the scenario's own
    offers (owned pools and reservations held before the sizing; default: ``resolved``'s). Their fixed cost is
    what every horizon total carries alike; the signed reservations' fees are in the sizing's value only (a pool
    with held and signed nodes is not charged the signed ones twice, nor to "all on-demand")."""
    used = {(c.region, c.shape): c.used for c in result.capacity}
    view: dict[str, Any] = {
        "idle": idle_capacity(resolved.offers, used) if result.has_plan else [],
        "spot": spot_risk(scenario, resolved.offers, result),
        "assumptions": assumptions(scenario, resolved.offers, candidates),
    }
    base_offers = list(committed_before if committed_before is not None else resolved.offers)
    fixed_h = sum(o.fixed_per_node_hour * o.available for o in base_offers if o.kind in ("owned", "reserved"))
    hours = scenario.finance.horizon_years * HOURS_PER_YEAR
    if sizing is not None:
        view["sizing"] = _total(sizing, fixed_h * hours)
        view["sizing"]["epochs"] = epoch_list(sizing.epochs)
        view["comparisons"] = {name: _total(s, fixed_h * hours) for name, s in compare.items()}
        view["break_even"] = [{"reservation": c.id, "region": c.region, "shape": c.shape,
                               "effective_hourly": c.effective_hourly, "on_demand_price": c.on_demand_price,
                               "break_even": c.break_even, "committed": int(sizing.counts.get(c.id, 0))}
                              for c in candidates]
        if sizing.has_plan:
            pools = committed_pools(base_offers, candidates, sizing.counts)
            rows = bill_rows(sizing, base_offers, pools, scenario.finance.horizon_years, scenario.finance.periods)
            view["bill"] = rows
            view["bill_totals"] = {by: summarise(rows, by) for by in ("kind", "model", "region", "cloud", "month")}
            view["bill_source"] = "two-stage plan over the horizon's epochs"
    elif result.has_plan:  # no profile, nothing to size: the design hour all year
        view["bill_source"] = "the design hour's plan, every hour of the horizon"
        view["bill"] = _flat_bill(result, scenario, view["idle"])
        view["bill_totals"] = {by: summarise(view["bill"], by) for by in ("kind", "model", "region", "cloud", "month")}
    return view


def _flat_bill(result: PlanResult, scenario: Scenario, pools: list[dict[str, Any]]) -> list[dict[str, object]]:
    """The bill of one plan held every hour: its cost lines by model at their full cost (marginal + the fixed cost
    of the committed nodes they use), the idle committed capacity under ``(idle)`` and the KV egress; each month
    the design hour's full cost × 730 h (``planning.billing``)."""
    from planning.billing import full_cost_rows
    from planning.pools import HOURS_PER_MONTH, cloud_of, site_of

    months = max(1, round(12 * scenario.finance.horizon_years))
    acc: dict[tuple[str, str, str], float] = {}
    for line in full_cost_rows([asdict(c) for c in result.cost_lines], pools):
        if line["kind"] in ("provisioning", "idle committed"):
            key = (str(line["model"]), str(line["region"]), kind_of(str(line["region"])))
            acc[key] = acc.get(key, 0.0) + float(line["full_cost_per_hour"])
    for f in result.kv_flows:
        if f.cross_region and f.usd_per_hour > 0:
            acc[(f.model, f.src, "egress")] = acc.get((f.model, f.src, "egress"), 0.0) + f.usd_per_hour
    return [{"month": m + 1, "model": model, "region": site_of(region), "cloud": cloud_of(region), "kind": kind,
             "usd": usd * HOURS_PER_MONTH}
            for m in range(months) for (model, region, kind), usd in sorted(acc.items())]


def spot_risk(scenario: Scenario, offers: tuple[ResolvedOffer, ...], result: PlanResult) -> dict[str, Any]:
    """Per model: the share of its served capacity on spot nodes, the expected served fraction counting
    interruptions (``recovery: lost``: served × (1 − Σ share_i·q_i·τ)), interruptions expected per day; and each
    spot offer's rate with its source."""
    spot_offers = {(o.region, o.shape): o for o in offers if o.kind == "spot"}
    if not spot_offers:
        return {}
    models: dict[str, dict[str, float]] = {}
    for s in result.service:
        gid = (s.model, s.phase)
        inst = [i for i in result.instances if (i.model, i.phase) == gid]
        total = sum(i.load * i.throughput for i in inst)
        lost, share, per_day = 0.0, 0.0, 0.0
        for i in inst:
            if kind_of(i.region) != "spot" or total <= 0:
                continue
            q = max((spot_offers[(i.region, sh)].interruption_per_hour for sh in i.usage if (i.region, sh) in spot_offers),
                    default=0.0)
            nodes = sum(i.usage.values()) * i.count
            w = i.load * i.throughput / total
            share += w
            lost += w * lost_share(scenario, q * sum(i.usage.values()))  # an instance stops when any node goes
            per_day += nodes * q * 24
        row = models.setdefault(s.model, {"spot_share": 0.0, "expected_served_fraction": 1.0,
                                          "interruptions_per_day": 0.0})
        row["spot_share"] = max(row["spot_share"], share)
        row["expected_served_fraction"] = min(row["expected_served_fraction"], s.fraction * (1.0 - lost))
        row["interruptions_per_day"] += per_day
    rates = [{"region": o.region, "shape": o.shape, "spot_price": o.list_price, "expected_price": o.price_per_hour,
              "interruptions_per_hour": o.interruption_per_hour,
              "per_month": (r := risk_of(scenario, o.region, o.gpu)).per_month, "band": r.band, "quality": r.quality,
              "source": r.source}
             for o in spot_offers.values()]
    return {"recovery": scenario.spot.recovery, "recovery_hours": scenario.spot.recovery_hours,
            "max_share": scenario.spot.max_share, "models": models, "rates": rates}


def assumptions(scenario: Scenario, offers: tuple[ResolvedOffer, ...], candidates: tuple[Candidate, ...]) -> list[str]:
    """Every assumption the finance numbers rest on, as sentences."""
    fin = scenario.finance
    dates = sorted({o.as_of for o in offers if o.as_of})
    out = [f"Prices: catalog on-demand and spot list prices restated as of {dates[0] if dates else '?'}"
           + (f" to {dates[-1]}" if len(dates) > 1 else "") + f", × price_scale {scenario.price_scale:g}.",
           f"Horizon: {fin.horizon_years:g} year(s) of {'the demand profile' if fin.profile else 'the design hour'}"
           + (f" ({len(fin.profile.factors)} epochs of {fin.profile.epoch_hours:g} h, {fin.profile.source or 'given'})"
              if fin.profile else "") + f", repeated; demand growth {fin.demand_growth_per_year:+.0%}/year in "
           f"{fin.periods} step(s).",
           "The sizing leaves out the start-up penalty K (node start-up is counted by the timeline).",
           "Reserved nodes serve only their own region and shape; a commitment's upfront is spread over its term "
           "(a term longer than the horizon counts the horizon's share)."]
    for c in candidates:
        out.append(f"Reservation to size {c.id}: {c.shape} in {c.region}, {c.terms.term_years:g} y "
                   f"{c.terms.payment}, ${c.terms.upfront_usd:,.2f} upfront + ${c.terms.hourly_usd:.4f}/h per node "
                   f"(effective ${c.effective_hourly:.4f}/h, break-even at {c.break_even:.0%} use); {c.terms.source}.")
    for pool in scenario.owned:
        out.append(f"Owned {pool.count} × {pool.shape} at {pool.location}: ${pool.capex_usd:,.0f} over "
                   f"{pool.amortisation_years or 0:g} y + ${pool.ops_usd_per_hour:g}/h per node fixed, "
                   f"${pool.power_usd_per_hour:g}/h per serving node ({pool.source}).")
    if scenario.spot.enabled:
        out.append(f"Spot: recovery {scenario.spot.recovery} in {scenario.spot.recovery_hours:g} h, at most "
                   f"{scenario.spot.max_share:.0%} of any model's demand on spot; interruption rates per offer in "
                   "finance.spot.rates with their sources.")
    return out
