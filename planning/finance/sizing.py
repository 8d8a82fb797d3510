"""How the two-stage commitment model (:mod:`planning.finance.commitments`) is solved: ``size``, anytime.

Small libraries (below ``REDUCE_MIN_TEMPLATES`` templates per epoch, or histogram classes): the stacked MILP over
every template, exact to ``mip_rel_gap``. Large ones, in four steps under one deadline:

1. **Relaxation over every template.** For multipliers μ_pe ≥ 0 on the pool rows, pricing pool p's nodes at μ_pe
   in epoch e (availability H_p + Σ cap) and dropping R gives a single-period relaxation whose value minus
   C(μ) = Σ_pe μ_pe H_p − Σ_j min(0, a_j − Σ_e μ_{p(j)e})·cap_j is a lower bound on the two-stage optimum
   (Lagrangian relaxation of the pool rows). μ: each pool's cheapest candidate's effective hourly rate × w_e
   (``_uniform_prices``). ``planning.allocate.reduce`` solves its LP over all columns (links, pool flows, spot
   cap) with per-group integer cover bounds; its thresholds keep the columns a plan near the bound may use.
2. **Every epoch alone**, certified over all templates (``allocate.certify.solve_certified``): at R = 0 (an exact
   plan: the "all on-demand" horizon) and with the pools at that μ and their caps (Σ_e w_e z_e(μ) − C(μ), each
   epoch at its proven bound, is a second lower bound).
3. **The two-stage MILP** over the templates those plans use (any epoch may use any of them) chooses R
   (within ``MILP_LIMIT_S``: it only proposes R; its plans are re-solved exactly in step 4).
4. **Every epoch re-solved alone at that R**, certified over all templates: the second stage is exact for the
   chosen commitments.
5. **The Lagrangian dual** (``_kelley``): Kelley's cutting planes in a box (a bundle step) over every epoch plan
   seen (:func:`planning.finance.cuts.next_prices`, the Dantzig–Wolfe pricing of the pool rows) propose prices
   π_e per epoch; each proposal is one pass of step 2's certified epoch solves, a bound, new plans and cuts.
6. **The cut master over R** (``_master_loop``, :mod:`planning.finance.cuts`): every certified epoch solve of
   steps 2–5 is a cut on that epoch's second-stage value z_e(K) (Lagrangian at prices, monotone at a point);
   the MILP over R ∈ ℤ and one θ_e per epoch is a lower bound at least as good as every Lagrangian one. Its R̂
   is solved exactly (epochs at K(R̂), certified), giving exact cuts there, until the gap closes or time runs
   out: finitely many steps to the optimum. Only the epochs that can refute R̂ are solved, the most promising
   first, until the cuts prove R̂ no better than the best plan (a point not refuted is solved in full and is
   a plan). Every certified epoch solve is also a Benders cut valid for every K (the Lagrangian bound's
   availability duals, ``allocate.certify.AvailabilityDuals``).

Steps 1–6 also run on a horizon whose epochs repeat a demand level: each distinct level is solved once,
weighted by the hours of all its epochs (``dedupe_epochs``).

The better of R and R = 0 is returned with the better bound; status ``optimal`` when the gap is within
``mip_rel_gap``, else ``feasible`` with the proven gap; at the deadline the best plan so far (``feasible``), or
``time_limit`` before any plan (never a $0 plan).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from planning.allocate.certify import AvailabilityDuals
from planning.allocate.problem import AllocationProblem, AllocationResult
from planning.allocate.reduce import ColumnBlock, LagrangianBound, Reduction, lagrangian_bound, lp_reduction
from planning.allocate.solve import solve_allocation
from planning.context import CancelToken, ProgressFn, check_cancel, time_left
from planning.finance.commitments import (
    Candidate,
    Epoch,
    EpochPlan,
    Sizing,
    epoch_groups,
    epoch_id,
    epoch_shape,
    horizon_problem,
    plan_from_allocation,
    plans_from_stacked,
)
from planning.finance.cuts import Cut, PlanPoint, next_prices, solve_master
from planning.pools import kind_of
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

START_FRACTION = 0.003  # the relaxation's columns kept for a plan within the bound + 0.3 %
COVER_LIMIT_S = 2.0
REDUCE_MIN_TEMPLATES = 1500  # below this many templates per epoch the MILP sees all of them
MILP_SHARE = 0.25  # of the time left when the two-stage MILP starts (the rest: re-solving the epochs, the bound)
MILP_LIMIT_S = 15.0  # and at most this: it only proposes R (found in seconds; the rest of its time went to
# polishing epoch plans that step 4 re-solves exactly anyway: enterprise, 10 s limit: the same R at a 4.3 % gap)
DUAL_STEPS = 12  # Kelley steps on the pool prices at most
DUAL_SHARE = 0.6  # of the time left when they start (the rest: the cut master's points, solved only as far as needed)
MASTER_STEPS = 200  # cut-master iterations at most (each solves the epochs its point needs, at most all)
EPOCH_THREADS = min(2, os.cpu_count() or 1)  # epochs of one pass solved at once (threads; HiGHS frees the GIL)
MASTER_LIMIT_S = 10.0  # per master MILP (a few dozen integers; its dual bound holds where it stops)


def _kelley(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
            candidates: Sequence[Candidate], pools: Mapping[tuple[str, str], tuple[float, int]],
            cheapest: Mapping[tuple[str, str], float], held: Mapping[tuple[str, str], int], drop_kinds: Sequence[str],
            cancel: CancelToken | None, state: dict[str, object], stats: dict[str, float], say: Callable[[str], None],
            proof: _Proof) -> None:
    """Raise ``state["bound"]`` towards the Lagrangian dual of the pool rows (module docstring, step 5) by
    Kelley's cutting planes with a box around the best prices (a bundle step): :func:`planning.finance.cuts.
    next_prices` over every epoch plan seen so far proposes π_e per epoch; one pass of certified epoch solves at
    π (pools at their caps) gives the bound Σ_e w_e·low_e(π) − C(π), new plans and new cuts. A step that raises
    the bound moves the box there; one that does not halves it. Stops when the model proves the dual cannot
    close the gap, the box is tiny, or a pass no longer fits in the time left."""
    gap = resolved.scenario.options.mip_rel_gap
    keys = sorted(pools)
    hours = [ep.hours for ep in epochs]
    total = sum(hours)
    rows = [(c.id, (c.pool, c.shape), c.max_count, c.effective_hourly * total) for c in candidates]
    centre: list[dict[tuple[str, str], float]] = [{k: cheapest[k] for k in keys} for _e in epochs]
    radius = max(cheapest.values(), default=0.0)
    best = float(state["bound"])  # type: ignore[arg-type]
    seconds = float(stats.get("pass_seconds", 0.0))
    budget = DUAL_SHARE * time_left(cancel, math.inf, 0.0)  # the rest is the cut master's
    t_start = time.perf_counter()
    for step in range(DUAL_STEPS):
        value = float(state["value"])  # type: ignore[arg-type]
        if not math.isfinite(value) or value - float(state["bound"]) <= gap * value:  # type: ignore[arg-type]
            break
        if math.isfinite(budget) and budget - (time.perf_counter() - t_start) < seconds:
            break
        step_to = next_prices(proof.points, hours, rows, held, centre, radius)
        if step_to is None:
            break
        prices, model = step_to
        stats["dual_model"] = model
        if model - best <= 1e-9 * abs(value) or (model - best <= gap * value
                                                  and radius >= max(cheapest.values(), default=0.0)):
            break  # the model's best prices raise nothing (in the box), or could not close the gap at all
        t0 = time.perf_counter()

        def tell(m: str, step: int = step) -> None:
            say(f"step {step + 1}: {m}")

        _plans, allocs, _used = _epoch_solves(resolved, sets, epochs, candidates, pools, drop_kinds, cancel, tell,
                                              prices=prices, proof=proof)
        seconds = time.perf_counter() - t0
        if not all(a.has_plan for a in allocs):
            break
        proof.record(allocs, gap, prices=prices)
        mu = {(k[0], k[1], e): prices[e][k] * hours[e] for k in keys for e in range(len(epochs))}
        bound = sum(w * _proven_low(a, gap) for w, a in zip(hours, allocs, strict=True)) - _constant(
            mu, held, candidates, total)
        stats["dual_steps"] = float(step + 1)
        if bound > best:
            best, centre = bound, prices
            stats["dual_bound"] = best
            state["bound"] = max(float(state["bound"]), best)  # type: ignore[arg-type]
        else:
            radius /= 2
            if radius < 1e-3 * max(cheapest.values(), default=1.0):
                break


@dataclass
class _Proof:
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
            self.cuts.append(Cut(e, _proven_low(a, mip_rel_gap), here, dict(point) if point is not None else None))
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


def _closed(state: Mapping[str, object], gap: float) -> bool:
    value, bound = float(state["value"]), float(state["bound"])  # type: ignore[arg-type]
    return math.isfinite(value) and value - bound <= gap * value


def _master_loop(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
                 candidates: Sequence[Candidate], held: Mapping[tuple[str, str], int], drop_kinds: Sequence[str],
                 cancel: CancelToken | None, state: dict[str, object], stats: dict[str, float], proof: _Proof,
                 offer: Callable[[float, Mapping[str, int], Sequence[EpochPlan]], None],
                 committed_cost: Callable[[Mapping[str, int]], float], say: Callable[[str], None]) -> None:
    """Step 6 (:mod:`planning.finance.cuts`): raise ``state["bound"]`` to the cut master's bound; while the gap is
    open and time is left, solve epochs at the master's R̂ exactly (pools free at K(R̂), certified over all
    templates), adding their monotone and Benders cuts, until R̂ is refuted or every epoch is solved.

    Only the epochs that can refute R̂ are solved: the epochs in order of w_e × (the cheapest plan seen that fits
    K(R̂) − θ_e(K(R̂))), stopping as soon as the cuts prove R̂ cannot beat the best plan (Σ_j a_j R̂_j +
    Σ_e w_e θ_e ≥ value × (1 − gap/2)); an epoch whose plan at another point fits K(R̂) and is proven there has
    nothing to gain and is not re-solved. A point that is not refuted is solved in full and offered as a plan;
    a point the master proposes again is solved in full. Before time runs out a last master solve turns the
    cuts so far into the bound."""
    gap = resolved.scenario.options.mip_rel_gap
    hours = [ep.hours for ep in epochs]
    total = sum(hours)
    rows = [(c.id, (c.pool, c.shape), c.max_count, c.effective_hourly * total) for c in candidates]
    seen: dict[tuple[tuple[str, int], ...], dict[int, tuple[EpochPlan, AllocationResult]]] = {}
    per_epoch = float(stats.get("pass_seconds", 0.0)) / max(1, len(epochs))  # one certified epoch solve
    stats["master_epoch_solves"] = 0.0
    for step in range(MASTER_STEPS):
        left = time_left(cancel, math.inf, 0.0)
        master = solve_master(proof.cuts, hours, rows, held, min(MASTER_LIMIT_S, max(0.05, 0.2 * left)))
        if master is None:
            return
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
            left = time_left(cancel, math.inf, 0.0)
            if math.isfinite(left) and left < 3 * per_epoch + min(MASTER_LIMIT_S, 2.0):
                break  # no time for another epoch: a last master solve proves what the cuts so far give
            t0 = time.perf_counter()

            def tell(_m: str, step: int = step, e: int = e) -> None:
                say(f"step {step + 1}: epoch {e + 1}")

            plans, allocs, _used = _epoch_solves(resolved, sets, epochs, candidates, pools, drop_kinds, cancel, tell,
                                                 proof=proof, which=[e])
            per_epoch = max(0.5 * per_epoch, time.perf_counter() - t0) if per_epoch else time.perf_counter() - t0
            stats["master_epoch_solves"] += 1.0
            proof.record(allocs, gap, point=k_hat, which=[e])
            if not allocs[0].has_plan:
                break
            solved[e] = (plans[0], allocs[0])
            low[e] = max(low[e], proof.low(e, k_hat))
        if len(solved) == len(epochs):
            second = sum(w * float(solved[e][1].total_per_hour or 0.0) for e, w in enumerate(hours))
            offer(second + committed_cost(master.counts), master.counts, [solved[e][0] for e in range(len(epochs))])
        left = time_left(cancel, math.inf, 0.0)
        if math.isfinite(left) and left < 3 * per_epoch + min(MASTER_LIMIT_S, 2.0):
            last = solve_master(proof.cuts, hours, rows, held, max(0.05, min(MASTER_LIMIT_S, 0.5 * left)))
            if last is not None:
                stats["master_bound"] = max(float(stats["master_bound"]), last.bound)
                state["bound"] = max(float(state["bound"]), last.bound)  # type: ignore[arg-type]
            return


def _blocks(sets: Sequence[TemplateSet], epochs: Sequence[Epoch]) -> tuple[list[ColumnBlock], list[tuple[int, int]]]:
    blocks, where = [], []
    for e in range(len(epochs)):
        for si, ts in enumerate(sets):
            blocks.append(ColumnBlock(epoch_id(ts.group.id, e), tuple(epoch_shape(s, e) for s in ts.shapes),
                                      ts.usage, ts.throughput[:, 0]))
            where.append((si, e))
    return blocks, where


def _constant(mu: Mapping[tuple[str, str, int], float], held: Mapping[tuple[str, str], int],
              candidates: Sequence[Candidate], hours: float) -> float:
    """C(μ) = Σ μ·H − Σ_j min(0, a_j − Σ_e μ_{p(j)e})·cap_j (the relaxation's value minus C is a lower bound)."""
    c = sum(v * held.get((pool, shape), 0) for (pool, shape, _e), v in mu.items())
    for cand in candidates:
        paid = sum(v for (pool, shape, _e), v in mu.items() if (pool, shape) == (cand.pool, cand.shape))
        c -= min(0.0, cand.effective_hourly * hours - paid) * cand.max_count
    return c


@dataclass
class _Relaxation:
    red: Reduction
    lag: LagrangianBound
    blocks: list[ColumnBlock]
    where: list[tuple[int, int]]
    demand: list[float]
    constant: float

    @property
    def bound(self) -> float:
        return float(self.lag.z_lb) - self.constant

    def masks(self, target: float) -> dict[tuple[int, int], np.ndarray]:
        keep = self.red.select(self.lag.thresholds(self.red, self.demand, target + self.constant), self.blocks)
        return {w: m for w, m in zip(self.where, keep, strict=True)}


def _relaxation(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
                candidates: Sequence[Candidate], mu: Mapping[tuple[str, str, int], float],
                drop_kinds: Sequence[str], cancel: CancelToken | None) -> _Relaxation | None:
    """The pool-priced single-period relaxation over every template (module docstring), with its LP and
    Lagrangian cover bounds (``planning.allocate.reduce``: links, pool flows and the spot cap included)."""
    relaxed = horizon_problem(resolved, sets, epochs, candidates, masks={}, drop_kinds=drop_kinds, pool_prices=mu)
    all_blocks, all_where = _blocks(sets, epochs)
    # every shape of every block, sold or not (a shape no pool sells, e.g. with on-demand dropped, is not offered:
    # the templates using it get no column; dropping their whole block instead would drop its demand too)
    shapes = sorted({o.shape for o in relaxed.offers} | {s for b in all_blocks for s in b.shapes})
    regions = sorted({o.region for o in relaxed.offers})
    index = {s: k for k, s in enumerate(shapes)}
    r_index = {r: i for i, r in enumerate(regions)}
    prices = np.full((len(regions), len(shapes)), np.nan)
    available = np.zeros((len(regions), len(shapes)))
    for o in relaxed.offers:
        prices[r_index[o.region], index[o.shape]] = o.price_per_hour
        available[r_index[o.region], index[o.shape]] = o.available
    blocks, where = all_blocks, all_where
    demand = {q.group: q.rate for q in relaxed.classes}
    group_of = {q.id: q.group for q in relaxed.classes}
    links = [tuple(group_of[q] for q in link) for link in relaxed.links]
    first = {link[0]: li for li, link in enumerate(relaxed.links)}
    flows = {(first[tp.sender], tp.src, tp.dst): tp.usd_per_hour for tp in relaxed.transfers if tp.sender in first}
    red = lp_reduction(blocks, index, regions, prices, available, demand, 0.0, spot_cap=relaxed.spot_cap,
                       spot_regions=relaxed.spot_regions, links=links, transfers=flows, cancel=cancel)
    if not red.feasible_lp:
        return None
    d = [demand.get(b.group, 0.0) for b in blocks]
    lag = lagrangian_bound(red, d, min(COVER_LIMIT_S, time_left(cancel, COVER_LIMIT_S)),
                           budget_s=time_left(cancel, math.inf))
    held = {(o.region, o.shape): o.available for o in resolved.offers}
    hours = sum(ep.hours for ep in epochs)
    return _Relaxation(red, lag, blocks, where, d, _constant(mu, held, candidates, hours))


def _proven_low(alloc: AllocationResult, mip_rel_gap: float) -> float:
    """A lower bound on an epoch's optimum from its certified solve: value × (1 − its proven gap); without a gap,
    the MILP gap when optimal, else nothing (0)."""
    value = float(alloc.total_per_hour or 0.0)
    gap = alloc.gap if alloc.gap is not None else (mip_rel_gap if alloc.status == "optimal" else 1.0)
    return value * (1.0 - min(1.0, max(0.0, float(gap))))


def _uniform_prices(epochs: Sequence[Epoch], candidates: Sequence[Candidate]) -> dict[tuple[str, str, int], float]:
    """μ: each pool's cheapest candidate's effective hourly price in every epoch (× w_e): Σ_e μ = min_j a_j."""
    out: dict[tuple[str, str, int], float] = {}
    for c in candidates:
        for e, ep in enumerate(epochs):
            key = (c.pool, c.shape, e)
            out[key] = min(out.get(key, math.inf), c.effective_hourly * ep.hours)
    return out


def epoch_resolved(resolved: ResolvedScenario, epoch: Epoch, candidates: Sequence[Candidate],
                   pools: Mapping[tuple[str, str], tuple[float, int]], drop_kinds: Sequence[str] = (),
                   zero_pools: bool = False) -> ResolvedScenario:
    """Epoch ``epoch``'s single-hour scenario: its demand, K = 0, ``drop_kinds`` left out, and each candidate pool
    (pool region, shape) offered at ``pools[key] = ($/node-hour, nodes)`` (held nodes included; absent = the
    held nodes only, at 0 $/h). ``zero_pools``: a pool of 0 nodes is offered too (with nothing available), so
    the certified solve's LP prices its columns and its availability dual is a valid slope (a Benders cut)."""
    scenario = replace(resolved.scenario, options=replace(resolved.scenario.options, K=0.0), current=())
    offers = [o for o in resolved.offers if kind_of(o.region) not in drop_kinds and (o.region, o.shape) not in pools]
    proto = {(o.region, o.shape): o for o in resolved.offers if kind_of(o.region) == "on_demand"}
    for c in candidates:
        key = (c.pool, c.shape)
        if key not in pools or any((o.region, o.shape) == key for o in offers):
            continue
        price, nodes = pools[key]
        base = next((o for o in resolved.offers if (o.region, o.shape) == key), None) or proto.get((c.region, c.shape))
        if base is None or (nodes <= 0 and not zero_pools):
            continue
        offers.append(replace(base, region=c.pool, price_per_hour=price, available=int(nodes), kind="reserved"))
    return ResolvedScenario.from_offers(scenario, offers, resolved.specs, epoch_groups(resolved.groups, epoch))


def _held(resolved: ResolvedScenario) -> dict[tuple[str, str], int]:
    return {(o.region, o.shape): o.available for o in resolved.offers if kind_of(o.region) == "reserved"}


def _epoch_solves(resolved: ResolvedScenario, sets: Sequence[TemplateSet], epochs: Sequence[Epoch],
                  candidates: Sequence[Candidate], pools: Mapping[tuple[str, str], tuple[float, int]],
                  drop_kinds: Sequence[str], cancel: CancelToken | None, report: Callable[[str], None], *,
                  stop_without_plan: bool = False, prices: Sequence[Mapping[tuple[str, str], float]] | None = None,
                  proof: _Proof | None = None, which: Sequence[int] | None = None,
                  ) -> tuple[list[EpochPlan], list[AllocationResult], list[list[np.ndarray]]]:
    """Every epoch solved alone, certified over all templates (``allocate.certify.solve_certified``), with the
    candidate pools as given: the plans, the allocations, and per epoch the template rows each plan uses.

    ``stop_without_plan``: the busiest epoch first, and stop at the first epoch without a plan (its allocation is
    the last one returned; the lists then cover only the epochs solved). "All reserved" at R = 0 has no plan as
    soon as demand exceeds the owned and held nodes: one solve says so instead of one per epoch.
    ``prices[e][pool]``: epoch e's $/node-hour of a pool instead of the one in ``pools``. ``proof``: receives
    each epoch's Benders cut (:meth:`_Proof.benders`; every pool of ``pools`` is then offered, 0 nodes too)."""
    from planning.allocate.certify import site_transfers, solve_certified, transfer_prices

    order = list(range(len(epochs))) if which is None else list(which)
    every_pool = {(c.pool, c.shape) for c in candidates}
    if stop_without_plan:
        order.sort(key=lambda e: -sum(epochs[e].factor.values()))
    solved: dict[int, tuple[EpochPlan, AllocationResult, list[np.ndarray]]] = {}

    def one(e: int) -> tuple[EpochPlan, AllocationResult, list[np.ndarray], AvailabilityDuals | None,
                             Mapping[tuple[str, str], tuple[float, int]]]:
        check_cancel(cancel, "sizing: epoch plans")
        here = pools if prices is None else {k: (prices[e][k], n) for k, (_p, n) in pools.items()}
        res_e = epoch_resolved(resolved, epochs[e], candidates, here, drop_kinds, zero_pools=proof is not None)
        certified = solve_certified(res_e, sets, cancel=cancel)
        alloc = certified.result
        flows = (transfer_prices(res_e) if res_e.scenario.options.kv_transfer == "cross-region"
                 else site_transfers(res_e))
        plan = plan_from_allocation(alloc, sets, {(tp.sender, tp.src, tp.dst): tp.usd_per_hour for tp in flows})
        rows = [np.zeros(len(ts), dtype=bool) for ts in sets]
        for (tid, _r) in alloc.counts:
            for si, ts in enumerate(sets):
                row = ts.row_of.get(tid)
                if row is not None:
                    rows[si][row] = True
        return plan, alloc, rows, certified.duals, here

    def keep(e: int, out: tuple[EpochPlan, AllocationResult, list[np.ndarray], AvailabilityDuals | None,
                                Mapping[tuple[str, str], tuple[float, int]]]) -> None:
        plan, alloc, rows, duals, here = out
        if proof is not None and duals is not None and alloc.has_plan and every_pool <= set(here):
            proof.benders(e, duals, here)
        solved[e] = (plan, alloc, rows)

    threads = EPOCH_THREADS if not stop_without_plan and len(order) > 1 else 1
    if threads > 1:  # HiGHS releases the GIL while it solves: two epochs at once; cuts kept in epoch order
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sizing-epoch")
        try:
            futures = {e: pool.submit(one, e) for e in order}
            for done, e in enumerate(order, 1):
                keep(e, futures[e].result())
                report(f"epoch {done}/{len(order)}")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    for done, e in enumerate(order if threads == 1 else (), 1):
        keep(e, one(e))
        report(f"epoch {done}/{len(order)}")
        if stop_without_plan and not solved[e][1].has_plan:
            out = [solved[k] for k in order[:done]]
            return [p for p, _a, _u in out], [a for _p, a, _u in out], [u for _p, _a, u in out]
    back = range(len(epochs)) if which is None else which
    return [solved[e][0] for e in back], [solved[e][1] for e in back], [solved[e][2] for e in back]


def dedupe_epochs(epochs: Sequence[Epoch]) -> tuple[list[Epoch], list[int]]:
    """The distinct demand levels of a horizon (a day profile repeated over growth-free periods, or a profile
    that repeats a level): one epoch per level standing for all its hours, and each epoch's level."""
    levels: list[Epoch] = []
    where: list[int] = []
    index: dict[tuple[tuple[str, float], ...], int] = {}
    for ep in epochs:
        key = tuple(sorted(ep.factor.items()))
        if key not in index:
            index[key] = len(levels)
            levels.append(replace(ep, index=len(levels), hours=0.0))
        lv = index[key]
        levels[lv] = replace(levels[lv], hours=levels[lv].hours + ep.hours)
        where.append(lv)
    return levels, where


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
        mu = _uniform_prices(epochs, candidates)
        relax = _relaxation(resolved, sets, epochs, candidates, mu, drop_kinds, cancel)
        if relax is None:  # the relaxation's LP is infeasible: so is the two-stage model
            return answer("infeasible", "no plan serves every epoch's demand (the LP relaxation is infeasible)")
        state["bound"] = relax.bound
        stats["lp_bound"] = float(relax.red.z_lp) - relax.constant
        stats["lagrangian_cover_bound"] = relax.bound
        # (2) each epoch alone at R = 0 (exact) and with the reservations priced at their effective rate (bound)
        masks = relax.masks(relax.bound + START_FRACTION * abs(relax.bound))
        levels: list[float | None] = [None, 1.0] if candidates else [None]
        dual = False  # the epochs' Lagrangian bound was computed (step 5 starts from it)
        proof = _Proof()
        held = _held(resolved)
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
            plans, allocs, used = _epoch_solves(resolved, sets, epochs, candidates, pools, drop_kinds, cancel, say,
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
            z_low = sum(w * _proven_low(a, resolved.scenario.options.mip_rel_gap)
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
                bound = float(z_low) - _constant(mu, held, candidates, sum(hours))
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
            plans, allocs, _used = _epoch_solves(resolved, sets, epochs, candidates, pools, drop_kinds, cancel,
                                                 lambda m: report(0.9, f"{label}: epochs at the chosen commitments: {m}"),
                                                 proof=proof)
            if all(a.has_plan for a in allocs):
                second = sum(w * float(a.total_per_hour or 0.0) for w, a in zip(hours, allocs, strict=True))
                offer(second + committed_cost(chosen), chosen, plans)
                proof.record(allocs, resolved.scenario.options.mip_rel_gap,
                             point={k: n for k, (_p, n) in pools.items()})
        # (5) the Lagrangian dual of the pool rows by Kelley's cutting planes (each pass's epochs are cuts)
        if dual and not _closed(state, resolved.scenario.options.mip_rel_gap):
            _kelley(resolved, sets, epochs, candidates, {k: (0.0, held.get(k, 0) + caps[k]) for k in caps},
                    cheapest, held, drop_kinds, cancel, state, stats,
                    lambda m: report(0.9, f"{label}: tightening the bound: {m}"), proof)
        # (6) the cut master over R: a bound from every cut so far, and the points it asks for, solved exactly
        _master_loop(resolved, sets, epochs, candidates, held, drop_kinds, cancel, state, stats, proof, offer,
                     committed_cost, lambda m: report(0.95, f"{label}: cut master: {m}"))
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
