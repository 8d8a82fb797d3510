"""Infeasibility diagnostics: which constraint family binds (template, capacity, budget), where, by how much, and the fix.

Sets and models (all on the allocation instance of ``planning.allocate.formulation``):
    G_dead  groups with demand that no template can serve at all (no template with a positive throughput on a
            demanded class, or none purchasable anywhere): nothing but new templates or offers helps them;
    G_live  the other groups with demand.
    α_joint = max α s.t. (D), (L), (A), (B) over G_live  (HiGHS MIP within a small time budget; its LP bound
              is kept so that an unproven value is reported as a range, never as a false 0 %);
    α_g     = the same for group g alone.
    Capacity shortfall (elastic LP): every offer (r, s) gets a twin "extra" offer with unlimited nodes at
    EXTRA_PRICE_FACTOR × its price; min cost s.t. (D), (L) at α = 1 over G_live. Extra nodes bought are the
    nodes short of each (region, shape) in the cheapest way to serve all demand (LP, rounded up).
    Budget: the cost optimum with the budget removed is the budget that would serve 100 %.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from planning.allocate.instance import build_instance
from planning.allocate.matrix_model import build_matrix, solve_matrix
from planning.allocate.problem import AllocationProblem, GroupDiagnostic, Offer

_MAX_LISTED = 5
DIAGNOSTICS_SECONDS = 10.0  # total time for all diagnostic solves
DIAGNOSTICS_GAP = 1e-2
EXTRA_PRICE_FACTOR = 1000.0  # extra (beyond availability) nodes cost this much more: used only where needed
_EXTRA = " (extra)"


def _pct(x: float) -> str:
    x = max(0.0, x) if x > -1e-12 else x
    return f"{100 * x:.0f} %" if abs(100 * x - round(100 * x)) < 0.05 or x >= 0.1 else f"{100 * x:.1f} %"


def _served(problem: AllocationProblem, limit: float) -> tuple[float | None, float | None, np.ndarray | None]:
    """(best α found or None, LP upper bound on α, ν of the best plan) of the max-served model."""
    inst = build_instance(problem)
    if inst.n_pairs == 0:
        return 0.0, 0.0, None
    model = build_matrix(inst, True, problem.budget_per_hour)
    mip = solve_matrix(model, "served", limit, DIAGNOSTICS_GAP)
    lp = solve_matrix(model, "served", limit, 1e-9, relax=True)
    found = float(mip.values[-1]) if mip.values is not None else None
    bound = float(lp.values[-1]) if lp.values is not None else None
    if found is not None and mip.phase.status == "optimal":
        bound = found if bound is None else min(bound, max(found, found * (1 + DIAGNOSTICS_GAP)))
    nu = np.rint(mip.values[: inst.n_pairs]) if mip.values is not None else None
    return found, bound, nu


def _fraction_text(found: float | None, bound: float | None) -> str:
    """"73 %" when proven, "between 60 % and 73 %" when not, "at most 73 % (no plan found …)" without a plan."""
    if found is None:
        return f"at most {_pct(min(bound or 0.0, 1.0))} (LP bound; no plan found within the diagnostics time)"
    if bound is None or bound - found <= max(1e-3, DIAGNOSTICS_GAP * found):
        return _pct(min(found, 1.0))
    return f"between {_pct(found)} and {_pct(min(bound, 1.0))}"


def capacity_shortfall(problem: AllocationProblem, limit: float) -> dict[str, dict[tuple[str, str], int]] | None:
    """Nodes short per group and (region, shape) in the cheapest way to serve all demand (elastic LP).

    Returns
    -------
    ``{group: {(region, shape): nodes short}}`` (rounded up; empty dicts when availability does not bind), or
    None when even unlimited nodes cannot serve the demand (a template or SLO problem, not capacity).
    """
    extra = tuple(Offer(region=o.region + _EXTRA, shape=o.shape, price_per_hour=o.price_per_hour * EXTRA_PRICE_FACTOR,
                        available=10**9) for o in problem.offers)
    elastic = replace(problem, offers=problem.offers + extra, objective="cost", budget_per_hour=None, K=0.0,
                      current={}, start={}, builder="matrix", solver="highs", dump_model=None, prune=False)
    inst = build_instance(elastic)
    if inst.n_pairs == 0:
        return None
    lp = solve_matrix(build_matrix(inst, False, None), "cost", limit, 1e-9, relax=True)
    if lp.values is None:
        return None
    nu = lp.values[: inst.n_pairs]
    short: dict[str, dict[tuple[str, str], float]] = {g: {} for g in inst.groups}
    for row, p, u in zip(inst.use_row, inst.use_pair, inst.use_val, strict=True):
        region, shape = inst.offer_keys[int(row)]
        if not region.endswith(_EXTRA) or nu[p] <= 1e-9:
            continue
        key = (region[: -len(_EXTRA)], shape)
        g = inst.groups[int(inst.pair_group[p])]
        short[g][key] = short[g].get(key, 0.0) + float(nu[p]) * float(u)
    return {g: {k: math.ceil(v - 1e-6) for k, v in rows.items() if v > 1e-6} for g, rows in short.items()}


def _listing(rows: dict[tuple[str, str], int], available: dict[tuple[str, str], int]) -> str:
    ranked = sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{r} {s} +{n:,} nodes ({available.get((r, s), 0):,} available)" for (r, s), n in ranked[:_MAX_LISTED])
    return text + (f" and {len(ranked) - _MAX_LISTED} more" if len(ranked) > _MAX_LISTED else "")


def _dead_groups(problem: AllocationProblem) -> dict[str, str]:
    """Groups with demand that nothing can serve, with the sentence saying why."""
    from planning.allocate.solve import with_classes

    out: dict[str, str] = {}
    for name in problem.groups():
        demanded = {q.id for q in problem.classes if q.group == name and q.rate > 0}
        if not demanded:
            continue
        mine = [t for t in problem.templates if t.group == name]
        useful = [t for t in mine if any(t.throughput.get(q, 0.0) > 0 for q in demanded)]
        if not useful:
            what = "no serving template" if not mine else f"none of its {len(mine)} templates serves its demanded classes"
            out[name] = (f"{name}: {what}, so 0 % of it can be served. Fix: relax the group's SLO or raise the "
                         "template limits (nmax, rho, max_stages), or add explicit templates for it.")
            continue
        if build_instance(with_classes(problem, {name})).n_pairs == 0:
            out[name] = (f"{name}: none of its {len(useful)} templates can be bought in any region (a shape is not "
                         "offered there or availability is below one instance). Fix: add the regions or shapes the "
                         "templates use, or raise availability.")
    return out


def _budget_needed(problem: AllocationProblem, limit: float) -> tuple[float | None, bool]:
    """(cost of serving all demand without a budget, proven optimal?) — None when not servable at all."""
    free = replace(problem, objective="cost", budget_per_hour=None, builder="matrix", solver="highs", dump_model=None)
    inst = build_instance(free)
    if inst.n_pairs == 0:
        return None, False
    model = build_matrix(inst, False, None)
    raw = solve_matrix(model, "cost", limit, DIAGNOSTICS_GAP)
    if raw.values is None:
        return None, False
    return float(raw.phase.objective or 0.0), raw.phase.status == "optimal"


def budget_sentence(problem: AllocationProblem, alpha: float, limit: float = DIAGNOSTICS_SECONDS) -> str | None:
    """The budget that would serve 100 %, when ``problem.budget_per_hour`` keeps α below 1 (else None)."""
    if problem.budget_per_hour is None or alpha >= 1 - 1e-6:
        return None
    need, proven = _budget_needed(problem, limit)
    if need is None or need <= problem.budget_per_hour + 1e-9:
        return None
    served = "nothing" if alpha <= 1e-9 else f"{_pct(alpha)} of every group's demand"
    return (f"Budget binds: ${problem.budget_per_hour:,.2f}/h serves {served}; serving 100 % needs "
            f"{'' if proven else 'at most '}${need:,.2f}/h. Fix: raise objective.budget_per_hour to "
            f"≥ {math.ceil(need * 100) / 100:,.2f}.")


def diagnose_infeasible(problem: AllocationProblem) -> tuple[tuple[GroupDiagnostic, ...], list[str]]:
    """Explain why the cost objective cannot meet all demand: the binding family, instance, number and fix.

    Parameters
    ----------
    problem:
        The (infeasible) allocation problem.

    Returns
    -------
    Per-group diagnostics and the sentences to show (group sentences start with ``"{group}: "``).
    """
    from planning.allocate.solve import with_classes

    sentences: list[str] = []
    groups = problem.groups()
    base = replace(problem, objective="served", builder="matrix", solver="highs", dump_model=None)
    limit = max(0.2, min(problem.time_limit_s, DIAGNOSTICS_SECONDS) / (len(groups) + 3))
    dead = _dead_groups(base)
    live = [g for g in groups if g not in dead and any(q.rate > 0 for q in problem.classes if q.group == g)]
    available = {(o.region, o.shape): o.available for o in problem.offers}
    out: list[GroupDiagnostic] = []
    for name in dead:
        out.append(GroupDiagnostic(name, 0.0, 0.0, ()))
    sentences.extend(dead.values())
    if not live:
        return tuple(out), sentences
    joint_problem = with_classes(base, set(live))
    joint, joint_bound, _nu = _served(joint_problem, limit)
    unproven = joint is None or (joint_bound is not None and joint_bound - joint > 1e-3)
    budget_text = budget_sentence(with_classes(problem, set(live)), joint if joint is not None else 0.0, limit) \
        if problem.budget_per_hour is not None else None
    shortfall = capacity_shortfall(with_classes(problem, set(live)), limit)
    total_short: dict[tuple[str, str], int] = {}
    for rows in (shortfall or {}).values():
        for k, n in rows.items():
            total_short[k] = total_short.get(k, 0) + n
    if total_short:
        n_total = sum(total_short.values())
        sentences.append(
            f"Capacity binds: serving all demand needs about {n_total:,} more nodes than available "
            f"(cheapest top-up, LP estimate): {_listing(total_short, available)}. Fix: raise availability "
            "(availability_scale or availability_overrides) or add regions/shapes.")
    if budget_text:
        sentences.append(budget_text)
    others = " with the other servable groups" if len(live) < len(groups) else ""
    for name in live:
        if len(live) == 1:
            alone, alone_bound = joint, joint_bound
        else:
            alone, alone_bound, _ = _served(with_classes(base, {name}), limit)
            unproven = unproven or alone is None or (alone_bound is not None and alone_bound - alone > 1e-3)
        rows = (shortfall or {}).get(name, {})
        binding = tuple(f"{r} {s} ({available.get((r, s), 0):,} available, ≈{n:,} short)"
                        for (r, s), n in sorted(rows.items(), key=lambda kv: -kv[1])[:_MAX_LISTED])
        out.append(GroupDiagnostic(name, float(alone if alone is not None else 0.0),
                                   float(joint if joint is not None else 0.0), binding))
        if alone is not None and alone >= 1 - 1e-9 and joint is not None and joint >= 1 - 1e-9:
            continue
        text = (f"{name}: can reach {_fraction_text(alone, alone_bound)} of its demand alone and "
                f"{_fraction_text(joint, joint_bound)} jointly{others} (the same fraction for every group)")
        if binding:
            text += "; short: " + ", ".join(binding)
        sentences.append(text + ".")
    if shortfall is None and not budget_text:
        sentences.append("Even unlimited nodes of the offered shapes cannot serve all demand: the templates' "
                         "throughputs are the limit. Fix: add templates or shapes, or relax the SLOs.")
    if unproven:
        sentences.append(f"(Fractions are the best found within {limit:.1f} s per solve, with their LP bound.)")
    return tuple(out), sentences


def groups_of(sentences: Iterable[str], group: str) -> list[str]:
    """The sentences about one group (they start with ``"{group}: "``)."""
    return [s for s in sentences if s.startswith(f"{group}: ")]
