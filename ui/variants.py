"""What-if variants of a scenario: each one a ``dataclasses.replace`` on the frozen spec (no streamlit)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario

KINDS = {
    "demand": "Demand × k",
    "remove_gpu": "Remove a GPU type",
    "remove_region": "Remove a region",
    "prices": "Prices ± %",
    "availability": "Availability × k (scarcity)",
    "slo": "SLOs × k (tighten < 1 < loosen)",
    "budget": "Budget ($/h, max served)",
}


def make_variant(scenario: Scenario, kind: str, *, k: float = 1.0, model: str | None = None,
                 gpu: str = "", region: str = "", pct: float = 0.0, budget: float = 0.0) -> tuple[str, Scenario]:
    """Return ``(label, variant)`` of ``scenario``.

    Parameters
    ----------
    scenario:
        The base scenario (unchanged).
    kind:
        One of :data:`KINDS`.
    k:
        Factor for ``demand``, ``availability`` and ``slo``.
    model:
        For ``demand``: one model id, or ``None`` for all models.
    gpu, region:
        What ``remove_gpu`` / ``remove_region`` removes.
    pct:
        Price change in percent for ``prices`` (``-20`` = 20 % cheaper).
    budget:
        $/h cap for ``budget`` (the objective becomes max served within the budget).

    Returns
    -------
    tuple[str, Scenario]
        A short label and the new scenario.

    Raises
    ------
    PlanningError
        For an unknown kind, a factor ≤ 0 or removing the last region.
    """
    if kind == "demand":
        target = model or None
        return f"demand ×{k:g} ({target or 'all models'})", scenario.with_demand_scaled(k, target)
    if kind == "remove_gpu":
        if not gpu:
            raise PlanningError("gpu", "is empty.", "pick the GPU type to remove.")
        excluded = tuple(dict.fromkeys((*scenario.exclude_gpus, gpu)))
        return f"without {gpu}", replace(scenario, exclude_gpus=excluded)
    if kind == "remove_region":
        regions = tuple(r for r in scenario.regions if r != region)
        offers = tuple(o for o in scenario.offers if o.region != region)
        if not regions and not offers:
            raise PlanningError("region", f"{region!r} is the only region of this scenario.",
                                "add another region on the Scenario page first.")
        return f"without {region}", replace(scenario, regions=regions, offers=offers)
    if kind == "prices":
        factor = 1 + pct / 100
        if factor <= 0:
            raise PlanningError("prices", f"a change of {pct:g} % makes prices ≤ 0.", "use a change above -100 %.")
        return f"prices {pct:+g} %", replace(scenario, price_scale=scenario.price_scale * factor)
    if kind == "availability":
        if k < 0:
            raise PlanningError("availability", f"factor {k:g} is negative.", "use a factor ≥ 0, e.g. 0.5.")
        return f"availability ×{k:g}", replace(scenario, availability_scale=scenario.availability_scale * k)
    if kind == "slo":
        return f"SLOs ×{k:g}", scenario.with_slo_scaled(k)
    if kind == "budget":
        if budget <= 0:
            raise PlanningError("budget", f"must be > 0 $/h, got {budget:g}.", "give a positive hourly budget.")
        objective = replace(scenario.objective, kind="served", budget_per_hour=float(budget))
        return f"budget ${budget:,.0f}/h", replace(scenario, objective=objective)
    raise PlanningError("kind", f"{kind!r} is not a what-if kind.", f"use one of {', '.join(KINDS)}.")


def comparison_frame(results: dict[str, PlanResult]) -> pd.DataFrame:
    """One row per (variant, method): cost/h, served fraction, and savings of the mixed plan vs that method."""
    rows = []
    for label, result in results.items():
        rows.append({"variant": label, "method": "Plan (mixed)", "cost_per_hour": result.cost_per_hour,
                     "served_fraction": result.served_fraction, "status": result.status, "savings_pct": None})
        for b in result.baselines:
            savings = (1 - result.cost_per_hour / b.cost_per_hour) * 100 if b.feasible and b.cost_per_hour else None
            rows.append({"variant": label, "method": b.name, "cost_per_hour": b.cost_per_hour,
                         "served_fraction": b.served_fraction,
                         "status": "meets demand" if b.feasible else "falls short", "savings_pct": savings})
    return pd.DataFrame(rows, columns=["variant", "method", "cost_per_hour", "served_fraction", "status",
                                       "savings_pct"])


def chart_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The comparison frame for ``planning.viz.whatif_figure``: a method that falls short gets no bar (NaN)."""
    out = frame.copy()
    out.loc[out["status"].isin(["falls short", "infeasible", "error", "cancelled"]), "cost_per_hour"] = float("nan")
    return out


def diff_lines(result: PlanResult) -> list[dict[str, object]]:
    """A plan's instances as ``planning.viz.plan_diff`` lines (cost and GPUs as totals over all copies)."""
    return [{"template_id": f"{i.model}/{i.phase}/{i.template_id}", "region": i.region, "count": i.count,
             "cost_per_hour": i.cost_per_hour, "gpus": {g: n * i.count for g, n in i.gpus.items()}}
            for i in result.instances]
