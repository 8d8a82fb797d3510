"""Jobs page: this workspace's background jobs (without sign-in, optionally everyone's), open a finished plan, cancel,
remove, share a plan read-only by a link."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any

import pandas as pd
import streamlit as st

from planning.jobs import JobRecord
from planning.result import PlanResult
from ui import state, team, widgets

widgets.page("Jobs", "Plans, template libraries and sweeps run in the background and are kept on disk, so a reload "
             "or a second tab finds them. Identical requests reuse a finished job.")

store = state.runner().store
if store.notice:  # a damaged store was recovered (how many jobs, where the damaged file went), or it is read-only
    st.warning(store.notice, icon=":material/warning:")
workspace = state.workspace()
# Signed in: one's own jobs only (and the identical requests one shares with others). Without sign-in the one local
# workspace may list everything on this PLANNING_HOME, as before; "mine" survives a reload (the owner is "local").
mine_only = workspace.private or st.toggle("Only my jobs", value=True,
                                           help="Off: every job on this server's PLANNING_HOME, e.g. from the CLI.")
records = state.runner().list_jobs(owner=workspace.id if mine_only else None, limit=100)
if not records:
    st.info("No jobs yet.")
    st.stop()


def _age(ts: float | None) -> str:
    """'12 s ago', '4 min ago', '2 h ago', or the date."""
    if not ts:
        return ""
    seconds = max(0.0, dt.datetime.now().timestamp() - ts)
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 86400:
        return f"{seconds / 3600:.0f} h ago"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


KIND_LABELS = {"solve": "plan", "library": "template library", "sweep": "sweep", "simulate": "simulation",
               "markets": "cloud/region comparison", "sharing": "GPU-sharing plan"}


def _scenario_of(record: JobRecord) -> dict[str, Any]:
    """The scenario a job was asked about (a simulation carries it inside its plan)."""
    request = record.request or {}
    if isinstance(request.get("scenario"), dict):
        return dict(request["scenario"])
    with contextlib.suppress(ValueError, TypeError, KeyError):
        return dict(json.loads(request["plan"]).get("scenario") or {})
    return {}


def _plan(record: JobRecord) -> PlanResult | None:
    """A finished solve's plan (None for other jobs and for a solve without a plan)."""
    if record.kind != "solve" or record.status != "done":
        return None
    full = state.find_job(record.id)
    result = state.result_of(full) if full is not None else None
    return None if result is None or not result.has_plan else result


def _shared_bill(record: JobRecord) -> tuple[float, float] | None:
    """A finished sharing job's bill per hour and month (its dict's ``bill``: the shared GPUs and the dedicated
    part, as ``SharingResult.bill`` counts them); None for other jobs."""
    if record.kind != "sharing" or record.status != "done":
        return None
    full = state.find_job(record.id)
    bill = (full.result or {}).get("bill") if full is not None else None
    return (float(bill["per_hour"]), float(bill["per_month"])) if isinstance(bill, dict) else None


rows = []
for r in records:
    scenario = _scenario_of(r)
    objective = scenario.get("objective", {}) if isinstance(scenario.get("objective"), dict) else {}
    plan = _plan(r)
    # the bill, as Home, Plan and the report show it
    bill = (plan.bill.per_hour, plan.bill.per_month) if plan is not None else _shared_bill(r)
    rows.append({
        "scenario": str(scenario.get("name", "")), "what": KIND_LABELS.get(r.kind, r.kind),
        "objective": {"cost": "min cost", "served": "max served"}.get(str(objective.get("kind", "")), ""),
        "prices": widgets.pricing_kinds(plan) if plan is not None else
        ("spot" if scenario.get("pricing") == "spot" else "on-demand"),
        "status": r.status, "progress": r.progress, "attention": r.attention() or "", "attempt": r.attempt or None,
        "cost $/h": None if bill is None else round(bill[0], 2),
        "cost $/month": None if bill is None else round(bill[1]),
        "age": _age(r.created), "seconds": round(r.elapsed, 2) if r.elapsed is not None else None,
        "message": r.message or "", "error": r.error or "", "id": r.id,
    })
frame = pd.DataFrame(rows)
st.dataframe(frame, hide_index=True, width="stretch",
             column_config={"progress": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0),
                            "cost $/h": st.column_config.NumberColumn(format="$%.2f"),
                            "cost $/month": st.column_config.NumberColumn(format="$%,.0f"),
                            "seconds": st.column_config.NumberColumn("run time (s)", format="%.1f"),
                            "attention": st.column_config.TextColumn(
                                help="'no progress for N s': alive (heartbeat fresh) but no step reported for a "
                                     "while, e.g. a long ILP on a busy machine. 'no heartbeat for N s': its process "
                                     "is stopped, hung or dead; it is marked lost after two minutes."),
                            "attempt": st.column_config.NumberColumn(
                                help="2 when its first worker process died (e.g. out of memory) and it was run "
                                     "again; its notes say why (planning jobs show ID).")})
if any(r.status == "lost" for r in records):
    st.caption("lost: the process running the job (the workbench server, or its worker) stopped before it finished. "
               "Plan it again: an identical request starts a fresh job.")

active = {f"{KIND_LABELS.get(r.kind, r.kind)} {r.id}": r.id for r in records if not r.is_terminal}
if active:
    widgets.live_jobs(active, key="jobs")

plans = [r.id for r in records if r.kind == "solve" and r.status == "done"]
names = {r.id: f"{_scenario_of(r).get('name', '?')} · {KIND_LABELS.get(r.kind, r.kind)} · {_age(r.created)} · {r.id}"
         for r in records}
if plans:
    with st.form("open_plan"):
        pick = st.selectbox("Open a finished plan", plans, format_func=names.__getitem__)
        if st.form_submit_button("Open on the Plan page"):
            state.link_solve_job(pick)
            st.switch_page("views/3_Plan.py")

finished = [r.id for r in records if r.is_terminal]
if finished:
    with st.form("remove_job"):
        gone = st.selectbox("Remove a finished job from my list", finished, format_func=names.__getitem__)
        if st.form_submit_button("Remove"):
            if workspace.private:  # another user's identical request keeps it
                state.runner().store.withdraw(gone, workspace.id)
            else:
                state.runner().store.delete(gone)
            st.rerun()
team.shares_panel({job_id: names[job_id] for job_id in plans})
