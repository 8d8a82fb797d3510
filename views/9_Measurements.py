"""Measurements page: import your own serving benchmarks, see them, fit the perf model to them (before/after)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from planning import api, viz
from planning.errors import PlanningError
from ui import state, widgets
from ui.jobs import fit_job, fit_request, impact_job, impact_request, validate_job, validate_request

FROM_FILE = "(from the file)"
SHOWN = ["model", "gpu", "count", "tp", "engine", "engine_version", "concurrency", "request_rate", "ttft_ms_mean",
         "itl_ms_mean", "tpot_ms_mean", "output_tokens_per_s", "source", "file", "instance"]

widgets.page(
    "Measurements",
    "Your own benchmark files — `vllm bench serve --save-result` JSON, GuideLLM report JSON or a CSV — checked "
    "against the hardware and fitted into the perf model, so plans can be checked against your GPUs. Every "
    "exported recipe carries the command that measures its instance (docs/measurements.md)."
)
gpus = [FROM_FILE, *state.catalog_frames()["gpus"]["id"].tolist()]
with st.form("measurement_import"):
    uploads = st.file_uploader("Benchmark files", type=["json", "csv"], accept_multiple_files=True)
    cols = st.columns(4)
    gpu = cols[0].selectbox("GPU", gpus, help="no benchmark file says which GPU ran it")
    count = cols[1].number_input("GPUs in the node (0: from the file)", 0, 64, 0)
    tp = cols[2].number_input("TP (0: from the file)", 0, 64, 0)
    version = cols[3].text_input("vLLM version (optional)", "")
    submitted = st.form_submit_button("Import", type="primary")
if submitted and uploads:
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for up in uploads:
            path = Path(folder) / Path(up.name).name
            path.write_bytes(up.getvalue())
            paths.append(path)
        setup = api.MeasurementSetup(gpu=None if gpu == FROM_FILE else gpu, count=int(count) or None,
                                     tp=int(tp) or None, engine_version=version.strip() or None)
        try:
            report = api.import_measurements(paths, setup)
        except PlanningError as exc:
            widgets.show_error(exc)
        else:
            st.success(f"{len(report.points)} point(s) read, {report.added} new; {report.total} stored.")

st.subheader("Check a deployed plan")
widgets.explain("validate_plan", "Upload the plan (PLAN.json) and the files its recipes' benchmark command wrote: "
                "each instance measured vs predicted, the ones that miss, and the plan re-solved with your numbers.")
with st.form("validate_plan"):
    plan_file = st.file_uploader("Plan (PLAN.json)", type=["json"], key="validate_plan_file")
    result_files = st.file_uploader("Benchmark results of its instances", type=["json", "csv"],
                                    accept_multiple_files=True, key="validate_results")
    check = st.form_submit_button("Check the plan")
if check and plan_file is not None and result_files:
    try:
        texts = {f.name: f.getvalue().decode("utf-8") for f in result_files}
        plan_text = plan_file.getvalue().decode("utf-8")
    except UnicodeDecodeError:
        widgets.show_error(PlanningError("upload", "a file is not UTF-8 text.", "upload the JSON files as written."))
    else:
        st.session_state["validate_job"] = state.submit("validate-plan", validate_request(plan_text, texts),
                                                        validate_job)
        st.rerun()
checked = state.find_job(st.session_state.get("validate_job"))
if checked is not None and not checked.is_terminal:
    widgets.live_jobs({"validate-plan": checked.id}, key="validate")
elif checked is not None and checked.status == "done" and checked.result is not None:
    missing = checked.result["missing"]
    if missing:
        st.warning(f"Instance(s) {', '.join(map(str, missing))} miss their prediction or SLOs.", icon=":material/warning:")
    else:
        st.success("Every measured instance is within 10 % of its prediction and meets its SLOs.")
    st.dataframe(pd.DataFrame(checked.result["instances"]), hide_index=True, width="stretch")
    st.caption(checked.result["note"])
    if checked.result["diff"] is not None:
        st.markdown("**Plan diff** (provisioning $/h before and after re-planning with your measurements)")
        st.dataframe(pd.DataFrame(checked.result["diff"]), hide_index=True, width="stretch")
elif checked is not None:
    widgets.show_job_outcome(checked)

st.subheader("Saved scenarios on your measurements")
widgets.explain("measurements_impact", "Plans every saved scenario with a trusted fit of one of its models twice, on "
                "the shipped model and on your measurements (what a solve now does by default), and shows which "
                "plans change and by how much (provisioning $/h).")
saved = state.saved_scenarios()
if not saved:
    st.caption("No saved scenarios (save one on the Scenario page).")
elif st.button("Which saved plans change?"):
    texts = {}
    for name in saved:
        try:
            texts[name] = state.load_saved(name).to_yaml()  # bounded loader; a broken file is named and skipped
        except PlanningError as exc:
            widgets.show_error(exc)
    st.session_state["impact_job"] = state.submit("measurements-impact", impact_request(texts), impact_job)
    st.rerun()
impact = state.find_job(st.session_state.get("impact_job"))
if impact is not None and not impact.is_terminal:
    widgets.live_jobs({"measurements-impact": impact.id}, key="impact")
elif impact is not None and impact.status == "done" and impact.result is not None:
    changed = [r["scenario"] for r in impact.result["rows"] if r["changes"]]
    st.markdown(f"**{len(changed)} of {len(impact.result['rows'])}** saved plan(s) change"
                + (f": {', '.join(changed)}." if changed else "."))
    st.dataframe(pd.DataFrame(impact.result["rows"]), hide_index=True, width="stretch")
elif impact is not None:
    widgets.show_job_outcome(impact)

stored = api.measurements_frame()
st.subheader(f"Stored measurements ({len(stored)})")
if stored.empty:
    st.info("No measurements yet: import a benchmark file above.")
    st.stop()
st.dataframe(stored[SHOWN], hide_index=True, width="stretch")

st.subheader("Fit")
widgets.explain("fit_figure", "Each marker is one measured number beside the simulator's prediction, hollow before "
                "the fit and filled after; on the dotted diagonal the simulator matches your measurement.")
rows = stored.astype(object).where(pd.notna(stored), None).to_dict("records")
if st.button("Fit the perf model to these measurements", type="primary"):
    st.session_state["fit_job"] = state.submit("fit", fit_request(rows), fit_job)
    st.rerun()
record = state.find_job(st.session_state.get("fit_job"))
if record is not None and not record.is_terminal:
    widgets.live_jobs({"fit": record.id}, key="fit")
elif record is not None and record.status == "done" and record.result is not None:
    settings = pd.DataFrame(record.result["settings"])
    st.dataframe(settings, hide_index=True, width="stretch")
    for row in settings.to_dict("records"):
        loo = row.get("error_leave_one_out")
        st.markdown(f"**{row['model']} on {row['shape']} TP{row['tp']}**: median error "
                    f"{100 * row['error_before']:.1f} % → {100 * row['error_after']:.1f} % on your points"
                    + (f", leave-one-out {100 * loo:.1f} %" if loo is not None else "")
                    + (" — trusted: plans use it." if row["trusted"] else
                       " — not trusted: the leave-one-out does not beat the model, plans keep it."))
    st.plotly_chart(viz.fit_figure(pd.DataFrame(record.result["points"])), width="stretch", key="fit-figure")
elif record is not None:
    widgets.show_job_outcome(record)
