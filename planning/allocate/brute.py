"""Brute-force oracle for tiny allocation problems: enumerate every ν, no pruning, no ILP (tests only)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planning.allocate.problem import AllocationProblem, Offer, WorkloadClass
from planning.errors import PlanningError

_TOL = 1e-9


@dataclass(frozen=True)
class BruteResult:
    """Best plan found by enumeration (None = no plan meets the objective's requirement)."""

    feasible: bool
    cost: float | None  # provisioning + penalty + KV transfer + commitments
    alpha: float | None
    counts: dict[tuple[str, str], int]
    evaluated: int


def _spot_alpha(problem: AllocationProblem, nu: dict[tuple[str, str], int]) -> float:
    """The largest α constraint (S) allows single-class groups with a spot cap s: their capacity outside the spot
    regions / ((1 − s) λ) (multi-class groups get (S) inside their LPs)."""
    alpha = 1.0
    by_id = {t.id: t for t in problem.templates}
    for g, share in problem.spot_cap.items():
        classes = [q for q in problem.classes if q.group == g]
        if len(classes) != 1 or classes[0].rate <= 0 or share >= 1:
            continue
        q = classes[0]
        cap = sum(by_id[tid].throughput.get(q.id, 0.0) * n for (tid, r), n in nu.items()
                  if by_id[tid].group == g and r not in problem.spot_regions)
        alpha = min(alpha, cap / ((1.0 - share) * q.rate))
    return alpha


def _group_alpha(problem: AllocationProblem, nu: dict[tuple[str, str], int]) -> float:
    """Max uniform fraction servable by fixed counts (per group: direct for one class, LP otherwise)."""
    from scipy.optimize import linprog

    alpha = _spot_alpha(problem, nu)
    for g in problem.groups():
        classes = [q for q in problem.classes if q.group == g and q.rate > 0]
        if not classes:
            continue
        insts = [(t, r, n) for t in problem.templates if t.group == g for (tid, r), n in nu.items()
                 if tid == t.id and n > 0]
        if len([q for q in problem.classes if q.group == g]) == 1:
            q = classes[0]
            cap = sum(t.throughput.get(q.id, 0.0) * n for t, _r, n in insts)
            alpha = min(alpha, cap / q.rate)
            continue
        # variables: x[q, i] for each class and instance group, then α; maximise α
        nq, ni = len(classes), len(insts)
        if ni == 0:
            return 0.0
        c = np.zeros(nq * ni + 1)
        c[-1] = -1.0
        a_ub, b_ub = [], []
        for qi, q in enumerate(classes):  # α λ_q − Σ_i x ≤ 0
            row = np.zeros(nq * ni + 1)
            row[qi * ni : (qi + 1) * ni] = -1.0
            row[-1] = q.rate
            a_ub.append(row)
            b_ub.append(0.0)
        for ii, (t, _r, n) in enumerate(insts):  # Σ_q x / T ≤ n
            row = np.zeros(nq * ni + 1)
            for qi, q in enumerate(classes):
                thr = t.throughput.get(q.id, 0.0)
                row[qi * ni + ii] = 1.0 / thr if thr > 0 else 0.0
            a_ub.append(row)
            b_ub.append(float(n))
        share = problem.spot_cap.get(g, 1.0)
        if share < 1:  # (S): (1 − s) α Σ λ − Σ x over non-spot instances ≤ 0
            row = np.zeros(nq * ni + 1)
            row[-1] = (1.0 - share) * sum(q.rate for q in classes)
            for qi in range(nq):
                for ii, (_t, r, _n) in enumerate(insts):
                    if r not in problem.spot_regions:
                        row[qi * ni + ii] = -1.0
            a_ub.append(row)
            b_ub.append(0.0)
        bounds = []
        for q in classes:
            for t, _r, _n in insts:
                bounds.append((0.0, None if t.throughput.get(q.id, 0.0) > 0 else 0.0))
        bounds.append((0.0, 1.0))
        res = linprog(c, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=bounds, method="highs")
        alpha = min(alpha, float(res.x[-1]) if res.status == 0 else 0.0)
    return max(0.0, min(alpha, 1.0))


def _link_flows(problem: AllocationProblem, classes: Sequence[WorkloadClass], regions: Sequence[str]
                ) -> tuple[list[tuple[int, str, str, float]], list[tuple[int, list[int]]]]:
    """The flow variables of :func:`_linked_alpha`, ``(link, src, dst, $/h)`` (the diagonal of every link, and the
    listed transfers of a link with a sender), and per link ``(sender class index or −1, receiver indices)``."""
    index = {q.id: qi for qi, q in enumerate(classes)}
    prices = {(tp.sender, tp.src, tp.dst): tp.usd_per_hour for tp in problem.transfers}
    flows: list[tuple[int, str, str, float]] = []  # (link, src, dst, $/h)
    links: list[tuple[int, list[int]]] = []  # (sender class index or −1, receiver class indices)
    for link in problem.links:
        members = [index[q] for q in link if q in index]
        if not members:
            continue
        li = len(links)
        sender = index[link[0]] if len(link) > 1 and link[0] in index else -1
        links.append((sender, [m for m in members if m != sender]))
        flows.extend((li, r, r, 0.0) for r in regions)
        if sender >= 0:
            flows.extend((li, a, b, prices[(link[0], a, b)]) for a in regions for b in regions
                         if (link[0], a, b) in prices)
    return flows, links


def _linked_alpha(problem: AllocationProblem, nu: dict[tuple[str, str], int],
                  transfer_budget: float | None = None) -> tuple[float, float]:
    """Max uniform fraction servable by fixed counts with the region links, then its cheapest KV transfer.

    Variables x[q, i] (rate of class q on instance group i = (template, region)), flows f[ℓ, a, b] (the
    diagonal a = b always, a ≠ b where ``problem.transfers`` lists it), α; maximise α s.t.
    Σ_i x[q, i] ≥ α λ_q, Σ_q x[q, i] / T_q(i) ≤ ν_i, Σ_{i in r} x[q, i] ≥ λ_q Σ_b f[ℓ, r, b] for the sender
    (first class) of ℓ, ≥ λ_q Σ_a f[ℓ, a, r] for a receiver, Σ f[ℓ] ≥ α, and Σ c f ≤ ``transfer_budget``.
    Then, with α fixed at that maximum, minimise Σ c f (a second LP, only when transfers are listed).

    Returns
    -------
    ``(α, transfer $/h)``.
    """
    from scipy.optimize import linprog

    by_id = {t.id: t for t in problem.templates}
    classes = [q for q in problem.classes if q.rate > 0]
    insts = [(by_id[tid], r, n) for (tid, r), n in sorted(nu.items()) if n > 0]
    regions = sorted({r for _t, r, _n in insts})
    xs = [(qi, ii) for qi, q in enumerate(classes) for ii, (t, _r, _n) in enumerate(insts)
          if t.group == q.group and t.throughput.get(q.id, 0.0) > 0]
    col = {k: j for j, k in enumerate(xs)}
    flows, links = _link_flows(problem, classes, regions)
    n_var = len(xs) + len(flows) + 1
    a_ub, b_ub = [], []

    def row() -> np.ndarray:
        return np.zeros(n_var)

    for qi, q in enumerate(classes):  # α λ_q − Σ_i x ≤ 0
        a = row()
        a[-1] = q.rate
        for ii in range(len(insts)):
            if (qi, ii) in col:
                a[col[(qi, ii)]] = -1.0
        a_ub.append(a)
        b_ub.append(0.0)
    for ii, (t, _r, n) in enumerate(insts):  # Σ_q x / T ≤ n
        a = row()
        for qi, q in enumerate(classes):
            if (qi, ii) in col:
                a[col[(qi, ii)]] = 1.0 / t.throughput[q.id]
        a_ub.append(a)
        b_ub.append(float(n))
    for li, (sender, receivers) in enumerate(links):
        for qi in ([sender] if sender >= 0 else []) + receivers:  # λ_q Σ f (out of / into r) − Σ_{i in r} x ≤ 0
            for r in regions:
                a = row()
                for j, (lj, src, dst, _c) in enumerate(flows):
                    if lj == li and (src if qi == sender else dst) == r:
                        a[len(xs) + j] = classes[qi].rate
                for ii, (_t, ri, _n) in enumerate(insts):
                    if ri == r and (qi, ii) in col:
                        a[col[(qi, ii)]] = -1.0
                a_ub.append(a)
                b_ub.append(0.0)
        a = row()  # α − Σ f ≤ 0
        a[-1] = 1.0
        for j, (lj, _s, _d, _c) in enumerate(flows):
            if lj == li:
                a[len(xs) + j] = -1.0
        a_ub.append(a)
        b_ub.append(0.0)
    price = row()
    for j, (_l, _s, _d, usd) in enumerate(flows):
        price[len(xs) + j] = usd
    if transfer_budget is not None and flows:  # Σ c f ≤ what the budget leaves
        a_ub.append(price.copy())
        b_ub.append(max(0.0, transfer_budget))
    c = row()
    c[-1] = -1.0
    bounds = [(0.0, None)] * (n_var - 1) + [(0.0, 1.0)]
    for g, share in problem.spot_cap.items():  # (S) for multi-class groups: (1 − s) α Σ λ − Σ non-spot x ≤ 0
        members = [qi for qi, q in enumerate(classes) if q.group == g]
        if len([q for q in problem.classes if q.group == g]) == 1 or not members:
            continue
        a = row()
        a[-1] = (1.0 - share) * sum(classes[qi].rate for qi in members)
        for (qi, ii), j in col.items():
            if qi in members and insts[ii][1] not in problem.spot_regions:
                a[j] = -1.0
        a_ub.append(a)
        b_ub.append(0.0)
    res = linprog(c, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=bounds, method="highs")
    alpha = max(0.0, min(float(res.x[-1]) if res.status == 0 else 0.0, 1.0, _spot_alpha(problem, nu)))
    if not problem.transfers or alpha <= 0:
        return alpha, 0.0
    low = [(0.0, None)] * (n_var - 1) + [(alpha * (1 - 1e-9), 1.0)]
    res = linprog(price, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=low, method="highs")
    return alpha, float(res.fun) if res.status == 0 else 0.0


def brute_force(problem: AllocationProblem, max_evaluations: int = 200_000) -> BruteResult:
    """Enumerate all integer counts within availability and return the best plan for the objective.

    Parameters
    ----------
    problem:
        A tiny problem (product of per-pair bounds below ``max_evaluations``).
    max_evaluations:
        Refuse larger enumerations.

    Returns
    -------
    ``BruteResult``: for ``cost`` the cheapest plan serving all demand; for ``served`` the largest α within the
    budget, then the cheapest plan reaching it.

    Raises
    ------
    PlanningError
        If the enumeration would exceed ``max_evaluations``.
    """
    offers = {(o.region, o.shape): o for o in problem.offers}
    regions = sorted({o.region for o in problem.offers})
    reach = {k: o.available + sum(c.max_count for c in problem.commitments if k in c.offers) for k, o in offers.items()}
    pairs: list[tuple[str, str]] = []
    bounds: list[int] = []
    price: list[float] = []
    for t in problem.templates:
        for r in regions:
            if all((r, s) in offers for s in t.usage):
                ub = min(reach[(r, s)] // u for s, u in t.usage.items())
                if ub > 0:
                    pairs.append((t.id, r))
                    bounds.append(ub)
                    price.append(sum(offers[(r, s)].price_per_hour * u for s, u in t.usage.items()))
    total = 1
    for b in bounds:
        total *= b + 1
    if total > max_evaluations:
        raise PlanningError("problem", f"brute force would enumerate {total} plans.", "Use a smaller instance.")
    usage = {t.id: t.usage for t in problem.templates}
    best: tuple[float, float, dict[tuple[str, str], int]] | None = None  # (−α, cost, counts)
    evaluated = 0
    for combo in itertools.product(*(range(b + 1) for b in bounds)):
        evaluated += 1
        used: dict[tuple[str, str], int] = {}
        for (tid, r), n in zip(pairs, combo, strict=True):
            for s, u in usage[tid].items():
                used[(r, s)] = used.get((r, s), 0) + n * u
        committed = _cheapest_commitments(problem, offers, used)
        if committed is None:
            continue
        nu = {p: n for p, n in zip(pairs, combo, strict=True) if n}
        cost = committed
        for (p, n), pr in zip(zip(pairs, combo, strict=True), price, strict=True):
            cost += pr * n + problem.K * pr * max(0, n - problem.current.get(p, 0))
        if problem.budget_per_hour is not None and cost > problem.budget_per_hour + 1e-9:
            continue
        if problem.objective == "cost" and best is not None and cost > best[1] + 1e-9:
            continue  # cannot beat the best plan: skip its feasibility LP
        transfer = 0.0
        if problem.links:
            left = None if problem.budget_per_hour is None else problem.budget_per_hour - cost
            alpha, transfer = _linked_alpha(problem, nu, left)
        else:
            alpha = _group_alpha(problem, nu)
        if problem.objective == "cost" and alpha < 1 - 1e-7:
            continue
        cost += transfer
        key = (-round(alpha, 9) if problem.objective == "served" else 0.0, cost, nu)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        return BruteResult(False, None, None, {}, evaluated)
    return BruteResult(True, best[1], -best[0] if problem.objective == "served" else 1.0, best[2], evaluated)


def _cheapest_commitments(problem: AllocationProblem, offers: Mapping[tuple[str, str], Offer],
                          used: Mapping[tuple[str, str], int]) -> float | None:
    """The cheapest commitments (enumerated) that make ``used`` fit the offers' availability; None if none do."""
    deficit = {k: n - offers[k].available for k, n in used.items() if n > offers[k].available}
    if not deficit:
        return 0.0
    best: float | None = None
    for combo in itertools.product(*(range(c.max_count + 1) for c in problem.commitments)):
        if all(sum(r for c, r in zip(problem.commitments, combo, strict=True) if k in c.offers) >= d
               for k, d in deficit.items()):
            cost = sum(c.cost * r for c, r in zip(problem.commitments, combo, strict=True))
            best = cost if best is None else min(best, cost)
    return best
