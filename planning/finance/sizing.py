"""How the two-stage commitment model (:mod:`planning.finance.commitments`) is solved: ``size``, anytime.

Small libraries (below ``REDUCE_MIN_TEMPLATES`` templates per epoch, or histogram classes): the stacked MILP over
every template, exact to ``mip_rel_gap``. Large ones, in four steps under one deadline:

1. **Relaxation over every template.** For multipliers μ_pe ≥ 0 on the pool rows, pricing pool p's nodes at μ_pe
   in epoch e (availability H_p + Σ cap) and dropping R gives a single-period relaxation whose value minus
   C(μ) = Σ_pe μ_pe H_p − Σ_j min(0, a_j − Σ_e μ_{p(j)e})·cap_j is a lower bound on the two-stage optimum
   (Lagrangian relaxation of the pool rows). μ: each pool's cheapest candidate's effective hourly rate × w_e
   (``relaxation.uniform_prices``, :mod:`planning.finance.relaxation`). ``planning.allocate.reduce`` solves its LP over all columns (links, pool flows, spot
   cap) with per-group integer cover bounds; its thresholds keep the columns a plan near the bound may use.
2. **Every epoch alone**, certified over all templates (``allocate.certify.solve_certified``): at R = 0 (an exact
   plan: the "all on-demand" horizon) and with the pools at that μ and their caps (Σ_e w_e z_e(μ) − C(μ), each
   epoch at its proven bound, is a second lower bound).
3. **The two-stage MILP** over the templates those plans use (any epoch may use any of them) chooses R
   (within ``MILP_LIMIT_S``: it only proposes R; its plans are re-solved exactly in step 4).
4. **Every epoch re-solved alone at that R**, certified over all templates: the second stage is exact for the
   chosen commitments.
5. **The Lagrangian dual** (:func:`planning.finance.proof.kelley`): Kelley's cutting planes in a box (a bundle step;
   ``proof.DUAL_BOX`` × each pool's cheapest rate, halved after a step that raises nothing) over every epoch plan
   seen (:func:`planning.finance.cuts.next_prices`, the Dantzig–Wolfe pricing of the pool rows) propose prices
   π_e per epoch; each proposal is one pass of step 2's certified epoch solves, a bound, new plans and cuts.
6. **The cut master over R** (:func:`planning.finance.proof.master_loop`, :mod:`planning.finance.cuts`): every certified epoch solve of
   steps 2–5 is a cut on that epoch's second-stage value z_e(K) (Lagrangian at prices, monotone at a point);
   the MILP over R ∈ ℤ and one θ_e per epoch is a lower bound at least as good as every Lagrangian one. Its R̂
   is solved exactly (epochs at K(R̂), certified), giving exact cuts there, until the gap closes or time runs
   out: finitely many steps to the optimum. Only the epochs that can refute R̂ are solved, the most promising
   first, until the cuts prove R̂ no better than the best plan (a point not refuted is solved in full and is
   a plan). Every certified epoch solve is also a Benders cut valid for every K (the Lagrangian bound's
   availability duals, ``allocate.certify.AvailabilityDuals``).

Steps 1–6 also run on a horizon whose epochs repeat a demand level: each distinct level is solved once,
weighted by the hours of all its epochs (:func:`planning.finance.epochs.dedupe_epochs`).
The epoch solves themselves: :mod:`planning.finance.epochs`.

The better of R and R = 0 is returned with the better bound; status ``optimal`` when the gap is within
``mip_rel_gap``, else ``feasible`` with the proven gap; at the deadline the best plan so far (``feasible``), or
``time_limit`` before any plan (never a $0 plan).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from planning.allocate.problem import AllocationProblem, AllocationResult
from planning.allocate.solve import solve_allocation
from planning.context import CancelToken, ProgressFn, check_cancel, time_left
from planning.finance.commitments import (
    Candidate,
    Epoch,
    EpochPlan,
    Sizing,
    horizon_problem,
    plans_from_stacked,
)
from planning.finance.epochs import dedupe_epochs, held_pools, proven_low, solve_epochs
from planning.finance.proof import Proof, closed, kelley, master_loop
from planning.finance.relaxation import pool_constant, relaxation, uniform_prices
from planning.progress_words import sizing_check
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

START_FRACTION = 0.003  # the relaxation's columns kept for a plan within the bound + 0.3 %
REDUCE_MIN_TEMPLATES = 1500  # below this many templates per epoch the MILP sees all of them
MILP_SHARE = 0.25  # of the time left when the two-stage MILP starts (the rest: re-solving the epochs, the bound)
MILP_LIMIT_S = 15.0  # and at most this: it only proposes R (found in seconds; the rest of its time went to
# polishing epoch plans that step 4 re-solves exactly anyway: enterprise, 10 s limit: the same R at a 4.3 % gap)


def size(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
         candidates: Sequence[Candidate], *, drop_kinds: Sequence[str] = (), cancel: CancelToken | None = None,
         progress: ProgressFn | None = None, label: str = "sizing") -> Sizing:
    """Solve the two-stage model (:func:`_size`) once per distinct demand level (:func:`dedupe_epochs`) and
    give every epoch its level's plan: the value and bound are the same sums (Σ_e w_e z_e groups by level)."""
    levels, where = dedupe_epochs(epochs)
    if len(levels) == len(epochs):
        return _size(resolved, sets, epochs, candidates, drop_kinds=drop_kinds, cancel=cancel, progress=progress,
                     label=label)
    out = _size(resolved, sets, levels, candidates, drop_kinds=drop_kinds, cancel=cancel, progress=progress,
                label=label)

    def spread(sz: Sizing) -> Sizing:
        plans = tuple(sz.plans[lv] for lv in where) if sz.plans else ()
        return replace(sz, epochs=tuple(epochs), plans=plans,
                       stats={**sz.stats, "epochs": float(len(epochs)), "distinct_epochs": float(len(levels))})

    return replace(spread(out), no_reservation=spread(out.no_reservation) if out.no_reservation else None)


def _size(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
          candidates: Sequence[Candidate], *, drop_kinds: Sequence[str] = (), cancel: CancelToken | None = None,
          progress: ProgressFn | None = None, label: str = "sizing") -> Sizing:
    """Solve the two-stage model over the templates of ``sets``; anytime: at the deadline of ``cancel`` the best
    plan found is returned with status ``feasible`` and its proven gap.

    Small libraries (below ``REDUCE_MIN_TEMPLATES`` per epoch, or several classes per group): the MILP over every
    template (exact to its gap). Large ones: (1) the pool-priced relaxation over every template gives a lower
    bound (LP with links and spot cap, Lagrangian covers); (2) every epoch is solved alone, certified over all
    templates, with the reservations priced at their effective hourly rate (a Lagrangian relaxation of the pool
    rows: Σ_e w_e·z_e − C(μ) is a second lower bound) and with none (R = 0, an exact plan); (3) the MILP over the
    templates those plans use, per epoch, chooses R; (4) each epoch is re-solved alone at that R, certified over
    all templates (the second stage is exact for the chosen commitments); (5) subgradient steps on the pool
    prices tighten step 2's bound while time allows. The better of R and R = 0 is returned with the best bound.

    Raises
    ------
    Cancelled
        When ``cancel`` is set by the caller (not by its deadline).
    """
    from planning.context import Cancelled, timed_out

    t0 = time.perf_counter()
    stats: dict[str, float] = {"epochs": float(len(epochs)), "candidates": float(len(candidates))}
    report: Callable[[float, str], None] = progress or (lambda _f, _m: None)
    hours = [ep.hours for ep in epochs]
    state: dict[str, object] = {"value": math.inf, "counts": {}, "plans": (), "bound": -math.inf,
                                "over": "all templates", "message": ""}

    def offer(value: float, counts: Mapping[str, int], plans: Sequence[EpochPlan]) -> None:
        if value < float(state["value"]) - 1e-9 * max(1.0, abs(value)):  # type: ignore[arg-type]
            state.update(value=value, counts=dict(counts), plans=tuple(plans))

    def answer(status: str | None = None, message: str = "") -> Sizing:
        value, bound = float(state["value"]), float(state["bound"])  # type: ignore[arg-type]
        stats["seconds"] = time.perf_counter() - t0
        plans: tuple[EpochPlan, ...] = state["plans"]  # type: ignore[assignment]
        if status is None:
            gap = (value - bound) / value if math.isfinite(bound) and value > 0 else math.inf
            status = "optimal" if gap <= resolved.scenario.options.mip_rel_gap + 1e-12 else "feasible"
        counts = {c.id: int(state["counts"].get(c.id, 0)) for c in candidates}  # type: ignore[attr-defined]
        zero: Sizing | None = state.get("no_reservation")  # type: ignore[assignment]
        return Sizing(status, value, min(bound, value), counts, tuple(epochs), tuple(candidates), plans,
                      str(state["over"]), message or str(state["message"]), stats, zero)

    def committed_cost(counts: Mapping[str, int]) -> float:
        return sum(c.effective_hourly * sum(hours) * counts.get(c.id, 0) for c in candidates)

    def milp(problem: AllocationProblem, share: float = 1.0, cap: float = math.inf) -> AllocationResult:
        check_cancel(cancel, f"{label}: two-stage MILP")
        limit = time_left(cancel, problem.time_limit_s)
        alloc = solve_allocation(replace(problem, time_limit_s=max(0.05, min(limit * share, cap))), diagnose=False)
        if alloc.has_plan and alloc.total_per_hour is not None:
            offer(float(alloc.total_per_hour), alloc.commitments, plans_from_stacked(alloc, problem, epochs))
        return alloc

    try:
        per_epoch = sum(len(ts) for ts in sets)
        reducible = per_epoch >= REDUCE_MIN_TEMPLATES and all(len(g.classes) == 1 for g in resolved.groups)
        if not reducible:
            state["over"] = "all templates (every one in the MILP)"
            report(0.1, f"{label}: two-stage MILP over {per_epoch * len(epochs):,} epoch templates")
            alloc = milp(horizon_problem(resolved, sets, epochs, candidates, drop_kinds=drop_kinds))
            last = alloc.phases[-1] if alloc.phases else None
            if alloc.status == "infeasible":
                return answer("infeasible", "no plan serves every epoch's demand")
            if last is not None and last.bound is not None and math.isfinite(last.bound):
                state["bound"] = float(last.bound)
            if not alloc.has_plan:
                return answer("time_limit", f"time limit reached in {label} before any plan")
            return answer("optimal" if alloc.status == "optimal" else "feasible")
        # (1) the relaxation over every template
        report(0.05, f"{label}: LP relaxation over {per_epoch * len(epochs):,} epoch templates")
        mu = uniform_prices(epochs, candidates)
        relax = relaxation(resolved, sets, epochs, candidates, mu, drop_kinds, cancel)
        if relax is None:  # the relaxation's LP is infeasible: so is the two-stage model
            return answer("infeasible", "no plan serves every epoch's demand (the LP relaxation is infeasible)")
        state["bound"] = relax.bound
        stats["lp_bound"] = float(relax.red.z_lp) - relax.constant
        stats["lagrangian_cover_bound"] = relax.bound
        # (2) each epoch alone at R = 0 (exact) and with the reservations priced at their effective rate (bound)
        masks = relax.masks(relax.bound + START_FRACTION * abs(relax.bound))
        levels: list[float | None] = [None, 1.0] if candidates else [None]
        dual = False  # the epochs' Lagrangian bound was computed (step 5 starts from it)
        proof = Proof()
        held = held_pools(resolved)
        caps = {(c.pool, c.shape): sum(x.max_count for x in candidates if (x.pool, x.shape) == (c.pool, c.shape))
                for c in candidates}
        cheapest = {key: min(c.effective_hourly for c in candidates if (c.pool, c.shape) == key) for key in caps}
        for lam in levels:
            pools = ({k: (0.0, held.get(k, 0)) for k in caps} if lam is None
                     else {k: (lam * cheapest[k], held.get(k, 0) + caps[k]) for k in caps})
            what = "no reservation" if lam is None else "reservations at their rate"

            def say(m: str, what: str = what) -> None:
                report(0.3, f"{label}: epochs alone ({what}): {m}")

            t_pass = time.perf_counter()
            plans, allocs, used = solve_epochs(resolved, sets, epochs, candidates, pools, drop_kinds, cancel, say,
                                                stop_without_plan=lam is None, proof=proof)
            for si in range(len(sets)):  # every epoch may use what any epoch's plan used (R is shared)
                anywhere = np.logical_or.reduce([rows[si] for rows in used])
                for e in range(len(epochs)):
                    masks[(si, e)] = masks.get((si, e), np.zeros(len(sets[si]), dtype=bool)) | anywhere
            if any(not a.has_plan for a in allocs):
                if lam is None:
                    continue
                return answer("infeasible", "an epoch has no plan even with every reservation")
            stats["pass_seconds"] = max(stats.get("pass_seconds", 0.0), time.perf_counter() - t_pass)
            gap_milp = resolved.scenario.options.mip_rel_gap
            if lam is None:
                proof.record(allocs, gap_milp, point={k: held.get(k, 0) for k in caps})
            else:
                proof.record(allocs, gap_milp, prices={k: p for k, (p, _n) in pools.items()})
            z = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(hours, allocs, strict=True))
            # each epoch's optimum is proven within its certified gap over all templates: its value × (1 − gap)
            z_low = sum(w * proven_low(a, resolved.scenario.options.mip_rel_gap)
                        for w, a in zip(hours, allocs, strict=True))
            if lam is None:  # R = 0: an exact plan
                offer(float(z), {}, plans)
                stats["no_reservation_value"] = float(z)
                gap_0 = (z - z_low) / z if z > 0 else 0.0
                state["no_reservation"] = Sizing(
                    "optimal" if gap_0 <= resolved.scenario.options.mip_rel_gap + 1e-12 else "feasible", float(z),
                    float(z_low), {}, tuple(epochs), (), tuple(plans), "all templates (each epoch certified alone)",
                    stats={"seconds": time.perf_counter() - t0})
                if not candidates:  # nothing to commit: the epochs are independent, each certified alone
                    state["bound"] = max(float(state["bound"]), z_low)  # type: ignore[arg-type]
            else:  # a Lagrangian bound over all templates (integer epochs, pool rows priced)
                bound = float(z_low) - pool_constant(mu, held, candidates, sum(hours))
                stats["lagrangian_epoch_bound"] = bound
                state["bound"] = max(float(state["bound"]), bound)  # type: ignore[arg-type]
                dual = True
        if not candidates:
            state["over"] = "all templates (each epoch certified alone)"
            return answer()
        # (3) the two-stage MILP over the templates of those plans (and the relaxation's cheapest), to choose R
        stats["templates_in_milp"] = float(sum(int(m.sum()) for m in masks.values()))
        report(0.6, f"{label}: two-stage MILP over {int(stats['templates_in_milp']):,} epoch templates")
        problem = horizon_problem(resolved, sets, epochs, candidates, masks=masks, drop_kinds=drop_kinds)
        alloc = milp(problem, share=MILP_SHARE, cap=MILP_LIMIT_S)
        if alloc.has_plan:
            stats["milp_value"] = float(alloc.total_per_hour or math.inf)
            stats["milp_gap"] = float(alloc.gap) if alloc.gap is not None else math.nan
            # (4) the second stage at the chosen R, each epoch certified over all templates
            chosen = dict(alloc.commitments)
            pools = {(c.pool, c.shape): (0.0, held.get((c.pool, c.shape), 0)
                                         + sum(chosen.get(x.id, 0) for x in candidates
                                               if (x.pool, x.shape) == (c.pool, c.shape))) for c in candidates}
            plans, allocs, _used = solve_epochs(resolved, sets, epochs, candidates, pools, drop_kinds, cancel,
                                                 lambda m: report(0.9, f"{label}: epochs at the chosen commitments: {m}"),
                                                 proof=proof)
            if all(a.has_plan for a in allocs):
                second = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(hours, allocs, strict=True))
                offer(second + committed_cost(chosen), chosen, plans)
                proof.record(allocs, resolved.scenario.options.mip_rel_gap,
                             point={k: n for k, (_p, n) in pools.items()})
        # (5) the Lagrangian dual of the pool rows by Kelley's cutting planes (each pass's epochs are cuts)
        if dual and not closed(state, resolved.scenario.options.mip_rel_gap):
            kelley(resolved, sets, epochs, candidates, {k: (0.0, held.get(k, 0) + caps[k]) for k in caps},
                    cheapest, held, drop_kinds, cancel, state, stats,
                    lambda m: report(0.9, f"{label}: tightening the bound: {m}"), proof)
        # (6) the cut master over R: a bound from every cut so far, and the points it asks for, solved exactly
        master_loop(resolved, sets, epochs, candidates, held, drop_kinds, cancel, state, stats, proof, offer,
                     committed_cost, lambda m: report(0.95, f"{label}: {sizing_check(m)}"))
        stats["benders_cuts"] = float(proof.benders_cuts)
        state["over"] = ("all templates" if answer().status == "optimal" else
                         "the commitments: the MILP over the epochs' candidate templates; each epoch's plan for them: "
                         "all templates")
        return answer()
    except Cancelled:
        if not timed_out(cancel):
            raise
        if not math.isfinite(float(state["value"])):  # type: ignore[arg-type]
            return answer("time_limit", f"time limit reached in {label} before any plan")
        return answer("feasible", f"time limit reached in {label}: the best plan found, with its proven gap")
