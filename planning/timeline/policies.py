"""The timeline's planning policies (issue 27 §2): which instances run in each epoch.

- **myopic** (Coral Sec. 4.3): each epoch's allocation ILP with the previous epoch's instances as ν′
  (``engine.solve_epoch``; the served objective when an epoch cannot meet its demand).
- **look-ahead** (a rolling horizon of H epochs): epoch t is planned by the multi-epoch MILP over epochs
  t … t+H−1 (``planning.timeline.horizon``) with ν′ = the plan committed for t − 1; only epoch t is kept. An epoch
  whose horizon cannot meet its demand is planned myopically (with the served fallback) and said so.
- **offline**: the multi-epoch MILP over the whole horizon at once, certified over every template: its proven bound
  is a lower bound on every policy's total (each policy's plans are one of its solutions), and its schedule the
  optimum only when certified (gap 0); past its time limit it is the best schedule found (never dearer than the
  schedule it started from or, run beside the look-ahead, than the look-ahead's: :func:`no_dearer`,
  ``planning.timeline.beside``), shown with the bound and the gap (``planning.checks.policy_rows``).

The :class:`HorizonAdapter` turns the prepared template sets and the epochs' demand and availability into
``HorizonProblem``s and their answers back into instance counts keyed like ``scenario.current``;
:func:`fixed_epoch` gives an epoch's ``EpochSolve`` (PlanResult included) for given counts; :func:`schedule_summary`
prices a schedule the way the timeline prices every method (provisioning + K·p·new instances, per epoch).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planning.catalog.schema import parse_shape
from planning.context import CancelToken
from planning.errors import PlanningError
from planning.groups import Group, region_links
from planning.scenario import Scenario
from planning.timeline import engine
from planning.timeline.horizon import HorizonGroup, HorizonPlan, HorizonProblem, solve_horizon
from planning.timeline.result import MethodEpoch

POLICIES = ("myopic", "lookahead", "offline")
Counts = dict[tuple[str, str], int]  # (template key, region) -> instances, as ``scenario.current``


def policy_label(policy: str, horizon: int) -> str:
    """The method name a policy's rows carry in every frame, chart and JSON."""
    return {"myopic": "myopic (Coral)", "lookahead": f"look-ahead (H={horizon})",
            "offline": "offline (all epochs at once)"}[policy]  # "optimum" only where its gap is 0 (policies_frame)


def check_supported(scenario: Scenario, groups: Sequence[Group], policy: str) -> None:
    """Raise when ``policy`` cannot plan this timeline: the multi-epoch MILP plans one request class per group and
    pairs a model's prefill and decode per region.

    Raises
    ------
    PlanningError
        Naming ``--policy`` and the fix.
    """
    if policy not in POLICIES:
        raise PlanningError("--policy", f"unknown policy {policy!r}.", f"use one of {', '.join(POLICIES)}.")
    if policy == "myopic":
        return
    if any(len(g.classes) > 1 for g in groups):
        raise PlanningError("--policy", f"the {policy} policy plans one request class per model; this timeline has "
                            "histogram buckets.", "drop --histogram, or use --policy myopic.")
    if scenario.options.kv_transfer == "cross-region":
        raise PlanningError("--policy", f"the {policy} policy pairs prefill and decode per region.",
                            "set options.kv_transfer: same-region, or use --policy myopic.")
    if scenario.objective.kind != "cost":
        raise PlanningError("--policy", f"the {policy} policy minimises cost over the epochs.",
                            "set objective.kind: cost (epochs short of nodes fall back to the served objective).")


@dataclass
class HorizonAdapter:
    """The template columns over the timeline's shapes, the prices, and per epoch the demand and availability."""

    prep: engine.Prepared
    regions: tuple[str, ...]
    shapes: tuple[str, ...]
    prices: np.ndarray
    available: np.ndarray  # (E, R, S)
    demand: np.ndarray  # (E, G)
    hours: float
    K: float
    groups: tuple[HorizonGroup, ...]
    links: tuple[tuple[int, int], ...]
    row_of: dict[str, tuple[int, int]] = field(default_factory=dict)  # template key -> (group, row)

    @classmethod
    def build(cls, prep: engine.Prepared, epoch_scenarios: Sequence[Scenario], epoch_groups: Sequence[Sequence[Group]],
              hours: float, K: float, rows: Sequence[np.ndarray] | None = None) -> HorizonAdapter:
        """``rows``: per template set, the rows the MILPs may use (None: all; ``columns.PoolResult.horizon_rows``)."""
        offers0 = engine.offers_for(prep, epoch_scenarios[0])
        regions = tuple(sorted({o.region for o in offers0}))
        shapes = tuple(sorted({o.shape for o in offers0}))
        prices = np.full((len(regions), len(shapes)), np.nan)
        for o in offers0:
            prices[regions.index(o.region), shapes.index(o.shape)] = o.price_per_hour
        available = np.zeros((len(epoch_scenarios), len(regions), len(shapes)))
        for e, scn in enumerate(epoch_scenarios):
            for o in engine.offers_for(prep, scn):
                if o.region in regions and o.shape in shapes:
                    available[e, regions.index(o.region), shapes.index(o.shape)] = o.available
        groups, row_of = [], {}
        for gi, ts in enumerate(prep.sets):
            sel = np.flatnonzero(rows[gi]) if rows is not None else np.arange(len(ts))
            usage = np.zeros((len(sel), len(shapes)), dtype=np.int64)
            throughput = np.asarray(ts.throughput[sel, 0], dtype=float).copy()
            for k, s in enumerate(ts.shapes):
                if s in shapes:
                    usage[:, shapes.index(s)] = ts.usage[sel, k]
                else:  # a shape no epoch offers: the template cannot be bought (no throughput, no column)
                    throughput[ts.usage[sel, k] > 0] = 0.0
            keys = tuple(ts.key(int(i)) for i in sel)
            groups.append(HorizonGroup(ts.group.id, ts.group.model, ts.group.phase, usage, throughput, keys))
            row_of.update({k: (gi, i) for i, k in enumerate(keys)})
        gid = [ts.group.id for ts in prep.sets]
        class_group = {c.id: g.id for g in epoch_groups[0] for c in g.classes}
        links = tuple((gid.index(class_group[p]), gid.index(class_group[d])) for p, d in region_links(epoch_groups[0]))
        demand = np.array([[next(g.demand for g in groups_e if g.id == ts.group.id) for ts in prep.sets]
                           for groups_e in epoch_groups], dtype=float)
        return cls(prep, regions, shapes, prices, available, demand, hours, K, tuple(groups), links, row_of)

    @property
    def epochs(self) -> int:
        return int(self.demand.shape[0])

    def problem(self, first: int, last: int, running: Counts) -> HorizonProblem:
        """Epochs ``first`` … ``last − 1`` with ``running`` as ν′."""
        run = self.keys_of(running)
        return HorizonProblem(self.groups, self.regions, self.shapes, self.prices, self.available[first:last],
                              self.demand[first:last], self.hours, self.K, run, self.links)

    def keys_of(self, counts: Counts) -> dict[tuple[int, int, int], int]:
        """``counts`` keyed as the horizon MILP keys its pairs: (group, row, region); unknown keys dropped."""
        out = {}
        for (key, region), n in counts.items():
            if n > 0 and key in self.row_of and region in self.regions:
                gi, i = self.row_of[key]
                out[(gi, i, self.regions.index(region))] = int(n)
        return out

    def counts(self, plan_counts: Mapping[tuple[int, int, int], int]) -> Counts:
        return {(self.groups[gi].keys[i], self.regions[r]): int(n) for (gi, i, r), n in plan_counts.items() if n > 0}


# ---------------------------------------------------------------------------------------------- policies
@dataclass
class Schedule:
    """A policy's instances per epoch, with how it was found."""

    policy: str
    counts: list[Counts]
    status: str = "feasible"  # offline: optimal (certified) | feasible (with gap)
    bound: float | None = None  # offline: proven lower bound of the horizon total (USD)
    gap: float | None = None
    myopic_epochs: tuple[int, ...] = ()  # look-ahead steps planned myopically (horizon short of nodes)
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    stats: dict[str, float] = field(default_factory=dict)


def lookahead(adapter: HorizonAdapter, horizon: int, *, time_limit_s: float, mip_rel_gap: float,
              myopic: Callable[[int, Counts], Counts], cancel: CancelToken | None = None,
              on_epoch: Callable[[int], None] | None = None) -> Schedule:
    """The rolling horizon: epoch t from the MILP over t … t+H−1 with ν′ = the plan of t − 1; ``myopic(t, prev)``
    plans an epoch whose horizon cannot meet its demand. Each step gets ``time_limit_s``."""
    t0 = time.perf_counter()
    out: list[Counts] = []
    prev: Counts = {}
    fallback: list[int] = []
    uncertified = 0
    previous: HorizonPlan | None = None
    seen: dict[bytes, HorizonPlan] = {}  # a step's problem → its plan (a repeated day repeats its steps)
    reused = 0
    for t in range(adapter.epochs):
        last = min(t + horizon, adapter.epochs)
        problem = adapter.problem(t, last, prev)
        key = step_key(problem)
        plan = seen.get(key)
        if plan is None:
            start = (list(previous.counts[1:]) or None) if previous is not None and previous.has_plan else None
            plan = solve_horizon(problem, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap, cancel=cancel,
                                 start=start)
            seen[key] = plan
        else:
            reused += 1
        if plan.has_plan:
            now = adapter.counts(plan.counts[0])
            uncertified += plan.status != "optimal"
            previous = plan
        else:
            now = myopic(t, prev)
            fallback.append(t)
            previous = None
        out.append(now)
        prev = now
        if on_epoch is not None:
            on_epoch(t)
    notes = []
    if fallback:
        notes.append(f"look-ahead: {len(fallback)} epochs could not meet their demand over the horizon and were planned "
                     f"myopically (served objective), e.g. epoch {fallback[0]}.")
    if uncertified:
        notes.append(f"look-ahead: {uncertified} horizon MILPs stopped before their proof (time limit "
                     f"{time_limit_s:g} s each); their best plans were used.")
    return Schedule("lookahead", out, "feasible", None, None, tuple(fallback), time.perf_counter() - t0, tuple(notes),
                    {"steps_reused": float(reused)})


def step_key(problem: HorizonProblem) -> bytes:
    """What a look-ahead step's MILP depends on besides the fixed columns and prices: its epochs' demand and
    availability, K, the epoch length and the running instances (two steps with the same key have one answer)."""
    import hashlib

    h = hashlib.sha256()
    for arr in (problem.demand, problem.available):
        a = np.ascontiguousarray(arr, dtype=float)
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    h.update(repr((problem.K, problem.hours, sorted(problem.running.items()))).encode())
    return h.digest()


def offline(adapter: HorizonAdapter, *, time_limit_s: float, mip_rel_gap: float,
            cancel: CancelToken | None = None, start: Sequence[Counts] | None = None) -> Schedule:
    """Every epoch at once (the offline optimum, certified, or the best plan with its proven gap). ``start``:
    another policy's schedule, a MIP start (so a time-limited answer is never dearer than it)."""
    t0 = time.perf_counter()
    plan = solve_horizon(adapter.problem(0, adapter.epochs, {}), time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap,
                         cancel=cancel, start=None if start is None else [adapter.keys_of(c) for c in start])
    if not plan.has_plan:
        why = ("some epoch's demand cannot be met with its availability" if plan.lp_slack
               else f"no plan within {time_limit_s:g} s")
        # a bound proven without a plan of its own is kept: ``no_dearer`` gives another schedule its gap to it
        bound = plan.bound if math.isfinite(plan.bound) else None
        return Schedule("offline", [], plan.status, bound, None, (), time.perf_counter() - t0,
                        (f"offline optimum not available: {why}.",), dict(plan.stats))
    note = () if plan.status == "optimal" else (
        f"offline: the multi-epoch MILP stopped before its proof; best plan within "
        f"{plan.gap:.2%} of the bound." if plan.gap is not None else "offline: no bound proven.",)
    return Schedule("offline", [adapter.counts(c) for c in plan.counts], plan.status,
                    plan.bound if math.isfinite(plan.bound) else None, plan.gap, (), time.perf_counter() - t0, note,
                    dict(plan.stats))


def no_dearer(adapter: HorizonAdapter, offline_schedule: Schedule, floor: Schedule | None) -> Schedule:
    """``offline_schedule``, or ``floor``'s counts when they cost less over the horizon (the offline MILP ran
    without them: ``planning.timeline.beside``), with the offline's proven bound and the gap to that cheaper
    schedule; an offline run with no plan of its own takes ``floor``'s with its bound, never "optimal"."""
    if floor is None or not floor.counts:
        return offline_schedule
    from planning.timeline.horizon_data import HorizonData
    from planning.timeline.horizon_ilp import schedule_value

    d = HorizonData.build(adapter.problem(0, adapter.epochs, {}))
    v_floor = schedule_value(d, [adapter.keys_of(c) for c in floor.counts])
    v_own = schedule_value(d, [adapter.keys_of(c) for c in offline_schedule.counts]) \
        if offline_schedule.counts else math.inf
    if not v_floor < v_own - 1e-9 * max(1.0, abs(v_floor)):
        return offline_schedule
    bound = offline_schedule.bound
    gap = None if bound is None or not math.isfinite(v_floor) or v_floor <= 0 else (v_floor - bound) / v_floor
    if gap is not None and gap <= 1e-6:  # the horizon MILP's own rule (``_Search.plan``)
        gap = 0.0
    status = "optimal" if gap == 0.0 else "feasible"
    name = {"lookahead": "look-ahead", "myopic": "myopic"}.get(floor.policy, floor.policy)
    note = (f"offline: the multi-epoch MILP stopped before its proof; best plan (the {name} schedule) within "
            f"{gap:.2%} of the bound." if gap is not None else "offline: no bound proven.",)
    return replace(offline_schedule, counts=[dict(c) for c in floor.counts], status=status, gap=gap,
                   notes=() if status == "optimal" else note)


# ---------------------------------------------------------------------------------------------- reporting
def fixed_epoch(prep: engine.Prepared, scenario: Scenario, groups: Sequence[Group], counts: Counts, prev: Counts,
                status: str, gap: float | None, seconds: float) -> engine.EpochSolve:
    """An epoch's ``EpochSolve`` for given instance counts: the PlanResult the timeline reports (cost lines,
    service, GPUs), each group's demand routed to its instances in proportion to their capacity."""
    from planning.allocate.problem import AllocationResult, SolveStats
    from planning.assemble import build_plan_result

    resolved = engine.resolved_for(prep, scenario, groups)
    price = {(o.region, o.shape): o.price_per_hour for o in resolved.offers}
    by_id = {g.id: g for g in groups}
    cap: dict[str, float] = {}
    info: dict[tuple[str, str], tuple[str, float, float]] = {}  # key -> (group, throughput, $/h per instance)
    nodes: dict[tuple[str, str], int] = {}
    for (key, region), n in counts.items():
        gi, i = _locate(prep, key)
        ts = prep.sets[gi]
        thr = float(ts.throughput[i, 0])
        usage = ts.usage_dict(i)
        info[(key, region)] = (ts.group.id, thr, sum(price.get((region, s), 0.0) * k for s, k in usage.items()))
        cap[ts.group.id] = cap.get(ts.group.id, 0.0) + n * thr
        for s, k in usage.items():
            nodes[(region, s)] = nodes.get((region, s), 0) + k * n
    assignment = {}
    for (key, region), n in counts.items():
        gid, thr, _p = info[(key, region)]
        g = by_id[gid]
        share = n * thr / cap[gid] if cap[gid] > 0 else 0.0
        assignment[(g.classes[0].id, key, region)] = min(g.demand, cap[gid]) * share
    provisioning = sum(n * info[k][2] for k, n in counts.items())
    penalty = scenario.options.K * sum(max(0, n - prev.get(k, 0)) * info[k][2] for k, n in counts.items())
    served = {g.id: (1.0 if g.demand <= 0 else min(1.0, cap.get(g.id, 0.0) / g.demand)) for g in groups}
    alloc = AllocationResult(status=status, objective="cost",  # type: ignore[arg-type]
                             objective_value=provisioning + penalty, cost_per_hour=provisioning,
                             penalty_per_hour=penalty, alpha=min(served.values(), default=1.0), counts=dict(counts),
                             assignment=assignment, served=served, nodes_used=nodes, gap=gap, phases=(),
                             timings={}, stats=SolveStats(), builder="horizon", solver="highs")
    result = build_plan_result(resolved, prep.sets, alloc, [], timings={}, provenance={}, stats={})
    return engine.EpochSolve(result, dict(counts), "cost", alloc.alpha or 1.0, seconds)


def held_epoch(prep: engine.Prepared, scenario: Scenario, groups: Sequence[Group], before: engine.EpochSolve,
               prev: Mapping[tuple[str, str], int]) -> engine.EpochSolve | None:
    """The epoch's plan when it has the problem of the epoch ``before`` (same rates, availability, prices, K) and
    starts from that epoch's plan x* (``prev``): x* again, with no new instance; None when that does not hold or
    ``before`` was not an optimal cost plan of one class per group on same-region pairs (the plans
    :func:`fixed_epoch` prices).

    Why x* is optimal: with c the prices and p the instances before x*, x* minimised
    f(x) = c·x + K·c·(x − p)⁺, and the epoch now minimises g(x) = c·x + K·c·(x − x*)⁺. Since (·)⁺ is subadditive,
    (x − p)⁺ ≤ (x − x*)⁺ + (x* − p)⁺, so f(x) ≤ g(x) + K·c·(x* − p)⁺ and
    g(x*) = c·x* = f(x*) − K·c·(x* − p)⁺ ≤ f(x) − K·c·(x* − p)⁺ + G ≤ g(x) + G for every plan x, where G is the
    absolute gap x* was proven within (0 at a proven optimum). The held plan's gap is G / g(x*).
    """
    res = before.result
    if (before.error or not before.has_plan or before.objective != "cost" or res.status != "optimal"
            or dict(before.counts) != dict(prev) or any(len(g.classes) != 1 for g in groups)
            or scenario.options.kv_transfer == "cross-region" or res.transfer_per_hour):
        return None
    t0 = time.perf_counter()
    absolute = (res.mip_gap or 0.0) * res.cost_per_hour
    provisioning = res.provisioning_per_hour
    gap = absolute / provisioning if provisioning > 0 else 0.0
    held = fixed_epoch(prep, scenario, groups, dict(prev), dict(prev), "optimal", gap, 0.0)
    return replace(held, seconds=time.perf_counter() - t0)


def _locate(prep: engine.Prepared, key: str) -> tuple[int, int]:
    for gi, ts in enumerate(prep.sets):
        row = ts.row_of.get(key)
        if row is not None:
            return gi, row
    raise KeyError(key)


def schedule_method(prep: engine.Prepared, schedule: Schedule, per_epoch_groups: Sequence[Sequence[Group]],
                    price: Mapping[tuple[str, str], float], K: float, models: Sequence[str],
                    node_cache: dict[str, int]) -> list[MethodEpoch]:
    """Each epoch of a schedule priced as the timeline prices a method: cost/h = provisioning + K·p·new
    instances, served fraction per model (capacity / demand, the worse phase), churn and GPUs by type."""
    out = []
    prev: Counts = {}
    for e, counts in enumerate(schedule.counts):
        groups = per_epoch_groups[e]
        cap = engine.capacity(prep, counts, groups)
        frac: dict[str, float] = {}
        for g in groups:
            f = 1.0 if g.demand <= 0 else min(1.0, cap[g.id] / g.demand)
            frac[g.model] = min(frac.get(g.model, 1.0), f)
        prov = 0.0
        gpus: dict[str, int] = {}
        for (key, region), n in counts.items():
            for s, k in prep.nodes_of(key).items():
                prov += n * k * price.get((region, s), 0.0)
                count, gpu = parse_shape(s)
                gpus[gpu] = gpus.get(gpu, 0) + n * k * count
        pen = K * sum(max(0, n - prev.get(key, 0)) * sum(price.get((key[1], s), 0.0) * k
                                                          for s, k in prep.nodes_of(key[0]).items())
                      for key, n in counts.items())
        started = sum(max(0, n - prev.get(k, 0)) * _nodes(prep, k[0], node_cache) for k, n in counts.items())
        stopped = sum(max(0, n - counts.get(k, 0)) * _nodes(prep, k[0], node_cache) for k, n in prev.items())
        out.append(MethodEpoch(cost_per_hour=prov + pen, served_fraction={m: frac.get(m, 1.0) for m in models},
                               feasible=all(v >= 1 - 1e-6 for v in frac.values()), nodes_started=started,
                               nodes_stopped=stopped, gpus=dict(sorted(gpus.items()))))
        prev = counts
    return out


def _nodes(prep: engine.Prepared, key: str, cache: dict[str, int]) -> int:
    if key not in cache:
        cache[key] = sum(prep.nodes_of(key).values())
    return cache[key]


def replace_current(scenario: Scenario, counts: Counts) -> Scenario:
    """``scenario`` with ``counts`` as its running instances."""
    return replace(scenario, current=engine.current_of(counts))
