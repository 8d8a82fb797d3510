"""The Plan page's export check: what the deployment files run differently from the plan, and what it costs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planning import api
from planning.errors import PlanningError
from planning.result import PlanResult
from ui import state, widgets


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
    alternative = api.export_alternative(result)
    if alternative is None or not any(d.kind == "kv-transfer" for d in preview.differences):
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
