"""Coral's Homo baseline (greedy, homogeneous replicas) and Homo-ILP (joint ILP, homogeneous templates only).

Homo (Coral Sec. 6.1): every replica runs on one shape (``TemplateOption.single_shape``); heterogeneity only
across replicas. Groups are served **in turn, in the given order** (default: the order groups first appear in
``problem.classes``). Each group ranks its homogeneous (template, region) pairs by cost efficiency — the share
of the group's demand one instance serves when it carries the group's class mix, 1 / Σ_q λ_q / (Λ T_q(τ)) ·
Λ, per USD/h at that region's prices — and takes instances of the best pair until demand is met or its
availability (what earlier groups left) runs out, then the next pair, and so on. Ties are broken by a stated
rule, never by float noise: efficiencies equal to :data:`EFFICIENCY_DIGITS` significant digits tie, and a tie goes
to the cheaper instance (finer steps over-provision less), then the smaller template id, then the region name
(issue 37 §6: the same input gives the same plan in every process). A group that runs out
is served partially and the note says so. Templates that cannot serve some demanded class are skipped.
Region links (``problem.links``: a model's prefill and decode in the same regions) are kept greedily: a group
linked to one served before it fills, in each region, the share of demand that group placed there (scaled to
the whole demand), from that region's pairs only; both are then served Σ_r min(their regional shares).
The greedy never sends KV caches across regions (``problem.transfers`` are ignored: it pairs per region, so it
has no egress); Homo-ILP and memP solve the allocation model and may use them, paying their egress.
A spot cap s (``problem.spot_cap``, constraint (S)) is kept by letting instances in ``problem.spot_regions``
carry at most s of a group's demand (whole instances, rounded down); the rest comes from the other pairs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from planning.allocate.problem import AllocationProblem
from planning.baselines.base import _FULL, BaselineResult, from_allocation, gpus_of
from planning.context import CancelToken, check_cancel
from planning.errors import PlanningError

EFFICIENCY_DIGITS = 9
"""Significant digits of a cost efficiency that rank the Homo greedy's pairs; beyond them values tie."""


def tie_key(x: float) -> float:
    """``x`` rounded to :data:`EFFICIENCY_DIGITS` significant digits (inf stays inf): the rank of an efficiency."""
    return float(f"{x:.{EFFICIENCY_DIGITS}g}") if math.isfinite(x) else x


def homo_greedy(problem: AllocationProblem, order: Sequence[str] | None = None,
                cancel: CancelToken | None = None) -> BaselineResult:
    """Coral's Homo: per group in turn, the most cost-efficient homogeneous replicas first.

    Parameters
    ----------
    problem:
        The allocation problem.
    order:
        Group order (default: order of first appearance in ``problem.classes``).
    cancel:
        Checked per group and every 1,000 templates.

    Returns
    -------
    ``BaselineResult``; ``feasible`` False with a note when some group is short.

    Raises
    ------
    PlanningError
        If ``order`` names unknown groups or misses some.
    Cancelled
        When ``cancel`` is set.
    """
    t0 = time.perf_counter()
    groups = list(problem.groups())
    if order is not None:
        if sorted(order) != sorted(groups):
            raise PlanningError("order", f"order {list(order)} is not a permutation of the groups {groups}.", "List every group once.")
        groups = list(order)
    remaining = {(o.region, o.shape): o.available for o in problem.offers}
    price = {(o.region, o.shape): o.price_per_hour for o in problem.offers}
    regions = sorted({o.region for o in problem.offers})
    counts: dict[tuple[str, str], int] = {}
    nodes: dict[tuple[str, str], int] = {}
    served: dict[str, float] = {}
    cost = 0.0
    notes: list[str] = []
    linked_to = {g: set(part) - {g} for part in problem.linked_parts() for g in part}
    placed: dict[str, dict[str, float]] = {}  # group -> region -> share of its demand placed there
    for g in groups:
        check_cancel(cancel, "baseline homo")
        rates = {q.id: q.rate for q in problem.classes if q.group == g and q.rate > 0}
        if not rates:
            served[g] = 1.0
            continue
        before = [h for h in groups[: groups.index(g)] if h in linked_to.get(g, set()) and h in placed]
        quota = _quota(placed[before[0]]) if before else None  # per region, fixed by an earlier linked group
        cands = ranked_pairs(problem, g, rates, regions, price, cancel)
        need = 1.0
        spot_left = problem.spot_cap.get(g, math.inf)  # share of the demand spot instances may still carry
        region_need = dict(quota) if quota is not None else None
        here: dict[str, float] = {}
        for _neg, p, _tid, r, t, share in cands:
            left = need if region_need is None else region_need.get(r, 0.0)
            if left <= 1e-12:
                if need <= 1e-12:
                    break
                continue
            k_avail = min(remaining[(r, s)] // u for s, u in t.usage.items())
            k_need = math.ceil(left / share - 1e-9)
            if r in problem.spot_regions and math.isfinite(spot_left):
                k_need = min(k_need, math.floor(spot_left / share + 1e-9))
                spot_left -= min(k_avail, k_need) * share
            k = min(k_avail, k_need)
            if k <= 0:
                continue
            counts[(t.id, r)] = counts.get((t.id, r), 0) + k
            for s, u in t.usage.items():
                remaining[(r, s)] -= k * u
                nodes[(r, s)] = nodes.get((r, s), 0) + k * u
            cost += k * p
            need -= k * share
            here[r] = here.get(r, 0.0) + k * share
            if region_need is not None:
                region_need[r] = region_need.get(r, 0.0) - k * share
        placed[g] = here
        frac = min(1.0, 1.0 - need)
        if quota is not None:  # paired with the earlier linked group region by region
            frac = min(1.0, sum(min(v, here.get(r, 0.0)) for r, v in quota.items()))
            for h in before:
                served[h] = min(served[h], frac)
        served[g] = frac
        if frac < _FULL:
            why = "no homogeneous template can serve it" if not cands else "availability ran out"
            notes.append(f"{g} falls short at {100 * frac:.0f} % of demand ({why})")
    feasible = all(f >= _FULL for f in served.values())
    note = f"greedy in order {groups}; " + ("all demand met" if feasible else "cannot meet demand: " + "; ".join(notes))
    return BaselineResult(
        name="homo",
        cost_per_hour=cost,
        served_fraction=served,
        gpus_used=gpus_of(nodes),
        nodes_used=nodes,
        counts=counts,
        feasible=feasible,
        note=note,
        seconds=time.perf_counter() - t0,
        details={"order": groups},
    )


def _quota(ref: Mapping[str, float]) -> dict[str, float]:
    """Per region, the share of its demand a group must place there to pair with a linked group placed as ``ref``."""
    total = sum(ref.values())
    return {r: v / max(1.0, total) for r, v in ref.items()}


def ranked_pairs(problem: AllocationProblem, g: str, rates: Mapping[str, float], regions: Sequence[str],
                 price: Mapping[tuple[str, str], float], cancel: CancelToken | None = None) -> list[tuple[Any, ...]]:
    """Group ``g``'s homogeneous (template, region) pairs, best first: ``(-rank, price, template id, region,
    template, share)`` with share = the part of the group's demand (class mix ``rates``) one instance serves and
    rank = :func:`tie_key` of share per USD/h; ties go to the cheaper instance, then template id, then region."""
    cands = []
    for i, t in enumerate(problem.templates):
        if i % 1000 == 999:
            check_cancel(cancel, "baseline homo")
        if t.group != g or not t.single_shape:
            continue
        if any(t.throughput.get(q, 0.0) <= 0 for q in rates):
            continue
        share = 1.0 / sum(lam / t.throughput[q] for q, lam in rates.items())  # of the whole demand
        for r in regions:
            if not all((r, s) in price for s in t.usage):
                continue
            p = sum(price[(r, s)] * u for s, u in t.usage.items())
            eff = share / p if p > 0 else math.inf
            cands.append((-tie_key(eff), p, t.id, r, t, share))
    cands.sort(key=lambda c: c[:4])
    return cands


def homo_ilp(problem: AllocationProblem, cancel: CancelToken | None = None) -> BaselineResult:
    """The joint allocation ILP restricted to homogeneous templates (heterogeneity only across replicas).

    Parameters
    ----------
    problem:
        The allocation problem.
    cancel:
        Checked before each ILP, which gets the time left on its deadline.

    Returns
    -------
    ``BaselineResult`` (the max uniform served fraction when demand cannot be met).
    """
    templates = tuple(t for t in problem.templates if t.single_shape)
    ids = {t.id for t in templates}
    current = {k: v for k, v in problem.current.items() if k[0] in ids}
    restricted = replace(problem, templates=templates, current=current, budget_per_hour=None, dump_model=None)
    return from_allocation("homo-ilp", restricted, f"joint ILP over {len(templates)} homogeneous templates; all demand met", cancel)
