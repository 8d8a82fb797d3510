"""Job store under damage: history is kept (issue 28 §3, issue 30 §3), dead jobs found by heartbeat.

A damaged file is moved aside and every job that can still be read from it (main file and write-ahead log) is
copied into the fresh store; the notice says how many and where the damaged file went. Recovered rows must equal
the rows that were written: a salvage that invents data would be worse than none.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planning.cli import main
from planning.errors import PlanningError
from planning.jobs.record import V1_COLUMNS
from planning.jobs.salvage import read_wal, salvage_rows
from planning.jobs.store import LOST_MESSAGE, JobStore

PAGE = 4096


def _fill(path: Path, n: int = 60) -> dict[str, dict[str, Any]]:
    """A store of ``n`` finished jobs (every 10th with a 20 kB result, on overflow pages); returns its rows."""
    with JobStore(path) as store:
        for i in range(n):
            job_id, _ = store.create_or_reuse(f"job{i:03d}", "solve", {"i": i, "pad": "x" * 300}, f"owner{i % 3}")
            store.mark_running(job_id, heartbeat_s=5.0, stall_s=30.0)
            store.set_progress(job_id, 0.5, f"step {i}")
            store.finish_done(job_id, {"cost": i * 1.5, "blob": "r" * (20_000 if i % 10 == 0 else 100)})
    return _rows(path)


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    rows = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM jobs")}
    conn.close()
    return rows


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    if how == "stripes":  # keep the header, overwrite 64 bytes every 997 from the second page on
        for offset in range(PAGE, len(data), 997):
            data[offset:offset + 64] = b"\xff" * 64
    elif how == "truncated":
        del data[len(data) // 2:]
    elif how == "garbage-pages":  # a tenth of the pages (never the first) replaced by random bytes
        rnd = random.Random(28)
        for page in rnd.sample(range(1, pages), max(1, pages // 10)):
            data[page * PAGE:(page + 1) * PAGE] = rnd.randbytes(PAGE)
    elif how == "header-and-schema":  # page 1 (the header and the schema table) garbage
        data[:PAGE] = b"\x07" * PAGE
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["stripes", "truncated", "garbage-pages", "header-and-schema"])
def test_a_damaged_store_keeps_every_job_sqlite_can_still_read(
        tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.sqlite"
    written = _fill(path)
    _damage(path, how)
    damaged = path.read_bytes()

    assert main(["jobs", "--store", str(path), "list", "--limit", "1000"]) == 0  # no traceback, a listing
    err = capsys.readouterr().err
    assert "Traceback" not in err and "was damaged" in err

    with JobStore(path) as store:  # the fresh store keeps what was recovered
        recovered = _rows(path)
        assert store.moved_aside is None  # already recovered by the CLI run above
    aside = [p for p in tmp_path.glob("jobs.sqlite.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == damaged  # the damaged file is kept as it was
    assert str(aside[0]) in err and f"{len(recovered)} job" in err
    floor = {"stripes": 5, "truncated": 20, "garbage-pages": 40, "header-and-schema": 60}[how]
    assert len(recovered) >= floor, (how, len(recovered))
    for job_id, row in recovered.items():  # nothing invented: each recovered row is the row that was written
        assert row == written[job_id]


def test_the_notice_names_the_count_and_the_place(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    _fill(path, n=20)
    _damage(path, "header-and-schema")
    with JobStore(path) as store:
        assert store.moved_aside is not None and store.recovered == 20
        assert store.notice is not None
        assert f"moved to {store.moved_aside}" in store.notice and "20 jobs could be read" in store.notice
        assert len(store.list_jobs(limit=100)) == 20
        assert store.get("job010").result == {"cost": 15.0, "blob": "r" * 20_000}  # an overflow-page result


def test_garbage_and_empty_files_are_reported_not_silently_emptied(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + b"\x07" * 5000)
    assert main(["jobs", "--store", str(garbage), "list"]) == 0
    err = capsys.readouterr().err
    assert "was damaged" in err and "0 jobs could be read" in err and "Traceback" not in err

    empty = tmp_path / "empty.sqlite"  # issue 30: a 0-byte store silently started empty
    empty.write_bytes(b"")
    old = time.time() - 60
    os.utime(empty, (old, old))
    with JobStore(empty) as store:
        assert store.notice is not None and "empty (0 bytes" in store.notice
        assert store.moved_aside is not None and store.moved_aside.stat().st_size == 0


def test_a_just_created_empty_file_is_a_new_store_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    path.write_bytes(b"")  # another process's store being created this instant
    with JobStore(path) as store:
        assert store.notice is None and store.moved_aside is None


def _store_with_rows_only_in_its_log(tmp_path: Path, n: int = 30) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A copy of a live store (a second connection still open): its jobs are in the write-ahead log."""
    live = tmp_path / "live" / "jobs.sqlite"
    live.parent.mkdir()
    store = JobStore(live)
    holder = sqlite3.connect(live)
    holder.execute("SELECT count(*) FROM jobs").fetchone()  # a reader keeps the log from being checkpointed away
    for i in range(n):
        job_id, _ = store.create_or_reuse(f"w{i:03d}", "solve", {"i": i}, None)
        store.mark_running(job_id)
        store.finish_done(job_id, {"cost": float(i)})
    written = {r["id"]: r for r in (dict(x) for x in _rows_via(store))}
    copy = tmp_path / "jobs.sqlite"
    shutil.copy(live, copy)
    shutil.copy(Path(f"{live}-wal"), Path(f"{copy}-wal"))
    holder.close()
    store.close()
    return copy, written


def _rows_via(store: JobStore) -> list[sqlite3.Row]:
    return list(store._conn.execute("SELECT * FROM jobs"))


@pytest.mark.parametrize("how", ["frame-in-the-middle", "header"])
def test_a_damaged_write_ahead_log_is_reported_and_its_good_frames_kept(tmp_path: Path, how: str) -> None:
    path, written = _store_with_rows_only_in_its_log(tmp_path)
    wal = Path(f"{path}-wal")
    data = bytearray(wal.read_bytes())
    page_size = int.from_bytes(data[8:12], "big")
    frames = (len(data) - 32) // (24 + page_size)
    assert frames > 10 and read_wal(bytes(data))[2] is None  # a sound log first
    if how == "header":
        data[:32] = b"\x5a" * 32
    else:
        at = 32 + (frames // 2) * (24 + page_size) + 24 + 100
        data[at:at + 200] = b"\x5a" * 200
    wal.write_bytes(bytes(data))
    assert read_wal(bytes(data))[2] is not None

    with JobStore(path) as store:
        assert store.notice is not None and "write-ahead log" in store.notice and "was damaged" in store.notice
        assert store.moved_aside is not None and Path(f"{store.moved_aside}-wal").read_bytes() == bytes(data)
        recovered = {r.id for r in store.list_jobs(limit=100)}
    if how == "frame-in-the-middle":  # the frames before the damage hold committed jobs
        assert recovered and recovered < set(written)
    for job_id in recovered:
        assert job_id in written


def test_salvage_never_raises_on_nonsense(tmp_path: Path) -> None:
    rnd = random.Random(30)
    for size in (0, 1, 99, 100, 4096, 50_000):
        path = tmp_path / f"n{size}"
        path.write_bytes(b"SQLite format 3\x00" + rnd.randbytes(size))
        wal = tmp_path / f"n{size}-wal"
        wal.write_bytes(rnd.randbytes(size))
        assert salvage_rows(path, wal) == []


def test_a_schema_1_store_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE jobs ({', '.join(V1_COLUMNS)})")
    row = ["old1", "solve", "k" * 64, '{"a":1}', "done", 1.0, "", '{"cost":2.0}', None, None, None, 0, "me",
           "host", 1, 1.0, 1.0, 1.0, 2.0]
    conn.execute(f"INSERT INTO jobs VALUES ({', '.join('?' for _ in row)})", row)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with JobStore(path) as store:
        record = store.get("old1")
        assert record.result == {"cost": 2.0} and record.attempt == 0 and record.notes is None
        job_id, _ = store.create_or_reuse("new", "solve", {"b": 1}, None)
        assert store.mark_running(job_id) and store.finish_lost(job_id, "lost: test", "detail")  # 'lost' is allowed
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


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


def test_dead_job_is_detected_by_heartbeat_without_reopening(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's heartbeats every 0.05 s keep its job running for a reader opened before the job (stale_after
    0.4 s); 0.8 s of silence marks it lost, and a late finish does not resurrect it. The stores' clock is
    injected (``planning.jobs.store.time``): a busy machine that runs the loop slowly (a heartbeat 0.4 s late
    under load 17 read as a lost job) changes nothing."""
    import planning.jobs.store as store_module

    clock = [1_700_000_000.0]
    monkeypatch.setattr(store_module, "time", SimpleNamespace(time=lambda: clock[0], monotonic=lambda: clock[0]))
    path = tmp_path / "jobs.sqlite"
    worker = JobStore(path, stale_after=0.4)
    reader = JobStore(path, stale_after=0.4)  # opened before the job exists: no reopen later
    job_id, _ = worker.create_or_reuse("j1", "solve", {"x": 1}, None)
    assert worker.mark_running(job_id)
    worker.set_progress(job_id, 0.3, "allocating")
    assert reader.get(job_id).status == "running"
    for _ in range(6):  # 0.3 s of a live worker: it keeps the job running
        worker.heartbeat([job_id])
        clock[0] += 0.05
        assert reader.get(job_id).status == "running"
    clock[0] += 0.8  # the worker stops sending heartbeats (died or hung)
    record = reader.get(job_id)
    assert record.status == "lost"
    assert record.error is not None and record.error.startswith(LOST_MESSAGE.split("{")[0])
    listed = reader.list_jobs()
    assert listed[0].status == "lost"
    worker.finish_done(job_id, {"late": True})  # a late finish does not resurrect it
    assert reader.get(job_id).status == "lost"
    worker.close()
    reader.close()


@pytest.mark.parametrize(("big", "page_size"), [(True, 4096), (False, 4096), (True, 512), (False, 65536)])
def test_the_vectorized_log_checksum_equals_sqlites_word_loop(big: bool, page_size: int) -> None:
    from planning.jobs.salvage import _frame_checksums, _wal_checksum

    rnd = random.Random(page_size)
    frames = 300 if page_size < 65536 else 3
    data = rnd.randbytes(32 + frames * (24 + page_size))
    s0, s1 = start = (rnd.getrandbits(32), rnd.getrandbits(32))
    expected = []
    for k in range(frames):  # the loop of sqlite.org/fileformat2.html, word pair by word pair
        at = 32 + k * (24 + page_size)
        s0, s1 = _wal_checksum(data[at:at + 8], s0, s1, big)
        s0, s1 = _wal_checksum(data[at + 24:at + 24 + page_size], s0, s1, big)
        expected.append((s0, s1))
    assert _frame_checksums(data, frames, page_size, big, start) == expected
