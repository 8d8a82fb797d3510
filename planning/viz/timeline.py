"""Timeline figures (Coral Figs. 7–10 style): cost per epoch by model, GPUs vs availability, served fraction,
churn, and the adaptive / static-peak / homogeneous comparison. TimelineResult in, plotly figures out."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from planning.timeline.result import TimelineResult
from planning.viz._common import empty_figure
from planning.viz.colors import gpu_color

_MODEL_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
                 "#CCB974", "#64B5CD", "#1B9E77", "#D95F02")
_METHOD_STYLE = {"myopic (Coral)": ("#222222", "solid"), "offline (all epochs at once)": ("#55A868", "longdash"),
                 "static peak": ("#C44E52", "dash"), "Homo (re-planned)": ("#8172B3", "dot"),
                 "Homo-ILP (re-planned)": ("#937860", "dashdot")}
_LOOKAHEAD_STYLE = ("#4C72B0", "solid")  # "look-ahead (H=…)"


def _x(result: TimelineResult) -> list[float]:
    return [e.start for e in result.epochs]


def cost_by_model_figure(result: TimelineResult) -> go.Figure:
    """Stacked bars: each epoch's provisioning cost per model, plus the initialization penalty on top."""
    if not result.epochs:
        return empty_figure("No epochs to show.")
    fig = go.Figure()
    x = _x(result)
    for i, m in enumerate(result.models):
        fig.add_bar(x=x, y=[e.cost_by_model.get(m, 0.0) for e in result.epochs], name=m,
                    marker_color=_MODEL_COLORS[i % len(_MODEL_COLORS)])
    fig.add_bar(x=x, y=[e.penalty_per_hour for e in result.epochs], name="start-up (K penalty)",
                marker_color="#BBBBBB")
    fig.update_layout(barmode="stack", title="Cost per hour in each epoch, by model",
                      xaxis_title="hour", yaxis_title="USD / h", legend_title="model")
    return fig


def gpus_figure(result: TimelineResult) -> go.Figure:
    """Stacked bars of GPUs in use per type per epoch, with each type's available GPUs as a dashed line."""
    frame = result.gpus_frame()
    if frame.empty:
        return empty_figure("No GPUs in use.")
    fig = go.Figure()
    for gpu, sub in frame.groupby("gpu", sort=True):
        color = gpu_color(str(gpu))
        fig.add_bar(x=sub["start"], y=sub["used"], name=f"{gpu} in use", marker_color=color, legendgroup=str(gpu))
        fig.add_scatter(x=sub["start"], y=sub["available"], name=f"{gpu} available", mode="lines",
                        line={"color": color, "dash": "dash", "shape": "hv"}, legendgroup=str(gpu))
    fig.update_layout(barmode="stack", title="GPUs by type per epoch (dashed: available)", xaxis_title="hour",
                      yaxis_title="GPUs")
    return fig


def served_figure(result: TimelineResult) -> go.Figure:
    """Served fraction per model per epoch (Coral Figs. 9–10): below 100 % only in goodput-mode epochs."""
    if not result.epochs:
        return empty_figure("No epochs to show.")
    fig = go.Figure()
    x = _x(result)
    for i, m in enumerate(result.models):
        fig.add_scatter(x=x, y=[e.served_fraction.get(m, 1.0) for e in result.epochs], name=m, mode="lines+markers",
                        line={"color": _MODEL_COLORS[i % len(_MODEL_COLORS)], "shape": "hv"})
        if any(e.expected_served_fraction for e in result.epochs):
            fig.add_scatter(x=x, y=[e.expected_served_fraction.get(m, 1.0) for e in result.epochs],
                            name=f"{m} (expected, spot preemptions)", mode="lines",
                            line={"color": _MODEL_COLORS[i % len(_MODEL_COLORS)], "dash": "dot", "shape": "hv"})
    fig.update_layout(title="Served fraction of demand per model", xaxis_title="hour", yaxis_title="served",
                      yaxis={"tickformat": ".0%", "range": [0, 1.05]})
    return fig


def goodput_figure(result: TimelineResult) -> go.Figure:
    """Goodput (served output tokens/s) per model per epoch."""
    if not result.epochs:
        return empty_figure("No epochs to show.")
    fig = go.Figure()
    x = _x(result)
    for i, m in enumerate(result.models):
        fig.add_bar(x=x, y=[e.goodput_tok_s.get(m, 0.0) for e in result.epochs], name=m,
                    marker_color=_MODEL_COLORS[i % len(_MODEL_COLORS)])
    fig.update_layout(barmode="group", title="Decode goodput per model", xaxis_title="hour", yaxis_title="output tok/s")
    return fig


def churn_figure(result: TimelineResult) -> go.Figure:
    """Nodes started (up) and stopped (down) per epoch by the adaptive plan."""
    if not result.epochs:
        return empty_figure("No epochs to show.")
    fig = go.Figure()
    x = _x(result)
    fig.add_bar(x=x, y=[e.nodes_started for e in result.epochs], name="nodes started", marker_color="#55A868")
    fig.add_bar(x=x, y=[-e.nodes_stopped for e in result.epochs], name="nodes stopped", marker_color="#C44E52")
    fig.update_layout(barmode="relative", title=f"Churn: node starts and stops (K = {result.K:g})",
                      xaxis_title="hour", yaxis_title="nodes")
    return fig


def comparison_figure(result: TimelineResult) -> go.Figure:
    """Cost per hour per epoch: adaptive plan vs the static peak plan and the re-planned homogeneous baselines."""
    frame = result.methods_frame()
    if frame.empty:
        return empty_figure("No epochs to show.")
    fig = go.Figure()
    for method, sub in frame.groupby("method", sort=False):
        color, dash = _METHOD_STYLE.get(str(method), _LOOKAHEAD_STYLE if str(method).startswith("look-ahead")
                                        else ("#888888", "solid"))
        total = float(sub["cost_per_hour"].sum(skipna=False)) * result.epoch_hours  # NaN: an epoch without a plan
        month = f"${result.month(total):,.0f}/month" if math.isfinite(total) else "month not stated (epochs without a plan)"
        fig.add_scatter(x=sub["start"], y=sub["cost_per_hour"], mode="lines", line={"color": color, "dash": dash,
                        "shape": "hv"}, name=f"{method}: {month}")
    fig.update_layout(title="Cost per hour: the policies vs static peak plan vs homogeneous (month = 730 h)",
                      xaxis_title="hour", yaxis_title="USD / h")
    return fig
