"""The Plan page's finance section: costs by pricing kind, commitments to sign, the horizon against all on-demand
and all reserved, the year's bill (chart and CSV), idle committed capacity, spot risk and the assumptions."""

from __future__ import annotations

import streamlit as st

from planning import api, viz
from planning.result import PlanResult
from ui import widgets


def _money(value: float | None) -> str:
    return "not computed" if value is None else f"${value:,.0f}"


def finance_section(result: PlanResult, name: str) -> None:
    """Everything ``PlanResult.finance`` holds, for a plan with owned pools, reservations, spot pools or a horizon."""
    summary = api.finance_summary(result)
    fin = dict(result.finance or {})
    st.header("Finance: owned, reserved, on-demand and spot")
    widgets.explain("finance", "Owned and reserved nodes cost the same every hour whether they serve or idle (their "
                    "fixed cost is in every comparison, so idle capacity is never a saving); on-demand and spot "
                    "nodes cost what the plan rents. Spot is priced at its expected cost with interruptions.")
    cols = st.columns(4)
    cols[0].metric("Committed $/h", f"${result.committed_per_hour:,.2f}",
                   help="Owned pools' amortised capex and operations plus reservations' effective hourly fee.")
    cols[1].metric("Horizon total", _money(summary["horizon_total_usd"]),
                   help="Nodes, reservations and owned pools over the horizon's epochs, with the commitments below: "
                        "the bill's total over the horizon (a one-year horizon: the bill per year).")
    cols[2].metric("All on-demand", _money(summary["all_on_demand_usd"]),
                   help="The same horizon with no new reservation (owned and held ones as given).")
    cols[3].metric("All reserved", _money(summary["all_reserved_usd"]),
                   help="The same horizon with every node reserved (no on-demand or spot node).")
    if summary["horizon_gap"] is not None:
        st.caption(f"Commitment sizing: {summary['horizon_status']}, proven within {summary['horizon_gap']:.2%} of "
                   f"the optimum ({(fin.get('sizing') or {}).get('certified_over', '')}).")
    if result.cost_by_pricing_kind:
        st.caption(f"The design hour by pricing kind, at its full cost (${result.comparable_cost:,.2f}/h with "
                   f"egress); the bill, ${result.bill.per_hour:,.2f}/h, is what the horizon pays on average.")
        st.plotly_chart(viz.kind_figure(dict(result.cost_by_pricing_kind)), width="stretch", key="finance_kinds")
    commitments = api.commitments_frame(result)
    if not commitments.empty:
        st.subheader("Commitments")
        st.dataframe(commitments, hide_index=True, width="stretch", column_config={
            "upfront_usd": st.column_config.NumberColumn("upfront / node", format="$%,.2f"),
            "hourly_usd": st.column_config.NumberColumn("hourly / node", format="$%.4f"),
            "effective_hourly": st.column_config.NumberColumn("effective $/h", format="$%.4f"),
            "on_demand_price": st.column_config.NumberColumn("on-demand $/h", format="$%.4f"),
            "break_even": st.column_config.NumberColumn("break-even use", format="percent"),
            "utilisation": st.column_config.NumberColumn("use in plan", format="percent"),
        })
    bill = api.bill_frame(result)
    if not bill.empty:
        st.subheader("The bill")
        by = st.radio("Stack the months by", ["kind", "model", "region", "cloud"], horizontal=True, key="bill_by")
        st.plotly_chart(viz.bill_figure(bill, by), width="stretch", key="bill")
        st.download_button("Bill CSV (month × model × region × kind, assumptions as # lines)", api.bill_csv(result),
                           file_name=f"{name}.bill.csv", mime="text/csv", icon=":material/receipt_long:")
    idle = [r for r in fin.get("idle", []) if r.get("idle")]
    if idle:
        st.warning("Idle committed capacity (paid, counted in every comparison): " + "; ".join(
            f"{r['idle']} of {r['held']} {r['shape']} in {r['region']} (${r['idle_usd_per_hour']:,.2f}/h)"
            for r in idle))
    spot = fin.get("spot") or {}
    if spot.get("models"):
        st.subheader("Spot risk")
        st.dataframe([{"model": m, **v} for m, v in spot["models"].items()], hide_index=True, width="stretch",
                     column_config={
                         "spot_share": st.column_config.NumberColumn("capacity on spot", format="percent"),
                         "expected_served_fraction": st.column_config.NumberColumn("expected served",
                                                                                   format="percent"),
                         "interruptions_per_day": st.column_config.NumberColumn("interruptions / day", format="%.3f"),
                     })
    if fin.get("assumptions"):
        with st.expander("Finance assumptions (prices as of, horizon and growth, reservation terms, owned costs, "
                         "interruption rates)"):
            st.markdown("\n".join(f"- {a}" for a in fin["assumptions"]))
