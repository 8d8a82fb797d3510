"""Scenario fan-out: sweep points and what-if variants, each an independent solve, on a backend.

``sweep`` (cost vs demand or SLO multipliers) and ``what_if`` (the base plan and one plan per variant) split
into tasks that carry the scenario as a dict and return plain rows or a ``PlanResult``, so they run here, on the
embedded process pool or as Ray tasks (``planning.parallel.run_tasks``), and are merged in input order: every
backend gives the sequential answer (``tests/parallel/test_fanout.py``). Here, one after another, is the default:
the engine's warm caches (T̂ tables, multiset spaces) make a point after the first cheap; ``workers`` ≥ 2 puts
them on the pool, ``backend="ray"`` on Ray (``PLANNING_RAY_ADDRESS`` for a cluster). ``api`` re-exports them.

Here, each case also starts from its neighbour (``planning.pipeline.Reuse``): a what-if variant from the base
plan's columns, a sweep point from the previous point's (``planning.allocate.warm.WarmStart``; the answer is the
cold one's, certified over every template, only reached sooner), a what-if variant whose optimum follows from
the base plan's (prices × f, a dropped GPU type or region the plan does not use: ``planning.relations``) is
answered from it at once, and every case asks the result cache first (``planning.resultcache``), so an answer
already known comes back at once on every backend.

A sweep run here may take a first look (``SweepOptions.first_pass_s``, the What-if page's sweeps): every point's
plan at a short limit and without baselines, one after another, so the whole curve is on screen (each point
labelled with what its solve proved) before the proofs; then every point as asked, from its neighbours' columns
(the first look's among them), a point already proven optimal by the first look kept when no baseline is asked.
The rows so far go to the job's partial answer (``planning.context.plan_listener``) as each point lands.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from planning.allocate.warm import WarmStart
from planning.context import CancelToken, ProgressFn, check_cancel, plan_listener
from planning.errors import PlanningError
from planning.parallel import FanOut, fan_out, resolve_backend
from planning.pipeline import Reuse
from planning.relations import BasePlan, Relation, relate
from planning.result import BaselineSummary, PlanResult
from planning.safeio import json_safe
from planning.scenario import Scenario
from planning.whatif import Variant, apply_variants, label


def _solve(scenario: Scenario, reuse: Reuse, *, progress: ProgressFn | None = None,
           cancel: CancelToken | None = None, with_baselines: bool = True) -> PlanResult:
    """What :func:`planning.api.solve` does (the perf model corrected by the user's kept measurement fits when the
    scenario asks, the result labelled), with ``reuse``: the result cache and/or a neighbour's warm columns."""
    from planning.api_measurements import solve_measured

    return solve_measured(scenario, reuse, progress=progress, cancel=cancel, with_baselines=with_baselines)


def solve_near(scenario: Scenario, base: PlanResult | Mapping[str, Any] | None = None, *,
               progress: ProgressFn | None = None, cancel: CancelToken | None = None,
               with_baselines: bool = True) -> PlanResult:
    """Plan ``scenario`` starting from a neighbouring plan's columns (``base``: a PlanResult, or its columns as
    ``WarmStart.to_dict()``, e.g. a job request's), asking the result cache first: the What-if page's sliders
    (without baselines: the plan and its diff against the base are what a slider shows). The answer is the cold
    one's (certified over every template), only reached sooner."""
    from planning.resultcache import default_cache

    warm = WarmStart.from_result(base) if isinstance(base, PlanResult) else \
        WarmStart.from_dict(base) if base else None
    related = _base_plan(base) if isinstance(base, PlanResult) else None
    return _solve(scenario, Reuse(cache=default_cache(), warm=warm, base=related), progress=progress,
                  cancel=cancel, with_baselines=with_baselines)


def cached_plan(scenario: Scenario) -> PlanResult | None:
    """The final plan of ``scenario`` the result cache holds (solved with its baselines, or without), None on a
    miss or with the cache off: how a job that was sent only a base plan's scenario gets the plan itself for the
    proofs by relation (``planning.relations``) without carrying it in its request."""
    from planning.api_measurements import plan_context
    from planning.context import engine_context
    from planning.resultcache import cache_key, default_cache

    cache = default_cache()
    if cache is None:
        return None
    ctx, _note = plan_context(scenario, engine_context())
    for with_baselines in (True, False):
        hit = cache.get(cache_key(scenario, ctx, with_baselines=with_baselines, finance=True), scenario)
        if hit is not None:
            return hit
    return None


def _base_plan(result: PlanResult) -> BasePlan | None:
    """``result`` with the scenario it answers (its ``scenario`` dict), for the proofs by relation; None when it
    carries no scenario that validates (an old saved plan)."""
    if not result.scenario:
        return None
    try:
        return BasePlan(Scenario.from_dict(dict(result.scenario)), result)
    except PlanningError:
        return None


def nearest_base(variant: Scenario, bases: Sequence[PlanResult]) -> PlanResult:
    """The plan to plan ``variant`` from, among ``bases`` (nearest first, e.g. the sliders' finished positions
    by slider steps, the base plan among them): the first whose proven optimum answers ``variant`` by a relation
    (``planning.relations``: prices × f, unused options dropped, or scarcer availability the plan may still fit),
    so that a price move after a demand move is proven from the demand position's plan at once; else the first,
    whose columns are the nearest warm start."""
    if not bases:
        raise ValueError("nearest_base needs at least one plan")
    for result in bases:
        relation = _relation(variant, result)
        if relation is not None and relation.may_answer:
            return result
    return bases[0]


def _relation(variant: Scenario, result: PlanResult) -> Relation | None:
    """How ``variant`` relates to ``result``'s scenario (``planning.relations.relate``), None without one."""
    related = _base_plan(result)
    return relate(related, variant) if related is not None else None


def proven_at_once(variant: Scenario, base: PlanResult) -> bool:
    """Whether ``base``'s proven plan answers ``variant`` by a relation that needs no solve (the same scenario,
    prices × f, an option the plan does not use dropped): planning ``variant`` from it ends in milliseconds. A
    scarcer availability the plan may still fit is not counted (when it does not fit, a solve follows)."""
    relation = _relation(variant, base)
    return relation is not None and relation.kind != "tightened"


def warm_columns(result: PlanResult) -> dict[str, Any]:
    """The templates ``result``'s plan uses, as plain JSON for :func:`solve_near` (``WarmStart.to_dict``)."""
    return WarmStart.from_result(result).to_dict()


@dataclass(frozen=True)
class SweepOptions:
    """How each sweep point is planned: ``baselines`` (False: the plan alone, for a caller that shows only the
    plan's line) and ``point_limit_s`` (a time limit per point below the scenario's ``options.time_limit_s``: a
    point it stops keeps its best plan, labelled with its proven gap, never passed off as optimal)."""

    baselines: bool = True
    point_limit_s: float | None = None
    # a first look: every point's plan at this limit, without baselines, before the points are solved as asked
    # (only when the points run here; None: none)
    first_pass_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("point_limit_s", "first_pass_s"):
            limit = getattr(self, name)
            if limit is not None and not (isinstance(limit, int | float) and math.isfinite(limit) and limit > 0):
                raise PlanningError(name, f"must be a positive number of seconds, got {limit!r}.",
                                    "give e.g. 30, or leave it out to use the scenario's time limit.")


FIRST_PASS_S = 2.0
"""The What-if page's first look at a sweep: each point's plan within 2 s. coral-extended's 10-point demand sweep
(×0.5 … ×5) in a process that has planned the preset (round 22): at 2 s every point planned after 18.2 s, 3 proven
optimal, 6 within 3.5-5.4 % and ×4, ×4.5 within 18.7, 24.0 % (proven gaps); at 1 s after 10.3 s but 4 points
without a plan and ×0.5 within 33 %; at 1.5 s after 14.9 s, ×5 without a plan and ×2.5 within 37 %."""


def sweep(scenario: Scenario, kind: str, values: Sequence[float], *, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None, backend: str | None = None, workers: int = 0,
          options: SweepOptions | None = None) -> pd.DataFrame:
    """Cost of the mixed plan and of each baseline as demand (``kind="demand"``) or SLOs (``"slo"``) scale.

    ``backend="ray"`` (or ``PLANNING_BACKEND=ray``, ``--backend ray``) solves the points as Ray tasks, ``workers``
    at a time on a local instance (0: one per core); on the process backend ``workers`` ≥ 2 solves them on the
    process pool, else here one after another, each from the columns of the points before it. Same rows either
    way, and the same costs as each point solved alone (``tests/parallel/test_sweep_points.py``).

    Returns
    -------
    DataFrame with columns x, method, cost_per_hour, served_fraction, feasible, status, proven_gap, proof: what
    each row's solve proved (the plan: ``PlanResult.status`` and ``proof()``, e.g. "within 0.42 % of the optimum
    (proven gap)" for a point stopped by its time limit; ``proven_gap`` 0 when optimal, NaN without a plan; a
    baseline, whose ILP asks the scenario's ``mip_rel_gap``: ``proven`` when it reached it, else ``time-limited``,
    ``infeasible`` or ``not run``, with its note).
    """
    if kind not in ("demand", "slo"):
        raise PlanningError("kind", f"unknown sweep {kind!r}.", 'use "demand" or "slo".')
    if not values:
        raise PlanningError("values", "is empty.", "give at least one multiplier, e.g. [0.5, 1, 2].")
    opts = options or SweepOptions()
    points = [(scenario.to_dict(), kind, float(x), opts.baselines, opts.point_limit_s) for x in values]
    labels = [f"{kind} ×{x:g}" for x in values]
    if resolve_backend(backend) == "ray" or workers >= 2:
        per_point = fan_out(sweep_point, points, labels, FanOut(backend, workers, progress, cancel, what="sweep"))
    else:
        per_point = _sweep_here(points, labels, opts, scenario.options.time_limit_s, progress, cancel)
    return pd.DataFrame([row for rows in per_point for row in rows], columns=SWEEP_COLUMNS)


def _sweep_here(points: list[tuple[Any, ...]], labels: list[str], opts: SweepOptions, limit_s: float,
                progress: ProgressFn | None, cancel: CancelToken | None) -> list[list[dict[str, Any]]]:
    """The points one after another, here: the first look when asked (and shorter than the points' own limit),
    then each point as asked from its neighbours' columns, within what its limit leaves after its look; the rows
    so far to the job after each point, the progress as a share of the expected time (:class:`_SweepRows`)."""
    limit = min(opts.point_limit_s or math.inf, limit_s)
    look = opts.first_pass_s if opts.first_pass_s is not None and opts.first_pass_s < limit else None
    warm, shown = _Neighbours(), _SweepRows(len(points), plan_listener(progress), limit, look)
    for i, point in enumerate(points if look is not None else ()):
        check_cancel(cancel, "sweep")
        t0 = time_now()
        rows = sweep_point((*point[:3], False, look), cancel, warm)
        shown.land(i, rows, final=False, seconds=time_now() - t0)
        if progress is not None:
            progress(shown.fraction(), f"first look: {labels[i]}")
    out = []
    for i, point in enumerate(points):
        check_cancel(cancel, "sweep")
        t0 = time_now()
        known = shown.rows.get(i)  # the first look proved this point's plan: nothing more to do without baselines
        if known and known[0]["status"] == "optimal" and not point[3]:
            rows = known
        else:  # the point's time limit counts its first look too
            rows = sweep_point((*point[:4], max(0.05, limit - shown.spent.get(i, 0.0))) if i in shown.spent
                               else point, cancel, warm)
        shown.land(i, rows, final=True, seconds=time_now() - t0)
        out.append(rows)
        if progress is not None:
            progress(shown.fraction(), labels[i])
    return out


class _SweepRows:
    """A sweep's rows so far, by point (the first look's until the point is solved as asked), handed to the job
    as its partial answer after each point: ``{"rows": [...], "final": n, "points": N}`` (JSON: NaN → None); and
    its progress as a share of its expected time, so that the job's "about N s left" is the time still to come.

    What a point solved as asked probably takes: what its first look took when that look proved its plan (it is
    proven again from its own columns), else its time limit less its look (an unproven point likely runs to its
    limit, which counts its look); plus, on average, what the points solved so far took beyond that (their
    baselines). A point not yet looked at counts its time limit; a first look still to come, its own limit."""

    def __init__(self, points: int, listener: Any, limit_s: float, look: float | None = None) -> None:
        self.points, self.listener, self.limit_s = points, listener, limit_s
        self.rows: dict[int, list[dict[str, Any]]] = {}
        self.final = 0
        self.look = look  # the first look's limit per point (None: no first look)
        self.looked: dict[int, float] = {}  # point → what its first look took, when the look proved its plan
        self.spent: dict[int, float] = {}  # point → what its first look took (counted against the point's limit)
        self.extra: list[float] = []  # per point solved as asked: its time beyond what was expected of it
        self.started = time_now()

    def _expected(self, i: int) -> float:
        guess = self.looked.get(i, self.limit_s - self.spent.get(i, 0.0))
        return guess if math.isfinite(guess) else 60.0  # no limit at all: a minute, until points are timed

    def land(self, i: int, rows: list[dict[str, Any]], final: bool, seconds: float = 0.0) -> None:
        if final:
            self.extra.append(max(0.0, seconds - self._expected(i)))
        else:
            self.spent[i] = seconds
            if rows and rows[0]["status"] == "optimal":
                self.looked[i] = seconds
        self.rows[i] = rows
        self.final += bool(final)
        if self.listener is not None:
            every = [row for j in sorted(self.rows) for row in self.rows[j]]
            self.listener(json_safe({"rows": every, "final": self.final, "points": self.points}))

    def fraction(self) -> float:
        """spent / (spent + left), within [0.01, 0.99] (what ``JobRecord.time_left`` turns back into left)."""
        extra = sum(self.extra) / len(self.extra) if self.extra else 0.0
        looks = 0.0 if self.look is None else (self.points - len(self.rows)) * self.look
        left = looks + sum(self._expected(i) + extra for i in range(self.final, self.points))
        spent = time_now() - self.started
        return min(0.99, max(0.01, spent / (spent + left))) if spent + left > 0 else 0.01


def time_now() -> float:
    """The clock a sweep's pace reads (a test moves it)."""
    return time.monotonic()


PLAN_METHOD = "Plan (mixed templates)"
"""The ``method`` of a sweep point's plan row (the other rows are its baselines)."""
SWEEP_COLUMNS = ["x", "method", "cost_per_hour", "served_fraction", "feasible", "status", "proven_gap", "proof"]
"""The columns of :func:`sweep`'s frame, in order."""


def sweep_notes(frame: pd.DataFrame) -> list[str]:
    """What a sweep's figure owes its reader, one sentence per row not proven: the plan at a point its time limit
    stopped ("plan at ×2.5: within 0.42 % of the optimum (proven gap)"), a baseline whose ILP stopped at its own
    limit (its note). Empty when every plan is proven optimal and every baseline reached its gap; rows of a sweep
    made before these columns existed (no ``status``) are not judged."""
    if "status" not in frame.columns:
        return []
    notes = []
    for row in frame.itertuples(index=False):
        if row.method == PLAN_METHOD and row.status != "optimal":
            notes.append(f"plan at ×{row.x:g}: {row.proof}")
        elif row.method != PLAN_METHOD and row.status == "time-limited":
            notes.append(f"{row.method} at ×{row.x:g}: {row.proof}")
    return notes


class _Neighbours:
    """The warm start of the next case solved here: the columns of every plan solved so far (a sweep's previous
    points, a what-if's base), bounded by what a plan uses (a handful of templates per group)."""

    def __init__(self) -> None:
        self.start: WarmStart | None = None
        self.base: BasePlan | None = None  # the first plan solved here (a what-if's base): proofs by relation

    def reuse(self) -> Reuse:
        from planning.resultcache import default_cache

        return Reuse(cache=default_cache(), warm=self.start, base=self.base)

    def learn(self, scenario: Scenario, result: PlanResult) -> None:
        if result.instances:
            self.start = WarmStart.union([self.start, WarmStart.from_result(result)])
        if self.base is None:
            self.base = BasePlan(scenario, result)


def _solve_case(scenario: Scenario, cancel: CancelToken | None, warm: _Neighbours | None,
                baselines: bool = True) -> PlanResult:
    """One case: with ``warm`` (here) through the pipeline with the neighbours' columns and the cache, else as
    :func:`planning.api.solve` (a pool or Ray task: the cache only)."""
    if warm is None:
        from planning.resultcache import default_cache

        return _solve(scenario, Reuse(cache=default_cache()), cancel=cancel, with_baselines=baselines)
    result = _solve(scenario, warm.reuse(), cancel=cancel, with_baselines=baselines)
    warm.learn(scenario, result)
    return result


def sweep_point(point: tuple[Any, ...], cancel: CancelToken | None = None,
                warm: _Neighbours | None = None) -> list[dict[str, Any]]:
    """One sweep point (scenario as a dict, kind, multiplier[, baselines, point limit]) → its rows: the plan and
    every baseline, each with what its solve proved (``warm``: started from the points solved before it, see
    :class:`_Neighbours`)."""
    data, kind, x = point[:3]
    baselines, limit = (bool(point[3]), point[4]) if len(point) > 3 else (True, None)
    scenario = Scenario.from_dict(data)
    variant = scenario.with_demand_scaled(x) if kind == "demand" else scenario.with_slo_scaled(x)
    variant = replace(variant, name=f"{scenario.name} ({kind} ×{x:g})")
    if limit is not None and limit < variant.options.time_limit_s:
        variant = replace(variant, options=replace(variant.options, time_limit_s=float(limit)))
    res = _solve_case(variant, cancel, warm, baselines)
    return [_plan_row(x, res), *(_baseline_row(x, b) for b in res.baselines)]


def _plan_row(x: float, res: PlanResult) -> dict[str, Any]:
    """The plan's row of a sweep point: its cost only with a plan, and what its solve proved."""
    ok = res.status in ("optimal", "feasible")
    gap = 0.0 if res.status == "optimal" else \
        float(res.mip_gap) if res.has_plan and res.mip_gap is not None else float("nan")
    return {"x": x, "method": PLAN_METHOD, "cost_per_hour": res.comparable_cost if ok else float("nan"),
            "served_fraction": res.served_fraction, "feasible": ok, "status": res.status, "proven_gap": gap,
            "proof": res.proof() if res.has_plan else (res.message or res.status)}


def _baseline_row(x: float, b: BaselineSummary) -> dict[str, Any]:
    """A baseline's row of a sweep point: status ``proven`` (its ILP reached the scenario's ``mip_rel_gap``),
    ``time-limited`` (stopped at its own limit; its note says within how much of its optimum), ``infeasible`` or
    ``not run`` (the point's time limit left it no time)."""
    status = "not run" if not b.ran else "infeasible" if not b.feasible else \
        "time-limited" if b.time_limited else "proven"
    return {"x": x, "method": b.name, "cost_per_hour": b.cost_per_hour if b.feasible else float("nan"),
            "served_fraction": b.served_fraction, "feasible": b.feasible, "status": status,
            "proven_gap": float("nan"), "proof": b.note}


def what_if(scenario: Scenario, variants: Mapping[str, Sequence[Variant]] | Sequence[Variant], *,
            base: bool = True, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
            backend: str | None = None, workers: int = 0) -> dict[str, PlanResult]:
    """The plan of each what-if variant (and of the scenario itself, ``"base"``), as independent solves.

    ``variants``: a list of single changes (each labelled by ``whatif.label``) or ``{label: [changes applied
    together]}``. The variants are applied here (bad ones fail before anything runs); the solves run like
    :func:`sweep`'s points. Returns ``{label: PlanResult}`` in input order (base first), ready for
    ``whatif.comparison_frame``; the same results on every backend.

    Raises
    ------
    PlanningError
        No variant, two variants with one label, or a variant the scenario cannot take.
    """
    named = dict(variants) if isinstance(variants, Mapping) else {}
    if not isinstance(variants, Mapping):
        for v in variants:
            if label(v) in named:
                raise PlanningError("variants", f"{label(v)!r} is given twice.", "give each change once.")
            named[label(v)] = [v]
    if not named:
        raise PlanningError("variants", "is empty.", "give at least one change, e.g. demand=2 or drop-gpu=L40S.")
    if base and "base" in named:
        raise PlanningError("variants", "a variant is labelled 'base', the scenario's own plan.", "rename it.")
    cases = {"base": scenario} if base else {}
    cases.update({name: apply_variants(scenario, list(changes)) for name, changes in named.items()})
    warm = _Neighbours()  # here: the base first, then each variant from the base's columns
    results = fan_out(variant_point, [s.to_dict() for s in cases.values()], list(cases),
                      FanOut(backend, workers, progress, cancel, what="what-if",
                             here=lambda data, cancel=None: variant_point(data, cancel, warm)))
    return dict(zip(cases, results, strict=True))


def variant_point(data: dict[str, Any], cancel: CancelToken | None = None,
                  warm: _Neighbours | None = None) -> PlanResult:
    """One what-if case (a scenario as a dict) → its plan with baselines (``warm``: see :class:`_Neighbours`)."""
    return _solve_case(Scenario.from_dict(data), cancel, warm)
