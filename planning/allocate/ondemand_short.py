"""A plan without baselines (a slider's position, a sweep's plan rows) that no plan can meet, answered from the LP
over every template instead of the library path (issue 41).

When column generation converges with demand uncovered and :meth:`planning.allocate.pricing.ColumnLP.shortfall`
proves that no plan meets the demand, the answer is ``infeasible`` with the offers the LP is short of. Before, the
on-demand engine handed such a scenario to the library path, which built every template and proved it again to
compute per-model fractions: 61 s for coral-core at 10 % availability and 110-145 s for coral-extended, on a quiet
machine, for a slider step. The fractions come with the scenario's full plan (with its baselines); the answer here
says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from planning.allocate.ondemand_sets import template_set
from planning.allocate.pricing import PricedGroup, PricingResult, Shortfall
from planning.allocate.solve import solve_allocation

if TYPE_CHECKING:
    from planning.allocate.ondemand import OnDemandPlan, _Run
    from planning.allocate.problem import AllocationProblem
    from planning.templates.sets import TemplateSet

SHOWN = 6
"""Binding offers named in the sentence (most binding first)."""


def short_plan(run: _Run, pr: PricingResult, columns: Sequence[tuple[int, int, int]]) -> OnDemandPlan | None:
    """The ``infeasible`` answer of a proven shortfall (``pr.shortfall.proven``): the allocation ILP over the LP's
    own ``columns`` ((group, code, region) keys; infeasible, as every template's LP is, so HiGHS says so at once)
    with the sentence naming the binding offers and the fix. None when the ILP finds a plan anyway (then the
    library path decides, as before)."""
    from planning.allocate.ondemand import OnDemandPlan, ilp_problem

    short = pr.shortfall
    assert short is not None and short.proven
    sets = [_lp_set(pg, gi, columns, run) for gi, pg in enumerate(run.priced)]
    masks = [np.ones(len(ts), dtype=bool) for ts in sets]
    problem = ilp_problem(run.resolved, run.groups, sets, masks, run.cancel)
    alloc = solve_allocation(problem, diagnose=False)
    if alloc.has_plan or alloc.status != "infeasible":
        return None
    alloc = replace(alloc, messages=(*alloc.messages, sentence(run, short, _top_up(problem))))
    return OnDemandPlan(alloc, sets, masks, pr, True, 0.0, run.timings)


def last_line(plan: OnDemandPlan) -> str:
    """The engine's last progress line: what the ILP ended with (a proven shortfall says so, not "found")."""
    if plan.alloc.status == "infeasible":
        return "ILP: no plan meets all demand (proven by the LP over every template)"
    return "ILP: certified allocation found" if plan.certified else "ILP: best allocation found"


def _lp_set(pg: PricedGroup, gi: int, columns: Sequence[tuple[int, int, int]], run: _Run) -> TemplateSet:
    """The template set of group ``gi``'s LP columns (one row per multiset)."""
    codes = sorted({code for g, code, _r in columns if g == gi})
    rows = np.array([pg.pool[c] for c in codes], dtype=np.int64).reshape(len(codes), pg.space.nmax)
    return template_set(pg, rows, run.provenance)


def _top_up(problem: AllocationProblem) -> str:
    """The cheapest top-up over the LP's templates (``diagnostics.capacity_shortfall``'s elastic LP): enough nodes
    for the LP over them, so over every template too; "" when that LP gives none within its time."""
    from planning.allocate.diagnostics import DIAGNOSTICS_SECONDS, listing, shortfall_status, total_shortfall

    rows, _status = shortfall_status(problem, DIAGNOSTICS_SECONDS)
    total = total_shortfall(rows)
    available = {(o.region, o.shape): int(o.available) for o in problem.offers}
    return (f"; serving all demand needs about {sum(total.values()):,} more nodes than available (cheapest top-up "
            f"over the templates column generation found, LP estimate): {listing(total, available)}" if total else "")


def sentence(run: _Run, short: Shortfall, top_up: str = "") -> str:
    """What binds, what is short (``top_up``, else the offers the LP's duals rank first) and the fix."""
    shapes, regions = run.priced[0].space.shapes, run.resolved.regions
    named = [f"{regions[r]} {shapes[k]} ({f'{available:g}' if available else 'none'} available)"
             for r, k, available in short.short[:SHOWN]]
    more = f" and {len(short.short) - SHOWN} more" if len(short.short) > SHOWN else ""
    uncovered = sum(1 for u, pg in zip(short.unserved, run.priced, strict=True) if u > 1e-9 * max(1.0, pg.demand))
    where = top_up or (f"; the offers whose nodes would serve the most per dollar (the LP's duals): "
                       f"{', '.join(named)}{more}" if named else "")
    return (f"Capacity binds: no plan meets all demand with the available nodes, proven by the LP relaxation over "
            f"every template (column generation converged with {uncovered} of {len(run.priced)} groups' demand "
            f"uncovered){where}. Fix: raise availability (the Availability slider, availability_scale or "
            "availability_overrides), lower demand, or add regions or shapes. The best fraction each model can "
            "reach is computed when the scenario is planned with its baselines (the Plan page, planning solve).")
