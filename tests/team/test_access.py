"""Job visibility across workspaces: grants on submit and reuse, listing, withdraw, share-link records."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from planning.errors import PlanningError
from planning.jobs import JobStore


def _store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.sqlite", recover=False)


def test_identical_request_is_shared_and_both_see_it(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        first, created = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "alice")
        second, created_again = store.create_or_reuse("aaaa0002", "solve", {"x": 1}, "bob")
        assert (created, created_again) == (True, False)
        assert second == first
        assert store.can_see(first, "alice") and store.can_see(first, "bob")
        assert [r.id for r in store.list_jobs(owner="bob")] == [first]


def test_other_workspaces_jobs_are_not_listed_nor_visible(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        a, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "alice")
        b, _ = store.create_or_reuse("bbbb0001", "solve", {"x": 2}, "bob")
        assert [r.id for r in store.list_jobs(owner="alice")] == [a]
        assert [r.id for r in store.list_jobs(owner="bob")] == [b]
        assert not store.can_see(a, "bob")
        assert store.withdraw(a, "bob") == "not found"
        assert store.get(a).status == "queued"  # bob's attempt left alice's job alone


def test_cancel_of_a_shared_job_only_withdraws_interest(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        job, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "alice")
        store.create_or_reuse("aaaa0002", "solve", {"x": 1}, "bob")
        assert store.withdraw(job, "bob") == "withdrawn"
        assert store.get(job).status == "queued" and not store.cancel_requested(job)
        assert not store.can_see(job, "bob") and store.can_see(job, "alice")
        assert store.withdraw(job, "alice") == "cancelled"  # the last holder's cancel stops it
        assert store.get(job).status == "cancelled"


def test_sessions_of_a_shared_workspace_hold_a_job_each(tmp_path: Path) -> None:
    """Without sign-in each browser session holds its own interest (``"local:<session>"``), while the one local
    workspace lists and sees every session's jobs."""
    with _store(tmp_path) as store:
        job, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "local", holder="local:one")
        assert store.create_or_reuse("aaaa0002", "solve", {"x": 1}, "local", holder="local:two") == (job, False)
        assert store.get(job).owner == "local"
        assert [r.id for r in store.list_jobs(owner="local")] == [job] and store.can_see(job, "local")
        assert not store.can_see(job, "loc") and store.list_jobs(owner="localx") == []  # a prefix is not a match
        assert store.withdraw(job, "local") == "not found"  # the workspace as such does not hold it
        assert store.withdraw(job, "local:one") == "withdrawn"  # session two still wants it
        assert store.get(job).status == "queued"
        assert store.withdraw(job, "local:two") == "cancelled"


def test_last_holder_removing_a_finished_job_deletes_it(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        job, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "alice")
        assert store.mark_running(job)
        store.finish_done(job, {"ok": True})
        assert store.withdraw(job, "alice") == "deleted"
        assert store.find(job) is None


def test_running_job_of_one_holder_gets_its_cancel_flag(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        job, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "alice")
        assert store.mark_running(job)
        assert store.withdraw(job, "alice") == "cancelled"
        assert store.cancel_requested(job)


def test_existing_store_is_migrated_with_its_owners(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    with JobStore(path, recover=False) as store:
        job, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "local")
    conn = sqlite3.connect(path)  # a store written before job_access existed
    conn.execute("DROP TABLE job_access")
    conn.execute("DROP TABLE job_shares")
    conn.commit()
    conn.close()
    with JobStore(path, recover=False) as store:
        assert store.can_see(job, "local") and not store.can_see(job, "other")
        assert [r.id for r in store.list_jobs(owner="local")] == [job]


def test_share_records_and_revocation(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        job, _ = store.create_or_reuse("aaaa0001", "solve", {"x": 1}, "alice")
        with pytest.raises(PlanningError, match="no job"):
            store.add_share(job, "bob", "cafe0001", expires=2e9)
        store.add_share(job, "alice", "cafe0002", expires=2e9)
        found = store.find_share("cafe0002")
        assert found is not None and found.job_id == job and found.revoked is None
        assert not store.revoke_share("cafe0002", "bob")  # not bob's link
        assert store.revoke_share("cafe0002", "alice")
        again = store.find_share("cafe0002")
        assert again is not None and again.revoked is not None
        assert [s.token_id for s in store.shares("alice")] == ["cafe0002"]
        assert store.find_share("beef0001") is None


def test_delete_and_prune_take_access_rows_and_links_along(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        ids = []
        for n in range(3):
            job, _ = store.create_or_reuse(f"aaaa000{n}", "solve", {"x": n}, "alice")
            assert store.mark_running(job)
            store.finish_done(job, {"n": n})
            store.add_share(job, "alice", f"cafe000{n}", expires=2e9)
            ids.append(job)
        assert store.delete(ids[0])
        assert store.prune(keep=1) == 1
        kept = [r.id for r in store.list_jobs(owner="alice")]
        assert len(kept) == 1 and [s.job_id for s in store.shares("alice")] == kept
        with store._sql("counting") as conn:
            assert conn.execute("SELECT count(*) FROM job_access").fetchone()[0] == 1
