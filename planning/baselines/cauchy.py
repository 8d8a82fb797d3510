"""Cauchy's baseline as Coral ran it: per model, the most cost-efficient GPU combos (one prefill replica feeding n
decode replicas, each phase on one GPU configuration), deployed by an ILP to meet demand within availability.

Sources
-------
- Cauchy: "Cauchy: A Cost-Efficient LLM Serving System through Adaptive Heterogeneous Deployment", ACM SoCC 2025
  (Coral's [zhang2025cauchy]); abstract read at https://williamericcheung.github.io/publication/2009-10-01-paper-title-number-1
  (the full text was not reachable from here). What we take from it: prefill and decode are deployed on
  heterogeneous GPUs as a **GPU Combo** (a prefill instance and a decode instance, each on its own GPU
  configuration); the **cost-efficiency model** is Token/USD of a combo; the **allocation** "works out the top
  performers of cost efficiency as GPU Combo candidates and deploys a set of combos to satisfy" the goodput.
- Coral (arXiv 2605.04357), Sec. 6.1: "Cauchy ... retains their cost-efficiency model and resource-allocation
  algorithm, but extends their GPU-combo definition so that a single prefill replica can feed multiple decode
  replicas"; Sec. 2/7: "each phase remains internally homogeneous" (a replica runs on a single homogeneous
  configuration); Sec. 6.4: "Cauchy encodes per-model cost efficiency directly in its ILP objective", and with
  scarce availability every model contends for the most cost-efficient GPUs.

Formulation (the numbers of the golden test, ``tests/baselines/test_cauchy.py``, are computed from it by hand)
-----------------------------------------------------------------------------------------------------------
Sets: models m planned in both phases (the problem's links: a prefill group P_m and a decode group D_m);
homogeneous templates of each phase (``TemplateOption.single_shape``: every node of the replica has one shape);
regions r; n = 1 … n̄ decode replicas per prefill replica.
Parameters: share_g(τ) = the fraction of group g's demand one instance of τ serves when it carries the group's
class mix, 1 / Σ_q (λ_q / T_q(τ)) · Λ_g (as Coral's Homo); price p_r(τ); node usage U(τ); availability A.
A **combo** c = (τ_p, τ_d, n) of model m: one instance of prefill template τ_p and n of decode template τ_d in one
region (the KV cache stays inside the combo). It serves the fraction f_c = min(share_P(τ_p), n·share_D(τ_d)) of
m's requests, uses U(τ_p) + n·U(τ_d) nodes and costs p_r(c) = p_r(τ_p) + n·p_r(τ_d).
n̄ = min(⌈share_P(τ_p) / share_D(τ_d)⌉, ``MAX_DECODE``): beyond it more decode replicas add no goodput.
Cost efficiency (Token/USD): e_r(c) = f_c·(Λ_P + Λ_D)·3600 / p_r(c), the prompt and output tokens the combo
serves per dollar (Λ in tokens/s).
Candidates: per model the ``CANDIDATES`` combos with the highest e_r(c) in their best region.
ILP (``planning.allocate`` on the combos as templates of one group per model, demand 1 = all of m's requests):
    min Σ_{c,r} p_r(c)·x_{c,r}  s.t.  Σ_{c∈m, r} f_c·x_{c,r} ≥ 1 for every m,  Σ U(c)·x_{c,r} ≤ A_r,  x ∈ ℤ≥0.
Its objective is each model's served goodput divided by the candidates' cost efficiency (p = f·tokens/e), which
is how Coral describes Cauchy's ILP. When demand cannot be met the largest uniform served fraction is reported
(``baselines.base.from_allocation``). ``decode_per_prefill=1`` gives Cauchy's own 1:1 combos.

Every Cauchy plan is a plan of the allocation model (a combo is a prefill and n decode instances in one region,
which meets the region pairing), so a plan certified optimal over all templates never costs more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planning.allocate.problem import AllocationProblem, Offer, TemplateOption, WorkloadClass
from planning.baselines.base import BaselineResult, from_allocation
from planning.context import CancelToken, check_cancel

CANDIDATES = 8
"""Combos kept per model (Cauchy's "top performers of cost efficiency"; the paper's number is not public)."""
MAX_DECODE = 16
"""At most this many decode replicas per prefill replica in one combo."""


@dataclass(frozen=True)
class Combo:
    """One GPU combo of a model: a prefill template feeding ``n`` decode replicas of one decode template."""

    model: str
    prefill: TemplateOption
    decode: TemplateOption
    n: int
    fraction: float  # f_c: share of the model's requests it serves
    usage: Mapping[str, int]

    @property
    def id(self) -> str:
        return f"cauchy:{self.model}:{self.prefill.id}+{self.n}x{self.decode.id}"

    def price(self, prices: Mapping[str, float]) -> float:
        """p_r(c) at one region's node prices (inf when a shape is not sold there)."""
        return sum(prices.get(s, math.inf) * k for s, k in self.usage.items())


def _share(t: TemplateOption, rates: Mapping[str, float]) -> float:
    """The fraction of a group's demand (class mix ``rates``) one instance of ``t`` serves (0: it misses a class)."""
    need = [(lam, t.throughput.get(q, 0.0)) for q, lam in rates.items() if lam > 0]
    if not need or any(thr <= 0 for _lam, thr in need):
        return 0.0
    return 1.0 / sum(lam / thr for lam, thr in need)  # instances needed for all demand, inverted


def model_pairs(problem: AllocationProblem) -> list[tuple[str, str, str]]:
    """(model, prefill group, decode group) of every model the problem links (planned in both phases)."""
    group_of = {q.id: q.group for q in problem.classes}
    seen: dict[tuple[str, str], None] = {}
    for link in problem.links:
        if len(link) >= 2:
            seen[(group_of[link[0]], group_of[link[1]])] = None
    return [(p.rsplit("/", 1)[0], p, d) for p, d in seen]


def combos(problem: AllocationProblem, decode_per_prefill: int = MAX_DECODE) -> dict[str, list[Combo]]:
    """Every combo of every linked model (homogeneous templates of each phase; n = 1 … n̄)."""
    rates: dict[str, dict[str, float]] = {}
    for q in problem.classes:
        rates.setdefault(q.group, {})[q.id] = q.rate
    return {model: _combos_of(model, _phase(problem, pg, rates), _phase(problem, dg, rates), decode_per_prefill)
            for model, pg, dg in model_pairs(problem)}


def candidates(problem: AllocationProblem, keep: int = CANDIDATES,
               decode_per_prefill: int = MAX_DECODE) -> dict[str, list[tuple[Combo, float, str]]]:
    """Per model the ``keep`` combos of highest Token/USD in their best region: (combo, tokens per USD, region).

    Ties in Token/USD go to the smaller combo id, ties in a combo's price to the region name first in order. When
    every homogeneous template of the pair's phases uses one shape (the engine's single-shape templates), the
    combos are priced as arrays (:func:`_ranked_arrays`), every float computed in the same order as
    :func:`_ranked_combos` does it one combo at a time, so both rank the same combos with the same bits
    (``tests/baselines/test_cauchy.py``); only the ``keep`` best become :class:`Combo` objects (catalog-wide has
    ~170,000 combos: 25 s one by one under load, well under a second as arrays).
    """
    tokens: dict[str, float] = {}
    for q in problem.classes:
        tokens[q.group] = tokens.get(q.group, 0.0) + q.rate
    prices: dict[str, dict[str, float]] = {}
    for o in problem.offers:
        if o.available > 0:
            prices.setdefault(o.region, {})[o.shape] = o.price_per_hour
    rates: dict[str, dict[str, float]] = {}
    for q in problem.classes:
        rates.setdefault(q.group, {})[q.id] = q.rate
    out: dict[str, list[tuple[Combo, float, str]]] = {}
    for model, pg, dg in model_pairs(problem):
        per_second = tokens.get(pg, 0.0) + tokens.get(dg, 0.0)
        pre = _phase(problem, pg, rates)
        dec = _phase(problem, dg, rates)
        if all(len(t.usage) == 1 and min(t.usage.values()) > 0 for t, _s in (*pre, *dec)):
            ranked = _ranked_arrays(model, pre, dec, _Market(prices, per_second, decode_per_prefill), keep)
        else:
            ranked = _ranked_combos(_combos_of(model, pre, dec, decode_per_prefill), prices, per_second)
        out[model] = ranked[:keep]
    return out


def _phase(problem: AllocationProblem, group: str,
           rates: Mapping[str, Mapping[str, float]]) -> list[tuple[TemplateOption, float]]:
    """A phase's homogeneous templates that serve some of its demand, with their shares."""
    out = []
    for t in problem.templates:
        if t.group == group and t.single_shape:
            share = _share(t, rates.get(group, {}))
            if share > 0:
                out.append((t, share))
    return out


def _combos_of(model: str, pre: Sequence[tuple[TemplateOption, float]], dec: Sequence[tuple[TemplateOption, float]],
               decode_per_prefill: int) -> list[Combo]:
    """Every combo of one model from its phases' templates and shares (n = 1 … n̄)."""
    found: list[Combo] = []
    for tp, sp in pre:
        for td, sd in dec:
            top = min(max(1, math.ceil(sp / sd - 1e-12)), decode_per_prefill)
            for n in range(1, top + 1):
                usage = dict(tp.usage)
                for s, k in td.usage.items():
                    usage[s] = usage.get(s, 0) + n * k
                found.append(Combo(model, tp, td, n, min(sp, n * sd), usage))
    return found


def _ranked_combos(found: Sequence[Combo], prices: Mapping[str, Mapping[str, float]],
                   per_second: float) -> list[tuple[Combo, float, str]]:
    """Combos with a finite price somewhere, by Token/USD in their cheapest region (best first), one by one."""
    ranked = []
    for c in found:
        best = min(((c.price(p), r) for r, p in prices.items()), default=(math.inf, ""))
        if math.isfinite(best[0]) and best[0] > 0:
            ranked.append((c, c.fraction * per_second * 3600.0 / best[0], best[1]))
    ranked.sort(key=lambda x: (-x[1], x[0].id))
    return ranked


@dataclass(frozen=True)
class _Market:
    """What ranks one model's combos: node prices per region and shape, the model's tokens/s, n̄'s cap."""

    prices: Mapping[str, Mapping[str, float]]
    per_second: float
    decode_per_prefill: int


def _ranked_arrays(model: str, pre: Sequence[tuple[TemplateOption, float]], dec: Sequence[tuple[TemplateOption, float]],
                   market: _Market, keep: int) -> list[tuple[Combo, float, str]]:
    """:func:`_ranked_combos` over :func:`_combos_of` for one-shape templates, as arrays; the ``keep`` best (and
    every combo tied with the last of them, so the id decides as it does there) become combos, best first."""
    regions = sorted(market.prices)
    if not pre or not dec or not regions:
        return []  # argmin takes the first of equal prices: the smallest region name, as min()
    shapes = sorted({next(iter(t.usage)) for t, _s in (*pre, *dec)})
    col = {s: j for j, s in enumerate(shapes)}
    price = np.array([[market.prices[r].get(s, math.inf) for r in regions] for s in shapes], dtype=float).reshape(
        len(shapes), len(regions))
    p_shape, p_count, p_share = _columns(pre, col)
    d_shape, d_count, d_share = _columns(dec, col)
    i = np.repeat(np.arange(len(pre)), len(dec))  # every (prefill, decode) pair, prefill-major
    j = np.tile(np.arange(len(dec)), len(pre))
    ratio = np.array([math.ceil(a / b - 1e-12) for a, b in zip(p_share[i].tolist(), d_share[j].tolist(), strict=True)],
                     dtype=np.int64)
    top = np.minimum(np.maximum(1, ratio), market.decode_per_prefill)
    i, j = np.repeat(i, top), np.repeat(j, top)
    n = np.arange(len(i)) - np.repeat(np.cumsum(top) - top, top) + 1  # 1 … top of each pair
    fraction = np.minimum(p_share[i], n * d_share[j])
    same = p_shape[i] == d_shape[j]
    # one shape: p·(a + n·b); two: p_P·a + p_D·(n·b), left to right (Combo.price sums its usage in this order)
    cost = np.where(same[:, None], price[p_shape[i]] * (p_count[i] + n * d_count[j])[:, None],
                    price[p_shape[i]] * p_count[i][:, None] + price[d_shape[j]] * (n * d_count[j])[:, None])
    where = np.argmin(cost, axis=1)
    best = cost[np.arange(len(where)), where]
    ok = np.isfinite(best) & (best > 0)
    eff = np.where(ok, fraction * market.per_second * 3600.0 / np.where(ok, best, 1.0), -math.inf)
    order = np.flatnonzero(ok)
    if order.size > keep:
        cut = np.partition(eff[order], order.size - keep)[order.size - keep]  # the keep-th largest
        order = order[eff[order] >= cut]
    ranked = []
    for k in order.tolist():
        tp, _sp = pre[int(i[k])]
        td, _sd = dec[int(j[k])]
        m = int(n[k])
        usage = dict(tp.usage)
        for s, c in td.usage.items():
            usage[s] = usage.get(s, 0) + m * c
        ranked.append((Combo(model, tp, td, m, float(fraction[k]), usage), float(eff[k]), regions[int(where[k])]))
    ranked.sort(key=lambda x: (-x[1], x[0].id))
    return ranked


def _columns(phase: Sequence[tuple[TemplateOption, float]],
             col: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shape column, node count, share) of each one-shape template of a phase."""
    shape = np.array([col[next(iter(t.usage))] for t, _s in phase], dtype=np.int64)
    count = np.array([next(iter(t.usage.values())) for t, _s in phase], dtype=np.int64)
    share = np.array([s for _t, s in phase], dtype=float)
    return shape, count, share


def cauchy(problem: AllocationProblem, cancel: CancelToken | None = None, keep: int = CANDIDATES,
           decode_per_prefill: int = MAX_DECODE) -> BaselineResult:
    """Cauchy's plan (module docstring): top-``keep`` combos per model by Token/USD, then the cost ILP over them.

    Parameters
    ----------
    problem:
        The allocation problem (disaggregated: its links pair each model's prefill and decode classes).
    cancel:
        Checked before the ILP, which gets the time left on its deadline.
    keep:
        Candidates per model (``CANDIDATES``).
    decode_per_prefill:
        Most decode replicas one prefill replica feeds (1: Cauchy's own combos; default Coral's extension).

    Returns
    -------
    ``BaselineResult`` named ``cauchy``, served fractions per original group (a model's prefill and decode get
    the fraction its combos serve); the note says why when demand cannot be met.
    """
    check_cancel(cancel, "baseline cauchy")
    pairs = model_pairs(problem)
    groups = problem.groups()
    if not pairs:
        return BaselineResult("cauchy", 0.0, {g: 0.0 for g in groups}, {}, {}, {}, False,
                              "Cauchy plans prefill and decode together: this problem has no disaggregated model")
    chosen = candidates(problem, keep, decode_per_prefill)
    templates: list[TemplateOption] = []
    classes: list[WorkloadClass] = []
    for model, _pg, _dg in pairs:
        cls = f"{model}/combo"
        classes.append(WorkloadClass(id=cls, group=cls, rate=1.0))
        for c, _eff, _r in chosen.get(model, []):
            gpus = tuple(sorted({*c.prefill.gpu_types, *c.decode.gpu_types}))
            templates.append(TemplateOption(id=c.id, group=cls, usage=dict(c.usage), throughput={cls: c.fraction},
                                            single_shape=False, gpu_types=gpus))
    offers = tuple(Offer(o.region, o.shape, o.price_per_hour, o.available) for o in problem.offers)
    # the spot cap (S) binds a combo like the plan's templates: a model's combos may carry at most the tighter of
    # its two phases' shares on spot nodes (its groups are renamed, so the cap is renamed with them)
    spot_cap = {f"{m}/combo": min(problem.spot_cap.get(pg, 1.0), problem.spot_cap.get(dg, 1.0)) for m, pg, dg in pairs}
    combo_problem = replace(problem, templates=tuple(templates), offers=offers, classes=tuple(classes), current={},
                            budget_per_hour=None, dump_model=None, start={}, links=(), transfers=(), decompose=True,
                            spot_cap=spot_cap)
    kind = "1:1 combos (Cauchy's own)" if decode_per_prefill == 1 else f"1 prefill : up to {decode_per_prefill} decode"
    res = from_allocation("cauchy", combo_problem,
                          f"ILP over the {keep} most cost-efficient GPU combos per model ({kind}); all demand met",
                          cancel)
    served = {}
    for model, pg, dg in pairs:
        f = float(res.served_fraction.get(f"{model}/combo", 0.0))
        served[pg] = served[dg] = f
    for g in groups:  # an unlinked group (a model planned in one phase only) is not Cauchy's to serve
        served.setdefault(g, 0.0)
    feasible = res.feasible and all(v >= 1 - 1e-9 for v in served.values())
    note = res.note if feasible or not res.feasible else res.note + "; groups outside prefill–decode pairs unserved"
    return replace(res, served_fraction=served, feasible=feasible, note=note,
                   details={**res.details, "candidates": {m: [(c.id, e, r) for c, e, r in v] for m, v in chosen.items()}})
