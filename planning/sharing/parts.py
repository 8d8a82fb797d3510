"""What the parts of the sharing step share (a public internal module: no file of ``planning.sharing`` imports
another's private names): offers and specs through the resolve step, the packing inputs of profiled models,
the shared nodes of a packing, node counts per (region, shape), the availability a part leaves the other, and a
part's proven bound. ``plan``, ``joint_plan`` and ``joint_contend`` use them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from planning.catalog.schema import Catalog, ModelSpec, parse_shape
from planning.result import PlanResult
from planning.scenario import AvailabilityOverride, Scenario
from planning.sharing.packing import NodeType, Packing, TailModel
from planning.sharing.profiles import ModelProfile, node_attainment
from planning.sharing.result import SharedModel, SharedNode

if TYPE_CHECKING:
    from planning.offers import ResolvedOffer


def resolve_parts(scenario: Scenario, catalog: Catalog) -> tuple[list[ResolvedOffer], dict[str, ModelSpec]]:
    """Offers and model specs through the engine's resolve step."""
    from planning.offers import resolve_offers
    from planning.resolve import resolve_models

    return resolve_offers(scenario, catalog), resolve_models(scenario, catalog)


TTFT_PREFILL_FRACTION = 0.5  # κ: a prefill slowed by co-located decodes may take at most half its TTFT SLO


def tail_models(profiles: Sequence[ModelProfile], types: Sequence[NodeType]) -> list[TailModel]:
    """Packing inputs: loads at the mean rate; the (ttft) rows use decode shares at √burstiness × the mean
    rate (the same burst scaling as :func:`planning.sharing.profiles.node_attainment`)."""
    out = []
    for p in profiles:
        ok = [t for t in types if gpu_of(t) in p.gpus]
        load = {t.key: p.gpus[gpu_of(t)].load for t in ok}
        decode = {t.key: math.sqrt(p.burstiness) * p.gpus[gpu_of(t)].decode_load for t in ok}
        prefill = {t.key: p.gpus[gpu_of(t)].prefill_ms / 1e3 / (TTFT_PREFILL_FRACTION * p.ttft_s) for t in ok}
        out.append(TailModel(p.id, p.weights_gb, p.kv_pool_gb, p.weighted_rate, load, decode, prefill))
    return out


def gpu_of(t: NodeType) -> str:
    return parse_shape(t.key.split(" ", 1)[1])[1]


def shared_nodes(packing: Packing, profiles: Sequence[ModelProfile], types: Sequence[NodeType]) -> tuple[SharedNode, ...]:
    by_id = {p.id: p for p in profiles}
    by_key = {t.key: t for t in types}
    nodes = []
    for n in packing.nodes:
        t = by_key[n.type]
        gpu = gpu_of(t)
        region, shape = t.key.split(" ", 1)
        est = node_attainment([by_id[m] for m in n.models], gpu)
        nodes.append(SharedNode(region, shape, gpu, t.price_per_hour, t.capacity_gb, tuple(
            SharedModel(m, by_id[m].base, by_id[m].rate_rps, by_id[m].weights_gb, by_id[m].kv_pool_gb,
                        by_id[m].gpus[gpu].load, est[m]) for m in n.models)))
    return tuple(nodes)


def node_usage(nodes: Sequence[SharedNode]) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = {}
    for n in nodes:
        used[(n.region, n.shape)] = used.get((n.region, n.shape), 0) + 1
    return used


def plan_usage(plan: PlanResult) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = {}
    for inst in plan.instances:
        for shape, k in inst.usage.items():
            used[(inst.region, shape)] = used.get((inst.region, shape), 0) + int(k) * int(inst.count)
    return used


def remaining(scenario: Scenario, offers: Sequence[ResolvedOffer],
               nodes: Sequence[SharedNode] | Mapping[tuple[str, str], int]
               ) -> Scenario:
    """``scenario`` with the given shared nodes (or node counts per (region, shape)) subtracted from availability."""
    used = dict(nodes) if isinstance(nodes, Mapping) else node_usage(nodes)
    overrides = [a for a in scenario.availability_overrides if (a.region, a.shape) not in used]
    by_key = {(o.region, o.shape): o for o in offers}
    overrides += [AvailabilityOverride(r, s, max(0, by_key[(r, s)].available - k)) for (r, s), k in sorted(used.items())]
    return replace(scenario, availability_overrides=tuple(overrides))


def part_bound(cost: float, gap: float | None, bound: float | None) -> float:
    """A part's proven lower bound: its own, else cost × (1 − gap); −inf when none is proven."""
    if bound is not None and math.isfinite(bound):
        return bound
    return cost * (1.0 - gap) if gap is not None and math.isfinite(cost) else -math.inf


def as_asked(result: PlanResult, limit_s: float, given_s: float) -> PlanResult:
    """``result`` of a part solved with ``given_s`` (the time left: its safety net) as its limit, its scenario
    showing the limit the caller asked for (``limit_s``) instead; the time it was given goes to its timings
    (``part_limit_seconds``, wall-clock figures). The time left depends on the machine's speed; the plan of a part
    that stopped on work does not, and two solves of one input must give the same result (issue 37 §6)."""
    options = dict(result.scenario.get("options") or {})
    if not options:
        return result
    options["time_limit_s"] = float(limit_s)
    return replace(result, scenario={**result.scenario, "options": options},
                   timings={**result.timings, "part_limit_seconds": float(given_s)})
