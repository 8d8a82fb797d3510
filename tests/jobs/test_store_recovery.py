"""Job store under damage: corrupted files moved aside, dead jobs found by heartbeat without reopening."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from planning.cli import main
from planning.errors import PlanningError
from planning.jobs.store import LOST_MESSAGE, JobStore


def _corrupt_pages(path: Path) -> None:
    """Keep the SQLite header but overwrite the rest: a 'database disk image is malformed'."""
    with JobStore(path) as store:
        for i in range(50):
            store.create_or_reuse(f"job{i}", "solve", {"i": i, "pad": "x" * 500}, None)
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data), 997):
        data[offset:offset + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    for side in ("-wal", "-shm"):
        Path(str(path) + side).unlink(missing_ok=True)


def test_malformed_database_is_moved_aside_and_a_fresh_store_starts(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    _corrupt_pages(path)
    damaged = path.read_bytes()
    with JobStore(path) as store:
        assert store.moved_aside is not None and store.moved_aside.read_bytes() == damaged
        assert store.notice and str(store.moved_aside.name) in store.notice
        assert store.list_jobs() == []
        job_id, created = store.create_or_reuse("new", "solve", {"a": 1}, None)
        assert created and store.get(job_id).status == "queued"
    with JobStore(path) as again:  # the fresh store is kept on the next open
        assert again.moved_aside is None and [r.id for r in again.list_jobs()] == ["new"]


def test_garbage_file_through_the_cli_warns_and_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 5000)
    code = main(["jobs", "--store", str(path), "list"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "moved" in captured.err and "Traceback" not in captured.err
    assert list(tmp_path.glob("jobs.sqlite.corrupt-*"))


def test_other_schema_version_is_kept_and_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(PlanningError, match="schema version 99"):
        JobStore(path)
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))


def test_a_folder_is_not_moved_aside(tmp_path: Path) -> None:
    folder = tmp_path / "jobs.sqlite"
    folder.mkdir()
    with pytest.raises(PlanningError, match=r"jobs\.store_path"):
        JobStore(folder)
    assert folder.is_dir()


def test_dead_job_is_detected_by_heartbeat_without_reopening(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    worker = JobStore(path, stale_after=0.4)
    reader = JobStore(path, stale_after=0.4)  # opened before the job exists: no reopen later
    job_id, _ = worker.create_or_reuse("j1", "solve", {"x": 1}, None)
    assert worker.mark_running(job_id)
    worker.set_progress(job_id, 0.3, "allocating")
    assert reader.get(job_id).status == "running"
    deadline = time.time() + 0.3
    while time.time() < deadline:  # a live worker keeps it running
        worker.heartbeat([job_id])
        time.sleep(0.05)
        assert reader.get(job_id).status == "running"
    time.sleep(0.8)  # the worker stops sending heartbeats (died or hung)
    record = reader.get(job_id)
    assert record.status == "failed"
    assert record.error is not None and record.error.startswith(LOST_MESSAGE.split("{")[0])
    listed = reader.list_jobs()
    assert listed[0].status == "failed"
    worker.finish_done(job_id, {"late": True})  # a late finish does not resurrect it
    assert reader.get(job_id).status == "failed"
    worker.close()
    reader.close()
