"""Jobs page: background jobs of this session (and everyone's recent ones), open a finished plan, cancel."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from ui import state, widgets

widgets.page("Jobs", "Plans, template libraries and sweeps run in the background and are kept on disk, so a reload "
             "or a second tab finds them. Identical requests reuse a finished job.")

mine_only = st.toggle("Only this session's jobs", value=True)
records = state.runner().list_jobs(owner=st.session_state["owner"] if mine_only else None, limit=100)
if not records:
    st.info("No jobs yet.")
    st.stop()


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts else ""


frame = pd.DataFrame([{
    "id": r.id, "kind": r.kind, "status": r.status, "progress": r.progress, "message": r.message,
    "created": _when(r.created), "seconds": round(r.elapsed, 2) if r.elapsed is not None else None,
    "error": r.error or "",
} for r in records])
st.dataframe(frame, hide_index=True, width="stretch",
             column_config={"progress": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0)})

active = {f"{r.kind} {r.id}": r.id for r in records if not r.is_terminal}
if active:
    widgets.live_jobs(active, key="jobs")

plans = [r.id for r in records if r.kind == "solve" and r.status == "done"]
if plans:
    with st.form("open_plan"):
        pick = st.selectbox("Open a finished plan", plans)
        if st.form_submit_button("Open on the Plan page"):
            st.session_state["solve_job"] = pick
            st.query_params["job"] = pick
            st.switch_page("pages/3_Plan.py")
