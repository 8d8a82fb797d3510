"""Pipeline layout of one serving template: stages left to right, replica nodes stacked (Coral Fig. 4)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import plotly.graph_objects as go

from planning.errors import PlanningError
from planning.viz._common import empty_figure
from planning.viz.colors import gpu_color, gpu_of_shape, text_color

BOX_W = 1.7  # node box width, data units
BOX_H = 0.8  # node box height
STAGE_DX = 3.0  # distance between stage centres
NODE_DY = 1.1  # distance between replica centres within a stage


@dataclass(frozen=True)
class _Node:
    stage: int
    index: int
    shape: str
    gpu: str
    count: int | None
    throughput: float | None
    x: float
    y: float


def _int(value: Any, field: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise PlanningError(field, f"must be an integer, got {value!r}.", "Pass a whole number.") from exc
    if number != value and not (isinstance(value, str) and value.strip().isdigit()):
        raise PlanningError(field, f"must be an integer, got {value!r}.", "Pass a whole number.")
    return number


def layer_ranges(stages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Inclusive layer range ``(first, last)`` of each stage.

    ``layer_end`` is read as exclusive (Python slice convention) unless ``layers`` says the range is
    inclusive (``layer_end - layer_start + 1 == layers``). Without ``layer_start``/``layer_end`` the
    ranges follow from the cumulative ``layers`` counts, starting at layer 0.

    Parameters
    ----------
    stages:
        Stage dicts in pipeline order (see :func:`pipeline_figure`).

    Returns
    -------
    list[tuple[int, int]]

    Raises
    ------
    PlanningError
        If a stage has neither a layer range nor a layer count, or they disagree.
    """
    ranges: list[tuple[int, int]] = []
    cursor = 0
    for s, stage in enumerate(stages):
        field = f"stages[{s}]"
        count = _int(stage["layers"], f"{field}.layers") if stage.get("layers") is not None else None
        has_range = stage.get("layer_start") is not None and stage.get("layer_end") is not None
        if has_range:
            start = _int(stage["layer_start"], f"{field}.layer_start")
            end = _int(stage["layer_end"], f"{field}.layer_end")
            if count is None or end - start == count:
                last = end - 1
            elif end - start + 1 == count:
                last = end
            else:
                raise PlanningError(
                    f"{field}.layer_end",
                    f"range {start}..{end} does not hold {count} layers.",
                    f"Use layer_end = {start + count} (exclusive) or drop layer_start/layer_end.",
                )
        elif count is not None:
            start, last = cursor, cursor + count - 1
        else:
            raise PlanningError(
                f"{field}.layers",
                "missing: a stage needs 'layers' or 'layer_start'/'layer_end'.",
                "Add the number of layers the stage holds.",
            )
        if last < start:
            raise PlanningError(f"{field}.layers", "a stage must hold at least one layer.", "Use layers ≥ 1.")
        ranges.append((start, last))
        cursor = last + 1
    return ranges


def _layout(stages: Sequence[Mapping[str, Any]]) -> list[_Node]:
    """Place nodes with networkx: a layered DiGraph (stage = layer), multipartite layout, scaled to boxes."""
    graph = nx.DiGraph()
    for s, stage in enumerate(stages):
        nodes = stage.get("nodes") or []
        if not nodes:
            raise PlanningError(f"stages[{s}].nodes", "is empty: every stage needs a node.", "Add its nodes.")
        for i in range(len(nodes)):
            graph.add_node((s, i), stage=s)
    for s in range(len(stages) - 1):  # every replica of a stage may hand off to every replica of the next
        for i in range(len(stages[s]["nodes"])):
            for k in range(len(stages[s + 1]["nodes"])):
                graph.add_edge((s, i), (s + 1, k))
    pos = nx.multipartite_layout(graph, subset_key="stage", align="vertical")
    # multipartite_layout spaces layers and nodes by one common unit; recover it and map to box units.
    xs = sorted({round(float(p[0]), 9) for p in pos.values()})
    ys_by_stage: dict[int, list[float]] = {}
    for (s, _), p in pos.items():
        ys_by_stage.setdefault(s, []).append(float(p[1]))
    steps = [b - a for a, b in itertools.pairwise(xs)]
    for ys in ys_by_stage.values():
        steps += [b - a for a, b in itertools.pairwise(sorted(ys))]
    unit = min((g for g in steps if g > 1e-9), default=1.0)
    x0 = xs[0]
    # Within a stage, replicas keep their input order top to bottom on the slots networkx computed.
    slot_y = {(s, i): y for s, ys in ys_by_stage.items() for i, y in enumerate(sorted(ys, reverse=True))}
    placed: list[_Node] = []
    for (s, i), p in pos.items():
        raw = stages[s]["nodes"][i]
        shape = str(raw.get("shape") or "")
        if not shape:
            raise PlanningError(
                f"stages[{s}].nodes[{i}].shape", "missing.", 'Give the node shape, e.g. "2xL40S".'
            )
        gpu = str(raw.get("gpu") or gpu_of_shape(shape))
        thr = raw.get("throughput")
        placed.append(
            _Node(
                stage=s,
                index=i,
                shape=shape,
                gpu=gpu,
                count=_int(raw["count"], f"stages[{s}].nodes[{i}].count") if raw.get("count") else None,
                throughput=float(thr) if thr is not None else None,
                x=(float(p[0]) - x0) / unit * STAGE_DX,
                y=slot_y[(s, i)] / unit * NODE_DY,
            )
        )
    placed.sort(key=lambda n: (n.stage, n.index))
    return placed


def _fmt_rate(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k tok/s"
    if value >= 1000:
        return f"{value / 1000:,.1f}k tok/s"
    return f"{value:,.0f} tok/s"


def _summary(nodes: list[_Node], n_stages: int) -> str:
    gpus: Counter[str] = Counter()
    for n in nodes:
        gpus[n.gpu] += n.count or 1
    parts = ", ".join(f"{c}×{g}" for g, c in sorted(gpus.items(), key=lambda kv: (-kv[1], kv[0])))
    stage_word = "stage" if n_stages == 1 else "stages"
    node_word = "node" if len(nodes) == 1 else "nodes"
    total = sum(gpus.values())
    gpu_word = "GPU" if total == 1 else "GPUs"
    return f"{n_stages} {stage_word} · {len(nodes)} {node_word} · {total} {gpu_word} ({parts})"


def pipeline_figure(
    stages: Sequence[Mapping[str, Any]],
    title: str = "",
    *,
    phase: str | None = None,
    loop_back: bool | None = None,
) -> go.Figure:
    """Draw a serving template's pipeline: stages left to right, each stage's nodes as stacked boxes.

    Boxes are coloured by GPU type (:data:`planning.viz.colors.GPU_COLORS`) and labelled with the node
    shape (and throughput when given); each stage is headed by its number and layer range
    ("layers 0–23"); arrows show the hand-off between stages, and decode gets a loop-back arrow because
    each generated token passes through the whole pipeline again. Node positions come from a networkx
    ``multipartite_layout`` of the stage graph.

    Parameters
    ----------
    stages:
        Stages in pipeline order, each ``{"layers": j, "layer_start": a, "layer_end": b, "nodes": [
        {"shape": "2xL40S", "gpu": "L40S", "count": 2, "throughput": 1234.0}, ...]}``. ``gpu`` defaults to
        the shape's GPU, ``count`` (GPUs in the node) and ``throughput`` (tokens/s) are optional;
        ``layer_start``/``layer_end`` may be left out (see :func:`layer_ranges`). Several nodes in one
        stage are data-parallel replicas.
    title:
        Figure title; a one-line summary (stages, nodes, GPUs) is added under it.
    phase:
        ``"prefill"`` or ``"decode"``; decode draws the loop-back arrow.
    loop_back:
        Force the loop-back arrow on or off (default: only for decode).

    Returns
    -------
    plotly.graph_objects.Figure
        One ``rect`` shape per node, one invisible hover trace per GPU type; an explanatory annotation
        only when ``stages`` is empty.

    Raises
    ------
    PlanningError
        If a stage lacks nodes, a node lacks a shape, or layer counts and ranges disagree.
    """
    if not stages:
        return empty_figure("No pipeline to draw: this template has no stages yet.", title)
    ranges = layer_ranges(stages)
    nodes = _layout(stages)
    draw_loop = (phase == "decode") if loop_back is None else loop_back

    fig = go.Figure()
    # Collected as dicts and set once: plotly validates each add_shape/add_annotation call (slow).
    shapes = _node_boxes(nodes)
    for trace in _hover_traces(nodes):
        fig.add_trace(trace)
    top = max(n.y for n in nodes) + BOX_H / 2
    bottom = min(n.y for n in nodes) - BOX_H / 2
    stage_x = [min(n.x for n in nodes if n.stage == s) for s in range(len(stages))]
    arrow = {"showarrow": True, "arrowhead": 3, "arrowsize": 1.2, "arrowwidth": 1.6, "arrowcolor": "#444444"}
    notes = _stage_notes(nodes, ranges, stage_x, top, arrow)
    left, right = stage_x[0] - BOX_W / 2, stage_x[-1] + BOX_W / 2
    notes.append(_arrow_note(left - 0.05, 0, left - 1.0, 0, "in", "input", arrow))
    notes.append(_arrow_note(right + 1.0, 0, right + 0.05, 0, "", "output", arrow))
    notes.append(dict(x=right + 1.05, y=0, text="out", showarrow=False, xanchor="left", name="output-label"))
    low = bottom - 0.6
    if draw_loop:
        loop_shape, loop_notes = _decode_loop(nodes, stage_x, low, arrow)
        shapes.append(loop_shape)
        notes.extend(loop_notes)
    fig.update_layout(shapes=shapes, annotations=notes)
    rows = max(Counter(n.stage for n in nodes).values())
    summary = _summary(nodes, len(stages))
    fig.update_layout(
        title={"text": f"{title}<br><sup>{summary}</sup>" if title else summary},
        template="plotly_white",
        height=240 + 90 * rows,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={"title": {"text": "GPU"}, "orientation": "h", "y": -0.02, "yanchor": "top"},
        showlegend=True,
        hovermode="closest",
    )
    fig.update_xaxes(visible=False, range=[left - 1.3, right + 1.6])
    fig.update_yaxes(visible=False, range=[low - 0.7, top + 1.4], scaleanchor="x", scaleratio=1)
    return fig


def _node_boxes(nodes: Sequence[_Node]) -> list[dict[str, Any]]:
    """One ``rect`` shape per node, coloured by GPU type and labelled with its shape (and throughput); the first
    box of each GPU type carries its legend entry."""
    shapes: list[dict[str, Any]] = []
    legend_seen: set[str] = set()
    for n in nodes:
        color = gpu_color(n.gpu)
        label = n.shape if n.throughput is None else f"{n.shape}<br>{_fmt_rate(n.throughput)}"
        shapes.append(
            dict(
                type="rect",
                x0=n.x - BOX_W / 2,
                x1=n.x + BOX_W / 2,
                y0=n.y - BOX_H / 2,
                y1=n.y + BOX_H / 2,
                fillcolor=color,
                line={"color": "#333333", "width": 1},
                layer="below",
                name=n.gpu,
                legendgroup=n.gpu,
                showlegend=n.gpu not in legend_seen,
                label={"text": label, "font": {"color": text_color(color), "size": 12}},
            )
        )
        legend_seen.add(n.gpu)
    return shapes


def _hover_traces(nodes: Sequence[_Node]) -> list[go.Scatter]:
    """Hover: one invisible marker trace per GPU type over the box centres."""
    traces = []
    for gpu in sorted({n.gpu for n in nodes}):
        mine = [n for n in nodes if n.gpu == gpu]
        traces.append(
            go.Scatter(
                x=[n.x for n in mine],
                y=[n.y for n in mine],
                mode="markers",
                marker={"size": 40, "opacity": 0, "color": gpu_color(gpu)},
                name=gpu,
                legendgroup=gpu,
                showlegend=False,
                hovertemplate="%{text}<extra></extra>",
                text=[
                    f"stage {n.stage + 1}, replica {n.index + 1}<br>{n.shape} ({n.count or '?'} GPUs)"
                    + (f"<br>{_fmt_rate(n.throughput)}" if n.throughput is not None else "")
                    for n in mine
                ],
            )
        )
    return traces


def _stage_notes(nodes: Sequence[_Node], ranges: Sequence[tuple[int, int]], stage_x: Sequence[float], top: float,
                 arrow: dict[str, Any]) -> list[dict[str, Any]]:
    """Each stage's header (number, layer range, replicas, summed throughput) and the hand-off arrows."""
    notes: list[dict[str, Any]] = []
    for s, (first, last) in enumerate(ranges):
        stage_nodes = [n for n in nodes if n.stage == s]
        thr = [n.throughput for n in stage_nodes if n.throughput is not None]
        header = f"<b>stage {s + 1}</b><br>layers {first}–{last}"
        if len(stage_nodes) > 1:
            header += f"<br>{len(stage_nodes)} replicas"
        if thr and len(thr) == len(stage_nodes):
            header += f"<br>{_fmt_rate(sum(thr))}"
        notes.append(
            dict(
                x=stage_x[s], y=top + 0.15, text=header, showarrow=False, yanchor="bottom", name=f"stage-{s}"
            )
        )
    for s in range(len(stage_x) - 1):
        notes.append(
            dict(
                x=stage_x[s + 1] - BOX_W / 2 - 0.05,
                y=0,
                ax=stage_x[s] + BOX_W / 2 + 0.05,
                ay=0,
                xref="x",
                yref="y",
                axref="x",
                ayref="y",
                text="",
                name=f"handoff-{s}",
                **arrow,
            )
        )
    return notes


def _decode_loop(nodes: Sequence[_Node], stage_x: Sequence[float], low: float,
                 arrow: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decode's loop-back: a dotted path from under the last stage to under the first, its arrow head and label."""
    n_stages = len(stage_x)
    last_bottom = min(n.y for n in nodes if n.stage == n_stages - 1) - BOX_H / 2
    first_bottom = min(n.y for n in nodes if n.stage == 0) - BOX_H / 2
    x_from = stage_x[-1] + (0.25 if n_stages == 1 else 0.0)
    x_to = stage_x[0] - (0.25 if n_stages == 1 else 0.0)
    path = dict(
        type="path",
        path=f"M {x_from},{last_bottom} L {x_from},{low} L {x_to},{low}",
        line={"color": "#444444", "width": 1.6, "dash": "dot"},
        name="decode-loop",
    )
    notes = [
        _arrow_note(x_to, first_bottom - 0.03, x_to, low, "", "decode-loop-head", arrow),
        dict(
            x=(x_from + x_to) / 2,
            y=low,
            text="decode: each new token runs through all stages again",
            showarrow=False,
            yanchor="top",
            font={"size": 11, "color": "#444444"},
            name="decode-loop-label",
        ),
    ]
    return path, notes


def _arrow_note(x: float, y: float, ax: float, ay: float, text: str, name: str, arrow: dict[str, Any]) -> dict[str, Any]:
    """A plotly annotation drawing an arrow from (ax, ay) to (x, y) in data coordinates."""
    return dict(x=x, y=y, ax=ax, ay=ay, xref="x", yref="y", axref="x", ayref="y", text=text, name=name, **arrow)
