"""Scenario fan-out: sweep points and what-if variants, each an independent solve, on a backend.

``sweep`` (cost vs demand or SLO multipliers) and ``what_if`` (the base plan and one plan per variant) split
into tasks that carry the scenario as a dict and return plain rows or a ``PlanResult``, so they run here, on the
embedded process pool or as Ray tasks (``planning.parallel.run_tasks``), and are merged in input order: every
backend gives the sequential answer (``tests/parallel/test_fanout.py``). Here, one after another, is the default:
the engine's warm caches (T̂ tables, multiset spaces) make a point after the first cheap; ``workers`` ≥ 2 puts
them on the pool, ``backend="ray"`` on Ray (``PLANNING_RAY_ADDRESS`` for a cluster). ``api`` re-exports them.

Here, each case also starts from its neighbour (``planning.pipeline.Reuse``): a what-if variant from the base
plan's columns, a sweep point from the previous point's (``planning.allocate.warm.WarmStart``; the answer is the
cold one's, certified over every template, only reached sooner), and every case asks the result cache first
(``planning.resultcache``), so an answer already known comes back at once on every backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from planning.allocate.warm import WarmStart
from planning.context import CancelToken, ProgressFn
from planning.errors import PlanningError
from planning.parallel import FanOut, fan_out
from planning.pipeline import Reuse
from planning.result import PlanResult
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
    return _solve(scenario, Reuse(cache=default_cache(), warm=warm), progress=progress, cancel=cancel,
                  with_baselines=with_baselines)


def warm_columns(result: PlanResult) -> dict[str, Any]:
    """The templates ``result``'s plan uses, as plain JSON for :func:`solve_near` (``WarmStart.to_dict``)."""
    return WarmStart.from_result(result).to_dict()


def sweep(scenario: Scenario, kind: str, values: Sequence[float], *, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None, backend: str | None = None, workers: int = 0) -> pd.DataFrame:
    """Cost of the mixed plan and of each baseline as demand (``kind="demand"``) or SLOs (``"slo"``) scale.

    ``backend="ray"`` (or ``PLANNING_BACKEND=ray``, ``--backend ray``) solves the points as Ray tasks, ``workers``
    at a time on a local instance (0: one per core); on the process backend ``workers`` ≥ 2 solves them on the
    process pool, else here one after another, reusing the engine's warm caches. Same rows either way.

    Returns
    -------
    DataFrame with columns x, method, cost_per_hour, served_fraction, feasible.
    """
    if kind not in ("demand", "slo"):
        raise PlanningError("kind", f"unknown sweep {kind!r}.", 'use "demand" or "slo".')
    if not values:
        raise PlanningError("values", "is empty.", "give at least one multiplier, e.g. [0.5, 1, 2].")
    points = [(scenario.to_dict(), kind, float(x)) for x in values]
    warm = _Neighbours()
    per_point = fan_out(sweep_point, points, [f"{kind} ×{x:g}" for x in values],
                        FanOut(backend, workers, progress, cancel, what="sweep",
                               here=lambda point, cancel=None: sweep_point(point, cancel, warm)))
    return pd.DataFrame([row for rows in per_point for row in rows])


class _Neighbours:
    """The warm start of the next case solved here: the columns of every plan solved so far (a sweep's previous
    points, a what-if's base), bounded by what a plan uses (a handful of templates per group)."""

    def __init__(self) -> None:
        self.start: WarmStart | None = None

    def reuse(self) -> Reuse:
        from planning.resultcache import default_cache

        return Reuse(cache=default_cache(), warm=self.start)

    def learn(self, result: PlanResult) -> None:
        if result.instances:
            self.start = WarmStart.union([self.start, WarmStart.from_result(result)])


def _solve_case(scenario: Scenario, cancel: CancelToken | None, warm: _Neighbours | None) -> PlanResult:
    """One case: with ``warm`` (here) through the pipeline with the neighbours' columns and the cache, else as
    :func:`planning.api.solve` (a pool or Ray task: the cache only)."""
    if warm is None:
        from planning.resultcache import default_cache

        return _solve(scenario, Reuse(cache=default_cache()), cancel=cancel)
    result = _solve(scenario, warm.reuse(), cancel=cancel)
    warm.learn(result)
    return result


def sweep_point(point: tuple[dict[str, Any], str, float], cancel: CancelToken | None = None,
                warm: _Neighbours | None = None) -> list[dict[str, Any]]:
    """One sweep point (scenario as a dict, kind, multiplier) → its rows: the plan and every baseline (``warm``:
    started from the points solved before it, see :class:`_Neighbours`)."""
    data, kind, x = point
    scenario = Scenario.from_dict(data)
    variant = scenario.with_demand_scaled(x) if kind == "demand" else scenario.with_slo_scaled(x)
    variant = replace(variant, name=f"{scenario.name} ({kind} ×{x:g})")
    res = _solve_case(variant, cancel, warm)
    ok = res.status in ("optimal", "feasible")
    rows = [{"x": x, "method": "Plan (mixed templates)", "cost_per_hour": res.comparable_cost if ok else float("nan"),
             "served_fraction": res.served_fraction, "feasible": ok}]
    for b in res.baselines:
        rows.append({"x": x, "method": b.name, "cost_per_hour": b.cost_per_hour if b.feasible else float("nan"),
                     "served_fraction": b.served_fraction, "feasible": b.feasible})
    return rows


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
