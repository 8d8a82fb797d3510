"""Home of the workbench: pick a preset or saved scenario, plan it in the background, see the KPIs."""

from __future__ import annotations

import streamlit as st

from planning.errors import PlanningError
from ui import state, widgets

widgets.page(
    "LLM serving planner",
    "Cost-minimal serving plans for LLMs on mixed cloud GPUs, compared with homogeneous baselines.",
)
st.markdown(
    "1. **Pick** models with latency targets (TTFT, TPOT) and demand, cloud regions, GPU prices and availability.\n"
    "2. **Plan**: serving templates (pipelines over possibly *mixed* GPUs) are built and an allocation ILP rents "
    "the cheapest set of nodes that serves all demand.\n"
    "3. **Compare** with homogeneous baselines, read the pipeline layouts and cost breakdowns, try what-ifs."
)

CURRENT = "current"
choices = [f"preset:{name}" for name in state.presets()] + [f"saved:{name}" for name in state.saved_scenarios()]
if st.session_state["scenario_origin"] and not st.session_state["scenario_origin"].startswith("preset:"):
    choices.insert(0, CURRENT)


def _label(choice: str) -> str:
    if choice == CURRENT:
        return f"✎ current scenario — {st.session_state['scenario'].name}"
    kind, _, name = choice.partition(":")
    return f"{name} (saved)" if kind == "saved" else name


default = st.session_state["preset"] if st.session_state["preset"] in choices else choices[0]
with st.form("plan_form", border=False):
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    choice = left.selectbox("Scenario", choices, index=choices.index(default), format_func=_label,
                            help="Presets reproduce the papers' setups; saved scenarios come from the Scenario page.")
    plan_it = right.form_submit_button("Plan it", type="primary", width="stretch")

if plan_it:
    st.session_state["preset"] = choice
    try:
        scenario = state.current_scenario() if choice == CURRENT else state.load_choice(choice)
        if choice != CURRENT:
            state.set_scenario(scenario, choice)
        job_id = state.submit_solve(scenario)
    except PlanningError as exc:
        widgets.show_error(exc)
    else:
        st.session_state["solve_job"] = job_id
        st.query_params["job"] = job_id

record = state.current_solve_job()
if record is None:
    st.info("Choose a scenario and press **Plan it**. Planning runs in the background; you can keep browsing.")
elif not record.is_terminal:
    widgets.live_jobs({f"Planning {st.session_state['scenario'].name}": record.id}, key="home")
elif record.status == "done":
    result = state.result_of(record)
    if result is not None:
        st.subheader(f"Plan for {result.scenario.get('name', 'the scenario')}")
        widgets.kpis(result)
        elapsed = record.elapsed
        if elapsed is not None:
            st.caption(f"Job {record.id} finished in {elapsed:.1f} s.")
else:
    widgets.show_job_outcome(record)

st.divider()
links = st.columns(7)
links[0].page_link("pages/1_Scenario.py", label="Edit the scenario", icon=":material/edit:")
links[1].page_link("pages/2_Templates.py", label="Explore templates", icon=":material/extension:")
links[2].page_link("pages/3_Plan.py", label="Read the plan", icon=":material/insights:")
links[3].page_link("pages/4_What-if.py", label="Try what-ifs", icon=":material/alt_route:")
links[4].page_link("pages/5_Jobs.py", label="Jobs", icon=":material/schedule:")
links[5].page_link("pages/6_Catalog.py", label="GPU catalog", icon=":material/menu_book:")
links[6].page_link("pages/8_Learn.py", label="Learn", icon=":material/school:")
