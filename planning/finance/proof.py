"""The sizing's proof (:mod:`planning.finance.sizing`, steps 5 and 6): the cuts every certified epoch solve gives
(:class:`Proof`), Kelley's steps on the Lagrangian dual of the pool rows (:func:`kelley`), and the cut master's
loop over R (:func:`master_loop`, the master itself in :mod:`planning.finance.cuts`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from planning.allocate.certify import AvailabilityDuals
from planning.allocate.problem import AllocationResult
from planning.context import time_left
from planning.finance.commitments import EpochPlan
from planning.finance.cuts import Cut, PlanPoint, next_prices, solve_master
from planning.finance.epochs import Horizon, proven_low, solve_epochs
from planning.finance.relaxation import pool_constant

DUAL_STEPS = 6  # Kelley steps on the pool prices at most (enterprise, certified epoch solves to optimal: 12 steps
# 394, 6 steps 290, 4 steps 266: the master closes the Lagrangian dual's ~1 % duality gap anyway)
DUAL_BOX: float | None = 0.25  # Kelley's box: this × each pool's cheapest rate around the prices (None: one
# radius for every pool, the largest cheapest rate: enterprise's 1xL4 prices then jump 16× their rate and the first
# steps fail; at 0.25 the bound after 6 steps is above the old one after 12)
MASTER_STEPS = 200  # cut-master iterations at most (each solves the epochs its point needs, at most all)
# Every stop above is counted in work (steps, nodes), never in seconds, so a proof that ends gives the same plan on
# every machine; the wall clock is only the sizing's deadline, a safety net whose stop flags the answer.


def kelley(horizon: Horizon, pools: Mapping[tuple[str, str], tuple[float, int]],
           cheapest: Mapping[tuple[str, str], float], held: Mapping[tuple[str, str], int], state: dict[str, object],
           stats: dict[str, float], say: Callable[[str], None], proof: Proof) -> None:
    """Raise ``state["bound"]`` towards the Lagrangian dual of the pool rows (module docstring, step 5) by
    Kelley's cutting planes with a box around the best prices (a bundle step): :func:`planning.finance.cuts.
    next_prices` over every epoch plan seen so far proposes π_e per epoch; one pass of certified epoch solves at
    π (pools at their caps) gives the bound Σ_e w_e·low_e(π) − C(π), new plans and new cuts. A step that raises
    the bound moves the box there; one that does not halves it. Stops when the model proves the dual cannot
    close the gap, the box is tiny, or after ``DUAL_STEPS`` steps (work, never seconds: the same on every machine;
    the sizing's deadline stops a pass as a safety net, flagged)."""
    epochs, candidates = horizon.epochs, horizon.candidates
    gap = horizon.resolved.scenario.options.mip_rel_gap
    keys = sorted(pools)
    hours = [ep.hours for ep in epochs]
    total = sum(hours)
    rows = [(c.id, (c.pool, c.shape), c.max_count, c.effective_hourly * total) for c in candidates]
    centre: list[dict[tuple[str, str], float]] = [{k: cheapest[k] for k in keys} for _e in epochs]
    scale = 1.0  # the box: scale × (DUAL_BOX × each pool's cheapest rate, or the largest cheapest rate)
    full = max(cheapest.values(), default=0.0)

    def box() -> float | dict[tuple[str, str], float]:
        return scale * full if DUAL_BOX is None else {k: scale * DUAL_BOX * cheapest[k] for k in keys}

    best = float(state["bound"])  # type: ignore[arg-type]
    for step in range(DUAL_STEPS):
        value = float(state["value"])  # type: ignore[arg-type]
        if not math.isfinite(value) or value - float(state["bound"]) <= gap * value:  # type: ignore[arg-type]
            break
        step_to = next_prices(proof.points, hours, rows, held, centre, box())
        if step_to is None:
            break
        prices, model = step_to
        stats["dual_model"] = model
        if model - best <= 1e-9 * abs(value) or (model - best <= gap * value
                                                  and scale >= 1.0):
            break  # the model's best prices raise nothing (in the box), or could not close the gap at all

        def tell(m: str, step: int = step) -> None:
            say(f"step {step + 1}: {m}")

        _plans, allocs, _used = solve_epochs(horizon, pools, tell, prices=prices, proof=proof)
        if not all(a.has_plan for a in allocs):
            break
        proof.record(allocs, gap, prices=prices)
        mu = {(k[0], k[1], e): prices[e][k] * hours[e] for k in keys for e in range(len(epochs))}
        bound = sum(w * proven_low(a, gap) for w, a in zip(hours, allocs, strict=True)) - pool_constant(
            mu, held, candidates, total)
        stats["dual_steps"] = float(step + 1)
        if bound > best:
            best, centre = bound, prices
            stats["dual_bound"] = best
            state["bound"] = max(float(state["bound"]), best)  # type: ignore[arg-type]
        else:
            scale /= 2
            if scale < 1e-3:
                break
        say(f"step {step + 1}: bound {bound:,.0f} (best {best:,.0f}, model {model:,.0f}, box × {scale:g})")


@dataclass
class Proof:
    """What the certified epoch solves proved: cuts on z_e for the cut master, and the plans (cost, pool use)
    for Kelley's model of the Lagrangian dual."""

    cuts: list[Cut] = field(default_factory=list)
    points: list[PlanPoint] = field(default_factory=list)
    benders_cuts: int = 0

    def record(self, allocs: Sequence[AllocationResult], mip_rel_gap: float,
               prices: Sequence[Mapping[tuple[str, str], float]] | Mapping[tuple[str, str], float] | None = None,
               point: Mapping[tuple[str, str], int] | None = None, which: Sequence[int] | None = None) -> None:
        """One pass over every epoch (``allocs`` in epoch order; ``which``: the epochs ``allocs`` are of): at
        ``prices`` (per epoch, or one for all; $/node-hour) with every candidate's cap (Lagrangian cuts), or with
        the pools free at ``point`` nodes (monotone cuts). Epochs without a plan give nothing."""
        for e, a in zip(which if which is not None else range(len(allocs)), allocs, strict=True):
            if not a.has_plan:
                continue
            here = dict((prices[e] if isinstance(prices, Sequence) else prices) if prices is not None else {})
            self.cuts.append(Cut(e, proven_low(a, mip_rel_gap), here, dict(point) if point is not None else None))
            use = {k: int(n) for k, n in a.nodes_used.items() if k in here or (point is not None and k in point)}
            paid = sum(here.get(k, 0.0) * n for k, n in use.items())
            self.points.append(PlanPoint(e, float(a.total_per_hour or 0.0) - paid, use))

    def low(self, epoch: int, k: Mapping[tuple[str, str], int]) -> float:
        """θ_e(K): the best lower bound the cuts prove on epoch ``epoch``'s z_e at pool sizes ``k`` (0 if none)."""
        best = 0.0
        for c in self.cuts:
            if c.epoch != epoch:
                continue
            if c.point is not None:
                if all(n <= c.point.get(key, n) for key, n in k.items()):
                    best = max(best, c.low)
            else:
                best = max(best, c.low - sum(p * k.get(key, 0) for key, p in c.prices.items()))
        return best

    def high(self, epoch: int, k: Mapping[tuple[str, str], int]) -> float:
        """The cheapest plan seen for epoch ``epoch`` that fits pool sizes ``k`` (its cost with the pools free;
        inf if none): an upper bound on z_e(K)."""
        return min((p.cost for p in self.points if p.epoch == epoch
                    and all(n <= k.get(key, 0) for key, n in p.use.items())), default=math.inf)

    def upper(self, epoch: int, pools: Mapping[tuple[str, str], tuple[float, int]]) -> float | None:
        """The cheapest plan seen for epoch ``epoch`` that fits the pools as offered (``pools``: (pool) ->
        ($/node-hour, nodes)), priced there: a feasible value of that epoch solve (None when no plan fits); the
        certified solve's cap on its targets (``allocate.certify.solve_certified(upper=...)``: speed only)."""
        best = math.inf
        for p in self.points:
            if p.epoch == epoch and all(k in pools and n <= pools[k][1] for k, n in p.use.items() if n > 0):
                best = min(best, p.cost + sum(pools[k][0] * n for k, n in p.use.items() if n > 0))
        return best if math.isfinite(best) else None

    def benders(self, epoch: int, duals: AvailabilityDuals, pools: Mapping[tuple[str, str], tuple[float, int]]) -> None:
        """Epoch ``epoch``'s certified solve with pool k at p_k $/node-hour and A_k nodes (``pools``; every pool
        offered) as a cut valid for every K: its bound as a function of the availabilities
        (:class:`planning.allocate.certify.AvailabilityDuals`) gives z_p(K) ≥ bound − Σ_k π_k (K_k − A_k) for the
        priced problem, and z_e(K) ≥ z_p(K) − Σ_k p_k K_k (a plan within K pays p·u ≤ p·K), so
        z_e(K) ≥ (bound + π·A) − (p + π)·K."""
        low = duals.bound + sum(duals.prices.get(k, 0.0) * n for k, (_p, n) in pools.items())
        prices = {k: p + duals.prices.get(k, 0.0) for k, (p, _n) in pools.items()}
        self.cuts.append(Cut(epoch, float(low), prices, None))
        self.benders_cuts += 1


def closed(state: Mapping[str, object], gap: float) -> bool:
    value, bound = float(state["value"]), float(state["bound"])  # type: ignore[arg-type]
    return math.isfinite(value) and value - bound <= gap * value


def master_loop(horizon: Horizon, held: Mapping[tuple[str, str], int], state: dict[str, object],
                stats: dict[str, float], proof: Proof,
                offer: Callable[[float, Mapping[str, int], Sequence[EpochPlan]], None],
                committed_cost: Callable[[Mapping[str, int]], float], say: Callable[[str], None]) -> None:
    """Step 6 (:mod:`planning.finance.cuts`): raise ``state["bound"]`` to the cut master's bound; while the gap is
    open and time is left, solve epochs at the master's R̂ exactly (pools free at K(R̂), certified over all
    templates), adding their monotone and Benders cuts, until R̂ is refuted or every epoch is solved.

    Only the epochs that can refute R̂ are solved: the epochs in order of w_e × (the cheapest plan seen that fits
    K(R̂) − θ_e(K(R̂))), stopping as soon as the cuts prove R̂ cannot beat the best plan (Σ_j a_j R̂_j +
    Σ_e w_e θ_e ≥ value × (1 − gap/2)); an epoch whose plan at another point fits K(R̂) and is proven there has
    nothing to gain and is not re-solved. A point that is not refuted is solved in full and offered as a plan;
    a point the master proposes again is solved in full. Every stop is counted in work (``MASTER_STEPS``, the
    master's nodes), never in seconds; the sizing's deadline is a safety net: a master MILP it stops is recorded
    in ``state["clock"]`` (the answer is flagged), and a pass it stops raises ``Cancelled`` to the sizing."""
    epochs, candidates, cancel = horizon.epochs, horizon.candidates, horizon.cancel
    gap = horizon.resolved.scenario.options.mip_rel_gap
    hours = [ep.hours for ep in epochs]
    total = sum(hours)
    rows = [(c.id, (c.pool, c.shape), c.max_count, c.effective_hourly * total) for c in candidates]
    seen: dict[tuple[tuple[str, int], ...], dict[int, tuple[EpochPlan, AllocationResult]]] = {}
    stats["master_epoch_solves"] = 0.0
    for step in range(MASTER_STEPS):
        master = solve_master(proof.cuts, hours, rows, held, max(0.05, time_left(cancel, 600.0, 0.0)))
        if master is None:
            return
        if master.clocked:
            state["clock"].append("the cut master")  # type: ignore[attr-defined]
        stats["master_steps"] = float(step + 1)
        stats["master_bound"] = master.bound
        stats["benders_cuts"] = float(proof.benders_cuts)
        state["bound"] = max(float(state["bound"]), master.bound)  # type: ignore[arg-type]
        value = float(state["value"])  # type: ignore[arg-type]
        say(f"step {step + 1}: bound {master.bound:,.0f}, best plan {value:,.0f}")
        key = tuple(sorted(master.counts.items()))
        if value - float(state["bound"]) <= gap * value or not master.counts:  # type: ignore[arg-type]
            return
        solved = seen.get(key)
        if solved is not None and len(solved) == len(epochs):
            return  # evaluated exactly already: the master cannot move
        early = solved is None  # a point proposed again is solved in full
        solved = seen.setdefault(key, {})
        k_hat = {(c.pool, c.shape): held.get((c.pool, c.shape), 0)
                 + sum(master.counts.get(x.id, 0) for x in candidates if (x.pool, x.shape) == (c.pool, c.shape))
                 for c in candidates}
        pools = {key_k: (0.0, n) for key_k, n in k_hat.items()}
        # the epochs whose cut can raise the master most first: w_e × (best plan that fits K̂ − θ_e(K̂)); an
        # epoch whose plan at another point fits K̂ and is proven there (θ = its cost) has nothing to gain
        low = {e: proof.low(e, k_hat) for e in range(len(epochs))}
        gain = {e: hours[e] * (proof.high(e, k_hat) - low[e]) for e in range(len(epochs)) if e not in solved}
        for e in sorted(gain, key=lambda x: -gain[x]):
            floor = committed_cost(master.counts) + sum(w * low[x] for x, w in enumerate(hours))
            if early and floor >= value * (1 - gap / 2):
                break  # R̂ is refuted (it cannot beat the best plan): back to the master with the new cuts

            def tell(_m: str, step: int = step, e: int = e) -> None:
                say(f"step {step + 1}: epoch {e + 1}")

            plans, allocs, _used = solve_epochs(horizon, pools, tell, proof=proof, which=[e])
            stats["master_epoch_solves"] += 1.0
            proof.record(allocs, gap, point=k_hat, which=[e])
            if not allocs[0].has_plan:
                break
            solved[e] = (plans[0], allocs[0])
            low[e] = max(low[e], proof.low(e, k_hat))
        if len(solved) == len(epochs):
            second = sum(w * float(solved[e][1].total_per_hour or 0.0) for e, w in enumerate(hours))
            offer(second + committed_cost(master.counts), master.counts, [solved[e][0] for e in range(len(epochs))])
