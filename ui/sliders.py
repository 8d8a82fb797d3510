"""What-if page section "Move a slider": demand ×, prices %, SLOs ×, availability % → the plan and its diff.

A slider sends its value when it is let go (Streamlit's own debounce); each new position cancels the solve of the
previous one if it still runs and plans the new one in the background from the base plan's columns
(``api.solve_near``: warm, the result cache first), so a position already visited comes back at once.
"""

from __future__ import annotations

import streamlit as st

from planning import api, viz
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario
from ui import state, widgets
from ui.jobs import near_job, near_request

LABELS = {"demand": "Demand ×", "price_pct": "Prices %", "slo": "SLOs ×", "availability_pct": "Availability %"}
HELP = {"demand": "Every model's demand times this factor.", "price_pct": "Every price changes by this percentage.",
        "slo": "Every latency target times this factor (below 1 tightens).",
        "availability_pct": "Available nodes as a percentage of today's (scarcity below 100)."}


def slider_section(scenario: Scenario, base: PlanResult) -> None:
    """Four sliders; the plan of their position (running, or its cost, status and diff against ``base``)."""
    st.subheader("Move a slider")
    widgets.explain("whatif_sliders", "Each position is planned in the background from the base plan's templates; "
                    "moving again cancels the previous plan. Positions already visited come back at once.")
    cols = st.columns(len(api.VARIANT_SLIDERS))
    values: dict[str, float] = {}
    for col, (name, (low, high, neutral, step)) in zip(cols, api.VARIANT_SLIDERS.items(), strict=True):
        values[name] = col.slider(LABELS[name], min_value=low, max_value=high, value=neutral, step=step,
                                  key=f"slider_{name}", help=HELP[name])
    changes = api.slider_variants(**values)
    if not changes:
        st.caption("The sliders are at the base scenario: move one to see its plan.")
        return
    try:
        variant = api.apply_variants(scenario, changes)
    except PlanningError as exc:
        widgets.show_error(exc)
        return
    job_id = _submit(variant, base)
    label = ", ".join(api.variant_label(c) for c in changes)
    record = widgets.job_result(state.find_job(job_id), label, key="sliders")
    result = None if record is None else state.result_of(record)
    if result is None:
        return
    _show(label, base, result)


def _submit(variant: Scenario, base: PlanResult) -> str:
    """The job of this position: the one already submitted for it, else a new one (cancelling the previous)."""
    request = near_request(variant, base)
    key = repr(sorted(request["scenario"].items()))
    current = st.session_state["slider_job"]
    if current and st.session_state["slider_key"] == key:
        return str(current)
    if current:
        previous = state.find_job(current)
        if previous is not None and not previous.is_terminal:
            state.cancel_job(current)  # the slider moved on: that position's plan is no longer wanted (by this user)
    job_id = state.submit("solve", request, near_job)
    st.session_state["slider_job"], st.session_state["slider_key"] = job_id, key
    return job_id


def _show(label: str, base: PlanResult, result: PlanResult) -> None:
    """Cost, status and the plan diff of the slider's position against the base plan."""
    cols = st.columns(3)
    cols[0].metric("Plan at the sliders", f"${result.comparable_cost:,.2f}/h" if result.has_plan else "no plan",
                   delta=f"{result.comparable_cost - base.comparable_cost:+,.2f} $/h" if result.has_plan else None,
                   delta_color="inverse")
    cols[1].metric("Status", result.status)
    cols[2].metric("Demand served", f"{result.served_fraction:.1%}")
    st.caption(f"Sliders: {label}.")
    if not result.has_plan:
        for line in result.diagnostics[:3]:
            st.caption(line)
        return
    before, after = api.diff_lines(base), api.diff_lines(result)
    st.markdown(viz.diff_summary(before, after))
    diff = viz.plan_diff(before, after)
    st.plotly_chart(viz.plan_diff_figure(diff, base.comparable_cost), width="stretch", key="slider_diff")
    st.dataframe(diff, hide_index=True, width="stretch", key="slider_diff_table")
