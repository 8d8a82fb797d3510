"""Templates page: build the serving-template library in the background, explore it, draw a pipeline layout."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd
import streamlit as st

from planning import api, viz
from ui import state, widgets
from ui.jobs import library_job, solve_request

widgets.page("Serving templates", "Every way to pipeline one model replica over up to Nmax nodes, possibly of "
             "different GPU types, with its throughput and hourly cost.")

scenario = state.current_scenario()
st.markdown(f"Scenario **{scenario.name}** — models: {', '.join(m.id for m in scenario.models)}.")
if st.button("Build the template library", type="primary"):
    st.session_state["library_job"] = state.submit("library", solve_request(scenario), library_job)

record = state.find_job(st.session_state["library_job"])
if record is None:
    st.info("Press **Build the template library**. It runs in the background with a progress bar and Cancel; "
            "identical requests reuse the stored library.")
    st.stop()
if not record.is_terminal:
    widgets.live_jobs({"Building templates": record.id}, key="templates")
    st.stop()
if record.status != "done" or record.result is None:
    widgets.show_job_outcome(record)
    st.stop()

library = pd.DataFrame(record.result["templates"])
if library.empty:
    st.warning("No template meets the SLOs with these GPUs. Loosen the SLOs or add GPU types on the Scenario page.")
    st.stop()

with st.form("template_filters"):
    cols = st.columns(3)
    models = cols[0].multiselect("Model", sorted(library["model"].unique()))
    phases = cols[1].multiselect("Phase", sorted(library["phase"].unique()))
    mix = cols[2].radio("GPU types", ["all", "one GPU type", "mixed"], horizontal=True)
    st.form_submit_button("Filter")
shown = library
if models:
    shown = shown[shown["model"].isin(models)]
if phases:
    shown = shown[shown["phase"].isin(phases)]
if mix != "all":
    shown = shown[shown["single_gpu_type"] == (mix == "one GPU type")]

total = int(record.result.get("total", len(library)))
st.subheader(f"{len(shown)} templates shown of {total:,} generated")
st.caption("Shown per model and phase: every single-shape template, the throughput-vs-cost frontier and the 300 "
           "best by throughput per dollar; the allocation ILP considers all of them.")
widgets.explain("template_scatter", "Each point is a template: throughput against hourly cost. Points up and to "
                "the left are the good deals; colour tells one-GPU-type from mixed templates.")
# Prompt tokens/s (prefill) and output tokens/s (decode) are different quantities: one chart per phase.
phase_list = sorted(shown["phase"].unique()) if not shown.empty else []
if len(phase_list) <= 1:
    st.plotly_chart(viz.template_scatter(shown), width="stretch", key="scatter")
else:
    for col, phase in zip(st.columns(len(phase_list)), phase_list, strict=True):
        col.plotly_chart(viz.template_scatter(shown[shown["phase"] == phase], title=f"{phase} templates"),
                         width="stretch", key=f"scatter-{phase}")

if not shown.empty:
    rows: dict[str, dict[str, Any]] = {f"{r['model']} · {r['phase']} · {r['template_id']}": {str(k): v for k, v in r.items()}
                                       for r in shown.to_dict(orient="records")}
    pick = st.selectbox("Pipeline layout of", list(rows))
    row = rows[pick]
    stages = [asdict(stage) for stage in api.template_stages(str(row.get("stages_json") or ""))]
    for stage in stages:  # the library keeps the template's throughput, not each node's: no "0 tok/s" boxes
        stage["nodes"] = [{**node, "throughput": node["throughput"] or None} for node in stage["nodes"]]
    widgets.explain("pipeline_figure", "Stages run left to right; each box is a node coloured by GPU type with the layer "
                    "range it holds. Boxes stacked in one stage are data-parallel replicas.")
    st.plotly_chart(viz.pipeline_figure(stages, title=f"{pick} · {row['throughput']:,.0f} {row['unit']}",
                                        phase=str(row["phase"])), width="stretch", key="template_pipeline")
    st.caption(f"{row['throughput']:,.0f} {row['unit']} for ${row['cost_per_hour']:,.2f}/h in {row['region']}.")
    st.dataframe(shown.drop(columns=["stages_json"], errors="ignore"), hide_index=True, width="stretch")
