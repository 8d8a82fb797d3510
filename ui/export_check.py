"""The Plan page's export check: what the deployment files run differently from the plan, and what it costs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planning import api
from planning.errors import PlanningError
from planning.result import PlanResult
from ui import state, widgets
from ui.jobs import export_simulation_job, export_simulation_request


def export_check_section(result: PlanResult, plan_job_id: str) -> None:
    """Before the download: every difference between the plan and its files, and a button that prices the plan
    that deploys as planned (a background solve without pipelines) where a KV transfer is lost."""
    try:
        preview = api.export_preview(result, price_alternative=False)
    except PlanningError as exc:
        widgets.show_error(exc)
        return
    if preview.deploys_as_planned:
        st.caption("Every instance of this plan deploys as planned.")
        return
    st.warning(f"The deployment files differ from the plan in {len(preview.differences)} place(s); each file's "
               "header says so too (docs/deploy.md).", icon=":material/compare_arrows:")
    st.dataframe(pd.DataFrame(preview.rows()), hide_index=True, width="stretch",
                 column_config={"what differs": st.column_config.TextColumn(width="large"),
                                "what it costs": st.column_config.TextColumn(width="large")})
    if not any(d.kind == "kv-transfer" for d in preview.differences):
        return
    _simulation_panel(result, plan_job_id)
    alternative = api.export_alternative(result)
    if alternative is None:
        return
    jobs: dict[str, str] = st.session_state.setdefault("export_alternative_jobs", {})
    if st.button("Price the plan that deploys as planned (no pipelines)", icon=":material/price_check:"):
        try:
            jobs[plan_job_id] = state.submit_solve(alternative)
        except PlanningError as exc:
            widgets.show_error(exc)
    record = widgets.job_result(state.find_job(jobs.get(plan_job_id)), "Planning without pipelines",
                                key="export_alternative")
    planned = None if record is None else state.result_of(record)
    if planned is None:
        return
    st.info(api.export_preview(result, alternative=planned).alternative_text().capitalize() + ".",
            icon=":material/price_check:")


SIMULATION_COLUMNS = {"model": "model", "planned_attainment": "SLO attainment as planned",
                      "exported_attainment": "SLO attainment as exported",
                      "planned_goodput": "goodput as planned (tok/s)", "exported_goodput": "goodput as exported (tok/s)"}


def _simulation_panel(result: PlanResult, plan_job_id: str) -> None:
    """A button that simulates the plan and the plan as its files deploy it (a background job), then both side by
    side per model whose KV transfer is lost."""
    jobs: dict[str, str] = st.session_state.setdefault("export_simulation_jobs", {})
    if st.button("Simulate the files as exported", icon=":material/play_arrow:"):
        try:
            jobs[plan_job_id] = state.submit("export-simulation", export_simulation_request(result.to_json()),
                                             export_simulation_job)
        except PlanningError as exc:
            widgets.show_error(exc)
    record = widgets.job_result(state.find_job(jobs.get(plan_job_id)), "Simulating the files as exported",
                                key="export_simulation")
    out = None if record is None else record.result
    if out is None:
        return
    if out["error"]:
        st.warning(f"Not simulated: {out['error']}.")
        return
    table = pd.DataFrame(out["runs"], columns=list(SIMULATION_COLUMNS)).rename(columns=SIMULATION_COLUMNS)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        **{c: st.column_config.NumberColumn(c, format="percent") for c in table.columns if "attainment" in c},
        **{c: st.column_config.NumberColumn(c, format="%,.0f") for c in table.columns if "goodput" in c}})
    st.caption(f"Simulated as exported ({out['how']}). " + " ".join(f"{n}." for n in out["notes"]))
