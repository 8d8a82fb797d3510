"""Assemble a PlanResult from an allocation: the one builder of plan results (pipeline, what-ifs, jobs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planning.allocate.problem import AllocationResult
from planning.checks import with_checks
from planning.finance.accounting import committed_per_hour, kind_costs
from planning.groups import Group
from planning.pools import site_of
from planning.resolve import ResolvedScenario
from planning.result import (
    BaselineSummary,
    CapacityUse,
    CostLine,
    GroupService,
    InstancePlan,
    KvFlow,
    PlanResult,
    savings_pct,
)
from planning.scenario import Scenario
from planning.templates.sets import TemplateSet
from planning.templates.stages import rated_stages


def _locate(sets: Sequence[TemplateSet], key: str) -> tuple[TemplateSet, int]:
    """The set and row of an allocation template id (explicit ids as given, generated "group:id")."""
    for ts in sets:
        row = ts.row_of.get(key) if ts.explicit or key.startswith(ts.group.id + ":") else None
        if row is not None:
            return ts, row
    raise KeyError(key)


@dataclass
class _Assigned:
    """What the allocation sends to one (template, region): per class column its rate (the group's unit, over all
    copies), the load it makes (Σ rate / T̂, in copies) and, for a histogram group, each class's requests/s."""

    rates: dict[int, float] = field(default_factory=dict)
    load: float = 0.0
    class_rps: list[tuple[float, float, float]] = field(default_factory=list)


def _assigned(groups: Sequence[Group], sets: Sequence[TemplateSet],
              alloc: AllocationResult) -> dict[tuple[str, str], _Assigned]:
    """Per (template id, region), the traffic the allocation assigned to it (:class:`_Assigned`)."""
    class_col = {c.id: j for g in groups for j, c in enumerate(g.classes)}
    multi = {c.id: (g, c) for g in groups if len(g.classes) > 1 for c in g.classes}
    out: dict[tuple[str, str], _Assigned] = {}
    for (cid, tid, region), rate in alloc.assignment.items():
        ts, row = _locate(sets, tid)
        j = class_col[cid]
        t = float(ts.throughput[row, j])
        acc = out.setdefault((tid, region), _Assigned())
        if t > 0:
            acc.load += rate / t
            acc.rates[j] = acc.rates.get(j, 0.0) + rate
        if cid in multi and rate > 0:  # requests/s of this class on these instances (rates are in the group's unit)
            mg, wc = multi[cid]
            per_request = wc.input_len if mg.phase == "prefill" else wc.output_len if mg.phase == "decode" else 1.0
            acc.class_rps.append((float(wc.input_len), float(wc.output_len), rate / max(per_request, 1e-12)))
    return out


def instance_capacity(group: Group, throughput: np.ndarray, rates: Mapping[int, float]) -> float:
    """``InstancePlan.throughput``: what one copy of a template serves at full load, of the mix it is assigned.

    With class rates T̂_c (``throughput``, one per class column of ``group``) and the rates r_c the plan assigns
    to the instance, the load is Σ r_c / T̂_c copies and the capacity Σ r_c / Σ (r_c / T̂_c): the assigned rate
    divided by the load, so ``load × throughput`` is the assigned rate (the group's unit). A single-class group
    has one T̂ and it is that. An instance assigned no traffic (a minimum count, a node kept warm) is rated for
    its group's demand mix over the classes it can serve; with no such demand, for its fastest class.

    Parameters
    ----------
    group:
        The template's group (its classes and their demand rates).
    throughput:
        The template's T̂ per class column.
    rates:
        Assigned rate per class column (over all copies; any positive scale gives the same answer).

    Returns
    -------
    float
        Capacity of one copy in the group's unit.
    """
    if len(group.classes) == 1:
        return float(throughput.max())
    served = {j: r for j, r in rates.items() if r > 0 and throughput[j] > 0}
    if not served:
        served = {j: c.rate for j, c in enumerate(group.classes) if c.rate > 0 and throughput[j] > 0}
    if not served:
        return float(throughput.max())
    return sum(served.values()) / sum(r / float(throughput[j]) for j, r in served.items())


def build_plan_result(resolved: ResolvedScenario, sets: Sequence[TemplateSet], alloc: AllocationResult,
                      baselines: Sequence[BaselineSummary], *, timings: Mapping[str, float],
                      provenance: Mapping[str, str], stats: Mapping[str, float]) -> PlanResult:
    """The PlanResult of an allocation: instances with placements, cost lines, capacity, service, baselines
    with savings (:func:`planning.result.savings_pct`), diagnostics, model sizes and its checks
    (:func:`planning.checks.with_checks`: never dearer than a baseline, SLOs, served, gap)."""
    scenario, groups, offers = resolved.scenario, resolved.groups, resolved.offers
    offer_by_key = {(o.region, o.shape): o for o in offers}
    group_by_id = {g.id: g for g in groups}
    instances: list[InstancePlan] = []
    lines: list[CostLine] = []
    assigned = _assigned(groups, sets, alloc)
    for (tid, region), n in sorted(alloc.counts.items()):
        if n <= 0:
            continue
        ts, row = _locate(sets, tid)
        group = group_by_id[ts.group.id]
        usage = ts.usage_dict(row)
        price = sum(offer_by_key[(region, s)].price_per_hour * c for s, c in usage.items())
        mine = assigned.get((tid, region), _Assigned())
        rating = instance_capacity(group, ts.throughput[row], mine.rates)
        stages = ts.stages(row) if len(group.classes) == 1 else rated_stages(ts.stages(row), rating)
        instances.append(InstancePlan(
            model=group.model, phase=group.phase, template_id=ts.ids[row], region=region, count=int(n), usage=usage,
            gpus=ts.gpus(row), throughput=rating, throughput_unit=group.unit,
            load=min(float(n), mine.load), cost_per_hour=price * n,
            single_shape=bool(ts.single_shape[row]), stages=stages, provenance=ts.provenance[row],
            class_rps=tuple(sorted(mine.class_rps))))
        for s, c in usage.items():
            lines.append(CostLine(group.model, group.phase, region, s, c * int(n),
                                  offer_by_key[(region, s)].price_per_hour * c * int(n)))
    penalty = float(alloc.penalty_per_hour or 0.0)
    if penalty > 0:
        lines.append(CostLine("(all)", "(init penalty)", "(all)", "(all)", 0, penalty, kind="penalty"))
    flows = kv_flows(resolved, alloc)
    transfer = float(alloc.transfer_per_hour)
    for f in flows:
        if f.cross_region and f.usd_per_hour > 0:
            lines.append(CostLine(f.model, "(kv transfer)", f"{f.src}->{f.dst}", "(egress)", 0, f.usd_per_hour,
                                  kind="transfer"))
    used: dict[tuple[str, str], int] = {k: int(v) for k, v in alloc.nodes_used.items()}
    capacity = tuple(CapacityUse(o.region, o.shape, o.gpu, used.get((o.region, o.shape), 0), o.available, o.price_per_hour)
                     for o in offers)
    served_rate: dict[str, float] = {}
    for (cid, _tid, _r), rate in alloc.assignment.items():
        served_rate[cid] = served_rate.get(cid, 0.0) + rate
    service = tuple(GroupService(g.model, g.phase, g.demand, sum(min(served_rate.get(c.id, 0.0), c.rate) for c in g.classes), g.unit)
                    for g in groups)
    provisioning = float(alloc.cost_per_hour or 0.0)
    total = provisioning + penalty + transfer
    diagnostics = [*alloc.messages]  # group diagnostics are already sentences there (allocate/diagnostics.py)
    diagnostics += [line for ts in sets for line in ts.notices]  # e.g. a damaged template cache file rebuilt
    diagnostics += [f"cross-region KV: {f.share:.1%} of {f.model} requests prefill in {f.src} and decode in "
                    f"{f.dst}, ${f.usd_per_hour:,.2f}/h egress, +{f.one_way_ms:.0f} ms one way and "
                    f"{f.transfer_s * 1e3:,.0f} ms KV hand-off per request over the WAN" for f in flows if f.cross_region]
    counts: dict[str, int] = {}
    for ts in sets:
        counts[ts.group.id] = counts.get(ts.group.id, 0) + len(ts)
    served_fraction = min((s.fraction for s in service), default=1.0) if alloc.has_plan else 0.0
    committed = committed_per_hour(offers)  # owned + held reservations: on every side of a comparison
    adjusted = tuple(
        replace(b, savings_pct=savings_pct(provisioning + transfer + committed, b.cost_per_hour, served_fraction,
                                           b.served_fraction)
                if b.feasible and alloc.has_plan else None)
        for b in baselines)
    # a plan the solver was stopped on (time limit) is a feasible plan with its gap; "time_limit" means no plan
    status = "feasible" if alloc.has_plan and alloc.status == "time_limit" else alloc.status
    return with_checks(PlanResult(
        status=status, objective=alloc.objective, cost_per_hour=total, provisioning_per_hour=provisioning,
        penalty_per_hour=penalty, served_fraction=served_fraction, mip_gap=alloc.gap, instances=tuple(instances),
        cost_lines=tuple(lines), capacity=capacity, service=service, baselines=adjusted, timings=dict(timings),
        provenance=dict(provenance), stats=dict(stats), diagnostics=tuple(diagnostics), template_counts=counts,
        scenario=scenario.to_dict(),
        message="" if alloc.has_plan else "No plan: see diagnostics for the best achievable fraction per model.",
        transfer_per_hour=transfer, kv_flows=flows, committed_per_hour=committed,
        cost_by_pricing_kind=kind_costs(offers, used) if alloc.has_plan and scenario.has_finance else {},
    ))


def kv_flows(resolved: ResolvedScenario, alloc: AllocationResult) -> tuple[KvFlow, ...]:
    """Per model and (prefill region, decode region), the share of its requests, summed over request-size
    buckets weighted by requests/s, with the egress bill and the WAN delay of a cross-region flow."""
    from planning.allocate.certify import kv_links
    from planning.transfer import transfer

    if not alloc.flows:
        return ()
    links = {k.sender: k for k in kv_links(resolved)}
    model_rps: dict[str, float] = {}
    for k in links.values():
        model_rps[k.model] = model_rps.get(k.model, 0.0) + k.requests_per_s
    acc: dict[tuple[str, str, str], list[float]] = {}  # share, $/h, request-weighted bytes
    for (sender, src, dst), f in sorted(alloc.flows.items()):
        found = links.get(sender)
        if found is None or model_rps[found.model] <= 0:
            continue
        k = found
        weight = k.requests_per_s / model_rps[k.model]
        row = acc.setdefault((k.model, src, dst), [0.0, 0.0, 0.0])
        row[0] += f * weight
        row[2] += f * weight * k.bytes_per_request
        if src != dst:
            row[1] += f * transfer(src, dst).usd_per_gb * k.bytes_per_request * k.requests_per_s * 3600 / 1e9
    out = []
    for (model, src, dst), (share, usd, wbytes) in acc.items():
        if src == dst:
            out.append(KvFlow(model, src, dst, share))
            continue
        if site_of(src) == site_of(dst):  # two pricing pools of one region: its own network, no WAN
            out.append(KvFlow(model, src, dst, share, same_site=True))
            continue
        t = transfer(src, dst)
        nbytes = wbytes / share if share > 0 else 0.0
        out.append(KvFlow(model, src, dst, share, usd, t.one_way_s * 1e3, t.seconds(nbytes), t.gbps))
    return tuple(out)


def time_limit_result(scenario: Scenario, limit_s: float, step: str, elapsed_s: float) -> PlanResult:
    """The PlanResult of a solve whose deadline passed before any plan: status ``time_limit``, no instances, and
    a message naming the step that was not finished and the fix.

    Parameters
    ----------
    scenario:
        The scenario being planned.
    limit_s:
        ``options.time_limit_s``.
    step:
        The last progress message (e.g. ``"library build: qwen3-32b/prefill (1,200 of 9,000 templates)"``).
    elapsed_s:
        Wall time of the solve so far.

    Returns
    -------
    PlanResult
    """
    name, _, detail = step.partition(": ")
    if name == "library build":
        group = detail.split(" (")[0]
        what = f"building the serving-template library for {group}" if "/" in group else \
            "building the serving-template library"
        fix = (f"raise options.time_limit_s to ≥ {_more(limit_s, elapsed_s)} s, reuse a template cache, or use "
               "options.templates: on-demand")
    elif name in ("reduction", "ILP"):
        what = f"in the allocation ({name}: {detail})" if detail else "in the allocation"
        fix = f"raise options.time_limit_s to ≥ {_more(limit_s, elapsed_s)} s, or loosen options.mip_rel_gap"
    else:
        what = f"at step {step!r}"
        fix = f"raise options.time_limit_s to ≥ {_more(limit_s, elapsed_s)} s"
    message = f"time limit {limit_s:g} s reached while {what}" if name == "library build" else \
        f"time limit {limit_s:g} s reached {what}"
    return with_checks(PlanResult(status="time_limit", objective=scenario.objective.kind, cost_per_hour=0.0,
                      provisioning_per_hour=0.0, penalty_per_hour=0.0, served_fraction=0.0, mip_gap=None,
                      timings={"total_seconds": elapsed_s}, scenario=scenario.to_dict(),
                      message=f"{message}; no plan. Fix: {fix}.",
                      diagnostics=(f"{message}; no plan was found before it.",)))


def _more(limit_s: float, elapsed_s: float) -> str:
    """A limit worth trying: a few times what was spent (the unfinished step's share is unknown)."""
    return f"{max(2 * limit_s, 4 * elapsed_s, limit_s + 10):.0f}"
