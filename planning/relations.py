"""Proofs by relation to a base plan: what-ifs whose optimum follows from the base plan's without a solve.

A what-if is the base scenario with one change; for some changes the base plan's proven optimum already
answers the variant (``docs/allocation.md``, "Proofs by relation to the base plan", says why each holds):

- **the same scenario** (only its name or description differ): the base plan itself.

- **uniform price change** (only ``price_scale`` differs, by a factor f > 0): when every cost the objective
  counts is a node price that ``price_scale`` multiplies — on-demand or spot list prices, explicit offers, the
  initialisation penalty K·p — every plan's cost is f × its base cost, so the order of plans is kept: the base
  plan stays optimal, its cost and its bound scale by f, and so do the baselines (each a minimum over plans of
  the same kind, or a greedy choice by price ratios). It does NOT hold when a component does not scale: owned
  pools (power, capex), reservations, the spot pool's interruption costs, a finance horizon (``has_finance``),
  cross-region KV egress (``options.kv_transfer: cross-region``, priced from ``data/egress.csv``), or a budget
  (a fixed $/h). Then the variant is solved.
- **dropping a GPU type or a region the base plan does not use** (only ``exclude_gpus`` grows, or only
  ``regions``/``offers`` shrink): every plan of the variant is a plan of the base (fewer options), so the
  variant's optimum is ≥ the base's; the base plan is one of them, so it is the variant's optimum. Its baselines
  can change (memP splits the whole pool), so with baselines asked the variant is still solved (warm).
- **availability × f < 1 when the base plan's nodes still fit** (with the catalog, to resolve the variant's
  offers): fewer plans, the base plan among them, so it is optimal (again without baselines).
- **dropping what the base plan uses**, or **tightening** (SLOs × f < 1, availability × f < 1): still fewer
  plans, so the base optimum is a valid lower bound of the variant (:attr:`Relation.bound`), never an answer.

Only a base plan proven optimal (status ``optimal``, cost objective, all demand served) is related; anything
else returns None and the variant is solved as usual.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from planning.catalog.schema import Catalog
from planning.checks import with_checks
from planning.result import BaselineSummary, PlanResult
from planning.scenario import Scenario

_IGNORED = ("name", "description")  # keys that never change a plan


@dataclass(frozen=True)
class BasePlan:
    """A plan already made and the scenario it answers: what a what-if variant may be related to."""

    scenario: Scenario
    result: PlanResult


@dataclass(frozen=True)
class Relation:
    """How a variant relates to its base: ``kind`` ``same`` (the base scenario itself, e.g. the sliders at rest),
    ``prices`` (a factor on every price), ``dropped-unused`` (GPU types or regions the base plan does not use
    removed), ``still-fits`` (scarcer, the base plan's nodes still offered) or ``tightened`` (fewer plans: the base optimum is a
    lower ``bound`` only); ``proof`` is the sentence the answer is labelled with."""

    kind: str
    proof: str
    factor: float = 1.0
    bound: float | None = None
    dropped_gpus: tuple[str, ...] = ()
    dropped_regions: tuple[str, ...] = ()
    scarcer: bool = False  # only availability_scale fell: the base plan may still fit (:func:`_still_fits`)
    available: tuple[tuple[tuple[str, str], int], ...] = ()  # still-fits: the variant's nodes per (region, shape)

    @property
    def may_answer(self) -> bool:
        """Whether the base plan may be the variant's answer (:func:`answer`): every kind but ``tightened``, and a
        scarcer variant too when the base plan's nodes still fit (:func:`_still_fits`, checked by ``answer``)."""
        return self.kind != "tightened" or self.scarcer


def _plain(scenario: Scenario) -> dict[str, Any]:
    data = scenario.to_dict()
    for key in _IGNORED:
        data.pop(key, None)
    return data


def _proven(result: PlanResult, scenario: Scenario) -> bool:
    """A base plan a relation may start from: proven optimal, cost objective, all demand served, no finance (its
    commitments are sized in a first stage, not part of one optimum the relations could carry)."""
    return (result.status == "optimal" and result.has_plan and scenario.objective.kind == "cost"
            and result.served_fraction >= 1.0 - 1e-9 and not scenario.has_finance)


def why_prices_do_not_scale(scenario: Scenario) -> str:
    """Why a uniform price change does NOT scale every cost the objective counts ("" when it does)."""
    if scenario.has_finance:
        return "owned pools, reservations, spot pools or a finance horizon carry costs price_scale does not scale"
    if scenario.options.kv_transfer != "same-region":
        return "cross-region KV egress is priced per GB, not scaled with node prices"
    if scenario.objective.budget_per_hour is not None:
        return "a budget is a fixed $/h that does not scale with prices"
    return ""


def relate(base: BasePlan, variant: Scenario) -> Relation | None:
    """The relation of ``variant`` to ``base`` that proves something, or None (see the module docstring)."""
    if not _proven(base.result, base.scenario):
        return None
    a, b = _plain(base.scenario), _plain(variant)
    changed = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    optimum = base.result.comparable_cost
    if not changed:
        return Relation("same", "proven optimal: the base plan (the same scenario, renamed at most)")
    if changed == {"price_scale"}:
        factor = variant.price_scale / base.scenario.price_scale
        if why_prices_do_not_scale(base.scenario):
            return None
        return Relation("prices", f"proven optimal: the same plan at prices × {factor:g} (every cost the "
                        "objective counts scales by the same factor, so the order of plans is kept)", factor=factor)
    if changed and changed <= {"exclude_gpus", "regions", "offers"}:
        return _dropped(base, variant, optimum)
    if changed == {"availability_scale"} and variant.availability_scale < base.scenario.availability_scale:
        return Relation("tightened", "", bound=optimum, scarcer=True)
    if changed == {"models"} and _slos_tightened(a["models"], b["models"]):
        return Relation("tightened", "", bound=optimum)
    return None


def _slos_tightened(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    """The same models, each differing at most in SLOs that are all as tight or tighter (a template that meets
    the tighter SLO meets the looser one at least as fast, so no variant plan is new to the base)."""
    if len(old) != len(new):
        return False
    for m, n in zip(old, new, strict=True):
        if {k: v for k, v in m.items() if k != "slo"} != {k: v for k, v in n.items() if k != "slo"}:
            return False
        so, sn = m.get("slo") or {}, n.get("slo") or {}
        if set(so) != set(sn) or any(sn[k] is not None and (so[k] is None or sn[k] > so[k]) for k in sn):
            return False
    return True


def lower_bound(base: BasePlan | None, variant: Scenario) -> float | None:
    """The base plan's proven optimum when ``variant`` can only cost more (options dropped that the plan uses,
    SLOs or availability tightened): a valid lower bound to start the variant's solve from; else None."""
    relation = relate(base, variant) if base is not None else None
    return relation.bound if relation is not None and relation.kind == "tightened" else None


def _dropped(base: BasePlan, variant: Scenario, optimum: float) -> Relation | None:
    """Only options removed: GPU types excluded, regions or explicit offers dropped (never added or changed)."""
    old, new = base.scenario, variant
    if not (set(old.exclude_gpus) <= set(new.exclude_gpus) and set(new.regions) <= set(old.regions)
            and set(new.offers) <= set(old.offers)):
        return None
    gpus = tuple(g for g in new.exclude_gpus if g not in old.exclude_gpus)
    regions = tuple(r for r in old.regions if r not in new.regions)
    offers_gone = {(o.region, o.shape) for o in old.offers if o not in new.offers}
    used = {(i.region, s) for i in base.result.instances for s, n in i.usage.items() if n > 0}
    used_gpus = {g for i in base.result.instances for g, n in i.gpus.items() if n > 0}
    touched = bool(set(gpus) & used_gpus) or any(r in regions for r, _s in used) or bool(used & offers_gone)
    what = ", ".join([*gpus, *regions] or [f"{len(offers_gone)} offers"])
    if touched:
        return Relation("tightened", "", bound=optimum, dropped_gpus=gpus, dropped_regions=regions)
    return Relation("dropped-unused", f"proven optimal: the base plan, which does not use {what} (fewer options "
                    "never make the optimum cheaper, and the base plan is still one of them)",
                    dropped_gpus=gpus, dropped_regions=regions)


def answer(base: BasePlan, variant: Scenario, *, with_baselines: bool,
           catalog: Catalog | None = None) -> PlanResult | None:
    """The variant's plan proven by its relation to ``base``, or None when it must be solved (no relation, a
    relation that only bounds, or baselines asked that the relation does not carry). With ``catalog``, a scarcer
    variant (availability × f < 1) whose offers still hold every node the base plan uses is answered too.

    Returns
    -------
    PlanResult or None
        The base plan re-labelled for ``variant``: ``message`` says how it was proven, ``stats`` has
        ``proven_by_relation`` 1, ``timings`` the milliseconds it took.
    """
    t0 = time.perf_counter()
    relation = relate(base, variant)
    if relation is not None and relation.scarcer and catalog is not None and not with_baselines:
        relation = _still_fits(base, variant, catalog) or relation
    if relation is None or relation.kind == "tightened":
        return None
    if with_baselines and not base.result.baselines:
        return None  # the base was planned without its baselines: nothing to carry over
    if relation.kind == "prices":
        result = _scaled(base.result, relation.factor)
    elif relation.kind == "same":
        result = base.result
    elif relation.kind == "still-fits":
        if with_baselines:
            return None  # fewer nodes change the baselines' plans
        available = dict(relation.available)
        result = replace(base.result, capacity=tuple(replace(c, available=available.get((c.region, c.shape), 0))
                                                     for c in base.result.capacity))
    else:
        if with_baselines:
            return None  # a dropped option changes memP's pool: the baselines need a solve
        result = _without(base.result, relation)
    if not with_baselines:
        result = replace(result, baselines=())
    seconds = time.perf_counter() - t0
    result = replace(result, scenario=variant.to_dict(), message=relation.proof, stopped_at="",
                     stats={**result.stats, "proven_by_relation": 1.0},
                     timings={"relation_seconds": seconds, "total_seconds": seconds})
    return with_checks(result)


def _still_fits(base: BasePlan, variant: Scenario, catalog: Catalog) -> Relation | None:
    """Availability × f < 1 leaves only plans of the base (fewer nodes); when the base plan's nodes still fit every
    offer of the variant, it is one of them, so it stays optimal."""
    from planning.offers import resolve_offers

    available = {(o.region, o.shape): o.available for o in resolve_offers(variant, catalog)}
    used: dict[tuple[str, str], int] = {}
    for inst in base.result.instances:
        for shape, nodes in inst.usage.items():
            used[(inst.region, shape)] = used.get((inst.region, shape), 0) + int(nodes) * inst.count
    if any(n > available.get(key, 0) for key, n in used.items()):
        return None
    factor = variant.availability_scale / base.scenario.availability_scale
    return Relation("still-fits", f"proven optimal: the base plan, which still fits availability × {factor:g} "
                    "(fewer nodes never make the optimum cheaper, and every node it uses is still offered)",
                    available=tuple(sorted(available.items())))


def _scale_map(values: Mapping[str, float], factor: float, keys: tuple[str, ...] = ()) -> dict[str, float]:
    return {k: (v * factor if not keys or k.endswith(keys) else v) for k, v in values.items()}


_DOLLAR_STATS = ("_per_hour", "anytime_bound")  # stats in $/h (lp_bound_alpha, counts and seconds are not)


def _scaled(result: PlanResult, factor: float) -> PlanResult:
    """``result`` with every $ figure × ``factor`` (the uniform price relation; committed, transfer and finance
    figures are 0 or empty where it applies, see :func:`why_prices_do_not_scale`)."""
    return replace(
        result, cost_per_hour=result.cost_per_hour * factor,
        provisioning_per_hour=result.provisioning_per_hour * factor,
        penalty_per_hour=result.penalty_per_hour * factor,
        instances=tuple(replace(i, cost_per_hour=i.cost_per_hour * factor) for i in result.instances),
        cost_lines=tuple(replace(c, cost_per_hour=c.cost_per_hour * factor) for c in result.cost_lines),
        capacity=tuple(replace(c, price_per_hour=c.price_per_hour * factor) for c in result.capacity),
        baselines=tuple(_scaled_baseline(b, factor) for b in result.baselines),
        cost_by_pricing_kind=_scale_map(result.cost_by_pricing_kind, factor),
        stats=_scale_map(result.stats, factor, _DOLLAR_STATS),
    )


def _scaled_baseline(b: BaselineSummary, factor: float) -> BaselineSummary:
    return replace(b, cost_per_hour=b.cost_per_hour * factor) if b.ran else b


def _without(result: PlanResult, relation: Relation) -> PlanResult:
    """``result`` without the capacity rows and provenance of the GPU types and regions the variant dropped."""
    gone_gpus, gone_regions = set(relation.dropped_gpus), set(relation.dropped_regions)
    capacity = tuple(c for c in result.capacity if c.gpu not in gone_gpus and c.region not in gone_regions)
    provenance = {k: v for k, v in result.provenance.items() if k not in gone_gpus}
    return replace(result, capacity=capacity, provenance=provenance)
