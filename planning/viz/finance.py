"""Finance figures: the year's bill by month and pricing kind, and the plan's cost by pricing kind."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from planning.viz._common import empty_figure, is_empty, require_columns

KIND_ORDER = ("owned", "reserved", "on_demand", "spot", "egress")
KIND_COLORS = {"owned": "#4C78A8", "reserved": "#54A24B", "on_demand": "#F58518", "spot": "#E45756",
               "egress": "#9D755D"}
KIND_LABELS = {"owned": "owned", "reserved": "reserved", "on_demand": "on-demand", "spot": "spot",
               "egress": "egress"}


def bill_figure(bill: pd.DataFrame, by: str = "kind") -> go.Figure:
    """The bill per month stacked by ``by`` (``kind``, ``model``, ``region`` or ``cloud``) from the rows of
    ``planning.api.bill_frame`` (``month, model, region, cloud, kind, usd``)."""
    if is_empty(bill):
        return empty_figure("No bill: plan a scenario with a finance horizon.")
    require_columns(bill, ("month", by, "usd"), "bill")
    grouped = bill.groupby(["month", by], sort=True)["usd"].sum().reset_index()
    fig = go.Figure()
    keys = [k for k in KIND_ORDER if k in set(grouped[by])] if by == "kind" else sorted(set(grouped[by]))
    for key in keys:
        part = grouped[grouped[by] == key]
        fig.add_bar(x=part["month"], y=part["usd"], name=KIND_LABELS.get(key, key) if by == "kind" else key,
                    marker_color=KIND_COLORS.get(key) if by == "kind" else None,
                    hovertemplate="month %{x}: $%{y:,.0f}<extra>%{fullData.name}</extra>")
    fig.update_layout(barmode="stack", xaxis_title="month of the horizon", yaxis_title="USD per month",
                      legend_title=by, margin={"t": 30, "b": 40})
    return fig


def kind_figure(costs: dict[str, float]) -> go.Figure:
    """A plan's $/h by pricing kind (owned and reserved with their fixed cost, used or idle)."""
    values = {k: v for k, v in costs.items() if v > 0}
    if not values:
        return empty_figure("No cost by pricing kind for this plan.")
    keys = [k for k in KIND_ORDER if k in values]
    fig = go.Figure(go.Bar(x=[values[k] for k in keys], y=[KIND_LABELS[k] for k in keys], orientation="h",
                           marker_color=[KIND_COLORS[k] for k in keys],
                           hovertemplate="%{y}: $%{x:,.2f}/h<extra></extra>"))
    fig.update_layout(xaxis_title="USD per hour", margin={"t": 20, "b": 40}, height=220)
    return fig
