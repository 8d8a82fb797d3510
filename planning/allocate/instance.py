"""Lossless pruning and the indexed instance (pairs, bounds, usage triplets) both model builders share.

Pruning (each step keeps every optimal solution's cost):

* **no demand** — a template whose group has no positive-rate class it can serve is never useful;
* **unsold** — a pair (τ, r) exists only if every shape of τ is offered in r with at least U_c(τ) nodes;
  a template without any pair is dropped (Coral: ν_r(τ) only where every config of τ is sold);
* **dominated** — within a group, τ′ dominates τ if U(τ′) ≤ U(τ) componentwise and T_q(τ′) ≥ T_q(τ) for every
  class q, not both equal (exact duplicates: the first is kept). For single-class groups the stronger
  *combination* rule applies: τ is dominated when a multiset of templates with smaller usage fits in U(τ)
  and has total throughput ≥ T(τ) (see ``planning.allocate.dominance``). Replacing each instance of τ by one of τ′ keeps
  availability (fewer nodes of each shape), demand and load (at least the throughput), and can only lower cost
  (p_r(τ′) ≤ p_r(τ) since prices are ≥ 0) and the penalty K p_r(τ′) ≤ K p_r(τ) — provided τ has no running
  instances ν′ > 0 (otherwise moving away from τ would create a penalty), so those are never pruned. τ′ is
  sold wherever τ is because its shapes are a subset. Dominance is a strict order (ties broken by position),
  so every pruned template has an unpruned dominator.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planning.allocate.dominance import dominated_mask
from planning.allocate.problem import AllocationProblem, TemplateOption

__all__ = ["Instance", "Links", "build_instance", "dominated_mask"]



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
    link_class: list[np.ndarray] = field(default_factory=list)  # per link of the problem: its class indices
    commit_rows: list[np.ndarray] = field(default_factory=list)  # per commitment: the offer rows it extends
    commit_cost: np.ndarray = field(default_factory=lambda: np.zeros(0))
    commit_ub: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_pairs(self) -> int:
        return len(self.pair_template)

    def pair_key(self, p: int) -> tuple[str, str]:
        return self.templates[int(self.pair_template[p])].id, self.regions[int(self.pair_region[p])]

    @property
    def n_commit(self) -> int:
        return len(self.commit_rows)

    def spot_pairs(self) -> np.ndarray:
        """Per pair: whether its region is one of the problem's ``spot_regions`` (constraint (S))."""
        spot = [i for i, r in enumerate(self.regions) if r in self.problem.spot_regions]
        return np.isin(self.pair_region, spot)

    def spot_cap_groups(self) -> list[tuple[int, float]]:
        """(group index, share s) of every demanded group with a spot cap s < 1 (constraint (S))."""
        index = {g: i for i, g in enumerate(self.groups)}
        return [(index[g], s) for g, s in sorted(self.problem.spot_cap.items())
                if g in index and np.any((self.class_group == index[g]) & (self.class_rate > 0))]

    @functools.cached_property
    def link_layout(self) -> Links:
        """The region-split columns and constraint (R) rows of the problem's links (see :class:`Links`)."""
        return _links(self)

    def links(self) -> Links:
        """:attr:`link_layout` (computed once per instance)."""
        return self.link_layout

    def components(self) -> list[list[int]]:
        """Groups joined by links (a model's prefill and decode), each a list of indices; unlinked groups alone
        (``AllocationProblem.linked_parts``; the instance's groups are the problem's, in the same order)."""
        index = {g: i for i, g in enumerate(self.groups)}
        return [[index[g] for g in part] for part in self.problem.linked_parts()]

    def restrict(self, group: int | Sequence[int]) -> tuple[Instance, np.ndarray, np.ndarray]:
        """The sub-instance of one group, or of a set of groups (other groups' demand set to 0).

        Returns
        -------
        ``(sub, pairs, triplets)``: the sub-instance and the joint indices of its pairs and of its
        throughput triplets (x columns), in the sub-instance's order.
        """
        keep = [group] if isinstance(group, (int, np.integer)) else sorted(group)
        pairs = np.nonzero(np.isin(self.pair_group, keep))[0]
        remap = np.full(self.n_pairs, -1, dtype=np.int64)
        remap[pairs] = np.arange(len(pairs))
        use = np.nonzero(remap[self.use_pair] >= 0)[0]
        trip = np.nonzero(remap[self.thr_pair] >= 0)[0] if len(self.thr_pair) else np.zeros(0, dtype=np.int64)
        rate = np.where(np.isin(self.class_group, keep), self.class_rate, 0.0)
        sub = replace(
            self,
            class_rate=rate,
            pair_template=self.pair_template[pairs],
            pair_region=self.pair_region[pairs],
            pair_group=self.pair_group[pairs],
            pair_price=self.pair_price[pairs],
            pair_ub=self.pair_ub[pairs],
            pair_current=self.pair_current[pairs],
            use_row=self.use_row[use],
            use_pair=remap[self.use_pair[use]],
            use_val=self.use_val[use],
            thr_class=self.thr_class[trip],
            thr_pair=remap[self.thr_pair[trip]],
            thr_val=self.thr_val[trip],
            single_thr=self.single_thr[pairs],
            notes=[],
        )
        return sub, pairs, trip


@dataclass(frozen=True)
class Links:
    """Constraint (R) of linked classes as flows, laid out once for both model builders.

    Link ℓ's first class sends (a request's prefill), the others receive (its decode). For the demanded
    classes of ℓ, S_ℓ are the regions where the sender has a pair that serves it and D_ℓ the regions where
    *every* demanded receiver has one. Flow columns f_{ℓ,a,b} ≥ 0: the diagonal (r, r) for r ∈ S_ℓ ∩ D_ℓ (the
    split s_{ℓr} of pairing per region) plus each cross-region (a, b) listed in ``problem.transfers`` with
    a ∈ S_ℓ, b ∈ D_ℓ, at cost c_{ℓab} $/h. Rows: the sender's supply in r − λ_q Σ_b f_{ℓ,r,b} ≥ 0; each
    receiver's supply in r − λ_q Σ_a f_{ℓ,a,r} ≥ 0 (supply = Σ T ν over the single-class group's pairs in r,
    or Σ x over class q's triplets in r); Σ f_ℓ − α ≥ 0 per link (no columns: α ≤ 0, the link cannot be
    served). A link whose sender has no demand pairs its receivers per region (diagonal only). With no
    transfers this is exactly the per-region pairing, row for row.
    """

    split_link: np.ndarray  # per flow column: link index
    split_src: np.ndarray  # per flow column: region index of the prefill (sender)
    split_dst: np.ndarray  # per flow column: region index of the decode (receivers)
    split_cost: np.ndarray  # per flow column: $/h at the link's full rate (0 on the diagonal)
    row_class: np.ndarray  # per (R) row: class index
    row_region: np.ndarray  # per (R) row: region index
    row_splits: list[np.ndarray]  # per (R) row: its flow columns
    row_pairs: list[np.ndarray]  # per (R) row: pair indices (single-class) or triplet indices (multi-class)
    row_is_x: np.ndarray  # per (R) row: True when row_pairs are x triplets
    served_links: list[int]  # links with a demanded class (one split row each)

    @property
    def n_split(self) -> int:
        return len(self.split_link)

    @property
    def split_region(self) -> np.ndarray:
        """Per flow column: its source region (the region of a paired split)."""
        return self.split_src


def _links(inst: Instance) -> Links:
    sl: list[int] = []
    ss: list[int] = []
    sd: list[int] = []
    sc: list[float] = []
    rc: list[int] = []
    rg: list[int] = []
    rs: list[np.ndarray] = []
    rp: list[np.ndarray] = []
    rx: list[bool] = []
    served: list[int] = []
    region_index = {r: i for i, r in enumerate(inst.regions)}
    prices: dict[str, dict[tuple[int, int], float]] = {}  # sender class -> (src, dst) -> $/h
    for tp in inst.problem.transfers:
        if tp.src in region_index and tp.dst in region_index:
            prices.setdefault(tp.sender, {})[(region_index[tp.src], region_index[tp.dst])] = float(tp.usd_per_hour)
    for li, qs in enumerate(inst.link_class):
        demanded = [int(q) for q in qs if inst.class_rate[q] > 0]
        if not demanded:
            continue
        served.append(li)
        sender = int(qs[0]) if len(qs) > 1 and inst.class_rate[qs[0]] > 0 else -1
        supply: dict[int, dict[int, np.ndarray]] = {}
        for q in demanded:
            g = int(inst.class_group[q])
            if inst.single_class[g]:
                idx = np.nonzero((inst.pair_group == g) & (inst.single_thr > 0))[0]
                regions = inst.pair_region[idx]
            else:
                idx = np.nonzero(inst.thr_class == q)[0]
                regions = inst.pair_region[inst.thr_pair[idx]]
            supply[q] = {int(r): idx[regions == r] for r in np.unique(regions)}
        receivers = [q for q in demanded if q != sender]
        src_ok = set(supply[sender]) if sender >= 0 else None
        dst_sets = [set(supply[q]) for q in receivers]
        dst_ok = set.intersection(*dst_sets) if dst_sets else None
        if src_ok is None:
            common = sorted(dst_ok or set())
        elif dst_ok is None:
            common = sorted(src_ok)
        else:
            common = sorted(src_ok & dst_ok)
        cols = [(r, r, 0.0) for r in common]
        if src_ok is not None and dst_ok is not None:
            mine = prices.get(inst.class_ids[sender], {})
            cols += [(a, b, c) for (a, b), c in sorted(mine.items()) if a in src_ok and b in dst_ok]
        j0 = len(sl)
        for a, b, c in cols:
            sl.append(li)
            ss.append(a)
            sd.append(b)
            sc.append(c)
        col_src = np.array([a for a, _b, _c in cols], dtype=np.int64)
        col_dst = np.array([b for _a, b, _c in cols], dtype=np.int64)
        for r in sorted(set(col_src.tolist()) | set(col_dst.tolist())):
            for q in demanded:
                js = np.nonzero(col_src == r)[0] if q == sender else np.nonzero(col_dst == r)[0]
                if len(js) == 0:
                    continue
                rc.append(q)
                rg.append(r)
                rs.append(j0 + js)
                rp.append(supply[q].get(r, np.zeros(0, dtype=np.int64)))
                rx.append(not bool(inst.single_class[int(inst.class_group[q])]))
    return Links(np.array(sl, dtype=np.int64), np.array(ss, dtype=np.int64), np.array(sd, dtype=np.int64),
                 np.array(sc, dtype=float), np.array(rc, dtype=np.int64), np.array(rg, dtype=np.int64), rs, rp,
                 np.array(rx, dtype=bool), served)


@dataclass(frozen=True)
class _Index:
    """The problem's classes, groups, regions, offers and shapes by position: what the pruning and the pair
    triplets of :func:`build_instance` look up."""

    groups: list[str]
    gidx: dict[str, int]
    class_ids: list[str]
    cidx: dict[str, int]
    class_group: np.ndarray
    class_rate: np.ndarray
    single_class: np.ndarray
    group_class: list[int]
    regions: list[str]
    offer_keys: list[tuple[str, str]]
    offer_avail: np.ndarray
    offer_price: np.ndarray
    reach: np.ndarray  # availability plus the commitments' max_count nodes on the offers they cover
    commit_rows: list[np.ndarray]
    sidx: dict[str, int]
    by_region: list[dict[str, int]]  # per region: shape -> offer row


def _index(problem: AllocationProblem) -> _Index:
    """Index the problem's classes (their group, rate, whether a group has one class) and offers (per region)."""
    classes = list(problem.classes)
    groups = list(problem.groups())
    gidx = {g: i for i, g in enumerate(groups)}
    class_ids = [q.id for q in classes]
    class_group = np.array([gidx[q.group] for q in classes], dtype=np.int64)
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
    # commitments add up to their max_count nodes to the offers they cover: pairs and bounds use the most
    commit_rows = [np.array(sorted(oidx[k] for k in c.offers), dtype=np.int64) for c in problem.commitments]
    reach = offer_avail.copy()
    for c, rows in zip(problem.commitments, commit_rows, strict=True):
        reach[rows] += int(c.max_count)
    by_region: list[dict[str, int]] = [{} for _ in regions]
    for k, i in oidx.items():
        by_region[ridx[k[0]]][k[1]] = i
    return _Index(groups, gidx, class_ids, {q: i for i, q in enumerate(class_ids)}, class_group,
                  np.array([q.rate for q in classes], dtype=float), single_class, group_class, regions, offer_keys,
                  offer_avail, np.array([o.price_per_hour for o in problem.offers], dtype=float), reach, commit_rows,
                  {s: i for i, s in enumerate(sorted({o.shape for o in problem.offers}))}, by_region)


def _sold_templates(problem: AllocationProblem, ix: _Index
                    ) -> tuple[list[TemplateOption], list[list[tuple[int, int]]], int, int]:
    """The templates with demand that some region sells, each with its (region, instance bound) pairs; and how
    many were dropped for no demand and for being sold nowhere."""
    rate_of = {q.id: q.rate for q in problem.classes}
    no_demand = unsold = 0
    kept: list[TemplateOption] = []
    kept_pairs: list[list[tuple[int, int]]] = []  # per kept template: (region, ub)
    for t in problem.templates:
        g = ix.gidx.get(t.group)
        if g is None or not any(v > 0 and rate_of[q] > 0 for q, v in t.throughput.items()):
            no_demand += 1
            continue
        pairs = []
        for r, offered in enumerate(ix.by_region):
            ub = None
            for shape, u in t.usage.items():
                row = offered.get(shape)
                if row is None:
                    ub = 0
                    break
                cap = int(ix.reach[row]) // u
                ub = cap if ub is None else min(ub, cap)
            if ub:
                pairs.append((r, ub))
        if not pairs:
            unsold += 1
            continue
        kept.append(t)
        kept_pairs.append(pairs)
    return kept, kept_pairs, no_demand, unsold


def _drop_dominated(problem: AllocationProblem, ix: _Index, kept: list[TemplateOption],
                    kept_pairs: list[list[tuple[int, int]]]
                    ) -> tuple[list[TemplateOption], list[list[tuple[int, int]]], int]:
    """Per group, drop the templates another one dominates (:func:`dominated_mask`; running and start templates
    are kept); returns the rest and how many were dropped."""
    if not (problem.prune and kept):
        return kept, kept_pairs, 0
    current_templates = {t for (t, _r), n in problem.current.items() if n > 0} | {t for (t, _r) in problem.start}
    keep_mask = np.ones(len(kept), dtype=bool)
    members_of: dict[int, list[int]] = {}
    for i, t in enumerate(kept):
        members_of.setdefault(ix.gidx[t.group], []).append(i)
    for g, members in members_of.items():
        gcls = [qi for qi in range(len(ix.class_ids)) if ix.class_group[qi] == g]
        thr = np.array([[kept[i].throughput.get(ix.class_ids[qi], 0.0) for qi in gcls] for i in members], dtype=float)
        usages = [{ix.sidx[s]: n for s, n in kept[i].usage.items()} for i in members]
        prot = [kept[i].id in current_templates for i in members]
        mask = dominated_mask(usages, thr, prot)
        for j, i in enumerate(members):
            if mask[j]:
                keep_mask[i] = False
    dominated = int((~keep_mask).sum())
    return ([t for t, k in zip(kept, keep_mask, strict=True) if k],
            [p for p, k in zip(kept_pairs, keep_mask, strict=True) if k], dominated)


def _pair_arrays(problem: AllocationProblem, ix: _Index, kept: Sequence[TemplateOption],
                 kept_pairs: Sequence[Sequence[tuple[int, int]]]) -> dict[str, np.ndarray]:
    """Per (template, region) pair its template, region, group, price, bound and running count; the usage
    triplets (offer row, pair, nodes) and throughput triplets (class, pair, rate) of multi-class groups; and the
    throughput of single-class groups' pairs. Keyed as :class:`Instance`'s fields."""
    cols: dict[str, list[Any]] = {k: [] for k in ("pt", "pr", "pg", "pp", "pub", "pcur", "ur", "up", "uv", "tc", "tp",
                                                   "tv", "single_thr")}
    for ti, (t, pairs) in enumerate(zip(kept, kept_pairs, strict=True)):
        g = ix.gidx[t.group]
        for r, ub in pairs:
            p = len(cols["pt"])
            cols["pt"].append(ti)
            cols["pr"].append(r)
            cols["pg"].append(g)
            price = 0.0
            for shape, u in t.usage.items():
                row = ix.by_region[r][shape]
                price += float(ix.offer_price[row]) * u
                cols["ur"].append(row)
                cols["up"].append(p)
                cols["uv"].append(u)
            cols["pp"].append(price)
            cols["pub"].append(ub)
            cols["pcur"].append(problem.current.get((t.id, ix.regions[r]), 0))
            if ix.single_class[g]:
                cols["single_thr"].append(t.throughput.get(ix.class_ids[ix.group_class[g]], 0.0))
            else:
                cols["single_thr"].append(0.0)
                for q, v in t.throughput.items():
                    if v > 0 and ix.class_rate[ix.cidx[q]] > 0:
                        cols["tc"].append(ix.cidx[q])
                        cols["tp"].append(p)
                        cols["tv"].append(v)
    ints = ("pt", "pr", "pg", "pub", "pcur", "ur", "up", "tc", "tp")
    names = {"pt": "pair_template", "pr": "pair_region", "pg": "pair_group", "pp": "pair_price", "pub": "pair_ub",
             "pcur": "pair_current", "ur": "use_row", "up": "use_pair", "uv": "use_val", "tc": "thr_class",
             "tp": "thr_pair", "tv": "thr_val", "single_thr": "single_thr"}
    return {names[k]: np.array(v, dtype=np.int64 if k in ints else float) for k, v in cols.items()}


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
    ix = _index(problem)
    kept, kept_pairs, no_demand, unsold = _sold_templates(problem, ix)
    kept, kept_pairs, dominated = _drop_dominated(problem, ix, kept, kept_pairs)
    pairs = _pair_arrays(problem, ix, kept, kept_pairs)
    inst = Instance(
        problem=problem,
        templates=kept,
        groups=ix.groups,
        class_ids=ix.class_ids,
        class_group=ix.class_group,
        class_rate=ix.class_rate,
        single_class=ix.single_class,
        group_class=ix.group_class,
        regions=ix.regions,
        offer_keys=ix.offer_keys,
        offer_avail=ix.offer_avail,
        offer_price=ix.offer_price,
        pair_template=pairs["pair_template"],
        pair_region=pairs["pair_region"],
        pair_group=pairs["pair_group"],
        pair_price=pairs["pair_price"],
        pair_ub=pairs["pair_ub"],
        pair_current=pairs["pair_current"],
        use_row=pairs["use_row"],
        use_pair=pairs["use_pair"],
        use_val=pairs["use_val"],
        thr_class=pairs["thr_class"],
        thr_pair=pairs["thr_pair"],
        thr_val=pairs["thr_val"],
        single_thr=pairs["single_thr"],
        pruned_unsold=unsold,
        pruned_dominated=dominated,
        pruned_no_demand=no_demand,
        link_class=[np.array([ix.cidx[q] for q in link], dtype=np.int64) for link in problem.links],
        commit_rows=ix.commit_rows,
        commit_cost=np.array([c.cost for c in problem.commitments], dtype=float),
        commit_ub=np.array([c.max_count for c in problem.commitments], dtype=np.int64),
    )
    inst.seconds = time.perf_counter() - t0
    return inst
