"""Packing tail models onto shared single-GPU nodes: the KVPR heuristic pool and the exact packing MILP.

Formulation (exact packing)
---------------------------
Sets: models m ∈ M (each wholly on one node); node types t ∈ T (one purchasable (region, shape)); candidate
nodes b ∈ B_t = {1..n_t} of type t (n_t = min(available_t, |M|, an upper bound from the heuristic)).
Parameters: p_t price per hour; C_t usable memory (GB); A_t nodes available; per model: W_m weights (GB),
K_m KV pool (GB, sized by its SLO-weighted demand, see ``planning.sharing.profiles``), u_{m,t} its compute load
on one node of type t (fraction of the node's time, from the perf model's SLO-feasible throughputs; > 1 or
missing = cannot run there).
Variables: y_{t,b} ∈ {0,1} node b of type t is bought; x_{m,t,b} ∈ {0,1} model m is placed on it.
Objective: minimise Σ_{t,b} p_t y_{t,b}.
Constraints:
  (assign)    Σ_{t,b} x_{m,t,b} = 1                         every model on exactly one node
  (memory)    Σ_m (W_m + K_m) x_{m,t,b} ≤ C_t y_{t,b}        weights of all co-located models + their KV pools
  (compute)   Σ_m u_{m,t} x_{m,t,b} ≤ y_{t,b}                 time-shared compute: loads sum to ≤ 1
  (ttft)      Σ_m' δ_{m',t} x_{m',t,b} + h_{m,t} x_{m,t,b} ≤ 1   for every m: decode shares δ (burst-scaled) slow
              prefills by 1/(1 − Σδ); m's slowed prefill e_m/(1 − Σδ) must stay within κ·s_m (h = e/(κ·s))
  (symmetry)  y_{t,b} ≥ y_{t,b+1}                              nodes of a type are bought in order
  (fit)       x_{m,t,b} = 0 when model m alone violates (memory), (compute) or (ttft) on type t
Availability is n_t ≤ A_t. Solved with HiGHS (highspy; time limit, relative gap reported).

The heuristic (Prism's Alg. 1 in a sizing loop): for a node type t, the fewest N nodes such that Alg. 1's
KVPR placement of the models on N nodes satisfies (memory) and (compute) on every node; the pool is the
cheapest of: one type for all models, or each model on its cheapest type alone, pooled per type.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from planning.errors import PlanningError
from planning.sharing.kvpr import KvprModel, kvpr_placement

_Vars = dict[Any, Any]
_Bins = dict[str, range]


@dataclass(frozen=True)
class TailModel:
    """A model to pack: weights and KV pool (GB), SLO-weighted rate (req/s per s of TTFT SLO), compute load per
    node type (fraction of one node; types missing = the model cannot run there).

    Optional TTFT headroom data per node type: ``decode_load`` (its burst-scaled decode share of the node, δ) and
    ``prefill_share`` (h = e / (κ·s): its prefill time over the part κ of its TTFT SLO the prefill may take).
    """

    id: str
    weights_gb: float
    kv_gb: float
    weighted_rate: float
    load: Mapping[str, float]
    decode_load: Mapping[str, float] = field(default_factory=dict)
    prefill_share: Mapping[str, float] = field(default_factory=dict)

    @property
    def memory_gb(self) -> float:
        return self.weights_gb + self.kv_gb


@dataclass(frozen=True)
class NodeType:
    """A purchasable single-GPU node for sharing: key (``region shape``), price, availability, usable memory."""

    key: str
    price_per_hour: float
    available: int
    capacity_gb: float


@dataclass(frozen=True)
class Node:
    """One bought node and the models packed on it."""

    type: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class Packing:
    """A packing: nodes with their models, cost, status (optimal, feasible, infeasible, time_limit), gap, time."""

    nodes: tuple[Node, ...]
    cost_per_hour: float
    status: str
    method: str
    gap: float | None = None
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    bound_per_hour: float | None = None  # a proven lower bound when the method gives one beside the gap
    lp_bound_per_hour: float | None = None  # the converged packing LP's value (column generation only) …
    node_prices: Mapping[tuple[str, str], float] = field(default_factory=dict)  # … and its node prices (−duals)
    time_limited: bool = False  # the safety-net clock, not a work limit, stopped it (column generation only)

    @property
    def feasible(self) -> bool:
        """A packing exists (an exact one stopped at its time limit still has one, with its gap)."""
        return math.isfinite(self.cost_per_hour)


def fits(models: Sequence[TailModel], t: NodeType, tol: float = 1e-9) -> bool:
    """Whether ``models`` can share one node of type ``t`` (memory and compute constraints)."""
    if any(t.key not in m.load for m in models):
        return False
    decode = sum(m.decode_load.get(t.key, 0.0) for m in models)
    return (sum(m.memory_gb for m in models) <= t.capacity_gb + tol
            and sum(m.load[t.key] for m in models) <= 1.0 + tol
            and all(decode + m.prefill_share.get(t.key, 0.0) <= 1.0 + tol for m in models))


def _node_share(m: TailModel, t: NodeType) -> float:
    """Share of a node of type t one model takes when the node is filled with copies of it: 1 / ⌊1 / s⌋ with
    s the larger of its memory and compute fractions (a model using 0.6 of a node takes the whole node)."""
    share = max(m.memory_gb / t.capacity_gb, m.load[t.key], 1e-9)
    return 1.0 / max(1, math.floor(1.0 / share + 1e-9))


def _alone(m: TailModel, t: NodeType) -> bool:
    return fits([m], t)


def _check_inputs(models: Sequence[TailModel], types: Sequence[NodeType]) -> None:
    ids = [m.id for m in models]
    if len(set(ids)) != len(ids):
        raise PlanningError("models", "has duplicate ids.", "give each model once.")
    keys = [t.key for t in types]
    if len(set(keys)) != len(keys):
        raise PlanningError("node_types", "has duplicate keys.", "give each (region, shape) once.")
    for m in models:
        if not any(_alone(m, t) for t in types):
            raise PlanningError(f"sharing.{m.id}", f"fits on no shared node type alone (weights {m.weights_gb:.1f} GB "
                                f"+ KV {m.kv_gb:.1f} GB; loads {dict(m.load)}).",
                                "give it a dedicated template (raise its rate above the sharing threshold) "
                                "or offer a larger GPU.")


def _kvpr_pool(models: Sequence[TailModel], t: NodeType) -> list[Node] | None:
    """Fewest nodes of type ``t`` on which Alg. 1's placement satisfies memory and compute (None: none does)."""
    if not models:
        return []
    if not all(_alone(m, t) for m in models):
        return None
    lower = max(1, math.ceil(sum(m.memory_gb for m in models) / t.capacity_gb - 1e-9),
                math.ceil(sum(m.load[t.key] for m in models) - 1e-9))
    upper = min(t.available, len(models))
    kmodels = [KvprModel(m.id, m.weighted_rate, m.weights_gb) for m in models]
    by_id = {m.id: m for m in models}
    for n in range(lower, upper + 1):
        try:
            placement = kvpr_placement(kmodels, n, t.capacity_gb)
        except PlanningError:
            continue
        nodes = [tuple(placement.models_on(i)) for i in range(n)]
        if all(fits([by_id[k] for k in node], t) for node in nodes):
            return [Node(t.key, node) for node in nodes if node]
    return None


SPILL_ROUNDS = 8


def _pools_within_availability(models: Sequence[TailModel], types: Sequence[NodeType]) -> list[Node] | None:
    """One pool per node type when the cheapest types are scarce: each model (largest first) goes to the
    cheapest type for it (price × node share) that still has room, a type's room being its availability
    filled by the node shares of the models sent to it. A pool Alg. 1 cannot place within availability
    shrinks its type's room by a quarter and the assignment is redone (at most ``SPILL_ROUNDS`` times)."""
    by_key = {t.key: t for t in types}
    room = {t.key: float(t.available) for t in types}
    order = sorted(models, key=lambda m: (-m.memory_gb, m.id))
    ranked = {m.id: sorted((t for t in types if _alone(m, t)),
                           key=lambda t: (t.price_per_hour * _node_share(m, t), t.key)) for m in models}
    for _ in range(SPILL_ROUNDS):
        used: dict[str, float] = {}
        groups: dict[str, list[TailModel]] = {}
        for m in order:
            t = next((t for t in ranked[m.id] if used.get(t.key, 0.0) + _node_share(m, t) <= room[t.key] + 1e-9),
                     None)
            if t is None:
                return None
            used[t.key] = used.get(t.key, 0.0) + _node_share(m, t)
            groups.setdefault(t.key, []).append(m)
        nodes: list[Node] = []
        short = False
        for key, group in groups.items():
            pool = _kvpr_pool(group, by_key[key])
            if pool is None:
                room[key] *= 0.75
                short = True
            else:
                nodes += pool
        if not short:
            return nodes
    return None


def kvpr_packing(models: Sequence[TailModel], types: Sequence[NodeType]) -> Packing:
    """The heuristic shared pool (module docstring): Alg. 1 placement sized per node type, cheapest kept.

    Two kinds of pools are tried: one node type for every model (Prism's setting: identical GPUs), and one
    pool per type with each model on the type that is cheapest for it (price × its node share, see
    ``_node_share``). The cheaper feasible one is returned. When neither fits the availability (many models,
    scarce cheap types), models spill over to their next cheapest types (``_pools_within_availability``).

    Raises
    ------
    PlanningError
        A model that fits on no node type alone, or duplicate ids.
    """
    t0 = time.perf_counter()
    _check_inputs(models, types)
    options: list[tuple[float, list[Node], tuple[str, ...]]] = []
    for t in types:
        nodes = _kvpr_pool(models, t)
        if nodes is not None:
            options.append((len(nodes) * t.price_per_hour, nodes, (f"one pool of {t.key} nodes.",)))
    by_key = {t.key: t for t in types}
    groups: dict[str, list[TailModel]] = {}
    for m in models:
        ok = [t for t in types if _alone(m, t)]
        t = min(ok, key=lambda t: (t.price_per_hour * _node_share(m, t), t.key))
        groups.setdefault(t.key, []).append(m)
    mixed: list[Node] = []
    for key, group in groups.items():
        nodes = _kvpr_pool(group, by_key[key])
        if nodes is None:
            break
        mixed += nodes
    else:
        cost = sum(by_key[n.type].price_per_hour for n in mixed)
        options.append((cost, mixed, (f"one pool per node type ({', '.join(sorted(groups))}).",)))
    if not options:  # every model's cheapest type cannot hold its pool: spill over to the next cheapest
        spilled = _pools_within_availability(models, types)
        if spilled is not None:
            used = sorted({n.type for n in spilled})
            options.append((sum(by_key[n.type].price_per_hour for n in spilled), spilled,
                            (f"one pool per node type, spilled over within availability ({', '.join(used)}).",)))
    if not options:
        return Packing((), math.inf, "infeasible", "kvpr", seconds=time.perf_counter() - t0,
                       notes=("no KVPR pool fits within availability.",))
    cost, nodes, notes = min(options, key=lambda o: o[0])
    return Packing(tuple(nodes), cost, "feasible", "kvpr", seconds=time.perf_counter() - t0, notes=notes)


def exact_packing(models: Sequence[TailModel], types: Sequence[NodeType], *, time_limit_s: float = 60.0,
                  mip_rel_gap: float = 1e-4, upper_bound_cost: float | None = None) -> Packing:
    """The cheapest packing (module docstring MILP), solved with HiGHS (highspy).

    Parameters
    ----------
    models, types:
        Models to pack and node types to buy.
    time_limit_s, mip_rel_gap:
        Solver limits; a stop at the time limit with a plan has status ``time_limit`` and its gap.
    upper_bound_cost:
        Cost of a known packing (default: the KVPR heuristic's): an optimal packing buys at most
        ⌊upper_bound_cost / p_t⌋ nodes of type t, which bounds the candidate nodes n_t.

    Returns
    -------
    Packing with ``method="exact"``.

    Raises
    ------
    PlanningError
        A model that fits on no node type alone, or duplicate ids.
    """
    t0 = time.perf_counter()
    _check_inputs(models, types)
    if not models:
        return Packing((), 0.0, "optimal", "exact", 0.0, time.perf_counter() - t0)
    if upper_bound_cost is None:
        heur = kvpr_packing(models, types)
        upper_bound_cost = heur.cost_per_hour if heur.feasible else math.inf
    milp = _Milp()
    bins = {t.key: range(_candidates(t, len(models), upper_bound_cost)) for t in types}
    y = {(t.key, b): milp.var(t.price_per_hour) for t in types for b in bins[t.key]}
    x = {(m.id, t.key, b): milp.var(0.0) for m in models for t in types if _alone(m, t) for b in bins[t.key]}
    _assign(milp, x, models, types, bins)
    _memory(milp, x, y, models, types, bins)
    _compute(milp, x, y, models, types, bins)
    _ttft(milp, x, models, types, bins)
    _symmetry(milp, y, types, bins)
    status, values, gap = milp.solve(time_limit_s, mip_rel_gap)
    seconds = time.perf_counter() - t0
    if values is None:
        return Packing((), math.inf, "infeasible" if status == "infeasible" else status, "exact", seconds=seconds,
                       notes=(f"HiGHS: {status} with candidate nodes {[len(b) for b in bins.values()]} per type.",))
    nodes = []
    for t in types:
        for b in bins[t.key]:
            if values[y[(t.key, b)]] > 0.5:
                on = tuple(m.id for m in models if (m.id, t.key, b) in x and values[x[(m.id, t.key, b)]] > 0.5)
                if on:
                    nodes.append(Node(t.key, on))
    price = {t.key: t.price_per_hour for t in types}
    cost = sum(price[n.type] for n in nodes)
    return Packing(tuple(nodes), cost, status, "exact", gap, seconds)


def _candidates(t: NodeType, n_models: int, upper_bound_cost: float) -> int:
    """n_t = min(A_t, |M|, ⌊UB / p_t⌋): no optimal packing buys more nodes of type t."""
    n = min(t.available, n_models)
    if math.isfinite(upper_bound_cost) and t.price_per_hour > 0:
        n = min(n, math.floor(upper_bound_cost / t.price_per_hour + 1e-9))
    return max(0, n)


class _Milp:
    """A small binary program fed to HiGHS: variables with costs, rows lower ≤ a·x ≤ upper."""

    def __init__(self) -> None:
        self.costs: list[float] = []
        self.rows: list[tuple[float, float, list[int], list[float]]] = []

    def var(self, cost: float) -> int:
        self.costs.append(float(cost))
        return len(self.costs) - 1

    def row(self, lower: float, upper: float, idx: Sequence[int], val: Sequence[float]) -> None:
        self.rows.append((lower, upper, list(idx), [float(v) for v in val]))

    def solve(self, time_limit_s: float, gap: float) -> tuple[str, list[float] | None, float | None]:
        import highspy
        import numpy as np

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(time_limit_s))
        h.setOptionValue("mip_rel_gap", float(gap))
        n = len(self.costs)
        inf = highspy.kHighsInf
        h.addCols(n, np.array(self.costs), np.zeros(n), np.ones(n), 0, np.array([], dtype=np.int32),
                  np.array([], dtype=np.int32), np.array([]))
        h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * n))
        for lo, up, idx, val in self.rows:
            h.addRow(lo if math.isfinite(lo) else -inf, up if math.isfinite(up) else inf, len(idx),
                     np.array(idx, dtype=np.int32), np.array(val))
        h.run()
        info = h.getInfo()
        ms = h.getModelStatus()
        has = int(info.primal_solution_status) == 2
        s = highspy.HighsModelStatus
        if ms == s.kOptimal:
            status = "optimal"
        elif ms in (s.kInfeasible, s.kUnboundedOrInfeasible):
            status = "infeasible"
        elif ms == s.kTimeLimit:
            status = "time_limit"
        else:
            status = "error"
        if not has:
            return status, None, None
        g = float(info.mip_gap) if math.isfinite(info.mip_gap) else None
        return status, list(h.getSolution().col_value), g


def _assign(milp: _Milp, x: _Vars, models: Sequence[TailModel], types: Sequence[NodeType], bins: _Bins) -> None:
    """(assign) every model on exactly one node."""
    for m in models:
        idx = [x[(m.id, t.key, b)] for t in types for b in bins[t.key] if (m.id, t.key, b) in x]
        milp.row(1.0, 1.0, idx, [1.0] * len(idx))


def _memory(milp: _Milp, x: _Vars, y: _Vars, models: Sequence[TailModel], types: Sequence[NodeType],
            bins: _Bins) -> None:
    """(memory) weights + KV pools of the node's models ≤ C_t · y."""
    for t in types:
        for b in bins[t.key]:
            on = [m for m in models if (m.id, t.key, b) in x]
            milp.row(-math.inf, 0.0, [x[(m.id, t.key, b)] for m in on] + [y[(t.key, b)]],
                     [m.memory_gb for m in on] + [-t.capacity_gb])


def _compute(milp: _Milp, x: _Vars, y: _Vars, models: Sequence[TailModel], types: Sequence[NodeType],
             bins: _Bins) -> None:
    """(compute) loads of the node's models ≤ y; and x ≤ y (tightens the relaxation)."""
    for t in types:
        for b in bins[t.key]:
            on = [m for m in models if (m.id, t.key, b) in x]
            milp.row(-math.inf, 0.0, [x[(m.id, t.key, b)] for m in on] + [y[(t.key, b)]],
                     [m.load[t.key] for m in on] + [-1.0])
            for m in on:
                milp.row(-math.inf, 0.0, [x[(m.id, t.key, b)], y[(t.key, b)]], [1.0, -1.0])


def _ttft(milp: _Milp, x: _Vars, models: Sequence[TailModel], types: Sequence[NodeType], bins: _Bins) -> None:
    """(ttft) Σ_m' δ_m' x_m' + h_m x_m ≤ 1 for every model m the node may hold: decode steps slow a prefill by
    1/(1 − Σδ); the slowed prefill must fit in κ of m's TTFT SLO. (With x_m = 0 the row is implied by compute.)"""
    for t in types:
        for b in bins[t.key]:
            on = [m for m in models if (m.id, t.key, b) in x and m.decode_load]
            for m in on:
                if m.prefill_share.get(t.key, 0.0) <= 0:
                    continue
                idx = [x[(k.id, t.key, b)] for k in on]
                val = [k.decode_load.get(t.key, 0.0) + (m.prefill_share[t.key] if k.id == m.id else 0.0) for k in on]
                milp.row(-math.inf, 1.0, idx, val)


def _symmetry(milp: _Milp, y: _Vars, types: Sequence[NodeType], bins: _Bins) -> None:
    """(symmetry) y_{t,b} ≥ y_{t,b+1}."""
    for t in types:
        for b in list(bins[t.key])[1:]:
            milp.row(0.0, math.inf, [y[(t.key, b - 1)], y[(t.key, b)]], [1.0, -1.0])


def brute_force_packing(models: Sequence[TailModel], types: Sequence[NodeType]) -> Packing:
    """The cheapest packing by enumerating set partitions and node types per block (tiny instances: the oracle).

    Raises
    ------
    PlanningError
        More than 7 models.
    """
    from planning.sharing.kvpr import kvpr_partitions

    if len(models) > 7:
        raise PlanningError("models", f"{len(models)} models; brute force enumerates partitions.", "use at most 7.")
    t0 = time.perf_counter()
    best_cost, best_nodes = math.inf, cast(tuple[Node, ...], ())
    for labels in kvpr_partitions(len(models), len(models)):
        blocks = [[models[i] for i in range(len(models)) if labels[i] == b] for b in range(max(labels, default=-1) + 1)]
        options = [[t for t in types if fits(block, t)] for block in blocks]
        if any(not o for o in options):
            continue
        for choice in itertools.product(*options):
            used: dict[str, int] = {}
            for t in choice:
                used[t.key] = used.get(t.key, 0) + 1
            if any(used[t.key] > t.available for t in types if t.key in used):
                continue
            cost = sum(t.price_per_hour for t in choice)
            if cost < best_cost - 1e-12:
                best_cost = cost
                best_nodes = tuple(Node(t.key, tuple(m.id for m in block)) for t, block in zip(choice, blocks, strict=True))
    status = "optimal" if math.isfinite(best_cost) else "infeasible"
    return Packing(best_nodes, best_cost, status, "brute", 0.0, time.perf_counter() - t0)
