"""Template explorer scatter: throughput against cost, homogeneous vs mixed-GPU templates."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from planning.viz._common import empty_figure, is_empty, require_columns

TEMPLATE_COLUMNS = (
    "template_id",
    "model",
    "phase",
    "throughput",
    "cost_per_hour",
    "n_gpu_types",
)

CATEGORY_COLORS = {
    "homogeneous": "#1F77B4",
    "mixed · 2 GPU types": "#FF7F0E",
    "mixed · 3+ GPU types": "#D62728",
}


def template_category(n_gpu_types: int) -> str:
    """Legend group of a template by its GPU-type count: ``"homogeneous"`` (one GPU type), ``"mixed · 2 GPU
    types"`` or ``"mixed · 3+ GPU types"``."""
    if n_gpu_types <= 1:
        return "homogeneous"
    return "mixed · 2 GPU types" if n_gpu_types == 2 else "mixed · 3+ GPU types"


def pareto_front(cost: list[float], throughput: list[float]) -> list[int]:
    """Indices of the cost/throughput Pareto front (no other point is cheaper and at least as fast).

    Parameters
    ----------
    cost, throughput:
        Equal-length lists.

    Returns
    -------
    list[int]
        Indices sorted by increasing cost.
    """
    order = sorted(range(len(cost)), key=lambda i: (cost[i], -throughput[i]))
    front: list[int] = []
    best = float("-inf")
    for i in order:
        if throughput[i] > best:
            front.append(i)
            best = throughput[i]
    return front


def template_scatter(
    df: pd.DataFrame, title: str = "Templates: throughput vs cost", frontier: bool = True
) -> go.Figure:
    """Each template as a point (x = $/h, y = tokens/s), coloured homogeneous vs mixed by GPU-type count.

    Points carry ``customdata = template_id`` so a selection in the UI maps back to a template.

    Parameters
    ----------
    df:
        Columns ``template_id``, ``model``, ``phase``, ``throughput`` (tokens/s), ``cost_per_hour``,
        ``n_gpu_types`` (int; 1 = homogeneous in GPU type).
    title:
        Figure title.
    frontier:
        Draw the cost/throughput Pareto front per (model, phase) as a line.

    Returns
    -------
    plotly.graph_objects.Figure
        One marker trace per category present (phases differ by symbol), plus one "Pareto front"
        line trace when ``frontier``.

    Raises
    ------
    PlanningError
        If a column is missing.
    """
    if is_empty(df):
        return empty_figure("No templates yet: build the template library first.", title)
    require_columns(df, TEMPLATE_COLUMNS, "template_scatter")
    data = df[list(TEMPLATE_COLUMNS)].copy().reset_index(drop=True)
    data["throughput"] = pd.to_numeric(data["throughput"], errors="coerce")
    data["cost_per_hour"] = pd.to_numeric(data["cost_per_hour"], errors="coerce")
    data = data.dropna(subset=["throughput", "cost_per_hour"])
    if data.empty:
        return empty_figure("No template has both a throughput and a cost.", title)
    data["category"] = [template_category(int(n)) for n in data["n_gpu_types"]]
    fig = go.Figure()
    for category in CATEGORY_COLORS:
        part = data[data["category"] == category]
        if part.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=part["cost_per_hour"],
                y=part["throughput"],
                mode="markers",
                name=category,
                marker={
                    "color": CATEGORY_COLORS[category],
                    "size": 9,
                    "opacity": 0.8,
                    "symbol": ["circle" if p == "prefill" else "diamond" for p in part["phase"]],
                },
                customdata=part["template_id"].astype(str),
                text=[f"{m} · {p}" for m, p in zip(part["model"], part["phase"], strict=True)],
                hovertemplate="%{customdata}<br>%{text}<br>$%{x:,.2f}/h · %{y:,.0f} tok/s<extra></extra>",
            )
        )
    if frontier:
        xs: list[float | None] = []
        ys: list[float | None] = []
        for _, group in data.groupby(["model", "phase"], sort=True, observed=True):
            cost = group["cost_per_hour"].astype(float).tolist()
            thr = group["throughput"].astype(float).tolist()
            front = pareto_front(cost, thr)
            xs += [cost[i] for i in front] + [None]
            ys += [thr[i] for i in front] + [None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name="Pareto front",
                line={"color": "#444444", "dash": "dot", "width": 1},
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        title=title,
        template="plotly_white",
        xaxis={"title": "USD per hour", "rangemode": "tozero"},
        yaxis={"title": "tokens/s", "rangemode": "tozero"},
        legend={"title": {"text": "template"}},
    )
    return fig
