"""Figures of the Learn lessons: plain rows in, plotly figures out."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from planning.viz._common import empty_figure, is_empty, require_columns
from planning.viz.colors import gpu_color

MIXED_PIPELINE_COLUMNS = ("setup", "kind", "template", "gpus", "per_dollar")
MIXED_COLOR = "#1B1B1B"  # near-black, as the plan elsewhere: no GPU colour uses it


def mixed_pipeline_figure(rows: pd.DataFrame,
                          title: str = "Prompt tokens per second per $/h: one GPU type vs mixed") -> go.Figure:
    """One horizontal bar per setup (Coral Fig. 1(a)): its throughput per dollar, coloured by its GPU type (mixed
    pipelines near-black), labelled with the template and its GPUs; a dashed line marks the best one-type setup.

    Parameters
    ----------
    rows:
        Columns ``setup``, ``kind`` ("one GPU type" or "mixed"), ``template`` (e.g. ``"3x1xL40S+3x2xH100"``),
        ``gpus``, ``per_dollar`` (tok/s per $/h); optional ``layers`` (layers per stage) goes into the hover.
    title:
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace (one bar per row, in the rows' order from top to bottom).

    Raises
    ------
    PlanningError
        If a column is missing.
    """
    if is_empty(rows):
        return empty_figure("No setup meets the SLO: relax it or allow larger nodes.", title)
    require_columns(rows, MIXED_PIPELINE_COLUMNS, "mixed_pipeline_figure")
    data = rows.iloc[::-1].reset_index(drop=True)  # plotly draws the first category at the bottom
    colors = [MIXED_COLOR if kind == "mixed" else gpu_color(str(t).split("+")[0].split("x", 1)[1])
              for kind, t in zip(data["kind"], data["template"], strict=True)]
    layers = data["layers"] if "layers" in data else pd.Series([""] * len(data))
    fig = go.Figure(go.Bar(
        x=data["per_dollar"], y=data["setup"], orientation="h", marker={"color": colors},
        text=[f"{v:,.0f} · {t} ({g} GPUs)" for v, t, g in zip(data["per_dollar"], data["template"], data["gpus"],
                                                               strict=True)],
        textposition="auto", customdata=layers,
        hovertemplate="%{y}: %{x:,.0f} tok/s per $/h<br>layers per stage: %{customdata}<extra></extra>",
        showlegend=False))
    one_type = data.loc[data["kind"] != "mixed", "per_dollar"]
    if not one_type.empty:
        best = float(one_type.max())
        fig.add_vline(x=best, line_dash="dash", line_color="#7F7F7F",
                      annotation_text="best one GPU type", annotation_position="top")
    fig.update_layout(title=title, template="plotly_white", height=120 + 48 * len(data),
                      xaxis={"title": "prompt tok/s per $/h", "rangemode": "tozero"}, yaxis={"title": ""},
                      margin={"l": 10})
    return fig
