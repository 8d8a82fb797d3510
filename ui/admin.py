"""The admin page's parts: who is an admin here, the whole queue with places, per-user usage, cancel any job."""

from __future__ import annotations

import contextlib
from typing import Any

import pandas as pd
import streamlit as st

from planning.jobs import JobRecord
from planning.jobs.admin import Identity, is_admin, usage
from ui.state import init_state, runner

PAGE = "views/10_Admin.py"


def signin_configured() -> bool:
    """Whether Streamlit's sign-in is configured (an ``[auth]`` section in ``.streamlit/secrets.toml``)."""
    with contextlib.suppress(Exception):  # no secrets file at all: no sign-in
        return "auth" in st.secrets
    return False


def identity() -> Identity:
    """Who this session is: its owner key, and the provider's claims when signed in."""
    init_state()
    configured = signin_configured()
    claims: dict[str, Any] = {}
    signed_in = False
    if configured:
        with contextlib.suppress(Exception):  # a Streamlit without st.user: treated as not signed in
            signed_in = bool(st.user.is_logged_in)
            claims = dict(st.user.to_dict()) if signed_in else {}
    return Identity(key=st.session_state.get("owner"), signin_configured=configured, signed_in=signed_in,
                    claims=claims)


def admin_here() -> bool:
    """Whether this session has the admin role (planning.jobs.admin.is_admin)."""
    return is_admin(identity())


def pages() -> list[Any]:
    """The Admin page for the app's navigation: only for admins (others never see it listed)."""
    if not st.runtime.exists() or not admin_here():  # a spawned worker re-running app.py has no session
        return []
    return [st.Page(PAGE, title="Admin", icon=":material/admin_panel_settings:")]


def _name(record: JobRecord) -> str:
    request = record.request or {}
    scenario = request.get("scenario") if isinstance(request.get("scenario"), dict) else {}
    return str((scenario or {}).get("name", ""))


def queue_frame(records: list[JobRecord]) -> pd.DataFrame:
    """Queued and running jobs, the next to start first: owner, what, place ("N ahead"), progress, run time."""
    queued, _running = runner().queue()
    order = {w.job_id: i for i, w in enumerate(queued)}
    rows = []
    for r in records:
        if r.is_terminal:
            continue
        ahead = order.get(r.id)
        rows.append({"status": r.status, "owner": r.owner or "(none)", "what": r.kind, "scenario": _name(r),
                     "place": "" if ahead is None else f"{ahead} ahead",
                     "progress": float(r.progress or 0.0), "message": r.message or "",
                     "run time (s)": None if r.elapsed is None else round(r.elapsed, 1), "id": r.id,
                     "_order": (0 if r.status == "running" else 1, order.get(r.id, len(order)), r.created)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    return frame.sort_values("_order").drop(columns="_order").reset_index(drop=True)


def usage_frame(records: list[JobRecord]) -> pd.DataFrame:
    """Per-user usage (planning.jobs.admin.usage) as a table."""
    return pd.DataFrame([{"owner": u.owner or "(none)", "jobs": u.jobs, "running": u.running, "queued": u.queued,
                          "done": u.done, "failed": u.failed, "cancelled": u.cancelled,
                          "run time (s)": u.run_seconds} for u in usage(records)])


def render(limit: int = 1000) -> None:
    """The admin page's body: caps, the queue, per-user usage and a Cancel for any active job."""
    jobs = runner()
    records = jobs.list_jobs(owner=None, limit=limit)
    queue = queue_frame(records)
    cols = st.columns(4)
    cols[0].metric("Running", int((queue["status"] == "running").sum()) if not queue.empty else 0)
    cols[1].metric("Queued", int((queue["status"] == "queued").sum()) if not queue.empty else 0)
    cols[2].metric("Workers (server)", jobs.max_workers, help="Jobs that run at the same time on this server.")
    cols[3].metric("Per user", jobs.per_user, help="Jobs one user runs at the same time "
                   "(PLANNING_MAX_JOBS_PER_USER); further jobs wait, round-robin across users.")
    st.subheader("Queue")
    if queue.empty:
        st.info("No job is queued or running.")
    else:
        st.dataframe(queue, hide_index=True, width="stretch",
                     column_config={"progress": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0)})
        with st.form("admin_cancel"):
            pick = st.selectbox("Cancel a job (any user's)", list(queue["id"]),
                                format_func=lambda j: _label(queue, j))
            if st.form_submit_button("Cancel job", type="primary"):
                stopped = jobs.cancel(str(pick))  # no ``by``: an admin's cancel stops it for everyone
                (st.success if stopped else st.warning)(
                    f"Job {pick} {'cancelled' if stopped else 'had already finished'}.")
    st.subheader("Usage per user")
    st.caption(f"The last {limit} jobs in the store. Run time: seconds from each job's start to its end, summed "
               "(wall-clock; CPU time is not recorded).")
    table = usage_frame(records)
    if table.empty:
        st.info("No jobs yet.")
    else:
        st.dataframe(table, hide_index=True, width="stretch")


def _label(queue: pd.DataFrame, job_id: str) -> str:
    row = queue.set_index("id").loc[job_id]
    return f"{row['owner']} · {row['what']} {row['scenario']} · {row['status']} · {job_id}"
