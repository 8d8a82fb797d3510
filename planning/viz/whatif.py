"""What-if figures: variants side by side against baselines, and cost sweeps (Mélange Fig. 9 style)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from planning.result import HOURS_PER_MONTH
from planning.viz._common import empty_figure, is_empty, require_columns
from planning.viz.colors import GPU_COLORS, gpu_of_shape

WHATIF_COLUMNS = ("variant", "cost_per_hour", "served_fraction", "method")
SWEEP_COLUMNS = ("x", "method", "cost_per_hour")

# The plan is near-black: no GPU colour uses it (green is L40S in the GPU palette) and it reads as "the answer".
_METHOD_PALETTE = ("#1B1B1B", "#7F7F7F", "#1F77B4", "#FF7F0E", "#9467BD", "#8C564B", "#E377C2", "#17BECF")


_EXTRA_PALETTE = ("#BCBD22", "#AEC7E8", "#FFBB78", "#98DF8A", "#FF9896", "#C5B0D5", "#C49C94", "#F7B6D2",
                  "#DBDB8D", "#9EDAE5", "#393B79", "#637939", "#8C6D31", "#843C39", "#7B4173")


def _method_colors(methods: list[str]) -> dict[str, str]:
    """The first method (the plan) is near-black; a method named after a GPU or shape ("homogeneous L40S",
    "4xL4") takes that GPU's colour; anything else a neutral palette colour. No two methods share a colour:
    a colour already taken (a second method on the same GPU, a palette colour equal to a GPU's) moves on to the
    next free one."""
    colors: dict[str, str] = {}
    gpu_of: dict[str, str] = {}
    for method in methods:
        words = method.replace(":", " ").split()  # "single:L40S" and "homogeneous L40S" both name L40S
        gpu_of[method] = gpu_of_shape(words[-1]) if words else ""
    reserved = {GPU_COLORS[g].upper() for g in gpu_of.values() if g in GPU_COLORS}
    used: set[str] = set()
    spare = [c for c in (*_METHOD_PALETTE[1:], *_EXTRA_PALETTE) if c.upper() not in reserved]
    for i, method in enumerate(methods):
        gpu = gpu_of[method]
        if i == 0:
            colour = _METHOD_PALETTE[0]
        elif gpu in GPU_COLORS and GPU_COLORS[gpu].upper() not in used:
            colour = GPU_COLORS[gpu]
        else:
            colour = next((c for c in spare if c.upper() not in used), f"hsl({(47 * i) % 360}, 55%, 45%)")
        colors[method] = colour
        used.add(colour.upper())
    return colors


def _ordered(values: pd.Series) -> list[str]:
    return list(dict.fromkeys(values.astype(str).tolist()))


def whatif_figure(df: pd.DataFrame, title: str = "What-if variants vs baselines") -> go.Figure:
    """Cost per hour and served fraction of each variant, one bar per method (plan and baselines).

    Parameters
    ----------
    df:
        Columns ``variant`` (e.g. "base", "demand ×2", "no H100"), ``cost_per_hour``,
        ``served_fraction`` (0..1), ``method`` (e.g. "mixed plan", "homogeneous L40S"); the first
        method is taken as the plan. NaN cost = infeasible (no bar).
    title:
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        Two subplots (cost, served fraction) with one bar trace per method in each (2 × methods).

    Raises
    ------
    PlanningError
        If a column is missing.
    """
    if is_empty(df):
        return empty_figure("No variants yet: add a what-if and run it.", title)
    require_columns(df, WHATIF_COLUMNS, "whatif_figure")
    data = df[list(WHATIF_COLUMNS)].copy()
    data["cost_per_hour"] = pd.to_numeric(data["cost_per_hour"], errors="coerce")
    data["served_fraction"] = pd.to_numeric(data["served_fraction"], errors="coerce")
    variants = _ordered(data["variant"])
    methods = _ordered(data["method"])
    colors = _method_colors(methods)
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        subplot_titles=("USD per hour", "served fraction"),
        vertical_spacing=0.12,
    )
    for method in methods:
        rows = data[data["method"].astype(str) == method]
        part = rows.assign(variant=rows["variant"].astype(str)).groupby("variant").last().reindex(variants)
        fig.add_trace(
            go.Bar(
                x=variants,
                y=part["cost_per_hour"].fillna(0.0),  # infeasible: a zero bar that carries the label
                name=method,
                legendgroup=method,
                marker={"color": colors[method]},
                text=["infeasible" if pd.isna(c) else "" for c in part["cost_per_hour"]],
                textposition="outside",
                hovertemplate="%{x}<br>" + method + ": $%{y:,.2f}/h<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=variants,
                y=part["served_fraction"],
                name=method,
                legendgroup=method,
                showlegend=False,
                marker={"color": colors[method]},
                hovertemplate="%{x}<br>" + method + ": %{y:.0%} served<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=2, col=1)
    fig.update_layout(
        title=title,
        template="plotly_white",
        barmode="group",
        height=560,
        legend={"title": {"text": "method"}},
    )
    return fig


def sweep_figure(
    df: pd.DataFrame,
    x_title: str = "demand scale",
    title: str = "Cost as demand grows",
    plan_method: str | None = None,
) -> go.Figure:
    """Cost per hour against a swept parameter, one line per method (Mélange Fig. 9 style).

    The plan (mixed GPUs) is drawn thick; each single-GPU baseline thin. A missing point (NaN cost)
    means the method is infeasible there, so its line stops. With ``status`` and ``proven_gap`` columns (a sweep's
    frame), a plan point not proven optimal is drawn open, with a whisker down to its proven bound
    (cost × (1 − gap): the optimum lies between the two).

    Parameters
    ----------
    df:
        Columns ``x`` (demand multiplier, SLO in ms …), ``method``, ``cost_per_hour``.
    x_title:
        Axis title for ``x``.
    title:
        Figure title.
    plan_method:
        Which method is the plan (default: the first method in the frame).

    Returns
    -------
    plotly.graph_objects.Figure
        One line trace per method.

    Raises
    ------
    PlanningError
        If a column is missing.
    """
    if is_empty(df):
        return empty_figure("No sweep points yet: run a sweep.", title)
    require_columns(df, SWEEP_COLUMNS, "sweep_figure")
    proofs = [c for c in ("status", "proven_gap") if c in df.columns]
    data = df[list(SWEEP_COLUMNS) + proofs].copy()
    data["cost_per_hour"] = pd.to_numeric(data["cost_per_hour"], errors="coerce")
    methods = _ordered(data["method"])
    plan = plan_method if plan_method in methods else methods[0]
    methods = [plan] + [m for m in methods if m != plan]
    colors = _method_colors(methods)
    fig = go.Figure()
    for method in methods:
        part = data[data["method"].astype(str) == method].sort_values("x")
        is_plan = method == plan
        fig.add_trace(
            go.Scatter(
                x=part["x"],
                y=part["cost_per_hour"],
                mode="lines+markers",
                name=method,
                line={
                    "color": colors[method],
                    "width": 4 if is_plan else 1.5,
                    "dash": "solid" if is_plan else "dash",
                },
                **(_unproven(part) if is_plan and len(proofs) == 2 else {"marker": {"size": 8 if is_plan else 6}}),
                connectgaps=False,
                customdata=part["cost_per_hour"] * HOURS_PER_MONTH,
                hovertemplate=(f"{method}<br>{x_title} %{{x}}<br>$%{{y:,.2f}}/h, "
                               "$%{customdata:,.0f} per month<extra></extra>"),
            )
        )
    fig.update_layout(
        title=title,
        template="plotly_white",
        xaxis={"title": x_title},
        yaxis={"title": f"USD per hour (× {HOURS_PER_MONTH:g} h = per month)", "rangemode": "tozero"},
        legend={"title": {"text": "method"}},
    )
    return fig


def _unproven(part: pd.DataFrame) -> dict[str, Any]:
    """The plan trace's open markers and whiskers down to the proven bound where its points are not proven optimal."""
    gap = pd.to_numeric(part["proven_gap"], errors="coerce").fillna(0.0).clip(0.0, 1.0)
    open_ = (part["status"].astype(str) != "optimal") & part["cost_per_hour"].notna()
    down = (part["cost_per_hour"] * gap).where(open_, 0.0).fillna(0.0)
    return {"marker": {"size": 8, "symbol": ["circle-open" if o else "circle" for o in open_]},
            "error_y": {"type": "data", "symmetric": False, "array": [0.0] * len(part),
                        "arrayminus": down.tolist(), "thickness": 1.5, "width": 5}}
