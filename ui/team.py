"""A workbench a team shares: the sign-in page, who is signed in, share links (make, list, revoke, open)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from planning import api
from planning.errors import PlanningError
from planning.jobs import ShareToken, load_secret, new_token_id, sign, verify
from ui import state

SHARE_DAYS = (1, 7, 30)
"""How long a new share link may live, in days (the Jobs page offers these)."""


def only_page(page: Callable[[], None], title: str) -> None:
    """Run ``page`` as the app's one page, whatever URL was asked for, with no navigation to any other."""
    st.navigation([st.Page(page, title=title, icon=":material/lock:", default=True)], position="hidden").run()


def providers() -> list[str | None]:
    """The providers configured under ``[auth]``: named ``[auth.NAME]`` sections, or ``[None]`` for one unnamed."""
    section: Any = st.secrets.get("auth", {})
    named = [str(k) for k, v in section.items() if hasattr(v, "keys")]
    return list(named) or [None]


def sign_in_page() -> None:
    """What an unauthenticated visitor sees, whatever page or ``?job=`` link they asked for: only this."""
    st.set_page_config(page_title="Sign in · planning", page_icon=":material/calculate:")
    st.title("Sign in")
    st.write("This workbench is shared by a team: sign in with your organisation's account to see your own "
             "scenarios, jobs and plans.")
    if st.user.get("is_logged_in"):  # signed in, but the provider's token does not say who: no workspace to open
        try:
            state.workspace()
        except PlanningError as exc:
            st.error(str(exc))
        st.button("Sign out", key="logout", on_click=st.logout)
        return
    for provider in providers():
        label = "Sign in" if provider is None else f"Sign in with {provider}"
        st.button(label, key=f"login-{provider}", type="primary", on_click=st.login,
                  args=() if provider is None else (provider,))


def user_sidebar() -> None:
    """The sidebar's who-is-signed-in line and sign-out (nothing without sign-in)."""
    if not state.sign_in_configured():
        return
    ws = state.workspace()
    st.sidebar.caption(f"Signed in as **{ws.label or 'you'}**")
    st.sidebar.button("Sign out", key="logout", on_click=st.logout, icon=":material/logout:")


# --- share links -------------------------------------------------------------------------------------------------
def _secret() -> bytes:
    configured = st.secrets.get("share_secret") if st.secrets.load_if_toml_exists() else None
    if configured and len(str(configured)) < 32:
        raise PlanningError("share_secret", "in Streamlit's secrets is shorter than 32 characters.",
                            "Set it to e.g. the output of `python -c 'import secrets; print(secrets.token_hex(32))'`.")
    return str(configured).encode() if configured else load_secret(state.planning_home())


def make_link(job_id: str, days: int, now: float | None = None) -> str:
    """Record and sign a read-only share link of one of this workspace's finished plans; returns its query string.

    Raises
    ------
    PlanningError
        On ``job_id`` when this workspace cannot see the job (as for an unknown id).
    """
    now = time.time() if now is None else now
    grant = ShareToken(job_id, now + days * 86400.0, new_token_id())
    token = sign(_secret(), grant)  # first: a bad secret records nothing
    state.runner().store.add_share(job_id, state.workspace().id, grant.token_id, grant.expires)
    return f"?share={token}"


def open_link(token: str, now: float | None = None) -> str:
    """The job id a share token opens: signature, expiry and revocation checked.

    Raises
    ------
    PlanningError
        On ``share`` for a damaged, foreign, expired or revoked link.
    """
    grant = verify(_secret(), token, time.time() if now is None else now)
    record = state.runner().store.find_share(grant.token_id)
    if record is None or record.revoked is not None or record.job_id != grant.job_id:
        raise PlanningError("share", "this share link was revoked.",
                            "Ask whoever shared it for a new link.")
    return grant.job_id


def shares_panel(plans: dict[str, str]) -> None:
    """Jobs page: make a share link of a finished plan, list one's links and revoke them."""
    with st.expander("Share a plan read-only", icon=":material/share:"):
        if plans:
            with st.form("share_plan"):
                pick = st.selectbox("Plan to share", list(plans), format_func=plans.__getitem__)
                days = st.selectbox("Link works for", SHARE_DAYS, index=1, format_func=lambda d: f"{d} days")
                if st.form_submit_button("Make a share link"):
                    try:
                        st.session_state["share_link"] = make_link(pick, int(days))
                    except PlanningError as exc:
                        st.error(str(exc))
        if link := st.session_state.get("share_link"):
            base = (st.context.url or "").split("?")[0].rsplit("/", 1)[0]
            st.code(f"{base}/{link}", language=None)
            st.caption("Whoever has this link can open this one plan read-only, without signing in, until it "
                       "expires or you revoke it below. Nothing else is reachable through it.")
        _revoke_list()


def _revoke_list() -> None:
    shares = state.runner().store.shares(state.workspace().id)
    if not shares:
        return
    now = time.time()
    for share in shares:
        until = dt.datetime.fromtimestamp(share.expires).strftime("%Y-%m-%d %H:%M")
        status = "revoked" if share.revoked else ("expired" if share.expires <= now else f"works until {until}")
        cols = st.columns([5, 1])
        cols[0].write(f"Plan `{share.job_id}` · link `{share.token_id}` · {status}")
        if share.revoked is None and share.expires > now and cols[1].button("Revoke", key=f"revoke-{share.token_id}"):
            state.runner().store.revoke_share(share.token_id, share.owner)
            st.session_state.pop("share_link", None)
            st.rerun()


def shared_plan_page() -> None:
    """What a share link opens: one plan, read-only, its report; no sidebar, no other page, no other job."""
    st.set_page_config(page_title="Shared plan · planning", page_icon=":material/calculate:", layout="wide")
    try:
        job_id = open_link(str(st.query_params.get("share") or ""))
        record = state.runner().store.find(job_id)
        result = state.result_of(record) if record is not None else None
        if result is None:
            raise PlanningError("share", "the shared plan is no longer stored.", "Ask for a new link.")
    except PlanningError as exc:
        st.title("Shared plan")
        st.error(str(exc))
        st.stop()
    title = str(result.scenario.get("name") or "plan")
    st.title(f"Shared plan: {title}")
    st.caption("Read-only, shared by a link. The report below is the plan as its owner sees it.")
    name = state.slug(title)
    cols = st.columns(2)
    cols[0].download_button("Report (printable HTML)", api.plan_report(result, "html"), file_name=f"{name}.report.html",
                            mime="text/html")
    cols[1].download_button("Report (Markdown)", api.plan_report(result, "markdown"), file_name=f"{name}.report.md",
                            mime="text/markdown")
    st.markdown(api.plan_report(result, "markdown"))
