"""Lossless pruning and the indexed instance (pairs, bounds, usage triplets) both model builders share.

Pruning (each step keeps every optimal solution's cost):

* **no demand** — a template whose group has no positive-rate class it can serve is never useful;
* **unsold** — a pair (τ, r) exists only if every shape of τ is offered in r with at least U_c(τ) nodes;
  a template without any pair is dropped (Coral: ν_r(τ) only where every config of τ is sold);
* **dominated** — within a group, τ′ dominates τ if U(τ′) ≤ U(τ) componentwise and T_q(τ′) ≥ T_q(τ) for every
  class q, not both equal (exact duplicates: the first is kept). Replacing each instance of τ by one of τ′ keeps
  availability (fewer nodes of each shape), demand and load (at least the throughput), and can only lower cost
  (p_r(τ′) ≤ p_r(τ) since prices are ≥ 0) and the penalty K p_r(τ′) ≤ K p_r(τ) — provided τ has no running
  instances ν′ > 0 (otherwise moving away from τ would create a penalty), so those are never pruned. τ′ is
  sold wherever τ is because its shapes are a subset. Dominance is a strict order (ties broken by position),
  so every pruned template has an unpruned dominator.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from planning.allocate.problem import AllocationProblem, TemplateOption

# A template whose proper sub-usages number more than this is not checked for (multi-class) dominance.
_MAX_SUBUSAGES = 4096


@dataclass
class Instance:
    """Indexed, pruned instance. Arrays are indexed by pair p (a (template, region) with ν_p integer)."""

    problem: AllocationProblem
    templates: list[TemplateOption]
    groups: list[str]
    class_ids: list[str]
    class_group: np.ndarray  # class -> group index
    class_rate: np.ndarray
    single_class: np.ndarray  # group -> True when the group has exactly one class (Coral's direct form)
    group_class: list[int]  # group -> its class index when single-class, else -1
    regions: list[str]
    offer_keys: list[tuple[str, str]]  # row index -> (region, shape)
    offer_avail: np.ndarray
    offer_price: np.ndarray
    pair_template: np.ndarray
    pair_region: np.ndarray
    pair_group: np.ndarray
    pair_price: np.ndarray  # p_r(τ)
    pair_ub: np.ndarray  # min_c floor(A_r(c) / U_c(τ))
    pair_current: np.ndarray  # ν′
    use_row: np.ndarray  # usage triplets: offer row, pair, U
    use_pair: np.ndarray
    use_val: np.ndarray
    thr_class: np.ndarray  # throughput triplets for classes of multi-class groups: class, pair, T > 0
    thr_pair: np.ndarray
    thr_val: np.ndarray
    single_thr: np.ndarray  # per pair: T of its group's single class (0 for multi-class groups)
    pruned_unsold: int = 0
    pruned_dominated: int = 0
    pruned_no_demand: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def n_pairs(self) -> int:
        return len(self.pair_template)

    def pair_key(self, p: int) -> tuple[str, str]:
        return self.templates[int(self.pair_template[p])].id, self.regions[int(self.pair_region[p])]


def dominated_mask(
    usages: Sequence[dict[int, int]], thr: np.ndarray, protected: Sequence[bool]
) -> np.ndarray:
    """Which templates of one group are dominated by another template of the same group.

    Parameters
    ----------
    usages:
        Per template, shape index -> node count.
    thr:
        ``(n_templates, n_classes)`` throughputs.
    protected:
        Templates that must not be pruned (running instances); they may still dominate others.

    Returns
    -------
    Boolean mask, True = dominated (safe to drop).
    """
    n = len(usages)
    out = np.zeros(n, dtype=bool)
    if n <= 1:
        return out
    keys = [tuple(sorted(u.items())) for u in usages]
    by_key: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    # Same usage: dominated by a template with ≥ throughput everywhere and (> somewhere or earlier position).
    for members in by_key.values():
        if len(members) == 1:
            continue
        block = thr[members]
        for a, i in enumerate(members):
            ge = np.all(block >= block[a], axis=1)
            gt = np.any(block > block[a], axis=1)
            earlier = np.arange(len(members)) < a
            ge[a] = False
            if np.any(ge & (gt | earlier)):
                out[i] = True
    if thr.shape[1] == 1:
        _dominated_by_subusage_scalar(keys, by_key, thr[:, 0], out)
    else:
        _dominated_by_subusage_vector(keys, by_key, thr, out)
    out &= ~np.asarray(protected, dtype=bool)
    return out


Key = tuple[tuple[int, int], ...]


def _dominated_by_subusage_scalar(keys: list[Key], by_key: dict[Key, list[int]], thr: np.ndarray, out: np.ndarray) -> None:
    """Single class: F(u) = max throughput over templates with usage ⊆ u, by memoised removal of one node."""
    best = {k: float(thr[m].max()) for k, m in by_key.items()}
    memo: dict[tuple[tuple[int, int], ...], float] = {}

    def children(k: tuple[tuple[int, int], ...]) -> list[tuple[tuple[int, int], ...]]:
        res = []
        for pos, (s, c) in enumerate(k):
            child = k[:pos] + k[pos + 1:] if c == 1 else (*k[:pos], (s, c - 1), *k[pos + 1:])
            if child:
                res.append(child)
        return res

    def closure(root: tuple[tuple[int, int], ...]) -> float:
        # iterative post-order so deep usages (many nodes of one shape) do not hit the recursion limit
        stack = [root]
        while stack:
            k = stack[-1]
            if k in memo:
                stack.pop()
                continue
            kids = children(k)
            pending = [c for c in kids if c not in memo]
            if pending:
                stack.extend(pending)
                continue
            val = best.get(k, 0.0)
            for c in kids:
                val = max(val, memo[c])
            memo[k] = val
            stack.pop()
        return memo[root]

    for k, members in by_key.items():
        below = max((closure(c) for c in children(k)), default=0.0)
        for i in members:
            if below >= thr[i]:
                out[i] = True


def _dominated_by_subusage_vector(keys: list[Key], by_key: dict[Key, list[int]], thr: np.ndarray, out: np.ndarray) -> None:
    """Several classes: check every proper sub-usage of each usage (bounded enumeration)."""
    for k, members in by_key.items():
        ranges = [range(c + 1) for _, c in k]
        total = 1
        for r in ranges:
            total *= len(r)
        if total - 1 > _MAX_SUBUSAGES:
            continue
        cand: list[int] = []
        for counts in product(*ranges):
            sub = tuple((s, c) for (s, _), c in zip(k, counts, strict=True) if c > 0)
            if sub == k or not sub:
                continue
            cand.extend(by_key.get(sub, ()))
        if not cand:
            continue
        block = thr[cand]
        for i in members:
            if np.any(np.all(block >= thr[i], axis=1)):
                out[i] = True


def build_instance(problem: AllocationProblem) -> Instance:
    """Prune the problem losslessly and index it for the model builders.

    Parameters
    ----------
    problem:
        The allocation problem.

    Returns
    -------
    The ``Instance`` with pairs, bounds, usage and throughput triplets, and pruning counts.
    """
    t0 = time.perf_counter()
    classes = list(problem.classes)
    groups = list(problem.groups())
    gidx = {g: i for i, g in enumerate(groups)}
    class_ids = [q.id for q in classes]
    cidx = {q: i for i, q in enumerate(class_ids)}
    class_group = np.array([gidx[q.group] for q in classes], dtype=np.int64)
    class_rate = np.array([q.rate for q in classes], dtype=float)
    n_classes_of = np.bincount(class_group, minlength=len(groups)) if classes else np.zeros(0, dtype=np.int64)
    single_class = n_classes_of == 1
    group_class = [-1] * len(groups)
    for qi, g in enumerate(class_group):
        if single_class[g]:
            group_class[int(g)] = qi

    regions = sorted({o.region for o in problem.offers})
    ridx = {r: i for i, r in enumerate(regions)}
    offer_keys = [(o.region, o.shape) for o in problem.offers]
    oidx = {k: i for i, k in enumerate(offer_keys)}
    offer_avail = np.array([o.available for o in problem.offers], dtype=np.int64)
    offer_price = np.array([o.price_per_hour for o in problem.offers], dtype=float)
    shapes = sorted({o.shape for o in problem.offers})
    sidx = {s: i for i, s in enumerate(shapes)}
    # per region: shape -> (offer row, availability, price)
    by_region: list[dict[str, int]] = [{} for _ in regions]
    for k, i in oidx.items():
        by_region[ridx[k[0]]][k[1]] = i

    current = problem.current
    current_templates = {t for (t, _r), n in current.items() if n > 0}
    no_demand = unsold = 0
    kept: list[TemplateOption] = []
    kept_pairs: list[list[tuple[int, int]]] = []  # per kept template: (region, ub)
    for t in problem.templates:
        g = gidx.get(t.group)
        if g is None or not any(class_rate[cidx[q]] > 0 and v > 0 for q, v in t.throughput.items()):
            no_demand += 1
            continue
        pairs = []
        for r, offered in enumerate(by_region):
            ub = None
            for shape, u in t.usage.items():
                row = offered.get(shape)
                if row is None:
                    ub = 0
                    break
                cap = int(offer_avail[row]) // u
                ub = cap if ub is None else min(ub, cap)
            if ub:
                pairs.append((r, ub))
        if not pairs:
            unsold += 1
            continue
        kept.append(t)
        kept_pairs.append(pairs)

    dominated = 0
    if problem.prune and kept:
        keep_mask = np.ones(len(kept), dtype=bool)
        members_of: dict[int, list[int]] = {}
        for i, t in enumerate(kept):
            members_of.setdefault(gidx[t.group], []).append(i)
        for g, members in members_of.items():
            gcls = [qi for qi in range(len(class_ids)) if class_group[qi] == g]
            thr = np.array([[kept[i].throughput.get(class_ids[qi], 0.0) for qi in gcls] for i in members], dtype=float)
            usages = [{sidx[s]: n for s, n in kept[i].usage.items()} for i in members]
            prot = [kept[i].id in current_templates for i in members]
            mask = dominated_mask(usages, thr, prot)
            for j, i in enumerate(members):
                if mask[j]:
                    keep_mask[i] = False
        dominated = int((~keep_mask).sum())
        kept = [t for t, k in zip(kept, keep_mask, strict=True) if k]
        kept_pairs = [p for p, k in zip(kept_pairs, keep_mask, strict=True) if k]

    pt: list[int] = []
    pr: list[int] = []
    pg: list[int] = []
    pp: list[float] = []
    pub: list[int] = []
    pcur: list[int] = []
    ur: list[int] = []
    up: list[int] = []
    uv: list[float] = []
    tc: list[int] = []
    tp: list[int] = []
    tv: list[float] = []
    single_thr: list[float] = []
    for ti, (t, pairs) in enumerate(zip(kept, kept_pairs, strict=True)):
        g = gidx[t.group]
        for r, ub in pairs:
            p = len(pt)
            pt.append(ti)
            pr.append(r)
            pg.append(g)
            price = 0.0
            for shape, u in t.usage.items():
                row = by_region[r][shape]
                price += float(offer_price[row]) * u
                ur.append(row)
                up.append(p)
                uv.append(u)
            pp.append(price)
            pub.append(ub)
            pcur.append(current.get((t.id, regions[r]), 0))
            if single_class[g]:
                single_thr.append(t.throughput.get(class_ids[group_class[g]], 0.0))
            else:
                single_thr.append(0.0)
                for q, v in t.throughput.items():
                    if v > 0 and class_rate[cidx[q]] > 0:
                        tc.append(cidx[q])
                        tp.append(p)
                        tv.append(v)
    inst = Instance(
        problem=problem,
        templates=kept,
        groups=groups,
        class_ids=class_ids,
        class_group=class_group,
        class_rate=class_rate,
        single_class=single_class,
        group_class=group_class,
        regions=regions,
        offer_keys=offer_keys,
        offer_avail=offer_avail,
        offer_price=offer_price,
        pair_template=np.array(pt, dtype=np.int64),
        pair_region=np.array(pr, dtype=np.int64),
        pair_group=np.array(pg, dtype=np.int64),
        pair_price=np.array(pp, dtype=float),
        pair_ub=np.array(pub, dtype=np.int64),
        pair_current=np.array(pcur, dtype=np.int64),
        use_row=np.array(ur, dtype=np.int64),
        use_pair=np.array(up, dtype=np.int64),
        use_val=np.array(uv, dtype=float),
        thr_class=np.array(tc, dtype=np.int64),
        thr_pair=np.array(tp, dtype=np.int64),
        thr_val=np.array(tv, dtype=float),
        single_thr=np.array(single_thr, dtype=float),
        pruned_unsold=unsold,
        pruned_dominated=dominated,
        pruned_no_demand=no_demand,
    )
    inst.seconds = time.perf_counter() - t0
    return inst
