"""Plan figures: GPUs used against availability caps, demand served, and the plan against baselines."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from planning.errors import PlanningError
from planning.result import savings_pct
from planning.viz._common import empty_figure, is_empty, money, require_columns
from planning.viz.colors import gpu_color

USAGE_COLUMNS = ("region", "shape", "gpu", "used", "available")
SERVED_COLUMNS = ("model", "phase", "demanded", "served")
BASELINE_COLUMNS = ("name", "cost_per_hour", "served_fraction", "feasible")
RIGHT_MARGIN_PX = 80  # a slanted 12-character name at 30 degrees reaches about 70 px right of its tick

PLAN_COLOR = "#2CA02C"
BASELINE_COLOR = "#7F7F7F"
INFEASIBLE_COLOR = "#D9D9D9"


def _numeric(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def gpu_usage_figure(df: pd.DataFrame, title: str = "Nodes used vs available") -> go.Figure:
    """Per region and shape: nodes the plan rents (bars, coloured by GPU) against the availability cap.

    Parameters
    ----------
    df:
        Columns ``region``, ``shape``, ``gpu``, ``used``, ``available`` (same unit, e.g. nodes;
        ``available`` NaN/inf/None = no cap). Rows with the same region and shape are summed.
    title:
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per GPU type on a (region, shape) axis, plus one "cap" marker trace when any
        row has a finite cap.

    Raises
    ------
    PlanningError
        If a column is missing.
    """
    if is_empty(df):
        return empty_figure("No GPUs in use: the plan rents no nodes.", title)
    require_columns(df, USAGE_COLUMNS, "gpu_usage_figure")
    data = df[list(USAGE_COLUMNS)].copy()
    data["used"] = _numeric(data["used"]).fillna(0.0)
    data["available"] = _numeric(data["available"]).replace([math.inf], math.nan)
    data = (
        data.groupby(["region", "shape", "gpu"], sort=True, observed=True)
        .agg(used=("used", "sum"), available=("available", lambda s: s.sum(min_count=1)))
        .reset_index()
    )
    fig = go.Figure()
    for gpu, part in data.groupby("gpu", sort=True, observed=True):
        text = [
            f"{u:g}/{a:g}" if not math.isnan(a) else f"{u:g}/∞"
            for u, a in zip(part["used"], part["available"], strict=True)
        ]
        fig.add_trace(
            go.Bar(
                x=[part["region"].astype(str).tolist(), part["shape"].astype(str).tolist()],
                y=part["used"],
                name=str(gpu),
                marker={"color": gpu_color(str(gpu))},
                text=text,
                textposition="outside",
                hovertemplate="%{x}<br>used %{y:g}<extra>" + str(gpu) + "</extra>",
            )
        )
    capped = data[data["available"].notna()]
    if not capped.empty:
        over = capped["used"] > capped["available"] + 1e-9
        fig.add_trace(
            go.Scatter(
                x=[capped["region"].astype(str).tolist(), capped["shape"].astype(str).tolist()],
                y=capped["available"],
                mode="markers",
                name="available (cap)",
                marker={
                    "symbol": "line-ew",
                    "size": 34,
                    "line": {"width": 3, "color": ["#D62728" if o else "#222222" for o in over]},
                },
                hovertemplate="%{x}<br>cap %{y:g}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        template="plotly_white",
        barmode="overlay",
        yaxis={"title": "nodes", "rangemode": "tozero"},
        legend={"title": {"text": "GPU"}},
    )
    if len(data) > 8:  # many (region, config) pairs: slanted labels and room for them
        fig.update_layout(height=460, margin={"b": 140}, xaxis={"tickangle": -45})
    return fig


def served_figure(df: pd.DataFrame, title: str = "Demand served", normalize: bool = False) -> go.Figure:
    """Served vs demanded per model and phase (throughput, or % of demand with ``normalize``).

    Parameters
    ----------
    df:
        Columns ``model``, ``phase``, ``demanded``, ``served`` (tokens/s; prefill and decode differ in
        scale, so ``normalize=True`` is clearer for many models).
    title:
        Figure title.
    normalize:
        Plot served as a percentage of demand, with demand as the 100 % line.

    Returns
    -------
    plotly.graph_objects.Figure
        Two bar traces ("demanded", "served") on a (model, phase) axis; served bars carry the
        served percentage.

    Raises
    ------
    PlanningError
        If a column is missing.
    """
    if is_empty(df):
        return empty_figure("No demand to compare: the scenario has no models.", title)
    require_columns(df, SERVED_COLUMNS, "served_figure")
    data = df[list(SERVED_COLUMNS)].copy()
    data["demanded"] = _numeric(data["demanded"]).fillna(0.0)
    data["served"] = _numeric(data["served"]).fillna(0.0)
    data = (
        data.groupby(["model", "phase"], sort=True, observed=True)[["demanded", "served"]].sum().reset_index()
    )
    fraction = [s / d if d > 0 else 1.0 for s, d in zip(data["served"], data["demanded"], strict=True)]
    x = [data["model"].astype(str).tolist(), data["phase"].astype(str).tolist()]
    demanded = [100.0] * len(data) if normalize else data["demanded"].tolist()
    served = [100.0 * f for f in fraction] if normalize else data["served"].tolist()
    fig = go.Figure()
    fig.add_trace(
        go.Bar(x=x, y=demanded, name="demanded", marker={"color": "#D9D9D9", "line": {"color": "#7F7F7F"}})
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=served,
            name="served",
            marker={"color": [PLAN_COLOR if f >= 0.999 else "#FF7F0E" for f in fraction]},
            text=[f"{100 * f:.0f} %" for f in fraction],
            textposition="outside",
        )
    )
    fig.update_layout(
        title=title,
        template="plotly_white",
        barmode="group",
        yaxis={"title": "% of demand" if normalize else "tokens/s", "rangemode": "tozero"},
    )
    return fig


savings = savings_pct  # the one savings rule (planning.result), re-exported for figure callers


def baselines_figure(
    df: pd.DataFrame, plan_name: str | None = None, title: str = "Plan vs homogeneous baselines"
) -> go.Figure:
    """Cost per hour and served fraction of the plan next to each baseline, with the plan's savings.

    Parameters
    ----------
    df:
        One row per method: ``name``, ``cost_per_hour``, ``served_fraction`` (0..1), ``feasible`` (bool).
    plan_name:
        Row that is the plan (default: the first row).
    title:
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        Two subplots (cost, served fraction), one bar trace each; each feasible baseline bar is
        labelled with the plan's savings against it ("plan −23 %"), infeasible ones "infeasible", baselines that
        did not run (a "note" column starting "not run") "not run", a plan row without a plan "no plan".

    Raises
    ------
    PlanningError
        If a column is missing or ``plan_name`` is not a row.
    """
    if is_empty(df):
        return empty_figure("No baselines to compare: solve the scenario first.", title)
    require_columns(df, BASELINE_COLUMNS, "baselines_figure")
    data = df[list(BASELINE_COLUMNS)].copy().reset_index(drop=True)
    data["name"] = data["name"].astype(str)
    data["cost_per_hour"] = _numeric(data["cost_per_hour"])
    not_run = [str(n).startswith("not run") or str(n).startswith("no plan")
               for n in (df["note"] if "note" in df.columns else [""] * len(df))]
    data["served_fraction"] = _numeric(data["served_fraction"]).fillna(0.0)
    names = data["name"].tolist()
    plan = names[0] if plan_name is None else plan_name
    if plan not in names:
        raise PlanningError(
            "plan_name", f"{plan!r} is not one of the rows.", f"Use one of {', '.join(names)}."
        )
    plan_cost = float(data.loc[data["name"] == plan, "cost_per_hour"].iloc[0])
    plan_served = float(data.loc[data["name"] == plan, "served_fraction"].iloc[0])
    labels: list[str] = []
    colors: list[str] = []
    for name, cost, feasible, served, missing in zip(data["name"], data["cost_per_hour"], data["feasible"],
                                                     data["served_fraction"], not_run, strict=True):
        if name == plan:
            labels.append(money(plan_cost) if not math.isnan(plan_cost) else "no plan")
            colors.append(PLAN_COLOR)
        elif missing:  # a baseline the time limit left no time for: no bar, no "infeasible"
            labels.append("not run")
            colors.append(INFEASIBLE_COLOR)
        elif not bool(feasible) or math.isnan(cost):
            labels.append("infeasible")
            colors.append(INFEASIBLE_COLOR)
        else:
            pct = savings_pct(plan_cost, float(cost), plan_served, float(served))
            labels.append(
                f"{money(float(cost))}<br>plan {-pct:+.0f} %" if pct is not None else money(float(cost))
            )
            colors.append(BASELINE_COLOR)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("USD per hour", "served fraction"), horizontal_spacing=0.12
    )
    fig.add_trace(
        go.Bar(
            x=names,
            y=data["cost_per_hour"].fillna(0.0),
            marker={"color": colors},
            text=labels,
            textposition="outside",
            name="cost per hour",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=names,
            y=data["served_fraction"],
            marker={"color": colors},
            text=[f"{100 * f:.0f} %" for f in data["served_fraction"]],
            textposition="outside",
            name="served fraction",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%", row=1, col=2)
    # slanted names ("Plan (mixed templates)") widen the bottom margin instead of being cut by it, and a bar's
    # label above the top gridline is drawn, not clipped
    fig.update_xaxes(automargin=True)
    fig.update_traces(cliponaxis=False)
    # the last name slants to the right of its bar: room for it ("memp" was cut at the figure's edge)
    fig.update_layout(title=title, template="plotly_white", margin={"r": RIGHT_MARGIN_PX})
    return fig
