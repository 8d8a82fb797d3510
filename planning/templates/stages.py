"""Pipeline stages, one type end to end: ``planning.result.StagePlan`` (layers, layer range, node boxes).

The solvers return ``placement.Stage`` (layers + node indices) and the library stores placements as JSON text
(``[{"layers": j, "shapes": [...]}]``, parsed only when shown); both become StagePlans here and nowhere else.
A fixed placement is evaluated by :func:`planning.templates.placement.pipeline_throughput` (Coral's semantics:
min over stages of the stage's summed T̂_j), the one evaluator the solvers' ``evaluate`` also uses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from planning.catalog.schema import parse_shape
from planning.result import NodeBox, StagePlan
from planning.templates.placement import Placement, pipeline_throughput


def stages_from_placement(placement: Sequence[Mapping[str, Any]] | Placement, node_shapes: Sequence[str] = (),
                          tables: np.ndarray | None = None,
                          table_shapes: Sequence[str] = ()) -> tuple[StagePlan, ...]:
    """StagePlans in pipeline order.

    Parameters
    ----------
    placement:
        A solver's :class:`Placement`, or its stages as ``[{"layers": j, "shapes": [...]}]`` (the library's
        layout) or ``[{"layers": j, "nodes": [k, ...]}]`` where k indexes ``node_shapes``.
    node_shapes:
        Shape of each node index (for node-indexed layouts).
    tables, table_shapes:
        Optional ``(len(table_shapes), S_max, L)`` T̂ tables to label every node box with its throughput.
    """
    raw: Sequence[Mapping[str, Any]] = (
        [{"layers": st.layers, "nodes": list(st.nodes)} for st in placement.stages]
        if isinstance(placement, Placement) else placement)
    index = {s: k for k, s in enumerate(table_shapes)}
    stages: list[StagePlan] = []
    start = 0
    n_stages = len(raw)
    for st in raw:
        j = int(st["layers"])
        members = st["shapes"] if "shapes" in st else [node_shapes[int(k)] for k in st["nodes"]]
        boxes = []
        for shape in members:
            count, gpu = parse_shape(shape)
            thr = float(tables[index[shape], n_stages - 1, j - 1]) if tables is not None else 0.0
            boxes.append(NodeBox(shape=shape, gpu=gpu, count=count, throughput=thr))
        stages.append(StagePlan(layers=j, layer_start=start, layer_end=start + j, nodes=tuple(boxes)))
        start += j
    return tuple(stages)


def stages_from_json(text: str, tables: np.ndarray | None = None,
                     table_shapes: Sequence[str] = ()) -> tuple[StagePlan, ...]:
    """StagePlans of one library row's ``stages_json`` (empty text → no stages, e.g. explicit templates)."""
    return stages_from_placement(json.loads(text), (), tables, table_shapes) if text else ()


def rated_stages(stages: Sequence[StagePlan], rate: float) -> tuple[StagePlan, ...]:
    """``stages`` with every node's T̂ scaled so that the pipeline (min over stages of the summed T̂) runs at
    ``rate``: a histogram instance's node labels then speak of the mix it serves, as its throughput does, with
    the nodes' shares unchanged. Unlabelled boxes (T̂ 0 everywhere) are returned as they are."""
    have = min((sum(b.throughput for b in st.nodes) for st in stages), default=0.0)
    if have <= 0 or rate <= 0:
        return tuple(stages)
    k = rate / have
    return tuple(replace(st, nodes=tuple(replace(b, throughput=b.throughput * k) for b in st.nodes))
                 for st in stages)


def evaluate_stages(stages: Sequence[StagePlan], tables: np.ndarray, shape_index: Mapping[str, int]) -> float:
    """Throughput of a fixed placement on (other) perf tables ``(K, S_max, L)`` indexed by ``shape_index``."""
    return pipeline_throughput([st.layers for st in stages],
                               [[shape_index[b.shape] for b in st.nodes] for st in stages], tables)
