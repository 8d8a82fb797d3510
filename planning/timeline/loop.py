"""The epoch loop of a timeline: one record per epoch, the static peak plan beside it, and the closing notes.

``run_timeline`` (``planning.timeline.plan``) sets the horizon up (:class:`Horizon`), builds the templates and the
policies' schedules, then calls :func:`run_epochs` (each epoch's plan with its churn, cost by model, spot share
and the re-planned homogeneous baselines), :func:`static_peak` and :func:`closing_notes`.

An epoch whose solve raises (anything but ``Cancelled``) is that epoch's "no plan" (status ``error``) with what it
raised and the fix; nothing runs after it (the next epoch starts from no instances) and the loop goes on, so one
failing epoch never loses the others' work. The static peak problem (each class at its peak rate, the scarcest
availability, nothing running) is solved once more only when no epoch had that same problem: an epoch with the
peak rates and the scarcest availability, planned from nothing running, gives the static plan its answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from planning.baselines.registry import REPLANNED_LABELS as BASELINE_LABELS
from planning.context import Cancelled, CancelToken, check_cancel
from planning.groups import Group
from planning.progress_words import planning_period
from planning.scenario import Scenario
from planning.timeline import engine
from planning.timeline.availability import is_spot
from planning.timeline.demand import DemandSeries, at
from planning.timeline.pace import Pace
from planning.timeline.result import EpochResult, MethodEpoch

if TYPE_CHECKING:
    from planning.timeline.plan import TimelineOptions

Counts = dict[tuple[str, str], int]


@dataclass(frozen=True)
class Horizon:
    """What every step of a timeline reads, built once by ``run_timeline``: the epochs' problems (scenario with
    the epoch's availability, groups with its rates, the effective node counts), the static peak problem, the
    prices and the models."""

    scenario: Scenario  # the user's: models without a series keep its demand
    opts: TimelineOptions
    demand: tuple[DemandSeries, ...]
    series: Mapping[str, DemandSeries]
    epoch_hours: float
    K: float
    models: tuple[str, ...]
    price: Mapping[tuple[str, str], float]
    scns: tuple[Scenario, ...]
    groups: tuple[list[Group], ...]
    avail: tuple[tuple[tuple[tuple[str, str], int], ...], ...]  # per epoch: (region, shape) → nodes, every offer
    peak_scn: Scenario
    peak_groups: list[Group]
    peak_avail: tuple[tuple[tuple[str, str], int], ...]

    @property
    def n_epochs(self) -> int:
        return len(self.scns)

    def problem(self, e: int | None) -> tuple[Any, ...]:
        """Epoch ``e``'s problem (None: the static peak's): class rates and effective availability."""
        groups, avail = (self.peak_groups, self.peak_avail) if e is None else (self.groups[e], self.avail[e])
        return tuple((c.id, round(float(c.rate), 12)) for g in groups for c in g.classes), avail


# ------------------------------------------------------------------------------------------------ accounting
def churn(prep: engine.Prepared, new: Mapping[tuple[str, str], int], old: Mapping[tuple[str, str], int],
          cache: dict[str, int]) -> tuple[int, int]:
    """Nodes started and stopped between two allocations (instance level: a new instance starts its nodes)."""
    def nodes(key: str) -> int:
        if key not in cache:
            cache[key] = sum(prep.nodes_of(key).values())
        return cache[key]

    started = sum(max(0, n - old.get(k, 0)) * nodes(k[0]) for k, n in new.items())
    stopped = sum(max(0, n - new.get(k, 0)) * nodes(k[0]) for k, n in old.items())
    return started, stopped


def penalty(prep: engine.Prepared, new: Mapping[tuple[str, str], int], old: Mapping[tuple[str, str], int],
            price: Mapping[tuple[str, str], float], K: float) -> float:
    """Coral's initialization penalty Σ K·p_r(τ)·max(0, ν − ν′) per hour."""
    total = 0.0
    for (key, region), n in new.items():
        extra = n - old.get((key, region), 0)
        if extra > 0:
            total += K * extra * sum(price.get((region, s), 0.0) * c for s, c in prep.nodes_of(key).items())
    return total


def gpu_totals(offers: Sequence[object]) -> dict[str, int]:
    """GPUs offered per type (count × nodes available)."""
    out: dict[str, int] = {}
    for o in offers:
        gpu, count, avail = o.gpu, o.gpu_count, o.available  # type: ignore[attr-defined]
        out[gpu] = out.get(gpu, 0) + int(count) * int(avail)
    return dict(sorted(out.items()))


def by_model(values: Mapping[str, float], models: Sequence[str], how: str = "min") -> dict[str, float]:
    """Per-group values (``"model/phase"``) folded per model: the worst (``min``) or the sum."""
    out: dict[str, float] = {}
    for gid, v in values.items():
        m = gid.split("/", 1)[0]
        if m not in models:
            continue
        out[m] = (min(out[m], v) if how == "min" else out[m] + v) if m in out else v
    return out


# ------------------------------------------------------------------------------------------------ the loop
def run_epochs(prep: engine.Prepared, hz: Horizon, plan_epoch: Callable[[int, Counts], engine.EpochSolve],
               pace: Pace | None, cancel: CancelToken | None) -> list[EpochResult]:
    """Every epoch in order: ``plan_epoch(e, running)`` (the first policy's plan), its record and the re-planned
    baselines; an epoch whose plan raises is recorded as "no plan" with its error and the loop goes on. Each
    epoch's time goes to ``pace`` (the progress line and its estimate of the time left).

    Raises
    ------
    Cancelled
        When ``cancel`` is set (checked between epochs and baselines).
    """
    epochs: list[EpochResult] = []
    prev: Counts = {}
    base_prev: dict[str, Counts] = {b: {} for b in hz.opts.baselines}
    node_cache: dict[str, int] = {}
    base_memo: dict[tuple[Any, ...], Any] = {}
    for e in range(hz.n_epochs):
        check_cancel(cancel, "timeline")
        t0 = time.perf_counter()
        try:
            solved = plan_epoch(e, prev)
        except Cancelled:
            raise
        except Exception as exc:  # this epoch alone has no plan; the horizon goes on
            solved = engine.failed_epoch(hz.scns[e], exc, time.perf_counter() - t0)
        methods = _baselines(prep, hz, e, _BaselineState(base_prev, node_cache, base_memo), cancel)
        epochs.append(_record(prep, hz, e, solved, prev, node_cache, methods))
        prev = dict(solved.counts)
        if pace is not None:
            pace.epoch_done(time.perf_counter() - t0, planning_period(e + 1, hz.n_epochs, hz.epoch_hours))
    return epochs


def _record(prep: engine.Prepared, hz: Horizon, e: int, solved: engine.EpochSolve, prev: Counts,
            node_cache: dict[str, int], methods: dict[str, MethodEpoch]) -> EpochResult:
    """Epoch ``e``'s record: cost (by model), served fraction, goodput, churn, GPUs, spot share, baselines."""
    res = solved.result
    started, stopped = churn(prep, solved.counts, prev, node_cache)
    cost_by_model: dict[str, float] = {}
    for line in res.cost_lines:
        if line.kind in ("provisioning", "transfer"):  # nodes + cross-region KV egress, both billed
            cost_by_model[line.model] = cost_by_model.get(line.model, 0.0) + line.cost_per_hour
    served = {f"{s.model}/{s.phase}": s.fraction for s in res.service}
    if not solved.has_plan:
        served = {k: 0.0 for k in served}
    goodput = {s.model: s.served for s in res.service if s.phase == "decode"}
    for s in res.service:
        if s.phase == "aggregated":
            sd = hz.series.get(s.model)
            goodput[s.model] = s.served * (sd.output_len[at(sd, e)] if sd else
                                           hz.scenario.model(s.model).demand.output_len)
    spot_share, expected = _spot(hz, res, served)
    start = hz.demand[0].start_hour + e * hz.epoch_hours
    return EpochResult(
        index=e, start=start, label=f"{start:g}h", status=res.status, has_plan=solved.has_plan,
        objective=solved.objective, alpha=solved.alpha if solved.objective == "served" else 1.0,
        cost_per_hour=res.cost_per_hour if solved.has_plan else 0.0, provisioning_per_hour=res.provisioning_per_hour,
        penalty_per_hour=res.penalty_per_hour, transfer_per_hour=res.transfer_per_hour, cost_by_model=cost_by_model,
        served_fraction=by_model(served, hz.models) if solved.has_plan else {m: 0.0 for m in hz.models},
        goodput_tok_s=goodput,
        demand_rps={m: (hz.series[m].rate_rps[at(hz.series[m], e)] if m in hz.series
                        else hz.scenario.model(m).demand.rate_rps) for m in hz.models},
        gpus=res.gpus_by_type(), gpus_available=gpu_totals(engine.offers_for(prep, hz.scns[e])),
        nodes_started=started, nodes_stopped=stopped, instances=sum(i.count for i in res.instances),
        spot_share=spot_share, expected_served_fraction=expected, seconds=solved.seconds, methods=methods,
        error=solved.error)


def _spot(hz: Horizon, res: Any, served: Mapping[str, float]) -> tuple[float, dict[str, float]]:
    """The plan's spot share of provisioning and per model the served fraction expected after preemptions."""
    spot = hz.opts.spot
    if not spot.enabled:
        return 0.0, {}
    spot_cost = sum(i.cost_per_hour for i in res.instances if is_spot(i.region))
    share_cost = spot_cost / res.provisioning_per_hour if res.provisioning_per_hour > 0 else 0.0
    per_group: dict[str, float] = {}
    for s in res.service:
        gid = f"{s.model}/{s.phase}"
        tot = sum(i.load * i.throughput for i in res.instances if f"{i.model}/{i.phase}" == gid)
        sp = sum(i.load * i.throughput for i in res.instances if f"{i.model}/{i.phase}" == gid and is_spot(i.region))
        share = sp / tot if tot > 0 else 0.0
        per_group[gid] = served.get(gid, 1.0) * (1 - spot.preemption_per_hour * spot.restart_hours * share)
    return share_cost, by_model(per_group, hz.models)


@dataclass(frozen=True)
class _BaselineState:
    """What the re-planned baselines carry from epoch to epoch: each one's previous instances (updated in place),
    the nodes per template, and their answers by problem and running instances (a baseline is a deterministic
    function of them: an epoch that repeats an earlier one's problem from the same instances reuses its answer)."""

    prev: dict[str, Counts]
    node_cache: dict[str, int]
    memo: dict[tuple[Any, ...], Any]


def _baselines(prep: engine.Prepared, hz: Horizon, e: int, state: _BaselineState,
               cancel: CancelToken | None) -> dict[str, MethodEpoch]:
    """The homogeneous baselines re-planned at epoch ``e`` from their own previous instances (updated here)."""
    methods: dict[str, MethodEpoch] = {}
    base_prev, node_cache = state.prev, state.node_cache
    for b in hz.opts.baselines:
        check_cancel(cancel, "timeline")
        key = (b, hz.problem(e), tuple(sorted(base_prev[b].items())))
        br = state.memo.get(key)
        if br is None:
            bscn = replace(hz.scns[e], current=engine.current_of(base_prev[b]))
            br = state.memo[key] = engine.homogeneous_epoch(prep, bscn, hz.groups[e], b)
        counts = {(str(t), str(r)): int(n) for (t, r), n in br.counts.items() if n > 0}
        b_start, b_stop = churn(prep, counts, base_prev[b], node_cache)
        pen = penalty(prep, counts, base_prev[b], hz.price, hz.K)
        methods[BASELINE_LABELS[b]] = MethodEpoch(
            cost_per_hour=float(br.cost_per_hour) + pen, served_fraction=by_model(dict(br.served_fraction), hz.models),
            feasible=bool(br.feasible), nodes_started=b_start, nodes_stopped=b_stop, gpus=dict(br.gpus_used))
        base_prev[b] = counts
    return methods


# ------------------------------------------------------------------------------------------------ static peak
@dataclass(frozen=True)
class StaticPeak:
    """The static peak plan's cost per hour, whether it serves the peak, its note, and the epoch it was taken
    from (None: solved on its own)."""

    cost_per_hour: float = 0.0
    feasible: bool = False
    note: str = ""
    from_epoch: int | None = None


def static_peak(prep: engine.Prepared, hz: Horizon, epochs: list[EpochResult],
                solved_alone: Callable[[int], engine.EpochSolve | None],
                cancel: CancelToken | None) -> tuple[list[EpochResult], StaticPeak]:
    """The static plan sized for the peak, held all horizon, as a method of every epoch. ``solved_alone(e)``:
    epoch ``e``'s solve from nothing running, if one was made; an epoch with the peak's problem gives its plan.

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    """
    check_cancel(cancel, "timeline")
    peak = hz.problem(None)
    from_epoch, st = None, None
    for e in range(hz.n_epochs):
        cand = solved_alone(e) if hz.problem(e) == peak else None
        if cand is not None and not cand.error and (hz.opts.goodput_fallback or cand.has_plan):
            from_epoch, st = e, cand
            break
    if st is None:
        st = engine.solve_epoch_alone(prep, hz.peak_scn, hz.peak_groups, goodput_fallback=True, cancel=cancel)
    if st.error:
        return epochs, StaticPeak(note=f"the static peak plan has no plan: {st.error}")
    ok = st.objective == "cost" and st.result.status in ("optimal", "feasible")
    cost = st.result.comparable_cost  # nodes + cross-region KV egress, as every method counts
    out = list(epochs)
    node_cache: dict[str, int] = {}
    for e, ep in enumerate(epochs):
        cap = engine.capacity(prep, st.counts, hz.groups[e])
        frac = {g.id: (1.0 if g.demand <= 0 else min(1.0, cap[g.id] / g.demand)) for g in hz.groups[e]}
        m = MethodEpoch(cost_per_hour=cost + (st.result.penalty_per_hour if e == 0 else 0.0),
                        served_fraction=by_model(frac, hz.models), feasible=all(v >= 1 - 1e-6 for v in frac.values()),
                        nodes_started=churn(prep, st.counts, {}, node_cache)[0] if e == 0 else 0, nodes_stopped=0,
                        gpus=st.result.gpus_by_type())
        out[e] = replace(ep, methods={"static peak": m, **ep.methods})
    note = "" if ok else (f"no static plan serves the peak of every model within the scarcest epoch's availability; "
                          f"the static plan serves {st.alpha:.1%} of the peak.")
    return out, StaticPeak(cost, ok, note, from_epoch)


def closing_notes(epochs: Sequence[EpochResult], time_limit_s: float) -> list[str]:
    """Notes on epochs whose solve failed, epochs the time limit left without a plan, and epochs short of demand."""
    from planning.timeline.shared import failed_notes

    notes = failed_notes(epochs)
    lost = [ep.index for ep in epochs if not ep.has_plan and not ep.error]
    if lost:
        notes.append(f"{len(lost)} epochs have no plan (the time limit {time_limit_s:g} s came before any plan was "
                     f"found, e.g. epoch {lost[0]}): their cost is unknown, so the horizon total is not stated. "
                     "Fix: raise options.time_limit_s.")
    short = [ep.index for ep in epochs if ep.objective == "served"]
    if short:
        notes.append(f"{len(short)} epochs could not meet all demand and were planned for the largest uniform served "
                     f"fraction (goodput mode), e.g. epoch {short[0]}.")
    return notes
