"""Sign-in, private workspaces and share links in the app (AppTest seeds st.user; tests/e2e/test_team.py signs in
through a real OIDC provider in a real browser)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planning.errors import PlanningError
from planning.jobs import JobStore, ShareToken, load_secret, sign, user_workspace, verify
from planning.scenario import Scenario, save_scenario
from tests.app.conftest import ROOT, TIMEOUT, TINY, app, save_tiny, texts, wait_for_job

ISSUER = "https://idp.example/realms/team"
AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "c" * 32, "client_id": "planning",
        "client_secret": "s", "server_metadata_url": f"{ISSUER}/.well-known/openid-configuration"}
SHARE_SECRET = "k" * 40  # share_secret in Streamlit's secrets signs the links (else PLANNING_HOME/share.key)


def _user(sub: str | None) -> dict[str, Any]:
    if sub is None:
        return {"is_logged_in": False}
    return {"is_logged_in": True, "iss": ISSUER, "sub": sub, "name": f"User {sub}", "email": f"{sub}@example.com"}


def team_app(sub: str | None, page: str | None = None, query: dict[str, str] | None = None) -> AppTest:
    """The app with sign-in configured, as user ``sub`` (None: nobody signed in), showing ``page``."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.secrets["auth"] = dict(AUTH)
    at.secrets["share_secret"] = SHARE_SECRET
    at.user = _user(sub)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at


def _plan_as(home: Path, sub: str) -> str:
    """User ``sub`` saves the tiny scenario in their workspace and plans it from Home; returns the job id."""
    save_scenario(Scenario.from_dict(TINY), user_workspace(home, ISSUER, sub).scenarios_dir / "tiny.yaml")
    at = team_app(sub)
    at.selectbox[0].set_value("saved:tiny")
    next(b for b in at.button if b.label == "Plan it").click()
    at.run()
    job_id = str(at.session_state["solve_job"])
    assert wait_for_job(home, job_id) == "done"
    return job_id


def test_unauthenticated_visitor_sees_only_the_sign_in_page() -> None:
    for page, query in ((None, None), (None, {"job": "0123456789abcdef"})):
        at = team_app(None, page, query)
        assert not at.exception
        assert [t.value for t in at.title] == ["Sign in"]
        assert [b.label for b in at.button] == ["Sign in"]
        assert not at.dataframe and not at.selectbox  # no presets, scenarios or jobs


def test_sidebar_names_the_user_with_a_sign_out() -> None:
    at = team_app("ada")
    assert not at.exception
    assert "User ada" in "\n".join(str(c.value) for c in at.sidebar.caption)
    assert "Sign out" in [b.label for b in at.sidebar.button]


def test_another_user_cannot_list_open_or_cancel_a_plan(planning_home: Path) -> None:
    job_id = _plan_as(planning_home, "ada")
    own = team_app("ada", "views/5_Jobs.py")
    assert job_id in set(own.dataframe[0].value["id"])
    other = team_app("bob", "views/5_Jobs.py")
    assert not other.exception and not other.toggle  # no "everyone's jobs" for a signed-in user
    assert "No jobs yet." in texts(other)
    assert "saved:tiny" not in team_app("bob").selectbox[0].options  # ada's saved scenario is hers
    by_link = team_app("bob", "views/3_Plan.py", {"job": job_id})
    assert "No plan yet" in texts(by_link)  # answered as for an id nobody ever used
    guessed = team_app("bob", "views/3_Plan.py", {"job": "ffffffffffffffff"})
    assert texts(guessed) == texts(by_link)
    assert not by_link.get("download_button") and not by_link.dataframe
    with JobStore(planning_home / "jobs.sqlite") as store:
        assert store.withdraw(job_id, user_workspace(planning_home, ISSUER, "bob").id) == "not found"
        assert store.get(job_id).status == "done"


def test_share_link_opens_one_plan_until_revoked(planning_home: Path) -> None:
    job_id = _plan_as(planning_home, "ada")
    at = team_app("ada", "views/5_Jobs.py")
    next(b for b in at.button if b.label == "Make a share link").click()
    at.run()
    link = str(at.session_state["share_link"])
    token = link.removeprefix("?share=")
    assert verify(SHARE_SECRET.encode(), token, now=time.time()).job_id == job_id  # signed with the configured secret
    assert not (planning_home / "share.key").exists()
    viewer = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    viewer.secrets["auth"] = dict(AUTH)
    viewer.secrets["share_secret"] = SHARE_SECRET
    viewer.user = _user(None)  # finance, without an account
    viewer.query_params["share"] = token
    viewer.run()
    assert not viewer.exception
    assert viewer.title[0].value == "Shared plan: tiny"
    assert {b.label for b in viewer.button} == set()  # downloads only, nothing to run or open
    assert len(viewer.get("download_button")) == 2
    assert not viewer.sidebar.button and not viewer.selectbox
    # revoke it on the Jobs page: the same link opens nothing any more
    at.run()
    next(b for b in at.button if b.label == "Revoke").click()
    at.run()
    viewer.run()
    assert "revoked" in texts(viewer) and "Shared plan: tiny" not in texts(viewer)
    assert job_id not in texts(viewer)


def test_expired_or_forged_link_opens_nothing(planning_home: Path) -> None:
    secret = load_secret(planning_home)
    stale = sign(secret, ShareToken("0123456789abcdef", time.time() - 1, "00000000cafe0001"))
    with pytest.raises(PlanningError, match="expired"):
        verify(secret, stale, now=time.time())
    for token in (stale, "forged.token"):
        viewer = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
        viewer.query_params["share"] = token
        viewer.run()
        assert not viewer.exception
        assert viewer.error and "share link" in viewer.error[0].value


def test_without_sign_in_my_jobs_survive_a_reload(planning_home: Path) -> None:
    """The old complaint: "Only this session's jobs" lost one's earlier jobs after a reload (a new session id)."""
    from tests.app.conftest import app, planned

    _, job_id = planned(planning_home)
    reloaded = app("views/5_Jobs.py")  # a new browser session: nothing carried over but the workspace
    assert not reloaded.exception
    assert reloaded.toggle[0].label == "Only my jobs" and reloaded.toggle[0].value is True
    assert job_id in set(reloaded.dataframe[0].value["id"])
    with JobStore(planning_home / "jobs.sqlite") as store:
        assert store.get(job_id).owner == "local"


def test_a_token_without_a_subject_opens_no_workspace() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.secrets["auth"] = dict(AUTH)
    at.user = {"is_logged_in": True, "iss": ISSUER, "email": "someone@example.com"}  # no sub claim
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Sign in"] and not at.dataframe and not at.selectbox
    assert at.error and "user.sub" in at.error[0].value
    assert [b.label for b in at.button] == ["Sign out"]


def test_without_sign_in_a_reloaded_page_cancels_its_linked_job(planning_home: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A reload is a new browser session (a new fair-share holder); opened by its ``?job=`` link, its Cancel stops
    the plan its old session alone asked for (``JobRunner.cancel(link=True)``)."""
    import threading

    import ui.jobs

    release = threading.Event()
    real = ui.jobs.solve_job

    def gated(request: dict[str, Any], progress: Any, cancel: Any) -> dict[str, Any]:
        while not release.wait(0.01):  # the test decides when the solve may run: no clock
            cancel.check()
        return real(request, progress, cancel)

    monkeypatch.setattr(ui.jobs, "solve_job", gated)
    save_tiny(planning_home)
    before = app()
    before.selectbox[0].set_value("saved:tiny")
    next(b for b in before.button if b.label == "Plan it").click()
    before.run()
    job_id = str(before.session_state["solve_job"])
    try:
        reloaded = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
        reloaded.query_params["job"] = job_id
        reloaded.switch_page("views/5_Jobs.py")  # the reloaded page of the link (Home's picker trips AppTest)
        reloaded.run()
        assert not reloaded.exception
        assert reloaded.session_state["session_key"] != before.session_state["session_key"]  # another holder
        next(b for b in reloaded.button if b.label == "Cancel").click()
        reloaded.run()
        assert not reloaded.exception
        assert wait_for_job(planning_home, job_id) == "cancelled"
    finally:
        release.set()
