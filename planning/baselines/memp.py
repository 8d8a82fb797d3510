"""LLMFabric's memP baseline: split the GPU pool between models in proportion to rate × model size.

LLMFabric Sec. 5 ("Placement strategy"): memP "allocates GPU resources proportional to the memory demand of
different models, defined as the product of the average request arrival rate and the model parameter size";
its Table 1 gives the largest model the biggest GPUs first (70B: 32×GH200 + 4×A100). Our mapping:

1. demand weight d_g = rate_g × size_g per group (rate_g defaults to the sum of the group's class rates —
   pass ``request_rate`` to use requests/s — and size_g is ``model_size[g]``);
2. the pool is every offered node (Σ availability); node memory = GPUs × ``gpu_memory_gb[gpu]``;
   group g's target is d_g / Σ d × total pool memory;
3. groups in descending d_g take nodes in descending per-GPU memory (then ascending price per GPU), each node
   taken if it keeps the group's memory nearest its target (allocated + node/2 ≤ target); a group only takes
   node shapes that some template of its own uses (LLMFabric assigns GPUs; a node too large for any of the
   model's templates, e.g. beyond the ρ cap, would otherwise be a share that serves nothing);
4. each group then buys the cheapest plan for its demand *within its share* (the joint ILP restricted to the
   group and its nodes); a share that cannot carry the demand is served partially (max fraction) and said.

Without ``model_size`` every group weighs 1 (rate-proportional); without ``gpu_memory_gb`` a GPU counts as 1
unit of memory; the note says which proxy was used. Unassigned pool nodes are not bought.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from planning.allocate.problem import AllocationProblem, Offer
from planning.baselines.base import _FULL, BaselineResult, from_allocation, gpus_of
from planning.catalog.schema import parse_shape
from planning.context import CancelToken, check_cancel


def memp(
    problem: AllocationProblem,
    model_size: Mapping[str, float] | None = None,
    gpu_memory_gb: Mapping[str, float] | None = None,
    request_rate: Mapping[str, float] | None = None,
    cancel: CancelToken | None = None,
) -> BaselineResult:
    """Memory-proportional split of the pool, then per-group cheapest plan inside its share.

    Parameters
    ----------
    problem:
        The allocation problem.
    model_size:
        Group -> model size (parameters or GB of weights; only ratios matter).
    gpu_memory_gb:
        GPU id -> memory in GB.
    request_rate:
        Group -> request rate; default the sum of its class rates.
    cancel:
        Checked per group and per offer; each group's ILP gets the time left on its deadline.

    Returns
    -------
    ``BaselineResult`` named ``memp`` with the shares in ``details["share_nodes"]``.

    Raises
    ------
    Cancelled
        When ``cancel`` is set.
    """
    t0 = time.perf_counter()
    groups = list(problem.groups())
    rates, weight, proxies = _weights(problem, groups, model_size, gpu_memory_gb, request_rate)
    share, target = _split_pool(problem, groups, weight, gpu_memory_gb, cancel)
    tally = _plan_shares(problem, share, rates, weight, cancel)
    feasible = all(f >= _FULL for f in tally.served.values())
    note = "memory-proportional shares" + (f" ({'; '.join(proxies)})" if proxies else "") + ("; all demand met" if feasible else "; cannot meet demand: " + "; ".join(tally.notes))
    return BaselineResult(
        name="memp",
        cost_per_hour=tally.cost,
        served_fraction=tally.served,
        gpus_used=gpus_of(tally.nodes),
        nodes_used=tally.nodes,
        counts=tally.counts,
        feasible=feasible,
        note=note,
        penalty_per_hour=tally.penalty,
        seconds=time.perf_counter() - t0,
        details={"share_nodes": {g: dict(v) for g, v in share.items()}, "target_memory": target, "weight": weight,
                 "time_limited": tally.time_limited},
    )


def _weights(
    problem: AllocationProblem,
    groups: list[str],
    model_size: Mapping[str, float] | None,
    gpu_memory_gb: Mapping[str, float] | None,
    request_rate: Mapping[str, float] | None,
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """(rate, demand weight rate × size, the proxies used) per group (step 1)."""
    proxies = []
    rates = {g: sum(q.rate for q in problem.classes if q.group == g) for g in groups}
    if request_rate is not None:
        rates.update({g: float(request_rate[g]) for g in groups if g in request_rate})
    if model_size is None:
        proxies.append("no model sizes given: weights are rates only")
    size = {g: float(model_size.get(g, 1.0)) if model_size else 1.0 for g in groups}
    if gpu_memory_gb is None:
        proxies.append("no GPU memory given: each GPU counts as one unit")
    return rates, {g: rates[g] * size[g] for g in groups}, proxies


def _split_pool(
    problem: AllocationProblem,
    groups: list[str],
    weight: dict[str, float],
    gpu_memory_gb: Mapping[str, float] | None,
    cancel: CancelToken | None,
) -> tuple[dict[str, dict[tuple[str, str], int]], dict[str, float]]:
    """(each group's share of the pool's nodes, its target memory): steps 2 and 3."""

    def mem_per_gpu(shape: str) -> float:
        _c, gpu = parse_shape(shape, bare_gpu=True)
        return float(gpu_memory_gb.get(gpu, 1.0)) if gpu_memory_gb else 1.0

    total_weight = sum(weight.values())
    pool = sorted(
        (o for o in problem.offers if o.available > 0),
        key=lambda o: (-mem_per_gpu(o.shape), o.price_per_hour / parse_shape(o.shape, bare_gpu=True)[0], o.region, o.shape),
    )
    left = {(o.region, o.shape): o.available for o in pool}
    node_mem = {(o.region, o.shape): mem_per_gpu(o.shape) * parse_shape(o.shape, bare_gpu=True)[0] for o in pool}
    pool_mem = sum(node_mem[k] * n for k, n in left.items())
    share: dict[str, dict[tuple[str, str], int]] = {g: {} for g in groups}
    target = {g: (weight[g] / total_weight * pool_mem if total_weight > 0 else 0.0) for g in groups}
    usable = {g: {s for t in problem.templates if t.group == g for s in t.usage} for g in groups}
    for g in sorted(groups, key=lambda g: (-weight[g], groups.index(g))):
        got = 0.0
        for o in pool:
            if o.shape not in usable[g]:  # a node no template of this model can use is no share at all
                continue
            check_cancel(cancel, "baseline memp")
            k = (o.region, o.shape)
            take = _nodes_to_take(left[k], got, node_mem[k], target[g])
            if take > 0:
                left[k] -= take
                got += take * node_mem[k]
                share[g][k] = share[g].get(k, 0) + take
    return share, target


@dataclass
class _Tally:
    """What the groups' plans inside their shares add up to (step 4)."""

    cost: float = 0.0
    penalty: float = 0.0
    served: dict[str, float] = field(default_factory=dict)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    nodes: dict[tuple[str, str], int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    time_limited: bool = False  # some part's ILP stopped on a wall clock: that moment's incumbent


def _plan_shares(
    problem: AllocationProblem,
    share: dict[str, dict[tuple[str, str], int]],
    rates: dict[str, float],
    weight: dict[str, float],
    cancel: CancelToken | None,
) -> _Tally:
    """Each linked part's cheapest plan inside the union of its groups' shares (step 4)."""
    total_weight = sum(weight.values())
    tally = _Tally()
    for part in problem.linked_parts():
        check_cancel(cancel, "baseline memp")
        demanded = [g for g in part if rates[g] > 0 or any(q.rate > 0 for q in problem.classes if q.group == g)]
        for g in part:
            if g not in demanded:
                tally.served[g] = 1.0
        if not demanded:
            continue
        res = from_allocation("memp", _part_problem(problem, part, share), "", cancel)
        tally.cost += res.cost_per_hour
        tally.penalty += res.penalty_per_hour
        tally.time_limited |= bool(res.details.get("time_limited"))
        for k, v in res.counts.items():
            tally.counts[k] = tally.counts.get(k, 0) + v
        for k, v in res.nodes_used.items():
            tally.nodes[k] = tally.nodes.get(k, 0) + v
        for g in demanded:
            tally.served[g] = res.served_fraction.get(g, 0.0)
            if tally.served[g] < _FULL:
                tally.notes.append(f"{g} gets {sum(share[g].values())} nodes ({100 * weight[g] / total_weight:.0f} % of pool memory) and serves {100 * tally.served[g]:.0f} % of demand")
    return tally


def _part_problem(
    problem: AllocationProblem, part: list[str], share: dict[str, dict[tuple[str, str], int]]
) -> AllocationProblem:
    """The problem restricted to one linked part's groups and the union of their shares: a model's prefill and
    decode (linked: the same regions) plan together."""
    pooled: dict[tuple[str, str], int] = {}
    for g in part:
        for k, n in share[g].items():
            pooled[k] = pooled.get(k, 0) + n
    offers = tuple(Offer(r, s, o.price_per_hour, pooled.get((r, s), 0)) for o in problem.offers for r, s in [(o.region, o.shape)])
    templates = tuple(t for t in problem.templates if t.group in part)
    ids = {t.id for t in templates}
    classes = tuple(q for q in problem.classes if q.group in part)
    own = {q.id for q in classes}
    return replace(
        problem,
        templates=templates,
        offers=offers,
        classes=classes,
        current={k: v for k, v in problem.current.items() if k[0] in ids},
        budget_per_hour=None,
        dump_model=None,
        links=tuple(lk for lk in problem.links if set(lk) <= own),
        transfers=tuple(tp for tp in problem.transfers if tp.sender in own),
    )


def _nodes_to_take(left: float, got: float, node: float, target: float) -> int:
    """How many nodes of ``node`` memory to take one by one while ``got + node/2 ≤ target`` (at most ``left``),
    in closed form: an availability of 10¹⁸ nodes must not mean 10¹⁸ loop turns."""
    if left <= 0 or node <= 0 or got + node / 2 > target:
        return 0
    take = min(int(left), math.floor((target - got - node / 2) / node) + 1)
    for _ in range(2):  # float rounding of the division (bounded: at 10¹⁸ nodes a +1 may not change the sum)
        if take > 1 and got + (take - 1) * node + node / 2 > target:
            take -= 1
        elif take < left and got + take * node + node / 2 <= target:
            take += 1
    return max(1, take)
