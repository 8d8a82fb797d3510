"""Shared-GPU figures: node → co-located models, memory per node (weights vs KV pool), dedicated vs shared cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from planning.errors import PlanningError
from planning.viz._common import empty_figure, money
from planning.viz.colors import gpu_color

_WEIGHTS = "#6B6B6B"
_KV = "#F2A541"
_FREE = "#E8E8E8"


def _nodes(nodes: Sequence[Mapping[str, Any]], function: str) -> list[Mapping[str, Any]]:
    """Check the ``shared_nodes`` rows (the JSON of ``SharingResult.to_dict``)."""
    out = []
    for i, n in enumerate(nodes):
        for key in ("shape", "gpu", "capacity_gb", "models"):
            if key not in n:
                raise PlanningError(f"{function}.nodes[{i}].{key}", "is missing.",
                                    "pass SharingResult.to_dict()['shared_nodes'] (or the CLI's JSON).")
        for j, m in enumerate(n["models"]):
            for key in ("model", "weights_gb", "kv_pool_gb"):
                if key not in m:
                    raise PlanningError(f"{function}.nodes[{i}].models[{j}].{key}", "is missing.",
                                        "give each model its weights_gb and kv_pool_gb.")
        out.append(n)
    return out


def _label(i: int, n: Mapping[str, Any]) -> str:
    return f"node {i} · {n['shape']}"


def shared_nodes_figure(nodes: Sequence[Mapping[str, Any]], title: str = "Shared GPUs and their models") -> go.Figure:
    """Node → models diagram (a Sankey): each shared GPU on the left, its co-located models on the right, link
    width = the model's memory (weights + KV pool, GB).

    Parameters
    ----------
    nodes:
        ``shared_nodes`` rows: ``shape``, ``gpu``, ``capacity_gb``, ``models`` (``model``, ``weights_gb``,
        ``kv_pool_gb``, optional ``load``, ``attainment_estimate``).

    Returns
    -------
    plotly Figure (an empty-input figure when there are no shared nodes).

    Raises
    ------
    PlanningError
        A row without the fields above.
    """
    rows = _nodes(nodes, "shared_nodes_figure")
    if not rows:
        return empty_figure("No shared GPUs: every model has dedicated instances.", title)
    labels = [_label(i, n) for i, n in enumerate(rows)]
    colors = [gpu_color(str(n["gpu"])) for n in rows]
    source, target, value, hover = [], [], [], []
    for i, n in enumerate(rows):
        for m in n["models"]:
            labels.append(str(m["model"]))
            colors.append("#B0B0B0")
            source.append(i)
            target.append(len(labels) - 1)
            value.append(float(m["weights_gb"]) + float(m["kv_pool_gb"]))
            extra = f", load {float(m['load']):.2f}" if "load" in m else ""
            extra += f", TTFT attainment ≈ {float(m['attainment_estimate']):.1%}" if "attainment_estimate" in m else ""
            hover.append(f"{m['model']}: weights {float(m['weights_gb']):.1f} GB + KV {float(m['kv_pool_gb']):.1f} GB"
                         + extra)
    fig = go.Figure(go.Sankey(
        node={"label": labels, "color": colors, "pad": 6, "thickness": 14},
        link={"source": source, "target": target, "value": value, "customdata": hover,
              "hovertemplate": "%{customdata}<extra></extra>"},
    ))
    fig.update_layout(title=title, template="plotly_white", height=max(320, 18 * (len(labels) - len(rows)) + 80))
    return fig


def shared_memory_figure(nodes: Sequence[Mapping[str, Any]],
                         title: str = "Memory of each shared GPU: weights vs KV pool") -> go.Figure:
    """Stacked horizontal bars per shared GPU: the weights of every co-located model, their KV pools and what is
    left of the usable memory.

    Parameters
    ----------
    nodes:
        ``shared_nodes`` rows (see :func:`shared_nodes_figure`).

    Returns
    -------
    plotly Figure with three traces named ``weights``, ``KV pool``, ``free``.

    Raises
    ------
    PlanningError
        A row without the required fields.
    """
    rows = _nodes(nodes, "shared_memory_figure")
    if not rows:
        return empty_figure("No shared GPUs: every model has dedicated instances.", title)
    y = [_label(i, n) for i, n in enumerate(rows)]
    weights = [sum(float(m["weights_gb"]) for m in n["models"]) for n in rows]
    kv = [sum(float(m["kv_pool_gb"]) for m in n["models"]) for n in rows]
    free = [max(0.0, float(n["capacity_gb"]) - w - k) for n, w, k in zip(rows, weights, kv, strict=True)]
    names = [", ".join(str(m["model"]) for m in n["models"]) for n in rows]
    fig = go.Figure()
    for name, values, color in (("weights", weights, _WEIGHTS), ("KV pool", kv, _KV), ("free", free, _FREE)):
        fig.add_trace(go.Bar(y=y, x=values, name=name, orientation="h", marker_color=color, customdata=names,
                             hovertemplate="%{y}: " + name + " %{x:.1f} GB<br>%{customdata}<extra></extra>"))
    fig.update_layout(barmode="stack", title=title, template="plotly_white", xaxis_title="GB (usable memory)",
                      yaxis={"autorange": "reversed"}, height=max(260, 22 * len(rows) + 120))
    return fig


def sharing_cost_figure(dedicated: Mapping[str, float], shared: Mapping[str, float],
                        title: str = "Dedicated plan vs shared plan") -> go.Figure:
    """Two bars (cost per hour) labelled with GPU counts: every model on dedicated instances vs the shared plan.

    Parameters
    ----------
    dedicated, shared:
        ``{"cost_per_hour": float, "gpus": int}`` of each plan; the shared one may add ``shared_cost_per_hour``
        to split its bar into shared nodes and dedicated (popular) models.

    Returns
    -------
    plotly Figure.

    Raises
    ------
    PlanningError
        A missing ``cost_per_hour`` or ``gpus``.
    """
    for name, d in (("dedicated", dedicated), ("shared", shared)):
        for key in ("cost_per_hour", "gpus"):
            if key not in d:
                raise PlanningError(f"sharing_cost_figure.{name}.{key}", "is missing.",
                                    'give {"cost_per_hour": ..., "gpus": ...}.')
    x = ["dedicated (no sharing)", "shared plan"]
    split = float(shared.get("shared_cost_per_hour", 0.0))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[float(dedicated["cost_per_hour"]), float(shared["cost_per_hour"]) - split],
                         name="dedicated instances", marker_color="#4C78A8"))
    fig.add_trace(go.Bar(x=x, y=[0.0, split], name="shared GPUs", marker_color=_KV))
    for xi, d in zip(x, (dedicated, shared), strict=True):
        fig.add_annotation(x=xi, y=float(d["cost_per_hour"]), text=f"{money(float(d['cost_per_hour']))} · "
                           f"{int(d['gpus'])} GPUs", showarrow=False, yshift=12)
    fig.update_layout(barmode="stack", title=title, template="plotly_white", yaxis_title="$/h", height=360)
    return fig
