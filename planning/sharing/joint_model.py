"""The joint sharing model's data: the instance (shareable models, node types, dedicated template columns over
one availability), its answer, and the indexing the LP, the enumeration and the ILP share
(:mod:`planning.sharing.joint` has the formulation)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from planning.errors import PlanningError
from planning.sharing.packing import Node, NodeType, TailModel, fits


@dataclass(frozen=True, eq=False)
class DedicatedGroup:
    """One (model, phase) group a dedicated model is served by: its demand and template columns over the joint
    shape index (``usage[i, k]`` nodes of shape k, ``throughput[i]``, ``ids[i]`` the template key)."""

    id: str
    model: str
    phase: str
    demand: float
    usage: np.ndarray
    throughput: np.ndarray
    ids: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class JointInstance:
    """Everything the joint model needs, as arrays.

    ``types`` are the single-GPU node types sharing may buy (key ``"region shape"``); ``shareable`` the models
    that may share (``TailModel`` rows); every model listed in ``groups`` but not shareable is dedicated.
    ``prices[r, k]`` (NaN where not sold) and ``available[r, k]`` are over ``regions`` × ``shapes``.
    """

    shareable: tuple[TailModel, ...]
    types: tuple[NodeType, ...]
    groups: tuple[DedicatedGroup, ...]
    regions: tuple[str, ...]
    shapes: tuple[str, ...]
    prices: np.ndarray
    available: np.ndarray
    K: float = 0.0
    fixed_shared: frozenset[str] = frozenset()  # shareable models forced to share (the threshold split)
    fixed_dedicated: frozenset[str] = frozenset()  # shareable models forced to be dedicated

    @property
    def models(self) -> tuple[str, ...]:
        out = dict.fromkeys(m.id for m in self.shareable)
        out.update(dict.fromkeys(g.model for g in self.groups))
        return tuple(out)


@dataclass(frozen=True)
class JointPlan:
    """The joint answer: shared nodes (a packing), dedicated instances, cost, status and the proof."""

    status: str  # optimal | feasible | infeasible | time_limit
    cost_per_hour: float  # objective: shared nodes + dedicated (1 + K)·p
    shared_cost_per_hour: float
    dedicated_cost_per_hour: float
    nodes: tuple[Node, ...]
    counts: Mapping[tuple[str, str], int]  # (template key, region) -> instances
    shared: tuple[str, ...]
    dedicated: tuple[str, ...]
    bound: float
    gap: float | None
    stats: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # the converged LP's availability duals as node prices, (region, shape) -> −σ ≥ 0 (empty when the column
    # generation did not converge): what one more node of that offer would save the LP (joint_contend uses them)
    node_prices: Mapping[tuple[str, str], float] = field(default_factory=dict)
    lp_nodes: Mapping[tuple[str, str], float] = field(default_factory=dict)  # ``lp_only``: the LP's shared nodes
    time_limited: bool = False  # the safety-net clock, not a work limit, stopped the call (machine-dependent)

    @property
    def has_plan(self) -> bool:
        return math.isfinite(self.cost_per_hour)


# ---------------------------------------------------------------------------------------------- instance arrays
@dataclass
class JointArrays:
    """Indexing shared by the LP, the enumeration and the ILP."""

    inst: JointInstance
    type_rk: list[tuple[int, int]]  # node type -> (region, shape) index
    fit_on: list[list[int]]  # node type -> shareable models that fit alone
    cost: list[np.ndarray]  # per group (n, R): (1 + K)·p_r(τ), inf where not sold
    t_eff: list[np.ndarray]  # per group: min(T, λ)
    card: list[float]  # per group: ⌈λ / max T⌉
    model_of_group: list[str]
    linked: dict[str, tuple[int, int]]  # model -> (prefill group, decode group) when paired per region
    planned: list[bool]  # per group: covered by whole-group plan columns (``joint_groups``), not per-template ν
    shareable_index: dict[str, int]
    max_cost: float

    @classmethod
    def build(cls, inst: JointInstance) -> JointArrays:
        rk = []
        for t in inst.types:
            region, shape = t.key.split(" ", 1)
            if region not in inst.regions or shape not in inst.shapes:
                raise PlanningError("sharing", f"node type {t.key!r} is not an offer of the scenario.",
                                    "pass the scenario's single-GPU offers.")
            rk.append((inst.regions.index(region), inst.shapes.index(shape)))
        fit_on = [[i for i, m in enumerate(inst.shareable) if fits([m], t)] for t in inst.types]
        offered = ~np.isnan(inst.prices)
        price0 = np.nan_to_num(inst.prices, nan=0.0)
        costs, t_eff, card = [], [], []
        for g in inst.groups:
            u = g.usage.astype(float)
            c = (1.0 + inst.K) * (u @ price0.T)
            c[(u > 0) @ (~offered).T] = np.inf
            c[g.throughput <= 0, :] = np.inf
            costs.append(c)
            t_eff.append(np.minimum(g.throughput, g.demand) if g.demand > 0 else g.throughput.astype(float))
            tmax = float(g.throughput.max()) if g.throughput.size else 0.0
            card.append(float(math.ceil(g.demand / tmax - 1e-9)) if tmax > 0 and g.demand > 0 else 0.0)
        linked: dict[str, tuple[int, int]] = {}
        if len(inst.regions) > 1:
            by = {(g.model, g.phase): i for i, g in enumerate(inst.groups)}
            for (model, phase), i in by.items():
                if phase == "prefill" and (model, "decode") in by:
                    linked[model] = (i, by[(model, "decode")])
        finite = [float(c[np.isfinite(c)].max()) for c in costs if np.isfinite(c).any()]
        max_cost = max([*finite, *(t.price_per_hour for t in inst.types), 1.0])
        paired = {gi for pair in linked.values() for gi in pair}
        planned = [gi not in paired and g.demand > 0 for gi, g in enumerate(inst.groups)]
        return cls(inst, rk, fit_on, costs, t_eff, card, [g.model for g in inst.groups], linked, planned,
                   {m.id: i for i, m in enumerate(inst.shareable)}, max_cost)
