"""Without sign-in a reloaded page is a new browser session (a new fair-share holder): the job of its ``?job=``
link may be cancelled by it when that job's one holder is another anonymous session of the same workspace (its
page before the reload), never when another user holds it, alone or with that session."""

from __future__ import annotations

from pathlib import Path

from planning.jobs import JobRunner, JobStore
from planning.jobs.runner import Cadence
from tests.jobs.test_fairshare import WAIT_S, Gates


def _session_job(runner: JobRunner, gates: Gates, name: str, session: str, owner: str = "local") -> str:
    return runner.submit("gate", {"name": name}, gates.job, owner=owner, fair_key=session)


def test_the_links_holder_cancels_the_job_its_old_session_alone_held(runner: JobRunner, gates: Gates) -> None:
    job = _session_job(runner, gates, "mine", "local:before")
    assert gates.events("mine")[0].wait(WAIT_S)
    assert runner.cancel(job, by="local:after") is False  # without the link: not its job, untouched
    assert not runner.get(job).cancel_requested
    assert runner.cancel(job, by="local:after", link=True) is True  # the reloaded page, by its ?job= link
    assert runner.wait(job, timeout=WAIT_S).status == "cancelled"


def test_a_queued_job_of_the_old_session_is_cancelled_by_the_link_too(tmp_path: Path, gates: Gates) -> None:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1, per_user=1,
                  cadence=Cadence(cancel_poll_interval=0.01))
    try:
        first = _session_job(r, gates, "first", "local:before")
        queued = _session_job(r, gates, "second", "local:before")
        assert gates.events("first")[0].wait(WAIT_S) and r.get(queued).status == "queued"
        assert r.cancel(queued, by="local:after", link=True) is True
        assert r.get(queued).status == "cancelled" and r.place(queued) is None  # out of the fair queue too
    finally:
        gates.events("first")[1].set()
        r.shutdown(wait=True)
        assert r.get(first).status == "done"
        r.store.close()


def test_the_link_never_cancels_what_another_user_holds(runner: JobRunner, gates: Gates) -> None:
    shared = _session_job(runner, gates, "shared", "local:before")
    assert _session_job(runner, gates, "shared", "local:someone") == shared  # a second session asked the same
    theirs = runner.submit("gate", {"name": "theirs"}, gates.job, owner="u-bob")  # a signed-in user's job
    assert gates.events("shared")[0].wait(WAIT_S) and gates.events("theirs")[0].wait(WAIT_S)
    assert runner.cancel(shared, by="local:after", link=True) is False  # two holders: whose page is unknown
    assert runner.cancel(theirs, by="local:after", link=True) is False  # another workspace's job
    other_ws = _session_job(runner, gates, "other-ws", "team:before", owner="team")
    assert runner.cancel(other_ws, by="local:after", link=True) is False  # a session of another workspace
    assert runner.cancel(theirs, by="u-carol", link=True) is False  # a signed-in user: only its own hold counts
    for job in (shared, theirs, other_ws):
        record = runner.get(job)
        assert not record.is_terminal and not record.cancel_requested
    assert runner.store.can_see(shared, "local") and runner.store.can_see(theirs, "u-bob")


def test_after_the_take_over_the_old_session_holds_nothing(tmp_path: Path, gates: Gates) -> None:
    """In the store itself (``JobStore.withdraw``, the one rule): the link's holder cancels a queued job of the old
    session, whose hold went with it."""
    store = JobStore(tmp_path / "jobs.sqlite")
    try:
        job, created = store.create_or_reuse("j1", "gate", {"name": "x"}, "local", holder="local:before")
        assert created
        assert store.withdraw(job, "local:after", link=True) == "cancelled"  # queued: cancelled at once
        assert store.withdraw(job, "local:before") == "not found"  # its hold was taken over
        assert store.get(job).status == "cancelled"
    finally:
        store.close()
