"""The on-demand engine's figures for a plan's ``stats`` and ``timings`` (pricing rounds, bounds, how it was proven,
templates placed), out of ``planning.allocate.ondemand``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planning.allocate.ondemand import OnDemandPlan
    from planning.allocate.pricing import PricedGroup


def record(plan: OnDemandPlan, priced: Sequence[PricedGroup], stats: dict[str, float],
           timings: dict[str, float]) -> None:
    """The plan's figures (pricing rounds, bounds, how it was proven, templates placed) into ``stats`` and the
    template search's seconds into ``timings``."""
    stats["pricing_rounds"] = float(plan.pricing.rounds)
    stats["lp_columns"] = float(plan.pricing.columns)
    stats["templates_in_ilp"] = float(sum(int(m.sum()) for m in plan.masks))
    bounds = {"lp_bound_per_hour": plan.pricing.z_lp, "lagrangian_bound_per_hour": plan.pricing.z_lb}
    stats.update({k: float(v) for k, v in bounds.items() if math.isfinite(v)})  # none when proven short (−inf)
    stats["linked_bound_gain_per_hour"] = plan.pricing.linked_gain
    stats["linked_bound_clock_stops"] = float(plan.pricing.linked_clock_stops)  # 0: stopped on work or gap
    if plan.certified and plan.alloc.status in ("optimal", "feasible"):  # finished, not stopped by the limit
        stats["reduction_certified"] = 1.0
    if plan.alloc.status == "infeasible":
        stats["proven_short"] = 1.0  # ondemand_short's answer: the LP proves no plan meets the demand
    if plan.by_covers:
        stats["proven_by_cover_plan"] = 1.0  # the linked covers' plan met the bound: no fixing round
    stats["templates_total"] = float(sum(len(pg.space.cache) for pg in priced))  # placed exactly (incl. reused)
    stats["templates_placed_now"] = float(sum(pg.space.stats.evaluated for pg in priced))  # placed by this solve
    stats["search_prefixes"] = float(sum(pg.space.stats.prefixes for pg in priced))
    stats["search_candidates"] = float(sum(pg.space.stats.candidates for pg in priced))
    timings["search_seconds"] = sum(pg.space.stats.seconds_search for pg in priced)
    timings["exact_placement_seconds"] = sum(pg.space.stats.seconds_exact for pg in priced)
