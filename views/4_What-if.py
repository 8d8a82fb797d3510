"""What-if page: sliders (ui.sliders), variants of the current scenario (planning.whatif via api) vs baselines,
plan diff, sweeps."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planning import api, viz
from planning.errors import PlanningError
from planning.result import PlanResult
from ui import simulation, sliders, state, widgets
from ui.jobs import near_job, near_request, sweep_job, sweep_request

widgets.page("What-if", "Change one thing about the scenario and see what the plan and the baselines do.")

scenario = state.current_scenario()
base = state.current_solve_job()
if base is None:
    st.info(f"No plan of **{scenario.name}** yet; variants are compared with it.")
    if st.button("Plan the current scenario", type="primary"):
        st.session_state["solve_job"] = state.submit_solve(scenario)
        st.rerun()
    st.stop()

whatif_jobs: dict[str, str] = st.session_state["whatif_jobs"]
sweep_jobs: dict[str, str] = st.session_state["sweep_jobs"]
base_result = state.result_of(base)

# --- sliders: the plan as a slider moves --------------------------------------------------------------------------
if base_result is not None and base_result.has_plan:
    sliders.slider_section(scenario, base_result, base.id)

# --- new variant -----------------------------------------------------------------------------------------------
st.subheader("Add a variant")
kind = st.selectbox("Change", list(api.VARIANT_KINDS), format_func=api.VARIANT_KINDS.__getitem__, key="whatif_kind")
with st.form("variant_form"):
    params: dict[str, object] = {}
    if kind in ("demand", "availability", "slo", "interruptions"):
        params["k"] = st.number_input("Factor k", min_value=0.0, value={"demand": 2.0, "availability": 0.5,
                                                                        "slo": 0.8, "interruptions": 10.0}[kind],
                                      step=0.1)
    if kind == "term":
        params["years"] = st.selectbox("Reservation term (years)", [1.0, 3.0], index=1,
                                       help="Every reservation with that term's published discount "
                                            "(data/reservations.csv) or its given prices.")
    if kind == "demand":
        model = st.selectbox("Model", ["(all models)", *[m.id for m in scenario.models]])
        params["model"] = None if model == "(all models)" else model
    if kind == "remove_gpu":
        gpus = sorted(state.catalog_frames()["gpus"]["id"].astype(str))
        params["gpu"] = st.selectbox("GPU type", gpus)
    if kind == "remove_region":
        regions = list(scenario.regions) or sorted({o.region for o in scenario.offers})
        params["region"] = st.selectbox("Region", regions)
    if kind == "prices":
        params["pct"] = st.number_input("Price change (%)", min_value=-95.0, max_value=500.0, value=-20.0, step=5.0)
    if kind == "budget":
        params["budget"] = st.number_input("Budget ($/h)", min_value=0.0, value=100.0, step=10.0)
    run_variant = st.form_submit_button("Run variant", type="primary")
if run_variant:
    try:
        change = api.make_variant(kind, **params)  # type: ignore[arg-type]
        variant = api.apply_variants(scenario, [change])
        if base_result is not None and base_result.has_plan:  # warm from the base plan's templates, same answer
            whatif_jobs[api.variant_label(change)] = state.submit(
                "solve", near_request(variant, base_result, with_baselines=True), near_job)
        else:
            whatif_jobs[api.variant_label(change)] = state.submit_solve(variant)
    except PlanningError as exc:
        widgets.show_error(exc)

running = {label: jid for label, jid in {"base plan": base.id, **whatif_jobs, **sweep_jobs}.items()
           if (r := state.find_job(jid)) is not None and not r.is_terminal}
if running:  # a running variant's best plan and a sweep's rows so far are drawn below: drawn again as they come
    partial = [jid for jid in (*whatif_jobs.values(), *sweep_jobs.values()) if jid in running.values()]
    widgets.live_jobs(running, key="whatif", watch=lambda: tuple(state.partial_stamp(j) for j in partial))

# --- comparison ------------------------------------------------------------------------------------------------
results: dict[str, PlanResult] = {}
if base_result is not None:
    results["base"] = base_result
for label, job_id in whatif_jobs.items():
    record = state.find_job(job_id)
    if record is None:
        continue
    result = state.result_of(record)
    if result is not None:
        results[label] = result
    elif record.is_terminal:
        st.caption(f"Variant **{label}**:")
        widgets.show_job_outcome(record)
    elif (found := state.partial_plan(job_id)) is not None:  # still proven: its best plan so far, said so
        st.caption(f"Variant **{label}** (still being planned):")
        widgets.best_so_far(found[1])

if len(results) > 0:
    st.subheader("Variants side by side")
    widgets.explain("whatif_figure", "Cost per hour of the mixed plan and of each baseline (homogeneous, Cauchy's "
                    "GPU combos, single GPU type, memP), per variant. A baseline that cannot meet all demand is marked "
                    "as falling short.")
    frame = api.comparison_frame(results)
    frame["cost_per_month"] = frame["cost_per_hour"] * widgets.HOURS_PER_MONTH  # finance reads months
    st.plotly_chart(viz.whatif_figure(api.chart_frame(frame)), width="stretch", key="variants_chart")
    st.dataframe(frame, hide_index=True, width="stretch",
                 column_config={"served_fraction": st.column_config.NumberColumn(format="percent"),
                                "cost_per_hour": st.column_config.NumberColumn("$/h", format="$%.2f"),
                                "cost_per_month": st.column_config.NumberColumn("$/month", format="$%,.0f"),
                                "savings_pct": st.column_config.NumberColumn("savings %", format="%.1f")})
    st.subheader("Does each variant keep its latency promise?")
    simulation.variants_attainment(results)

if base_result is not None and len(results) > 1:
    st.subheader("Plan-to-plan diff")
    widgets.explain("plan_diff", "Which instances and GPUs the variant adds or drops compared with the base plan, "
                    "and how the cost moves because of it.")
    other = st.selectbox("Compare the base plan with", [k for k in results if k != "base"])
    variant_result = results[other]
    if not variant_result.has_plan or variant_result.served_fraction < base_result.served_fraction - 1e-9:
        # an infeasible or short variant is not a cheaper plan: say what happened instead of diffing costs
        st.warning(f"**{other}** has no plan that serves the same demand (status {variant_result.status}, serves "
                   f"{variant_result.served_fraction:.1%} of demand against {base_result.served_fraction:.1%}), "
                   "so there is no cost difference to show.")
        for line in variant_result.diagnostics[:5]:
            st.caption(line)
    else:
        before, after = api.diff_lines(base_result), api.diff_lines(variant_result)
        st.markdown(viz.diff_summary(before, after))
        diff = viz.plan_diff(before, after)
        widgets.explain("plan_diff_figure", "")
        st.plotly_chart(viz.plan_diff_figure(diff, base_result.comparable_cost), width="stretch", key="plan_diff")
        st.dataframe(diff, hide_index=True, width="stretch")

# --- sweeps ----------------------------------------------------------------------------------------------------
st.subheader("Sweeps")
widgets.explain("sweep_figure", "Cost per hour as demand (or the SLO) is scaled: the mixed plan against each single GPU "
                "type. Mixed plans pay off most where one GPU type alone is a poor fit.")
with st.form("sweep_form"):
    cols = st.columns([1, 2, 1])
    sweep_kind = cols[0].radio("Sweep", ["demand", "slo"], format_func={"demand": "cost vs demand ×k",
                                                                       "slo": "cost vs SLO ×k"}.__getitem__)
    values_text = cols[1].text_input("Factors k", "0.5, 1, 2, 4")
    point_limit = cols[2].number_input("Time limit per point (s)", min_value=0.0, value=0.0, step=10.0,
                                       help="0: the scenario's own limit. A point it stops keeps its best plan, "
                                            "labelled with its proven gap under the chart. It counts the point's "
                                            "first look (a plan within a few seconds, drawn at once).")
    run_sweep = st.form_submit_button("Run sweep")
if run_sweep:
    try:
        values = [float(v) for v in values_text.replace(";", ",").split(",") if v.strip()]
    except ValueError:
        widgets.show_error(PlanningError("factors", f"{values_text!r} is not a list of numbers.",
                                         "write numbers separated by commas, e.g. 0.5, 1, 2."))
    else:
        if not values:
            widgets.show_error(PlanningError("factors", "is empty.", "give at least one factor, e.g. 1, 2."))
        else:
            label = f"{sweep_kind}: {', '.join(f'{v:g}' for v in values)}"
            sweep_jobs[label] = state.submit("sweep", sweep_request(scenario, sweep_kind, values,
                                                                    point_limit or None), sweep_job)
            st.rerun()


def _draw_sweep(label: str, job_id: str, kind: str, rows: list[dict[str, object]], so_far: str = "") -> None:
    """A sweep's figure and what its points' solves did not prove (``so_far``: the rows of a running sweep)."""
    st.markdown(f"**Sweep {label}{' (so far)' if so_far else ''}**")
    if so_far:
        st.info(so_far)
    sweep = pd.DataFrame(rows, columns=api.SWEEP_COLUMNS)
    st.plotly_chart(viz.sweep_figure(sweep, x_title=f"{kind} ×k", title="Cost vs " + kind), width="stretch",
                    key=f"sweep-{job_id}")
    notes = api.sweep_notes(sweep)  # a point stopped by its time limit is labelled, never passed off as optimal
    if notes:
        st.caption("Not proven: " + "; ".join(notes))


for label, job_id in reversed(list(sweep_jobs.items())):
    record = state.find_job(job_id)
    if record is None:
        continue
    if not record.is_terminal:  # its rows so far: every point's first look, then each point as it is solved
        found = state.partial_answer(job_id)
        if found and found.get("rows"):
            done, points = int(found.get("final", 0)), int(found.get("points", 0))
            plans = [row for row in found["rows"] if row.get("method") == api.PLAN_METHOD]
            _draw_sweep(label, job_id, record.request["kind"], found["rows"],
                        f"{sum(row.get('cost_per_hour') is not None for row in plans)} of {points} points planned "
                        f"so far, {len(plans) - done} of them at a first look (a plan within {api.FIRST_PASS_S:g} s, "
                        f"without baselines); {done} solved as asked. An open point is not proven: the optimum "
                        "lies between it and the end of its whisker (what each proved is said under the chart). "
                        "The chart is drawn again as the solves go on.")
        continue
    if record.status == "done" and record.result is not None:
        _draw_sweep(label, job_id, record.request["kind"], record.result["rows"])
    else:
        widgets.show_job_outcome(record)
