"""Infeasibility diagnostics: which constraint family binds (template, capacity, budget), where, by how much, and the fix.

Sets and models (all on the allocation instance of ``planning.allocate.formulation``):
    G_dead  groups with demand that no template can serve at all (no template with a positive throughput on a
            demanded class, or none purchasable anywhere): nothing but new templates or offers helps them;
    G_live  the other groups with demand.
    α_joint = max α s.t. (D), (L), (A), (B) over G_live  (HiGHS MIP within a small time budget; its LP bound
              is kept so that an unproven value is reported as a range, never as a false 0 %);
    α_g     = the same for group g alone.
    Capacity shortfall (elastic LP): every (template, region) pair gets a twin with unlimited nodes at
    EXTRA_PRICE_FACTOR × its price; min cost s.t. (D), (L) at α = 1 over G_live. The twins' nodes are the
    nodes short of each (region, shape) in the cheapest way to serve all demand (LP, rounded up).
    Budget: the cost optimum with the budget removed is the budget that would serve 100 %.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from planning.allocate.instance import Instance, build_instance
from planning.allocate.matrix_model import build_matrix, solve_matrix
from planning.allocate.problem import AllocationProblem, GroupDiagnostic
from planning.allocate.solvers import reached_gap

_MAX_LISTED = 5
DIAGNOSTICS_SECONDS = 10.0  # total time for all diagnostic solves
DIAGNOSTICS_GAP = 1e-2
MIP_MAX_PAIRS = 3000  # larger instances get LP bounds only (a max-α MIP there does not finish in a second)
EXTRA_PRICE_FACTOR = 1000.0  # extra (beyond availability) nodes cost this much more: used only where needed
_EXTRA = " (extra)"


def _pct(x: float) -> str:
    x = max(0.0, x) if x > -1e-12 else x
    return f"{100 * x:.0f} %" if abs(100 * x - round(100 * x)) < 0.05 or x >= 0.1 else f"{100 * x:.1f} %"


def _restrict(inst: Instance, keep: set[int]) -> Instance:
    """The sub-instance of the groups ``keep`` (others' demand set to 0, their pairs dropped)."""
    in_keep = np.isin(inst.pair_group, sorted(keep))
    pairs = np.nonzero(in_keep)[0]
    remap = np.full(inst.n_pairs, -1, dtype=np.int64)
    remap[pairs] = np.arange(len(pairs))
    use = np.nonzero(remap[inst.use_pair] >= 0)[0]
    trip = np.nonzero(remap[inst.thr_pair] >= 0)[0] if len(inst.thr_pair) else np.zeros(0, dtype=np.int64)
    return replace(
        inst, class_rate=np.where(np.isin(inst.class_group, sorted(keep)), inst.class_rate, 0.0),
        pair_template=inst.pair_template[pairs], pair_region=inst.pair_region[pairs], pair_group=inst.pair_group[pairs],
        pair_price=inst.pair_price[pairs], pair_ub=inst.pair_ub[pairs], pair_current=inst.pair_current[pairs],
        use_row=inst.use_row[use], use_pair=remap[inst.use_pair[use]], use_val=inst.use_val[use],
        thr_class=inst.thr_class[trip], thr_pair=remap[inst.thr_pair[trip]], thr_val=inst.thr_val[trip],
        single_thr=inst.single_thr[pairs], notes=[])


def _elastic(inst: Instance) -> Instance:
    """The instance with a twin of every pair in an "extra" copy of its region: unlimited nodes at
    EXTRA_PRICE_FACTOR × the price, no initialisation penalty, no MIP start."""
    n_off, n_pairs, n_reg = len(inst.offer_keys), inst.n_pairs, len(inst.regions)
    big = np.int64(10**9)
    return replace(
        inst, problem=replace(inst.problem, K=0.0, start={}, current={}),
        regions=[*inst.regions, *(r + _EXTRA for r in inst.regions)],
        offer_keys=[*inst.offer_keys, *((r + _EXTRA, s) for r, s in inst.offer_keys)],
        offer_avail=np.concatenate([inst.offer_avail, np.full(n_off, big)]),
        offer_price=np.concatenate([inst.offer_price, inst.offer_price * EXTRA_PRICE_FACTOR]),
        pair_template=np.concatenate([inst.pair_template, inst.pair_template]),
        pair_region=np.concatenate([inst.pair_region, inst.pair_region + n_reg]),
        pair_group=np.concatenate([inst.pair_group, inst.pair_group]),
        pair_price=np.concatenate([inst.pair_price, inst.pair_price * EXTRA_PRICE_FACTOR]),
        pair_ub=np.concatenate([inst.pair_ub, np.full(n_pairs, big)]),
        pair_current=np.zeros(2 * n_pairs, dtype=inst.pair_current.dtype),
        use_row=np.concatenate([inst.use_row, inst.use_row + n_off]),
        use_pair=np.concatenate([inst.use_pair, inst.use_pair + n_pairs]),
        use_val=np.concatenate([inst.use_val, inst.use_val]),
        thr_class=np.concatenate([inst.thr_class, inst.thr_class]),
        thr_pair=np.concatenate([inst.thr_pair, inst.thr_pair + n_pairs]),
        thr_val=np.concatenate([inst.thr_val, inst.thr_val]),
        single_thr=np.concatenate([inst.single_thr, inst.single_thr]), notes=[])


@dataclass(frozen=True)
class _Served:
    found: float | None  # best α of a plan found (None: no plan within the time, or no MIP tried)
    bound: float | None  # LP upper bound on α (None: not solved within the time)
    mip: bool = True  # whether a plan was searched for (large instances: LP bound only)


def _served(inst: Instance, budget: float | None, limit: float) -> _Served:
    """Best α found and the LP bound of the max-served model of ``inst`` (LP only above MIP_MAX_PAIRS)."""
    if inst.n_pairs == 0 or not np.any(inst.class_rate > 0):
        return _Served(0.0 if inst.n_pairs == 0 else 1.0, 0.0 if inst.n_pairs == 0 else 1.0)
    model = build_matrix(inst, True, budget)
    lp = solve_matrix(model, "served", limit, 1e-9, relax=True)
    bound = float(lp.values[-1]) if lp.values is not None and lp.phase.status == "optimal" else None
    if inst.n_pairs > MIP_MAX_PAIRS:
        return _Served(None, bound, mip=False)
    mip = solve_matrix(model, "served", limit, DIAGNOSTICS_GAP)
    found = float(mip.values[-1]) if mip.values is not None else None
    if found is not None and reached_gap(mip.phase.gap, DIAGNOSTICS_GAP):
        bound = found if bound is None else min(bound, found * (1 + DIAGNOSTICS_GAP) + 1e-9)
    return _Served(found, bound)


def _full(r: _Served) -> bool:
    """α = 1 reached (a plan), or not excluded (LP bound 1 and no plan searched for)."""
    return (r.found if r.found is not None else (r.bound if not r.mip else None) or 0.0) >= 1 - 1e-9


def _fraction_text(r: _Served) -> str:
    """"73 %" when proven, "60–73 %" when not, "at most 73 %" without a plan, "undetermined" without either."""
    if r.found is None:
        if r.bound is None:
            return "an undetermined fraction (not solved within the diagnostics time)"
        if not r.mip:
            return f"at most {_pct(min(r.bound, 1.0))} (LP bound)"
        return f"at most {_pct(min(r.bound, 1.0))} (LP bound; no plan found within the diagnostics time)"
    if r.bound is None or _pct(min(r.found, 1.0)) == _pct(min(r.bound, 1.0)):
        return _pct(min(r.found, 1.0))
    return f"{_pct(r.found)}–{_pct(min(r.bound, 1.0))} (best found–LP bound)"


def capacity_shortfall(problem: AllocationProblem, limit: float, inst: Instance | None = None
                       ) -> dict[str, dict[tuple[str, str], int]] | None:
    """Nodes short per group and (region, shape) in the cheapest way to serve all demand (elastic LP).

    Every pair of the (pruned) instance gets a twin with unlimited nodes at EXTRA_PRICE_FACTOR × its price; the
    cost LP then buys twins only where availability runs out. Templates pruned as unsold (no node available
    at all) are not topped up.

    Returns
    -------
    ``{group: {(region, shape): nodes short}}`` (rounded up; empty dicts when availability does not bind), or
    None when the LP is infeasible or not solved within ``limit`` (see :func:`shortfall_status`).
    """
    rows, _status = shortfall_status(problem, limit, inst)
    return rows


def shortfall_status(problem: AllocationProblem, limit: float, inst: Instance | None = None
                     ) -> tuple[dict[str, dict[tuple[str, str], int]] | None, str]:
    """:func:`capacity_shortfall` with the LP's status (``optimal``, ``infeasible``, ``time_limit``, …)."""
    base = inst if inst is not None else build_instance(problem)
    if base.n_pairs == 0:
        return None, "infeasible"
    el = _elastic(base)
    lp = solve_matrix(build_matrix(el, False, None), "cost", limit, 1e-9, relax=True)
    if lp.values is None or lp.phase.status not in ("optimal", "feasible"):
        return None, lp.phase.status
    nu = lp.values[: el.n_pairs]
    short: dict[str, dict[tuple[str, str], float]] = {g: {} for g in el.groups}
    extra = np.nonzero(el.use_row >= len(base.offer_keys))[0]
    for t in extra:
        p = int(el.use_pair[t])
        if nu[p] <= 1e-9:
            continue
        key = base.offer_keys[int(el.use_row[t]) - len(base.offer_keys)]
        g = el.groups[int(el.pair_group[p])]
        short[g][key] = short[g].get(key, 0.0) + float(nu[p]) * float(el.use_val[t])
    return {g: {k: math.ceil(v - 1e-6) for k, v in rows.items() if v > 1e-6} for g, rows in short.items()}, "optimal"


def total_shortfall(rows: dict[str, dict[tuple[str, str], int]] | None) -> dict[tuple[str, str], int]:
    """Nodes short per (region, shape), summed over the groups of :func:`capacity_shortfall`'s answer."""
    total: dict[tuple[str, str], int] = {}
    for per_group in (rows or {}).values():
        for key, n in per_group.items():
            total[key] = total.get(key, 0) + n
    return total


def listing(rows: dict[tuple[str, str], int], available: dict[tuple[str, str], int]) -> str:
    """"region shape +n nodes (a available)", the largest first, at most five and how many more."""
    ranked = sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{r} {s} +{n:,} nodes ({available.get((r, s), 0):,} available)" for (r, s), n in ranked[:_MAX_LISTED])
    return text + (f" and {len(ranked) - _MAX_LISTED} more" if len(ranked) > _MAX_LISTED else "")


def _dead_groups(problem: AllocationProblem, inst: Instance) -> dict[str, str]:
    """Groups with demand that nothing can serve, with the sentence saying why."""
    out: dict[str, str] = {}
    has_pairs = set(np.unique(inst.pair_group).tolist())
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
        orphans = sorted(q for q in demanded if not any(t.throughput.get(q, 0.0) > 0 for t in useful))
        if orphans:
            rate = sum(q.rate for q in problem.classes if q.id in orphans)
            listed = ", ".join(orphans[:_MAX_LISTED]) + (f" and {len(orphans) - _MAX_LISTED} more" if len(orphans) > _MAX_LISTED else "")
            out[name] = (f"{name}: no template serves {len(orphans)} of its demanded classes ({listed}; "
                         f"{rate:,.4g} in total), so no uniform fraction of it above 0 % can be served. Fix: relax "
                         "the SLO these request sizes miss, or add templates (explicit throughputs) for them.")
            continue
        if inst.groups.index(name) not in has_pairs:
            out[name] = (f"{name}: none of its {len(useful)} templates can be bought in any region (a shape is not "
                         "offered there or availability is below one instance). Fix: add the regions or shapes the "
                         "templates use, or raise availability.")
    return out


def _budget_needed(problem: AllocationProblem, limit: float, inst: Instance | None) -> tuple[float | None, bool]:
    """(cost of serving all demand without a budget, proven optimal?) — None when not servable at all."""
    base = inst if inst is not None else build_instance(problem)
    if base.n_pairs == 0:
        return None, False
    raw = solve_matrix(build_matrix(base, False, None), "cost", limit, problem.mip_rel_gap)
    if raw.values is None:
        return None, False
    return float(raw.phase.objective or 0.0), raw.phase.status == "optimal"


def budget_sentence(problem: AllocationProblem, alpha: float, limit: float = DIAGNOSTICS_SECONDS,
                    inst: Instance | None = None) -> str | None:
    """The budget that would serve 100 %, when ``problem.budget_per_hour`` keeps α below 1 (else None)."""
    if problem.budget_per_hour is None or alpha >= 1 - 1e-6:
        return None
    need, proven = _budget_needed(problem, limit, inst)
    if need is None or need <= problem.budget_per_hour + 1e-9:
        return None
    served = "nothing" if alpha <= 1e-9 else f"{_pct(alpha)} of every group's demand"
    return (f"Budget binds: ${problem.budget_per_hour:,.2f}/h serves {served}; serving 100 % needs "
            f"{'' if proven else 'at most '}${need:,.2f}/h. Fix: raise objective.budget_per_hour to "
            f"≥ {math.ceil(need * 100) / 100:,.2f}.")


def diagnose_infeasible(problem: AllocationProblem, inst: Instance | None = None
                        ) -> tuple[tuple[GroupDiagnostic, ...], list[str]]:
    """Explain why the cost objective cannot meet all demand: the binding family, instance, number and fix.

    Parameters
    ----------
    problem:
        The (infeasible) allocation problem.
    inst:
        Its instance when already built (``build_instance(problem)``); built here otherwise.

    Returns
    -------
    Per-group diagnostics and the sentences to show (group sentences start with ``"{group}: "``).
    """
    sentences: list[str] = []
    inst = inst if inst is not None else build_instance(problem)
    groups = list(inst.groups)
    end = time.perf_counter() + min(problem.time_limit_s, DIAGNOSTICS_SECONDS)

    def share(solves_left: int) -> float:
        """Time for the next solve: an equal share of what is left of the diagnostics budget (≥ 0.2 s)."""
        return max(0.2, (end - time.perf_counter()) / max(1, solves_left))

    dead = _dead_groups(problem, inst)
    live = [g for g in groups if g not in dead and any(q.rate > 0 for q in problem.classes if q.group == g)]
    available = {(o.region, o.shape): o.available for o in problem.offers}
    out = [GroupDiagnostic(name, 0.0, 0.0, ()) for name in dead]
    sentences.extend(dead.values())
    if not live:
        return tuple(out), sentences
    live_inst = _restrict(inst, {groups.index(g) for g in live})
    n_alone = len(live) if len(live) > 1 else 0
    sf_limit = 2 * share(n_alone + 4)  # the capacity top-up is the main answer: a double share
    shortfall, sf_status = shortfall_status(problem, sf_limit, live_inst)
    limit = share(n_alone + 2)
    joint = _served(live_inst, problem.budget_per_hour, limit)
    unproven = False
    budget_text = (budget_sentence(problem, joint.found if joint.found is not None else 0.0,
                                   share(n_alone + 1), live_inst)
                   if problem.budget_per_hour is not None else None)
    total_short = total_shortfall(shortfall)
    if total_short:
        sentences.append(
            f"Capacity binds: serving all demand needs about {sum(total_short.values()):,} more nodes than available "
            f"(cheapest top-up, LP estimate): {listing(total_short, available)}. Fix: raise availability "
            "(availability_scale or availability_overrides) or add regions/shapes.")
    if budget_text:
        sentences.append(budget_text)
    others = " with the other servable groups" if len(live) < len(groups) else ""
    for i, name in enumerate(live):
        g = groups.index(name)
        alone = joint if len(live) == 1 else _served(_restrict(inst, {g}), problem.budget_per_hour,
                                                     share(n_alone - i) / 2)
        rows = (shortfall or {}).get(name, {})
        binding = tuple(f"{r} {s} ({available.get((r, s), 0):,} available, ≈{n:,} short)"
                        for (r, s), n in sorted(rows.items(), key=lambda kv: -kv[1])[:_MAX_LISTED])
        out.append(GroupDiagnostic(name, float(alone.found or 0.0), float(joint.found or 0.0), binding))
        if _full(alone) and _full(joint):
            continue  # servable (proven, or by the LP bound with no capacity short): nothing to say
        unproven = unproven or any(r.found is None or r.bound is None or r.bound - r.found > 1e-3 for r in (alone, joint))
        text = (f"{name}: can reach {_fraction_text(alone)} of its demand alone and {_fraction_text(joint)} "
                f"jointly{others} (the same fraction for every group)")
        if binding:
            text += "; short: " + ", ".join(binding)
        sentences.append(text + ".")
    if shortfall is None and not budget_text:
        if sf_status == "infeasible":
            sentences.append("Even unlimited nodes of the offered shapes cannot serve all demand: some demanded "
                             "class has no template that serves it. Fix: add templates or shapes, or relax the SLOs.")
        else:
            sentences.append(f"The capacity top-up LP was not solved within {sf_limit:.1f} s ({sf_status}); "
                             "the fractions above are what is known.")
    if unproven:
        sentences.append(f"(Fractions are the best found within the {DIAGNOSTICS_SECONDS:g} s diagnostics budget, "
                         "with their LP bound.)")
    return tuple(out), sentences


def groups_of(sentences: Iterable[str], group: str) -> list[str]:
    """The sentences about one group (they start with ``"{group}: "``)."""
    return [s for s in sentences if s.startswith(f"{group}: ")]
