"""Scenario fan-out: sweep points and what-if variants, each an independent solve, on a backend.

``sweep`` (cost vs demand or SLO multipliers) and ``what_if`` (the base plan and one plan per variant) split
into tasks that carry the scenario as a dict and return plain rows or a ``PlanResult``, so they run here, on the
embedded process pool or as Ray tasks (``planning.parallel.run_tasks``), and are merged in input order: every
backend gives the sequential answer (``tests/parallel/test_fanout.py``). Here, one after another, is the default:
the engine's warm caches (T̂ tables, multiset spaces) make a point after the first cheap; ``workers`` ≥ 2 puts
them on the pool, ``backend="ray"`` on Ray (``PLANNING_RAY_ADDRESS`` for a cluster). ``api`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from planning.context import CancelToken, ProgressFn, engine_context
from planning.errors import PlanningError
from planning.parallel import fan_out
from planning.result import PlanResult
from planning.scenario import Scenario
from planning.whatif import Variant, apply_variants, label


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
    per_point = fan_out(sweep_point, points, [f"{kind} ×{x:g}" for x in values], backend=backend,
                         workers=workers, progress=progress, cancel=cancel, what="sweep")
    return pd.DataFrame([row for rows in per_point for row in rows])


def sweep_point(point: tuple[dict[str, Any], str, float], cancel: CancelToken | None = None) -> list[dict[str, Any]]:
    """One sweep point (scenario as a dict, kind, multiplier) → its rows: the plan and every baseline."""
    from planning.pipeline import solve

    data, kind, x = point
    scenario = Scenario.from_dict(data)
    variant = scenario.with_demand_scaled(x) if kind == "demand" else scenario.with_slo_scaled(x)
    variant = replace(variant, name=f"{scenario.name} ({kind} ×{x:g})")
    res = solve(variant, context=engine_context(), cancel=cancel)
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
    results = fan_out(variant_point, [s.to_dict() for s in cases.values()], list(cases), backend=backend,
                       workers=workers, progress=progress, cancel=cancel, what="what-if")
    return dict(zip(cases, results, strict=True))


def variant_point(data: dict[str, Any], cancel: CancelToken | None = None) -> PlanResult:
    """One what-if case (a scenario as a dict) → its plan with baselines."""
    from planning.pipeline import solve

    return solve(Scenario.from_dict(data), context=engine_context(), cancel=cancel)
