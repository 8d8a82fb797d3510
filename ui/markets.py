"""Plan page section "Compare clouds and regions": api.compare_markets as a background job, on-demand vs spot."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from planning.errors import PlanningError
from planning.result import savings_pct
from planning.scenario import Scenario
from ui import state, widgets
from ui.jobs import markets_job, markets_request

PRICING_COLOURS = {"on-demand": "#1f77b4", "spot": "#ff7f0e"}


def side_by_side(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per market (mixed optimum, cloud, region) with on-demand and spot cost per hour and month."""
    frame = rows.copy()
    frame["where"] = frame["market"].str.rsplit(" · ", n=1).str[0]
    out = pd.DataFrame({"where": list(dict.fromkeys(frame["where"]))})
    for pricing in ("on-demand", "spot"):
        part = frame[frame["pricing"] == pricing].set_index("where")
        out[f"{pricing} $/h"] = out["where"].map(part["cost_per_hour"])
        out[f"{pricing} $/month"] = out["where"].map(part["cost_per_month"])
    if {"on-demand $/h", "spot $/h"} <= set(out.columns):
        out["spot saves"] = [None if (pct := savings_pct(spot, od)) is None else pct / 100.0
                             for spot, od in zip(out["spot $/h"], out["on-demand $/h"], strict=True)]
    gpus = frame[frame["pricing"] == "on-demand"].set_index("where")["gpus"]
    out["GPUs (on-demand plan)"] = out["where"].map(gpus).fillna("")
    return out


def markets_figure(table: pd.DataFrame) -> go.Figure:
    """Grouped bars: monthly cost per market, on-demand next to spot; a market that cannot serve all demand has no
    bar (and says so in the table)."""
    fig = go.Figure()
    for pricing, colour in PRICING_COLOURS.items():
        column = f"{pricing} $/month"
        if column in table:
            fig.add_trace(go.Bar(x=table["where"], y=table[column], name=pricing, marker_color=colour,
                                 hovertemplate="%{x}: $%{y:,.0f} per month<extra>" + pricing + "</extra>"))
    # many markets slant their names: the margin grows to hold them (it cut them at the bottom), and the legend
    # sits above the bars so it never takes their width
    fig.update_layout(template="plotly_white", barmode="group", height=360, yaxis_title="$ per month",
                      title="The same demand planned per cloud and region: on-demand vs spot",
                      xaxis={"automargin": True},
                      legend={"title": "pricing", "orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0})
    return fig


def markets_section(scenario: Scenario, plan_job_id: str) -> None:
    """Button → background job → side-by-side table and chart."""
    jobs: dict[str, str] = st.session_state.setdefault("market_jobs", {})
    widgets.explain("markets", "The same models, SLOs and traffic planned in each cloud alone, each region alone and "
                    "all together (the mixed optimum), at on-demand and at spot prices. Spot is cheaper but nodes can "
                    "be reclaimed at short notice.")
    if st.button("Compare clouds and regions", icon=":material/public:"):
        try:
            jobs[plan_job_id] = state.submit("markets", markets_request(scenario), markets_job)
        except PlanningError as exc:
            widgets.show_error(exc)
    record = widgets.job_result(state.find_job(jobs.get(plan_job_id)), "Comparing markets", key="markets")
    out = None if record is None else record.result
    if out is None:
        return
    rows = pd.DataFrame(out["rows"])
    table = side_by_side(rows)
    st.plotly_chart(markets_figure(table), width="stretch", key="markets_chart")
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "where": st.column_config.TextColumn("market"),
        **{c: st.column_config.NumberColumn(c, format="$%.2f") for c in table.columns if c.endswith("$/h")},
        **{c: st.column_config.NumberColumn(c, format="$%,.0f") for c in table.columns if c.endswith("$/month")},
        "spot saves": st.column_config.NumberColumn("spot saves", format="percent"),
    })
    short = rows[rows["cost_per_hour"].isna()]
    if not short.empty:
        st.caption("Cannot serve the whole demand: " + ", ".join(short["market"]) + " (no cost shown).")
    st.caption("Spot rows: nodes can be reclaimed at short notice; plan spare capacity or a fallback.")
