"""The sizing's epoch solves (:mod:`planning.finance.sizing`): each epoch of the horizon alone as a single-hour
allocation, certified over every template (``allocate.certify.solve_certified``), with the candidate pools priced
and sized as a step asks; the pools held; the proven lower bound of a certified solve; distinct demand levels.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from planning.allocate.certify import AvailabilityDuals
from planning.allocate.problem import AllocationResult
from planning.context import CancelToken, check_cancel
from planning.finance.commitments import Candidate, Epoch, EpochPlan, epoch_groups, plan_from_allocation
from planning.pools import kind_of
from planning.resolve import ResolvedScenario
from planning.templates.sets import TemplateSet

if TYPE_CHECKING:
    from planning.finance.proof import Proof

EPOCH_GAP_SHARE = 0.1  # each epoch ILP's gap: this × options.mip_rel_gap (its cuts lose at most that much; gap 0
# could take minutes: an ILP over free pools proving its last 0.01 % among symmetric plans, enterprise at a master point)
EPOCH_THREADS = min(2, os.cpu_count() or 1)  # epochs of one pass solved at once (threads; HiGHS frees the GIL)


def proven_low(alloc: AllocationResult, mip_rel_gap: float) -> float:
    """A lower bound on an epoch's optimum from its certified solve: value × (1 − its proven gap); without a gap,
    the MILP gap when optimal, else nothing (0)."""
    value = float(alloc.total_per_hour or 0.0)
    gap = alloc.gap if alloc.gap is not None else (mip_rel_gap if alloc.status == "optimal" else 1.0)
    return value * (1.0 - min(1.0, max(0.0, float(gap))))


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


def held_pools(resolved: ResolvedScenario) -> dict[tuple[str, str], int]:
    return {(o.region, o.shape): o.available for o in resolved.offers if kind_of(o.region) == "reserved"}


@dataclass(frozen=True)
class Horizon:
    """What every step of the sizing solves over: the scenario, its template sets, the horizon's epochs, the
    commitment candidates, the offer kinds left out (``drop_kinds``) and the caller's cancel token/deadline."""

    resolved: ResolvedScenario
    sets: Sequence[TemplateSet]
    epochs: Sequence[Epoch]
    candidates: Sequence[Candidate]
    drop_kinds: Sequence[str] = ()
    cancel: CancelToken | None = None


def solve_epochs(horizon: Horizon, pools: Mapping[tuple[str, str], tuple[float, int]],
                 report: Callable[[str], None], *, stop_without_plan: bool = False, prices: Sequence[Mapping[tuple[str, str], float]] | None = None,
                 proof: Proof | None = None, which: Sequence[int] | None = None,
                 ) -> tuple[list[EpochPlan], list[AllocationResult], list[list[np.ndarray]]]:
    """Every epoch solved alone, certified over all templates (``allocate.certify.solve_certified``), with the
    candidate pools as given: the plans, the allocations, and per epoch the template rows each plan uses.

    ``stop_without_plan``: the busiest epoch first, and stop at the first epoch without a plan (its allocation is
    the last one returned; the lists then cover only the epochs solved). "All reserved" at R = 0 has no plan as
    soon as demand exceeds the owned and held nodes: one solve says so instead of one per epoch.
    ``prices[e][pool]``: epoch e's $/node-hour of a pool instead of the one in ``pools``. ``proof``: receives
    each epoch's Benders cut (:meth:`Proof.benders`; every pool of ``pools`` is then offered, 0 nodes too), and
    its plans seen so far warm-start each solve: the cheapest that fits, priced here, caps the certificate's
    targets (:meth:`Proof.upper`; the same answer, never the blind ×4 growth or the ILP over every template)."""
    from planning.allocate.certify import site_transfers, solve_certified, transfer_prices

    resolved, sets, epochs, candidates = horizon.resolved, horizon.sets, horizon.epochs, horizon.candidates
    drop_kinds, cancel = horizon.drop_kinds, horizon.cancel
    ilp_gap = EPOCH_GAP_SHARE * resolved.scenario.options.mip_rel_gap  # each epoch's proven low: value × (1 − gap)
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
        hint = proof.upper(e, here) if proof is not None else None  # a plan seen that fits: caps the targets
        certified = solve_certified(res_e, sets, cancel=cancel, upper=hint, ilp_gap=ilp_gap)
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
