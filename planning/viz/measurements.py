"""Measurement figures: the simulator's predictions against the user's measured points, before and after the fit."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from planning.viz._common import empty_figure, is_empty, require_columns

FIT_COLUMNS = ("quantity", "measured", "predicted_before", "predicted_after")
_QUANTITY_LABEL = {"ttft_ms": "TTFT (ms)", "itl_ms": "ITL (ms)", "output_tokens_per_s": "output tok/s"}
_SYMBOL = {"ttft_ms": "circle", "itl_ms": "diamond", "output_tokens_per_s": "square"}


def fit_figure(points: pd.DataFrame, title: str = "Predicted vs measured") -> go.Figure:
    """Log–log scatter of predicted against measured, one marker per (point, quantity): hollow before the fit,
    filled after; the diagonal is a perfect prediction. ``points``: ``api.points_frame`` rows."""
    if is_empty(points):
        return empty_figure("no measurements to show: import some and fit.", title)
    require_columns(points, FIT_COLUMNS, "fit_figure")
    fig = go.Figure()
    lo = float(points[["measured", "predicted_before", "predicted_after"]].min().min())
    hi = float(points[["measured", "predicted_before", "predicted_after"]].max().max())
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line={"color": "#7F7F7F", "dash": "dot"},
                             name="predicted = measured", hoverinfo="skip"))
    for q, g in points.groupby("quantity", sort=False):
        label = _QUANTITY_LABEL.get(str(q), str(q))
        for when, col, fill in (("before", "predicted_before", "open"), ("after", "predicted_after", "")):
            symbol = _SYMBOL.get(str(q), "circle") + (f"-{fill}" if fill else "")
            fig.add_trace(go.Scatter(
                x=g["measured"], y=g[col], mode="markers", name=f"{label}, {when} the fit",
                marker={"symbol": symbol, "size": 10, "color": "#7F7F7F" if when == "before" else "#1F77B4"},
                hovertemplate=f"{label}<br>measured %{{x:.4g}}<br>predicted {when} %{{y:.4g}}<extra></extra>"))
    fig.update_xaxes(type="log", title="measured")
    fig.update_yaxes(type="log", title="simulator")
    fig.update_layout(title=title, legend={"orientation": "h", "y": -0.2})
    return fig
