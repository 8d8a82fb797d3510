"""Cost breakdown figures: where the plan's dollars per hour go (treemap/sunburst and stacked bars)."""

from __future__ import annotations

from typing import Literal

import pandas as pd
import plotly.graph_objects as go

from planning.errors import PlanningError
from planning.viz._common import empty_figure, is_empty, money, require_columns
from planning.viz.colors import gpu_color, gpu_of_shape

COST_COLUMNS = ("model", "phase", "region", "shape", "cost_per_hour")
_LEVELS = ("model", "phase", "region", "shape")


def _hierarchy(df: pd.DataFrame) -> tuple[list[str], list[str], list[str], list[float], list[str]]:
    """Flatten model → phase → region → shape into treemap ids/labels/parents/values/colours."""
    ids: list[str] = ["all"]
    labels: list[str] = ["all"]
    parents: list[str] = [""]
    values: list[float] = [float(df["cost_per_hour"].sum())]
    colors: list[str] = ["#FFFFFF"]
    for depth in range(1, len(_LEVELS) + 1):
        keys = list(_LEVELS[:depth])
        grouped = df.groupby(keys, sort=True, observed=True)["cost_per_hour"].sum().reset_index()
        for _, row in grouped.iterrows():
            path = [str(row[k]) for k in keys]
            ids.append("all/" + "/".join(path))
            labels.append(path[-1])
            parents.append("all/" + "/".join(path[:-1]) if depth > 1 else "all")
            values.append(float(row["cost_per_hour"]))
            colors.append(gpu_color(path[-1]) if depth == len(_LEVELS) else "")
    return ids, labels, parents, values, colors


_PATTERNS = ("", "/", "x", ".", "+", "\\", "|", "-")


def _patterns(shapes: list[str]) -> dict[str, str]:
    """Shapes of one GPU type share a colour, so tell them apart by fill pattern (2xL4 plain, 4xL4 hatched)."""
    by_gpu: dict[str, list[str]] = {}
    for shape in sorted(set(shapes), key=lambda s: (gpu_of_shape(s), len(s), s)):
        by_gpu.setdefault(gpu_of_shape(shape), []).append(shape)
    return {
        shape: _PATTERNS[i % len(_PATTERNS)] for group in by_gpu.values() for i, shape in enumerate(group)
    }


def cost_treemap(
    df: pd.DataFrame, kind: Literal["treemap", "sunburst"] = "treemap", title: str = "Cost breakdown"
) -> go.Figure:
    """Nested cost breakdown: model → phase → region → shape, area proportional to $/h.

    Parameters
    ----------
    df:
        One row per plan line with columns ``model``, ``phase``, ``region``, ``shape``,
        ``cost_per_hour`` (USD/h; duplicates are summed, rows ≤ 0 are left out).
    kind:
        ``"treemap"`` or ``"sunburst"``.
    title:
        Figure title (the total is appended).

    Returns
    -------
    plotly.graph_objects.Figure
        One treemap/sunburst trace whose leaves are the (model, phase, region, shape) groups; leaves
        are coloured by the shape's GPU type.

    Raises
    ------
    PlanningError
        If a column is missing or ``kind`` is unknown.
    """
    if kind not in ("treemap", "sunburst"):
        raise PlanningError("kind", f"unknown chart kind {kind!r}.", "Use 'treemap' or 'sunburst'.")
    if is_empty(df):
        return empty_figure("No costs to break down: the plan has no instances.", title)
    require_columns(df, COST_COLUMNS, "cost_treemap")
    data = df[list(COST_COLUMNS)].copy()
    data["cost_per_hour"] = pd.to_numeric(data["cost_per_hour"], errors="coerce").fillna(0.0)
    data = data[data["cost_per_hour"] > 0]
    if data.empty:
        return empty_figure("Every line costs $0/h, so there is nothing to break down.", title)
    ids, labels, parents, values, colors = _hierarchy(data)
    trace_cls = go.Treemap if kind == "treemap" else go.Sunburst
    trace = trace_cls(
        ids=ids,
        labels=labels,
        parents=parents,
        values=values,
        branchvalues="total",
        marker={"colors": colors},
        hovertemplate="%{id}<br>$%{value:,.2f}/h (%{percentRoot:.1%} of total)<extra></extra>",
        texttemplate="%{label}<br>$%{value:,.2f}/h",
    )
    fig = go.Figure(trace)
    fig.update_layout(
        title=f"{title} — {money(float(data['cost_per_hour'].sum()))}",
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def cost_bars(
    df: pd.DataFrame, by: str = "model", color: str = "shape", title: str = "Cost per hour"
) -> go.Figure:
    """Stacked bars of $/h: one bar per ``by`` value, stacked by ``color`` with the total on top.

    Parameters
    ----------
    df:
        Columns ``cost_per_hour`` plus the ``by`` and ``color`` columns (e.g. the cost_treemap frame).
    by:
        Column on the x axis (``"model"``, ``"region"``, ``"phase"`` …).
    color:
        Column that splits each bar; ``"shape"`` and ``"gpu"`` use the GPU colour map.
    title:
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per ``color`` value, one total annotation per bar.

    Raises
    ------
    PlanningError
        If a needed column is missing.
    """
    if is_empty(df):
        return empty_figure("No costs to show: the plan has no instances.", title)
    require_columns(df, (by, color, "cost_per_hour"), "cost_bars")
    data = df.copy()
    data["cost_per_hour"] = pd.to_numeric(data["cost_per_hour"], errors="coerce").fillna(0.0)
    grouped = data.groupby([by, color], sort=True, observed=True)["cost_per_hour"].sum().reset_index()
    categories = [
        str(c) for c in grouped.groupby(by)["cost_per_hour"].sum().sort_values(ascending=False).index
    ]
    fig = go.Figure()
    use_gpu_colors = color in ("shape", "gpu")
    patterns = _patterns([str(v) for v in grouped[color].unique()]) if use_gpu_colors else {}
    for value, part in grouped.groupby(color, sort=True, observed=True):
        marker = (
            {"color": gpu_color(str(value)), "pattern": {"shape": patterns[str(value)]}}
            if use_gpu_colors
            else None
        )
        fig.add_trace(
            go.Bar(
                x=[str(v) for v in part[by]],
                y=part["cost_per_hour"],
                name=str(value),
                marker=marker,
                hovertemplate=f"{by}: %{{x}}<br>{color}: {value}<br>$%{{y:,.2f}}/h<extra></extra>",
            )
        )
    totals = grouped.groupby(by, observed=True)["cost_per_hour"].sum()
    for category, total in totals.items():
        fig.add_annotation(
            x=str(category),
            y=float(total),
            text=money(float(total)),
            showarrow=False,
            yanchor="bottom",
            name="total",
        )
    fig.update_layout(
        barmode="stack",
        title=title,
        template="plotly_white",
        xaxis={"title": by, "categoryorder": "array", "categoryarray": categories},
        yaxis={"title": "USD per hour"},
        legend={"title": {"text": color}},
    )
    return fig
