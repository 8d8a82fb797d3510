"""Market comparisons for finance: the same demand planned per cloud, per region, and mixed; spot vs on-demand.

:func:`market_scenarios` turns one scenario into labelled variants that differ only in where nodes may be rented
(one cloud, one region, or all — the mixed optimum) and how they are priced (on-demand or spot).
:func:`compare_markets` plans each and returns one table with cost per hour and month, the served fraction
and the GPUs used, so "what would this cost on AWS only / in us-east-2 only / on spot" is one click. Every row
counts the same component (provisioning cost: what the nodes cost per hour), and a row that cannot serve the
whole demand says so instead of looking cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from planning.errors import PlanningError
from planning.result import HOURS_PER_MONTH, PlanResult
from planning.scenario import Scenario


@dataclass(frozen=True)
class MarketVariant:
    """One market to plan in: ``scope`` ("all", "cloud" or "region"), its regions and its pricing."""

    label: str
    scope: str
    regions: tuple[str, ...]
    pricing: str
    scenario: Scenario


def _cloud(region: str) -> str:
    return region.split(":", 1)[0]


def market_scenarios(scenario: Scenario, *, pricings: Sequence[str] = ("on_demand", "spot"),
                     per_region: bool = True) -> list[MarketVariant]:
    """Labelled variants of ``scenario`` per cloud, per region (optional) and all together, for each pricing.

    Raises
    ------
    PlanningError
        When the scenario lists no regions (explicit offers only: there is no market to vary), or a pricing is
        not ``on_demand``/``spot``.
    """
    if not scenario.regions:
        raise PlanningError("regions", "the scenario has no regions to compare (it uses explicit offers only).",
                            "list the regions to compare, e.g. regions: [aws:us-east-2, gcp:us-central1].")
    for p in pricings:
        if p not in ("on_demand", "spot"):
            raise PlanningError("pricing", f"unknown pricing {p[:40]!r}.", "use on_demand or spot.")
    regions = tuple(scenario.regions)
    clouds = sorted({_cloud(r) for r in regions})
    scopes: list[tuple[str, str, tuple[str, ...]]] = [("all regions (mixed optimum)", "all", regions)]
    if len(clouds) > 1:
        scopes += [(f"{c} only", "cloud", tuple(r for r in regions if _cloud(r) == c)) for c in clouds]
    if per_region and len(regions) > 1:
        scopes += [(r, "region", (r,)) for r in regions]
    out = []
    for pricing in pricings:
        suffix = "on-demand" if pricing == "on_demand" else "spot"
        for label, scope, regs in scopes:
            variant = replace(scenario, regions=regs, pricing=pricing,
                              offers=tuple(o for o in scenario.offers if o.region in regs))
            out.append(MarketVariant(f"{label} · {suffix}", scope, regs, pricing, variant))
    return out


def market_frame(variants: Sequence[MarketVariant], results: Sequence[PlanResult]) -> pd.DataFrame:
    """One row per market: label, scope, pricing, status, $/h and $/month (provisioning + cross-region KV egress), served, GPUs, regions used."""
    rows = []
    for v, r in zip(variants, results, strict=True):
        ok = r.status in ("optimal", "feasible") and r.served_fraction >= 1 - 1e-9
        rows.append({
            "market": v.label, "scope": v.scope, "pricing": v.pricing.replace("_", "-"), "status": r.status,
            "cost_per_hour": round(r.comparable_cost, 2) if ok else None,  # nodes + cross-region KV egress
            "cost_per_month": round(r.comparable_cost * HOURS_PER_MONTH, 2) if ok else None,
            "served_fraction": round(r.served_fraction, 4),
            "gpus": ", ".join(f"{n}×{g}" for g, n in r.gpus_by_type().items()),
            "regions_used": ", ".join(r.regions_used()),
            "note": ("cannot serve the whole demand here" if not ok else
                     "spot: nodes can be reclaimed at short notice" if v.pricing == "spot" else ""),
        })
    frame = pd.DataFrame(rows)
    best = frame["cost_per_hour"].min() if frame["cost_per_hour"].notna().any() else None
    frame["vs_cheapest"] = [None if c is None or pd.isna(c) or not best else round(c / best - 1, 4)
                            for c in frame["cost_per_hour"]]
    return frame


def compare_markets(scenario: Scenario, solve: Callable[[Scenario], PlanResult], *,
                    pricings: Sequence[str] = ("on_demand", "spot"), per_region: bool = True) -> pd.DataFrame:
    """Plan ``scenario`` in every market of :func:`market_scenarios` with ``solve`` and tabulate the answers."""
    variants = market_scenarios(scenario, pricings=pricings, per_region=per_region)
    return market_frame(variants, [solve(v.scenario) for v in variants])
