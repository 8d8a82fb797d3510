"""Work planned ahead (``submit(background=True)``: the What-if sliders' neighbours) is not listed as its holder's
job until they ask for it; a hold of a job they asked for is never hidden by a prefetch of the same request."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from planning.jobs import JobRunner, JobStore
from tests.jobs.test_fairshare import WAIT_S, Gates


def _listed(runner: JobRunner, owner: str) -> set[str]:
    return {r.id for r in runner.list_jobs(owner=owner)}


def test_a_prefetch_is_not_listed_until_its_holder_asks_for_it(runner: JobRunner, gates: Gates) -> None:
    mine = runner.submit("gate", {"name": "asked"}, gates.job, owner="local", fair_key="local:a")
    ahead = runner.submit("gate", {"name": "ahead"}, gates.job, owner="local", fair_key="local:a", background=True)
    assert _listed(runner, "local") == {mine}
    assert ahead in {r.id for r in runner.list_jobs(owner=None)}  # everyone's list (admin, "Only my jobs" off)
    assert runner.store.can_see(ahead, "local")  # the page that planned it reads it
    assert runner.submit("gate", {"name": "ahead"}, gates.job, owner="local", fair_key="local:a") == ahead
    assert _listed(runner, "local") == {mine, ahead}  # asked for now: listed, and a user's job


def test_a_prefetch_never_hides_a_job_someone_asked_for(runner: JobRunner, gates: Gates) -> None:
    asked = runner.submit("gate", {"name": "x"}, gates.job, owner="u-alice")
    assert runner.submit("gate", {"name": "x"}, gates.job, owner="u-alice", background=True) == asked
    assert runner.submit("gate", {"name": "x"}, gates.job, owner="u-bob", background=True) == asked
    assert _listed(runner, "u-alice") == {asked}  # alice asked for it before the prefetch joined
    assert _listed(runner, "u-bob") == set()  # bob only planned it ahead


def test_a_cancelled_prefetch_stays_off_the_list(runner: JobRunner, gates: Gates) -> None:
    ahead = runner.submit("gate", {"name": "p"}, gates.job, owner="u-alice", background=True)
    assert gates.events("p")[0].wait(WAIT_S)
    assert runner.cancel(ahead, by="u-alice") is True
    assert runner.wait(ahead, timeout=WAIT_S).status == "cancelled"
    assert _listed(runner, "u-alice") == set()


def test_a_store_of_the_build_before_gains_the_table(tmp_path: Path) -> None:
    """A store whose access tables predate holds planned ahead gets the table on open; its jobs stay listed."""
    path = tmp_path / "jobs.sqlite"
    store = JobStore(path)
    job, _ = store.create_or_reuse("j1", "gate", {"name": "old"}, "u-alice")
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE job_ahead")
    store = JobStore(path)
    try:
        assert {r.id for r in store.list_jobs(owner="u-alice")} == {job}
        ahead, _ = store.create_or_reuse("j2", "gate", {"name": "new"}, "u-alice", ahead=True)
        assert {r.id for r in store.list_jobs(owner="u-alice")} == {job}
        assert store.withdraw(ahead, "u-alice") == "cancelled"
    finally:
        store.close()
