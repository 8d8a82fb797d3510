"""How a plan instance runs on vLLM: engines, one tensor-parallel size each, pipeline ranks and layer partition.

A plan instance is a pipeline: stages of consecutive layers, each stage on one or more nodes (data-parallel
copies of the stage: the planner splits the stage's traffic over them), and inside a node the perf model's best
tensor × data-parallel split of its GPUs. vLLM (the pinned version, :data:`planning.export.deploy.VLLM_VERSION`)
runs something narrower, and the export maps every instance onto it instead of planning around it:

- **Equal data parallelism** (every stage on the same number d of nodes, including S = 1): d independent
  engines, each a pipeline of one node per stage (nodes paired fastest with fastest), when that keeps the
  plan's throughput exactly (always for S = 1 and for identical nodes). A single-node engine runs
  ``--tensor-parallel-size`` = its GPUs when the model's heads allow it, the rest as ``--data-parallel-size``.
- **Otherwise** (S ≥ 2): one engine on one Ray cluster spanning every node of the instance.
  vLLM's pipeline parallelism needs **one tensor-parallel size for every rank** (world size = TP × PP), so
  TP = the largest size that divides every node's GPU count and suits the model's heads, and a node of c GPUs
  runs c / TP consecutive pipeline ranks. A stage that the plan spreads over several data-parallel nodes
  becomes consecutive ranks too (vLLM has no data parallelism inside a stage): its layers are split over them
  in proportion to each node's planned throughput. A node's layers are split evenly over its ranks; uneven
  counts go to ``VLLM_PP_LAYER_PARTITION``. Every GPU of the plan is used, a node of a one-node stage holds
  exactly the plan's layers (a data-parallel node fewer), and what changes is said in :attr:`EngineLayout.notes`.

The alternative, a placement constraint that only plans pipelines vLLM runs as they are (one node per stage,
equal GPUs per node), would take Coral's mixed pipelines away from every user, including those deploying
elsewhere; the export adapts to the engine instead and says how. See docs/deploy.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from planning.errors import PlanningError
from planning.result import InstancePlan, StagePlan

TpOptions = Callable[[str, int], Sequence[int]]
"""``tp_options(model, gpus)``: tensor-parallel sizes usable for ``model`` on ``gpus`` GPUs (vLLM's head rule)."""


@dataclass(frozen=True)
class NodeSlot:
    """One machine of an engine, in pipeline order: ``rank_layers`` are the layers of each pipeline rank on it."""

    index: int
    shape: str
    gpu: str
    gpus: int
    stage: int
    rank_layers: tuple[int, ...]

    @property
    def layers(self) -> int:
        return sum(self.rank_layers)


@dataclass(frozen=True)
class EngineLayout:
    """A vLLM engine: ``tp`` × ``pp`` GPUs (× ``dp`` data-parallel copies on a single node) over ``slots``,
    ``copies`` times per copy of the instance."""

    tp: int
    dp: int
    slots: tuple[NodeSlot, ...]
    notes: tuple[str, ...] = ()
    copies: int = 1
    """Equal engines one copy of the instance runs (independent pipelines of a data-parallel template)."""

    @property
    def pp(self) -> int:
        return sum(len(s.rank_layers) for s in self.slots)

    @property
    def partition(self) -> tuple[int, ...]:
        """Layers per pipeline rank, in the plan's pipeline order."""
        return tuple(j for s in self.slots for j in s.rank_layers)

    @property
    def gpus(self) -> int:
        return sum(s.gpus for s in self.slots)

    @property
    def multi_node(self) -> bool:
        return len(self.slots) > 1


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _largest_tp(model: str, gpus: int, tp_options: TpOptions | None) -> int:
    """The largest TP size dividing ``gpus`` that the model's heads allow (1 always works)."""
    allowed = set(tp_options(model, gpus)) if tp_options is not None else set(_divisors(gpus))
    return max([t for t in _divisors(gpus) if t in allowed] or [1])


def apportion(targets: Sequence[float], total: int, minimum: Sequence[int] | None = None) -> list[int]:
    """Integers summing to ``total``, each at least ``minimum[i]`` (default 1), closest to ``targets`` scaled to
    ``total`` (largest remainders; ties go to the earlier entry).

    Raises
    ------
    PlanningError
        Fewer units than the minimums need.
    """
    n = len(targets)
    low = list(minimum) if minimum is not None else [1] * n
    if total < sum(low):
        raise PlanningError("layers", f"{total} layers cannot give {sum(low)} pipeline ranks at least one each.",
                            "use fewer GPUs for this model.")
    mass = sum(targets)
    want = [t * total / mass for t in targets] if mass > 0 else [total / n] * n
    out = [max(lo, math.floor(w)) for lo, w in zip(low, want, strict=True)]
    while sum(out) < total:
        k = max(range(n), key=lambda i: (want[i] - out[i], -i))
        out[k] += 1
    while sum(out) > total:
        k = max((i for i in range(n) if out[i] > low[i]), key=lambda i: (out[i] - want[i], -i))
        out[k] -= 1
    return out


def _fastest_first(stage: StagePlan) -> list[int]:
    """Node positions of a stage, fastest (planned throughput) first, ties by shape."""
    return sorted(range(len(stage.nodes)), key=lambda i: (-stage.nodes[i].throughput, stage.nodes[i].shape))


def _pipelines(inst: InstancePlan) -> list[list[int]] | None:
    """Node indices (stage-major numbering) of ``d`` independent one-node-per-stage pipelines, when every stage has
    the same ``d`` nodes and pairing them (fastest with fastest) keeps the plan's throughput exactly; else None."""
    sizes = {len(s.nodes) for s in inst.stages}
    if len(sizes) != 1:
        return None
    d = sizes.pop()
    starts = [sum(len(s.nodes) for s in inst.stages[:k]) for k in range(len(inst.stages))]
    order = [_fastest_first(st) for st in inst.stages]
    planned = min(sum(n.throughput for n in st.nodes) for st in inst.stages)
    paired = sum(min(st.nodes[order[k][i]].throughput for k, st in enumerate(inst.stages)) for i in range(d))
    if d > 1 and planned > 0 and paired < planned * (1 - 1e-9):
        return None
    return [[starts[k] + order[k][i] for k in range(len(inst.stages))] for i in range(d)]


def _layout(inst: InstancePlan, members: list[int], tp_options: TpOptions | None,
            data_parallel_note: bool = False) -> EngineLayout:
    """One engine over the nodes ``members`` (stage-major indices) of ``inst``, in pipeline order."""
    nodes = [(s_idx, node) for s_idx, stage in enumerate(inst.stages) for node in stage.nodes]
    mine = [nodes[i] for i in members]
    layers = sum(s.layers for s in inst.stages)
    if len(mine) == 1:
        node = mine[0][1]
        tp = _largest_tp(inst.model, node.count, tp_options)
        single: tuple[str, ...] = () if tp == node.count else (
            f"{node.shape}: TP {tp} × data parallel {node.count // tp} (the model's heads do not split "
            f"{node.count} ways)",)
        return EngineLayout(tp, node.count // tp, (NodeSlot(0, node.shape, node.gpu, node.count, 0, (layers,)),),
                            single)
    tp = _largest_tp(inst.model, math.gcd(*(node.count for _, node in mine)), tp_options)
    ranks = sum(node.count // tp for _, node in mine)
    if ranks > layers:
        raise PlanningError("instances", f"{inst.model}/{inst.phase} ({inst.template_id}) needs {ranks} "
                            f"pipeline ranks of TP {tp} but the model has {layers} layers.",
                            "plan fewer or larger nodes per pipeline (options.nmax).")
    node_layers: dict[int, int] = {}
    for s_idx, stage in enumerate(inst.stages):
        here = [k for k, (s, _) in enumerate(mine) if s == s_idx]
        weight = [max(mine[k][1].throughput, 0.0) for k in here]
        # a stage's data-parallel nodes share its layers in proportion to their planned throughput
        split = apportion(weight if sum(weight) > 0 else [1.0] * len(here), stage.layers,
                          [mine[k][1].count // tp for k in here])
        node_layers.update(zip(here, split, strict=True))
    slots = tuple(NodeSlot(k, node.shape, node.gpu, node.count, s_idx,
                           tuple(apportion([1.0] * (node.count // tp), node_layers[k])))
                  for k, (s_idx, node) in enumerate(mine))
    notes: list[str] = []
    counts = sorted({node.count for _, node in mine})
    if any(node.count != tp for _, node in mine):
        notes.append(f"tensor parallel {tp} on every rank (vLLM needs one TP size per pipeline; the plan's nodes "
                     f"have {' and '.join(str(c) for c in counts)} GPUs): a node of c GPUs runs c/{tp} pipeline ranks")
    if data_parallel_note:
        for s_idx, stage in enumerate(inst.stages):
            if len(stage.nodes) > 1:
                parts = "/".join(str(s.layers) for s in slots if s.stage == s_idx)
                notes.append(f"stage {s_idx}'s {len(stage.nodes)} data-parallel nodes run as consecutive pipeline "
                             f"ranks holding {parts} of its {stage.layers} layers (vLLM has no data parallelism "
                             "inside a pipeline stage)")
    return EngineLayout(tp, 1, slots, tuple(notes))


def engine_layouts(inst: InstancePlan, tp_options: TpOptions | None = None) -> list[EngineLayout]:
    """The vLLM engines one copy of ``inst`` runs as (module docstring), equal engines merged (``copies``).

    Parameters
    ----------
    inst:
        A plan instance with its stages.
    tp_options:
        Usable TP sizes per (model, GPUs); default every divisor (no head check).

    Returns
    -------
    list[EngineLayout]
        Independent engines (one per node of a single-stage instance, one per one-node-per-stage pipeline when
        every stage has the same number of nodes), else one engine over every node.

    Raises
    ------
    PlanningError
        An instance without a placement, or with more pipeline ranks than layers.
    """
    if not inst.stages or not all(s.nodes for s in inst.stages):
        raise PlanningError("instances", f"{inst.model}/{inst.phase} ({inst.template_id}) has no placement.",
                            "export a plan solved with generated templates (explicit ones carry no layout).")
    pipelines = _pipelines(inst)
    if pipelines is not None:
        engines = [_layout(inst, members, tp_options) for members in pipelines]
        if len(pipelines) > 1 and len(inst.stages) > 1:
            engines = [replace(e, notes=(*e.notes, f"each stage's {len(pipelines)} data-parallel nodes form "
                                                   f"{len(pipelines)} independent pipelines (same throughput)"))
                       for e in engines]
    else:
        n_nodes = sum(len(s.nodes) for s in inst.stages)
        engines = [_layout(inst, list(range(n_nodes)), tp_options, data_parallel_note=True)]
    merged: dict[tuple[object, ...], EngineLayout] = {}
    for e in engines:
        key = (e.tp, e.dp, tuple((s.shape, s.rank_layers) for s in e.slots))
        merged[key] = replace(merged[key], copies=merged[key].copies + 1) if key in merged else e
    return list(merged.values())
