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
   (stopped at its ``MILP_SOLUTIONS``-th improving solution: it only proposes R; its plans are re-solved exactly in step 4).
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
``time_limit`` before any plan (never a $0 plan). Every stop is counted in work (steps, HiGHS nodes), never in
seconds, so a proof that ends is the same on every machine; the wall clock is only the deadline, a safety net:
when it stops a step the answer is ``feasible`` with ``Sizing.stopped_by == "clock"`` (else ``"work"``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

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
from planning.finance.epochs import Horizon, dedupe_epochs, held_pools, proven_low, solve_epochs
from planning.finance.proof import Proof, closed, kelley, master_loop
from planning.finance.relaxation import pool_constant, relaxation, uniform_prices
from planning.progress_words import sizing_check
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

START_FRACTION = 0.003  # the relaxation's columns kept for a plan within the bound + 0.3 %
REDUCE_MIN_TEMPLATES = 1500  # below this many templates per epoch the MILP sees all of them
MILP_SOLUTIONS = 3  # the two-stage MILP stops at its third improving solution (HiGHS mip_max_improving_sols: a
# stop counted in work, so the R it proposes is the same on every machine). It only proposes R; enterprise: the
# third solution has the optimum's R (3 x 1xL40S, 2 x 1xL4) at 7 % MILP gap in 4.4 CPU-s, where the old 15 s wall
# cap got 3 CPU-s at load ~20 and proposed 282 reserved nodes (dearer than none); 50 B&B nodes took 55 CPU-s.
# Its wall-clock limit is the time left, a safety net.


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

    run = _Sizer(Horizon(resolved, sets, epochs, candidates, drop_kinds, cancel), progress, label)
    try:
        per_epoch = sum(len(ts) for ts in sets)
        reducible = per_epoch >= REDUCE_MIN_TEMPLATES and all(len(g.classes) == 1 for g in resolved.groups)
        if not reducible:
            return _whole_milp(run, per_epoch)
        return _reduced(run, per_epoch)
    except Cancelled:
        if not timed_out(cancel):
            raise
        run.clock(label)
        if not math.isfinite(float(run.state["value"])):  # type: ignore[arg-type]
            return run.answer("time_limit", f"time limit reached in {label} before any plan")
        return run.answer("feasible", f"time limit reached in {label}: the best plan found, with its proven gap")


class _Sizer:
    """One sizing run: the horizon, the best plan and bound so far (``state``, shared with :func:`kelley` and
    :func:`master_loop`), its figures (``stats``) and how it reports progress."""

    def __init__(self, horizon: Horizon, progress: ProgressFn | None, label: str) -> None:
        self.h, self.label, self.t0 = horizon, label, time.perf_counter()
        self.stats: dict[str, float] = {"epochs": float(len(horizon.epochs)),
                                        "candidates": float(len(horizon.candidates))}
        self.report: Callable[[float, str], None] = progress or (lambda _f, _m: None)
        self.hours = [ep.hours for ep in horizon.epochs]
        self.gap = horizon.resolved.scenario.options.mip_rel_gap
        self.state: dict[str, object] = {"value": math.inf, "counts": {}, "plans": (), "bound": -math.inf,
                                         "over": "all templates", "message": "", "clock": []}

    def clock(self, step: str) -> None:
        """The wall clock (the safety net), not the work budget, stopped ``step``: the answer is flagged."""
        clocked: list[str] = self.state["clock"]  # type: ignore[assignment]
        clocked.append(step)

    def offer(self, value: float, counts: Mapping[str, int], plans: Sequence[EpochPlan]) -> None:
        """Keep (value, commitments, epoch plans) when it is cheaper than the best so far."""
        if value < float(self.state["value"]) - 1e-9 * max(1.0, abs(value)):  # type: ignore[arg-type]
            self.state.update(value=value, counts=dict(counts), plans=tuple(plans))

    def answer(self, status: str | None = None, message: str = "") -> Sizing:
        """The best plan so far with the best bound (status from the gap unless given)."""
        state, stats = self.state, self.stats
        value, bound = float(state["value"]), float(state["bound"])  # type: ignore[arg-type]
        stats["seconds"] = time.perf_counter() - self.t0
        plans: tuple[EpochPlan, ...] = state["plans"]  # type: ignore[assignment]
        clocked: list[str] = state["clock"]  # type: ignore[assignment]
        if status is None:
            gap = (value - bound) / value if math.isfinite(bound) and value > 0 else math.inf
            status = "optimal" if gap <= self.gap + 1e-12 and not clocked else "feasible"
        stopped = "" if status != "feasible" else "clock" if clocked else "work"
        if stopped == "clock" and not message:
            message = (f"the wall clock stopped {', '.join(dict.fromkeys(clocked))} before its work budget: "
                       "a faster or less busy machine may return another plan")
        counts = {c.id: int(state["counts"].get(c.id, 0)) for c in self.h.candidates}  # type: ignore[attr-defined]
        zero: Sizing | None = state.get("no_reservation")  # type: ignore[assignment]
        return Sizing(status, value, min(bound, value), counts, tuple(self.h.epochs), tuple(self.h.candidates),
                      plans, str(state["over"]), message or str(state["message"]), stats, zero, stopped)

    def committed_cost(self, counts: Mapping[str, int]) -> float:
        """The commitments' hourly cost over the whole horizon."""
        return sum(c.effective_hourly * sum(self.hours) * counts.get(c.id, 0) for c in self.h.candidates)

    def milp(self, problem: AllocationProblem, solutions: int | None = None) -> AllocationResult:
        """The two-stage MILP, stopped at its ``solutions``-th improving solution (None: at its gap) within the time left
        (a safety net: when it binds, the answer is flagged); its plan is offered."""
        check_cancel(self.h.cancel, f"{self.label}: two-stage MILP")
        limit = time_left(self.h.cancel, problem.time_limit_s)
        alloc = solve_allocation(replace(problem, time_limit_s=max(0.05, limit), improving_limit=solutions), diagnose=False)
        if alloc.status == "time_limit" or any(ph.status == "time_limit" or "time limit" in ph.solver_status.lower()
                                               for ph in alloc.phases):
            self.clock(f"{self.label}: two-stage MILP")
        if alloc.has_plan and alloc.total_per_hour is not None:
            self.offer(float(alloc.total_per_hour), alloc.commitments,
                       plans_from_stacked(alloc, problem, self.h.epochs))
        return alloc


def _whole_milp(run: _Sizer, per_epoch: int) -> Sizing:
    """A small library: the two-stage MILP over every template (exact to its gap)."""
    h = run.h
    run.state["over"] = "all templates (every one in the MILP)"
    run.report(0.1, f"{run.label}: two-stage MILP over {per_epoch * len(h.epochs):,} epoch templates")
    alloc = run.milp(horizon_problem(h.resolved, h.sets, h.epochs, h.candidates, drop_kinds=h.drop_kinds))
    last = alloc.phases[-1] if alloc.phases else None
    if alloc.status == "infeasible":
        return run.answer("infeasible", "no plan serves every epoch's demand")
    if last is not None and last.bound is not None and math.isfinite(last.bound):
        run.state["bound"] = float(last.bound)
    if not alloc.has_plan:
        return run.answer("time_limit", f"time limit reached in {run.label} before any plan")
    return run.answer("optimal" if alloc.status == "optimal" else "feasible")


@dataclass(frozen=True)
class _Pools:
    """The candidate pools: the nodes held, every pool's cap (Σ its candidates' max counts), its cheapest rate."""

    held: dict[tuple[str, str], int]
    caps: dict[tuple[str, str], int]
    cheapest: dict[tuple[str, str], float]


def _reduced(run: _Sizer, per_epoch: int) -> Sizing:
    """A large library: steps 1–6 of the module docstring."""
    h, label, stats, state, proof = run.h, run.label, run.stats, run.state, Proof()
    # (1) the relaxation over every template
    run.report(0.05, f"{label}: LP relaxation over {per_epoch * len(h.epochs):,} epoch templates")
    mu = uniform_prices(h.epochs, h.candidates)
    relax = relaxation(h.resolved, h.sets, h.epochs, h.candidates, mu, h.drop_kinds, h.cancel)
    if relax is None:  # the relaxation's LP is infeasible: so is the two-stage model
        return run.answer("infeasible", "no plan serves every epoch's demand (the LP relaxation is infeasible)")
    state["bound"] = relax.bound
    if relax.clocked:
        run.clock(f"{label}: the relaxation's cover bounds")
    stats["lp_bound"] = float(relax.red.z_lp) - relax.constant
    stats["lagrangian_cover_bound"] = relax.bound
    masks = relax.masks(relax.bound + START_FRACTION * abs(relax.bound))
    held = held_pools(h.resolved)
    caps = {(c.pool, c.shape): sum(x.max_count for x in h.candidates if (x.pool, x.shape) == (c.pool, c.shape))
            for c in h.candidates}
    cheapest = {key: min(c.effective_hourly for c in h.candidates if (c.pool, c.shape) == key) for key in caps}
    pools = _Pools(held, caps, cheapest)
    # (2) each epoch alone at R = 0 (exact) and with the reservations priced at their effective rate (bound)
    dual = _epochs_alone(run, pools, masks, mu, proof)
    if isinstance(dual, Sizing):
        return dual
    if not h.candidates:
        state["over"] = "all templates (each epoch certified alone)"
        return run.answer()
    # (3) and (4): the two-stage MILP chooses R, each epoch re-solved at it
    _choose_commitments(run, held, masks, proof)
    # (5) the Lagrangian dual of the pool rows by Kelley's cutting planes (each pass's epochs are cuts)
    if dual and not closed(state, run.gap):
        kelley(h, {k: (0.0, held.get(k, 0) + caps[k]) for k in caps}, cheapest, held, state, stats,
               lambda m: run.report(0.9, f"{label}: tightening the bound: {m}"), proof)
    # (6) the cut master over R: a bound from every cut so far, and the points it asks for, solved exactly
    master_loop(h, held, state, stats, proof, run.offer, run.committed_cost,
                lambda m: run.report(0.95, f"{label}: {sizing_check(m)}"))
    stats["benders_cuts"] = float(proof.benders_cuts)
    state["over"] = ("all templates" if run.answer().status == "optimal" else
                     "the commitments: the MILP over the epochs' candidate templates; each epoch's plan for them: "
                     "all templates")
    return run.answer()


def _epochs_alone(run: _Sizer, pools: _Pools, masks: dict[tuple[int, int], np.ndarray],
                  mu: Mapping[tuple[str, str, int], float], proof: Proof) -> bool | Sizing:
    """Step 2: every epoch alone at R = 0 (an exact plan, offered) and with the reservations at their effective
    rate (a Lagrangian bound); widens ``masks`` to the templates the plans use. True when the Lagrangian bound
    was computed (step 5 starts from it); a ``Sizing`` when an epoch has no plan even with every reservation."""
    h, label, stats, state = run.h, run.label, run.stats, run.state
    held, caps, cheapest = pools.held, pools.caps, pools.cheapest
    levels: list[float | None] = [None, 1.0] if h.candidates else [None]
    dual = False
    for lam in levels:
        offered = ({k: (0.0, held.get(k, 0)) for k in caps} if lam is None
                   else {k: (lam * cheapest[k], held.get(k, 0) + caps[k]) for k in caps})
        what = "no reservation" if lam is None else "reservations at their rate"

        def say(m: str, what: str = what) -> None:
            run.report(0.3, f"{label}: epochs alone ({what}): {m}")

        t_pass = time.perf_counter()
        plans, allocs, used = solve_epochs(h, offered, say, stop_without_plan=lam is None, proof=proof)
        for si in range(len(h.sets)):  # every epoch may use what any epoch's plan used (R is shared)
            anywhere = np.logical_or.reduce([rows[si] for rows in used])
            for e in range(len(h.epochs)):
                masks[(si, e)] = masks.get((si, e), np.zeros(len(h.sets[si]), dtype=bool)) | anywhere
        if any(not a.has_plan for a in allocs):
            if lam is None:
                continue
            return run.answer("infeasible", "an epoch has no plan even with every reservation")
        stats["pass_seconds"] = max(stats.get("pass_seconds", 0.0), time.perf_counter() - t_pass)
        if lam is None:
            proof.record(allocs, run.gap, point={k: held.get(k, 0) for k in caps})
        else:
            proof.record(allocs, run.gap, prices={k: p for k, (p, _n) in offered.items()})
        z = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(run.hours, allocs, strict=True))
        # each epoch's optimum is proven within its certified gap over all templates: its value × (1 − gap)
        z_low = sum(w * proven_low(a, run.gap) for w, a in zip(run.hours, allocs, strict=True))
        if lam is None:  # R = 0: an exact plan
            _no_reservation(run, float(z), float(z_low), plans)
        else:  # a Lagrangian bound over all templates (integer epochs, pool rows priced)
            bound = float(z_low) - pool_constant(mu, held, h.candidates, sum(run.hours))
            stats["lagrangian_epoch_bound"] = bound
            state["bound"] = max(float(state["bound"]), bound)  # type: ignore[arg-type]
            dual = True
    return dual


def _no_reservation(run: _Sizer, z: float, z_low: float, plans: Sequence[EpochPlan]) -> None:
    """R = 0, every epoch certified alone: an exact plan (offered, and kept as the no-reservation answer)."""
    run.offer(z, {}, plans)
    run.stats["no_reservation_value"] = z
    gap_0 = (z - z_low) / z if z > 0 else 0.0
    run.state["no_reservation"] = Sizing(
        "optimal" if gap_0 <= run.gap + 1e-12 else "feasible", z, z_low, {}, tuple(run.h.epochs), (),
        tuple(plans), "all templates (each epoch certified alone)", stats={"seconds": time.perf_counter() - run.t0})
    if not run.h.candidates:  # nothing to commit: the epochs are independent, each certified alone
        run.state["bound"] = max(float(run.state["bound"]), z_low)  # type: ignore[arg-type]


def _choose_commitments(run: _Sizer, held: Mapping[tuple[str, str], int],
                        masks: dict[tuple[int, int], np.ndarray], proof: Proof) -> None:
    """Steps 3 and 4: the two-stage MILP over the templates of the epochs' plans (and the relaxation's cheapest)
    chooses R; every epoch is then re-solved alone at that R, certified over all templates, and offered."""
    h, label, stats = run.h, run.label, run.stats
    stats["templates_in_milp"] = float(sum(int(m.sum()) for m in masks.values()))
    run.report(0.6, f"{label}: two-stage MILP over {int(stats['templates_in_milp']):,} epoch templates")
    problem = horizon_problem(h.resolved, h.sets, h.epochs, h.candidates, masks=masks, drop_kinds=h.drop_kinds)
    alloc = run.milp(problem, solutions=MILP_SOLUTIONS)
    if not alloc.has_plan:
        return
    stats["milp_value"] = float(alloc.total_per_hour or math.inf)
    stats["milp_gap"] = float(alloc.gap) if alloc.gap is not None else math.nan
    chosen = dict(alloc.commitments)
    pools = {(c.pool, c.shape): (0.0, held.get((c.pool, c.shape), 0)
                                 + sum(chosen.get(x.id, 0) for x in h.candidates
                                       if (x.pool, x.shape) == (c.pool, c.shape))) for c in h.candidates}
    plans, allocs, _used = solve_epochs(h, pools,
                                        lambda m: run.report(0.9, f"{label}: epochs at the chosen commitments: {m}"),
                                        proof=proof)
    if all(a.has_plan for a in allocs):
        second = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(run.hours, allocs, strict=True))
        run.offer(second + run.committed_cost(chosen), chosen, plans)
        proof.record(allocs, run.gap, point={k: n for k, (_p, n) in pools.items()})
