"""A full disk and a read-only store (issue 28 §4, issue 30 §3): the store's own clear error, nothing half-written.

The real faults need a small file system of their own: as root (CI and this project's machines) each test mounts a
tmpfs of a few hundred kB and fills it, or remounts it read-only. Where mounting is not allowed, the read-only test
uses file permissions instead (they bind a non-root user), and the full-disk test is skipped; the simulated
full-disk test below (SQLite's own page limit, the same SQLITE_FULL error) runs everywhere.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from planning.cli import main
from planning.jobs import JobRunner, JobStore, StoreError
from tests.jobs._children import big_result_job, pid_job

ROOT = os.geteuid() == 0


@contextmanager
def small_disk(where: Path, size_kb: int) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` at ``where`` (skips the test where this process may not mount)."""
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the simulated full-disk test covers it")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True, capture_output=True)


def _history(path: Path) -> dict[str, str]:
    """Three jobs (done, failed, queued); returns id → status."""
    with JobStore(path) as store:
        done, _ = store.create_or_reuse("donejob", "solve", {"n": 1}, "alice")
        store.mark_running(done)
        store.finish_done(done, {"cost": 12.5})
        failed, _ = store.create_or_reuse("failedjob", "solve", {"n": 2}, "alice")
        store.mark_running(failed)
        store.finish_failed(failed, "models[0].slo: is impossible.", field="models[0].slo")
        store.create_or_reuse("queuedjob", "solve", {"n": 3}, "bob")
        return {r.id: r.status for r in store.list_jobs()}


def _fill_up(disk: Path) -> None:
    with (disk / "filler").open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def _intact(path: Path, expected: dict[str, str]) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        statuses = dict(conn.execute("SELECT id, status FROM jobs").fetchall())
    finally:
        conn.close()
    for job_id, status in expected.items():
        assert statuses[job_id] == status


def _check_full_disk_job(runner: JobRunner, history: dict[str, str]) -> None:
    record = runner.wait(runner.submit("big", {"mb": 3}, big_result_job), timeout=120)
    assert record.status == "failed" and record.result is None
    assert record.error is not None and "could not be recorded" in record.error
    assert "is full" in record.error and "nothing was half-written" in record.error and "Fix: Free space" in record.error
    assert record.error_field is None or record.error_field == "jobs.store_path"
    _intact(runner.store.path, history)


def test_a_full_disk_fails_the_job_clearly_and_keeps_the_store(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with small_disk(tmp_path / "disk", 512) as disk:
        path = disk / "jobs.sqlite"
        history = _history(path)
        runner = JobRunner(JobStore(path), max_workers=1)
        try:
            _check_full_disk_job(runner, history)  # 3 MB result on a 512 kB disk
            small = runner.wait(runner.submit("pid", {"n": 1}, pid_job), timeout=120)
            assert small.status == "done"  # the same full disk still takes small jobs
        finally:
            runner.shutdown(wait=True)
            runner.store.close()

        _fill_up(disk)  # not one byte left
        assert main(["jobs", "--store", str(path), "list"]) == 0  # reading needs no room
        out = capsys.readouterr()
        assert "donejob" in out.out and "disk holding it is full" in out.err
        assert main(["jobs", "--store", str(path), "cancel", "queuedjob"]) == 2
        err = capsys.readouterr().err
        assert "\nerror: jobs.store_path: the disk holding the job store" in err and "is full" in err
        assert "Fix: Free space" in err and "Traceback" not in err and "internal error" not in err
        with pytest.raises(StoreError, match="is full") as caught:
            JobRunner(JobStore(path), max_workers=1).submit("pid", {"n": 2}, pid_job)
        assert caught.value.kind == "full"

        (disk / "filler").unlink()
        _intact(path, {**history, "queuedjob": "queued"})
        with JobStore(path) as store:  # room again: everything works, nothing was lost
            assert store.request_cancel("queuedjob") and store.get("queuedjob").status == "cancelled"


def test_a_full_store_simulated_by_sqlites_page_limit(tmp_path: Path) -> None:
    """SQLite's ``max_page_count`` makes a write fail with the same SQLITE_FULL as a full disk: deterministic,
    and it needs no privileges."""
    path = tmp_path / "jobs.sqlite"
    history = _history(path)
    runner = JobRunner(JobStore(path), max_workers=1)
    try:
        pages = runner.store._conn.execute("PRAGMA page_count").fetchone()[0]
        runner.store._conn.execute(f"PRAGMA max_page_count = {pages + 4}")
        _check_full_disk_job(runner, history)
    finally:
        runner.shutdown(wait=True)
        runner.store.close()


@contextmanager
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder holding a store, and a way to make it read-only: a read-only remount of a tmpfs as root (root
    ignores permissions), file permissions otherwise."""
    if ROOT:
        with small_disk(tmp_path / "disk", 2048) as disk:
            yield disk, disk
    else:
        folder = tmp_path / "store"
        folder.mkdir()
        yield folder, folder


def _make_read_only(folder: Path, writable: bool) -> None:
    if ROOT:
        remount(folder, "rw" if writable else "ro")
        return
    mode = stat.S_IRWXU if writable else stat.S_IRUSR | stat.S_IXUSR
    for item in folder.iterdir():
        item.chmod(stat.S_IRUSR | stat.S_IWUSR if writable else stat.S_IRUSR)
    folder.chmod(mode)


def test_a_read_only_store_lists_and_refuses_writes_with_its_own_error(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with read_only(tmp_path) as (folder, _):
        path = folder / "jobs.sqlite"
        history = _history(path)
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        _make_read_only(folder, writable=False)
        try:
            assert main(["jobs", "--store", str(path), "list"]) == 0
            out = capsys.readouterr()
            assert all(job in out.out for job in history) and "read-only" in out.err
            assert main(["jobs", "--store", str(path), "show", "donejob", "--json"]) == 0
            assert '"cost": 12.5' in capsys.readouterr().out
            assert main(["jobs", "--store", str(path), "cancel", "queuedjob"]) == 2  # issue 30: was exit 3
            err = capsys.readouterr().err
            assert "\nerror: jobs.store_path: the job store" in err and "is read-only" in err
            assert "Fix: Make the file and its folder writable" in err
            assert "Traceback" not in err and "internal error" not in err and "OperationalError" not in err
            runner = JobRunner(JobStore(path), max_workers=1)
            with pytest.raises(StoreError, match="is read-only") as caught:
                runner.submit("pid", {"n": 1}, pid_job)
            assert caught.value.kind == "read-only" and caught.value.field == "jobs.store_path"
            runner.shutdown()
            runner.store.close()
            assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing written, half or whole
        finally:
            _make_read_only(folder, writable=True)
        with JobStore(path) as store:  # writable again: the history is all there and the store works
            assert {r.id: r.status for r in store.list_jobs()} == history
            assert store.request_cancel("queuedjob")
