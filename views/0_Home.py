"""Home of the workbench: pick a preset or saved scenario (or a quick estimate), plan it in the background, see the KPIs."""

from __future__ import annotations

import time

import streamlit as st

from planning.errors import PlanningError
from planning.jobs import JobRecord
from ui import estimates, state, widgets

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
record = state.current_solve_job()  # first: a ?job= in the URL restores its scenario before the picker is drawn
origin = str(st.session_state["scenario_origin"] or "")
choices = [f"preset:{name}" for name in state.presets()] + [f"saved:{name}" for name in state.saved_scenarios()]
if origin and origin not in choices:  # edited, uploaded, estimated or restored from a job
    choices.insert(0, CURRENT)


def _label(choice: str) -> str:
    if choice == CURRENT:
        return f"✎ current scenario — {state.current_scenario().name}"
    kind, _, name = choice.partition(":")
    return f"{name} (saved)" if kind == "saved" else name


# The picker follows the working scenario (after a reload too), and picking loads at once, so "Edit the scenario"
# opens what was picked.
default = origin if origin in choices else (CURRENT if CURRENT in choices else
                                            next((c for c in choices if c == f"preset:{state.DEFAULT_PRESET}"),
                                                 choices[0]))
left, right = st.columns([3, 1], vertical_alignment="bottom")
choice = left.selectbox("Scenario", choices, index=choices.index(default), format_func=_label,
                        help="Presets reproduce the papers' setups; saved scenarios come from the Scenario page.")
if choice != default and choice != CURRENT:
    try:
        state.set_scenario(state.load_choice(choice), choice)
        st.session_state["preset"] = choice
    except PlanningError as exc:
        widgets.show_error(exc)
plan_it = right.button("Plan it", type="primary", width="stretch", icon=":material/play_arrow:")


def _started(job_id: str) -> JobRecord | None:
    """Remember a submitted solve in the session and the URL (a reload or a second tab finds it); its record."""
    state.link_solve_job(job_id)
    return state.find_job(job_id)


if plan_it:
    try:
        job_id = state.submit_solve(state.current_scenario())
    except PlanningError as exc:
        widgets.show_error(exc)
    else:
        record = _started(job_id)

# --- quick estimate: model, traffic, SLO preset, clouds → monthly cost ----------------------------------------
with st.expander("Quick estimate: what would serving one model cost per month?", icon=":material/payments:",
                 expanded=record is None):
    frames = state.catalog_frames()
    model_ids = list(frames["models"]["id"].astype(str))
    clouds = estimates.estimate_clouds(frames["regions"])
    with st.form("estimate_form", border=False):
        c1, c2, c3 = st.columns(3)
        est_model = c1.selectbox("Model", model_ids, index=model_ids.index("llama-3-8b") if "llama-3-8b" in model_ids
                                 else 0)
        est_rate = c2.number_input("Traffic (requests/s)", min_value=0.0, value=5.0, step=1.0)
        est_slo = c3.selectbox("Latency target", list(estimates.SLO_PRESETS), index=1,
                               format_func=lambda k: estimates.SLO_PRESETS[k]["label"],
                               help="TTFT = time to the first token, TPOT = time per output token.")
        c1, c2, c3, c4 = st.columns(4)
        est_in = c1.number_input("Prompt tokens (mean)", min_value=1, value=1000, step=100)
        est_out = c2.number_input("Output tokens (mean)", min_value=1, value=200, step=50)
        est_clouds = c3.multiselect("Clouds", clouds, default=clouds[:1])
        est_pricing = c4.radio("Pricing", ["on_demand", "spot"], horizontal=True,
                               format_func={"on_demand": "on-demand", "spot": "spot"}.__getitem__)
        estimate = st.form_submit_button("Estimate monthly cost", type="primary", icon=":material/calculate:")
    if estimate:
        try:
            scenario = estimates.estimate_scenario(frames["regions"], model=est_model, rate_rps=float(est_rate),
                                                   input_len=int(est_in), output_len=int(est_out), slo=est_slo,
                                                   clouds=est_clouds, pricing=est_pricing)
            state.set_scenario(scenario, "estimate")
            job_id = state.submit_solve(scenario)
        except PlanningError as exc:
            widgets.show_error(exc)
        else:
            record = _started(job_id)

if record is not None and not record.is_terminal and (plan_it or estimate):
    # drawn in this run when it ends; a longer one is shown with its best plan so far once it has one, from
    # SO_FAR_AFTER_S on and before its baselines (90 % on): sooner, a coral-core plan ending a second later would
    # wait for a poll and a rerun (its KPIs came 0.5-1.5 s later with 2 s and no progress test)
    job, asked = record.id, time.monotonic()
    record = widgets.await_job(job, f"Planning {state.current_scenario().name}", until=lambda r: (
        time.monotonic() - asked > widgets.SO_FAR_AFTER_S and float(r.progress or 0.0) < 0.9
        and state.partial_stamp(job) is not None))
if record is None:
    st.info("Choose a scenario and press **Plan it**, or fill in the quick estimate. Planning runs in the background; "
            "you can keep browsing.")
elif not record.is_terminal:
    widgets.live_jobs({f"Planning {state.current_scenario().name}": record.id}, key="home",
                      watch=lambda job=record.id: state.partial_stamp(job))  # drawn again when a better plan comes
    if (partial := state.partial_plan(record.id)) is not None:
        widgets.best_so_far(partial[1])
elif record.status == "done":
    result = state.result_of(record)
    if result is not None:
        planned_name = result.scenario.get("name", "the scenario")
        st.subheader(f"Plan for {planned_name}")
        if record.request.get("scenario") != state.current_scenario().to_dict():
            st.warning(f"This plan is of **{planned_name}** as it was when planned; the working scenario "
                       f"(**{state.current_scenario().name}**) has changed since. Press **Plan it** to plan it.",
                       icon=":material/history:")
        widgets.kpis(result)
        elapsed = record.elapsed
        if elapsed is not None:
            st.caption(f"Job {record.id} finished in {elapsed:.1f} s.")
        st.page_link("views/3_Plan.py", label="Read the full plan, compare clouds and download the report",
                     icon=":material/insights:")
else:
    widgets.show_job_outcome(record)

st.divider()
links = [*st.columns(4), *st.columns(4)]  # two rows: labels stay whole on a laptop screen
links[0].page_link("views/1_Scenario.py", label="Edit the scenario", icon=":material/edit:")
links[1].page_link("views/2_Templates.py", label="Explore templates", icon=":material/extension:")
links[2].page_link("views/3_Plan.py", label="Read the plan", icon=":material/insights:")
links[3].page_link("views/4_What-if.py", label="Try what-ifs", icon=":material/alt_route:")
links[4].page_link("views/5_Jobs.py", label="Jobs", icon=":material/schedule:")
links[5].page_link("views/6_Catalog.py", label="GPU catalog", icon=":material/menu_book:")
links[6].page_link("views/7_Timeline.py", label="Plan over a day", icon=":material/timeline:")
links[7].page_link("views/8_Learn.py", label="Learn", icon=":material/school:")
