"""Admin page: the whole queue with places, per-user usage, cancel any job; refused for non-admins."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planning.jobs import JobRunner, JobToken, ProgressFn, default_runner
from planning.jobs.admin import Identity, UserUsage, is_admin, usage
from tests.app.conftest import ROOT, TIMEOUT, app, save_tiny, texts

WAIT_S = 120  # how long a test waits for a job to reach a state before calling it hung: never a claim on speed


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def held(planning_home: Path) -> Iterator[tuple[JobRunner, threading.Event, Callable[..., Any]]]:
    """The app's own runner for this PLANNING_HOME, and a job function that waits for the test's gate."""
    gate = threading.Event()
    runner = default_runner(planning_home / "jobs.sqlite")

    def job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        while not gate.wait(0.01):
            token.check()
        return {}

    yield runner, gate, job
    gate.set()
    runner.shutdown(wait=True, cancel=True)


def test_admin_page_lists_the_queue_usage_and_cancels_any_job(held: tuple[JobRunner, threading.Event, Any]) -> None:
    runner, _gate, job = held
    heavy = [runner.submit("held", {"n": i}, job, owner="heavy") for i in range(3)]
    alice = runner.submit("held", {"n": 9}, job, owner="alice")
    until(lambda: runner.get(heavy[0]).status == runner.get(heavy[1]).status == "running", "two heavy jobs")
    at = app("views/10_Admin.py")
    assert not at.exception
    queue = at.dataframe[0].value.set_index("id")
    assert list(queue["status"]) == ["running", "running", "queued", "queued"]
    assert queue.loc[alice, "place"] == "0 ahead" and queue.loc[heavy[2], "place"] == "1 ahead"  # fair share
    assert set(queue["owner"]) == {"heavy", "alice"}
    use = at.dataframe[1].value.set_index("owner")
    assert use.loc["heavy", ["jobs", "running", "queued"]].tolist() == [3, 2, 1]
    assert use.loc["alice", ["jobs", "running", "queued"]].tolist() == [1, 0, 1]
    at.selectbox[0].set_value(heavy[0])
    next(b for b in at.button if b.label == "Cancel job").click()
    at.run()
    assert not at.exception
    assert f"Job {heavy[0]} cancelled" in texts(at)
    until(lambda: runner.get(heavy[0]).status == "cancelled", "the admin's cancel")
    until(lambda: runner.get(alice).status == "running", "alice's job to take the freed slot")
    assert runner.get(heavy[2]).status == "queued"


def test_admin_page_hidden_and_refused_for_a_user_not_in_the_admin_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_ADMINS", "boss@example.com")
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        app("views/10_Admin.py")  # not listed in the navigation
    at = AppTest.from_file(str(ROOT / "views" / "10_Admin.py"), default_timeout=TIMEOUT)  # reached directly
    at.run()
    assert not at.exception
    assert "This page is for admins" in texts(at)
    assert "Usage per user" not in [h.value for h in at.subheader] and not at.dataframe


def test_admin_page_listed_for_the_local_user_without_sign_in(held: tuple[JobRunner, Any, Any]) -> None:
    at = app("views/10_Admin.py")
    assert not at.exception
    assert "Queue" in [h.value for h in at.subheader] and "No job is queued or running." in texts(at)


def test_who_is_an_admin() -> None:
    local = Identity(key="s1")
    assert is_admin(local, {}) and not is_admin(local, {"PLANNING_ADMINS": "boss@example.com"})
    assert is_admin(local, {"PLANNING_ADMINS": "boss@example.com, s1"})
    signed = Identity(key="w1", signin_configured=True, signed_in=True,
                      claims={"sub": "u-42", "email": "Boss@Example.com", "groups": ["staff", "planning-admins"]})
    assert is_admin(signed, {"PLANNING_ADMINS": "boss@example.com"})  # e-mails in any case
    assert is_admin(signed, {"PLANNING_ADMINS": "u-42"})
    assert not is_admin(signed, {})  # with sign-in, nobody is an admin unless listed or claimed
    assert is_admin(signed, {"PLANNING_ADMIN_CLAIM": "groups=planning-admins"})
    assert not is_admin(signed, {"PLANNING_ADMIN_CLAIM": "groups=finance"})
    flagged = Identity(key="w2", signin_configured=True, signed_in=True, claims={"planning_admin": True})
    assert is_admin(flagged, {"PLANNING_ADMIN_CLAIM": "planning_admin"})
    anonymous = Identity(key="w3", signin_configured=True, signed_in=False)
    assert not is_admin(anonymous, {"PLANNING_ADMINS": "w3"})  # not signed in: never


def test_usage_counts_each_users_jobs(held: tuple[JobRunner, threading.Event, Any]) -> None:
    runner, gate, job = held
    ids = [runner.submit("held", {"n": i}, job, owner=owner) for i, owner in enumerate(["a", "a", "b"])]
    gate.set()
    for job_id in ids:
        runner.wait(job_id, timeout=WAIT_S)
    rows = {u.owner: u for u in usage(runner.list_jobs())}
    assert rows["a"].jobs == 2 and rows["a"].done == 2 and rows["b"].jobs == 1
    assert all(isinstance(u, UserUsage) and u.run_seconds >= 0 for u in rows.values())


def test_a_queued_plan_shows_its_place_in_the_live_panel(
        planning_home: Path, held: tuple[JobRunner, threading.Event, Any]) -> None:
    """Issue 43 §4: while another user's jobs hold both workers, the user's own plan says where it stands."""
    runner, _gate, job = held
    others = [runner.submit("held", {"n": i}, job, owner="someone-else") for i in range(3)]
    until(lambda: runner.get(others[0]).status == runner.get(others[1]).status == "running", "both workers busy")
    save_tiny(planning_home)
    at = app()
    at.selectbox[0].set_value("saved:tiny")
    next(b for b in at.button if b.label == "Plan it").click()
    at.run()
    assert not at.exception
    mine = str(at.session_state["solve_job"])
    assert runner.get(mine).status == "queued"
    live = [str(p.text) for p in at.get("progress")]
    # the other user's third job queued earlier, but this user runs nothing: theirs starts first
    assert any("1st in your queue, 0 ahead overall" in t for t in live), live
    theirs = runner.place(others[2])
    assert theirs is not None and theirs.ahead == 1


def test_cancel_of_a_plan_another_user_also_wants_only_withdraws_it(
        planning_home: Path, held: tuple[JobRunner, threading.Event, Any]) -> None:
    """Issue 43 §4: identical requests share one job; one user's Cancel never stops it for the other."""
    from planning.scenario import Scenario
    from tests.app.conftest import TINY
    from ui.jobs import solve_job, solve_request

    runner, _gate, job = held
    busy = [runner.submit("held", {"n": i}, job, owner="someone-else") for i in range(2)]
    until(lambda: all(runner.get(j).status == "running" for j in busy), "both workers busy")
    bobs = runner.submit("solve", solve_request(Scenario.from_dict(TINY)), solve_job, owner="bob")
    save_tiny(planning_home)
    at = app()
    at.selectbox[0].set_value("saved:tiny")
    next(b for b in at.button if b.label == "Plan it").click()
    at.run()
    assert str(at.session_state["solve_job"]) == bobs  # the same request: bob's job, joined
    next(b for b in at.button if b.label == "Cancel").click()
    at.run()
    assert not at.exception
    assert any("goes on for them" in str(t.value) for t in at.toast)
    record = runner.get(bobs)
    assert record.status == "queued" and not record.cancel_requested
    assert runner.cancel(bobs, by="bob") and runner.wait(bobs, timeout=WAIT_S).status == "cancelled"
