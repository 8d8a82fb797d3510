"""Persistent job store in SQLite (WAL): one row per background job, readable from any process or tab."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from planning.errors import PlanningError, quote
from planning.jobs.dbfile import FULL_COLUMNS, LIGHT_COLUMNS, default_store_path, open_store_file
from planning.jobs.record import JobRecord, canonical_json, record_from_row, request_key

INTERRUPTED_MESSAGE = "interrupted: the process running this job stopped before it finished"
LOST_MESSAGE = "lost: no heartbeat from the process running this job for {seconds:.0f} s (it died or hung)"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (signal 0 probes without sending)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists but belongs to another user
        return True
    except OSError:
        return False
    return True


class JobStore:
    """SQLite-backed job table shared by threads, processes and browser tabs.

    One connection per store object (``check_same_thread=False``) guarded by a lock; every write is a
    short autocommit statement or a ``BEGIN IMMEDIATE`` transaction, and ``busy_timeout`` makes a
    concurrent writer wait instead of failing. Opening the store marks jobs whose process died as
    failed ("interrupted"); reads (:meth:`get`, :meth:`list_jobs`) also mark active jobs whose heartbeat is
    older than ``stale_after`` as failed ("lost"), so a dead job is seen without reopening the store.

    A corrupted database file (not SQLite, or a malformed image) is renamed to
    ``<name>.corrupt-<UTC time>`` with its ``-wal``/``-shm`` files, a warning is logged, :attr:`notice` says
    where it went, and a fresh store starts (the store only caches job results).

    Parameters
    ----------
    path:
        Database file; ``None`` means :func:`default_store_path`. Parent folders are created.
    busy_timeout_ms:
        How long a write waits for another writer before SQLite gives up.
    stale_after:
        Seconds without a heartbeat after which an active job is considered dead even when its
        process id cannot be checked (another host, or a recycled pid).
    recover:
        Run :meth:`recover_stale` on open.

    Raises
    ------
    PlanningError
        If the file cannot be opened as a job store (another schema version, a folder, no permission), or a
        corrupted file cannot be moved aside.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_ms: int = 10_000,
        stale_after: float = 120.0,
        recover: bool = True,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stale_after = stale_after
        self.host = socket.gethostname()
        self.notice: str | None = None
        """Set when a corrupted file was moved aside on open (where it went); ``None`` otherwise."""
        self.moved_aside: Path | None = None
        self._lock = threading.RLock()
        self._last_reap = 0.0
        self._conn, self.moved_aside, self.notice = open_store_file(self.path, busy_timeout_ms)
        if recover:
            self.recover_stale()

    # -- plumbing -----------------------------------------------------------------------------------
    def _reap_lost(self) -> None:
        """On reads: mark dead/silent active jobs failed, at most every ``min(1, stale_after / 4)`` seconds."""
        now = time.monotonic()
        if now - self._last_reap < min(1.0, self.stale_after / 4):
            return
        self._last_reap = now
        try:
            self.recover_stale()
        except sqlite3.OperationalError:  # busy: the next read tries again
            self._last_reap = 0.0

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction that takes the write lock up front (no deadlock on upgrade)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        with self._lock:
            cursor = self._conn.execute(sql, params)
            return cursor.rowcount

    def close(self) -> None:
        """Close the connection (the store object is unusable afterwards)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads --------------------------------------------------------------------------------------
    def get(self, job_id: str) -> JobRecord:
        """Read one job, result included.

        Parameters
        ----------
        job_id:
            Id returned by ``submit``/``create``.

        Returns
        -------
        JobRecord

        Raises
        ------
        PlanningError
            If no job has this id.
        """
        self._reap_lost()
        with self._lock:
            row = self._conn.execute(f"SELECT {FULL_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise PlanningError(
                "job_id",
                f"no job {quote(job_id, 80)} in {self.path}.",
                "The job store may have been cleared; submit the request again.",
            )
        return record_from_row(row)

    def find(self, job_id: str) -> JobRecord | None:
        """Like :meth:`get` but returns ``None`` for an unknown id."""
        try:
            return self.get(job_id)
        except PlanningError:
            return None

    def list_jobs(
        self,
        owner: str | None = None,
        limit: int = 50,
        *,
        kind: str | None = None,
        status: str | None = None,
        with_result: bool = False,
    ) -> list[JobRecord]:
        """Most recent jobs first.

        Parameters
        ----------
        owner:
            Only this owner's (session's) jobs; ``None`` lists everyone's.
        limit:
            At most this many records.
        kind, status:
            Optional filters.
        with_result:
            Load ``result_json`` too (off by default: results can be large).

        Returns
        -------
        list[JobRecord]
        """
        clauses: list[str] = []
        params: list[Any] = []
        if owner is not None:
            clauses.append("owner = ?")
            params.append(owner)
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        columns = FULL_COLUMNS if with_result else LIGHT_COLUMNS
        self._reap_lost()
        sql = f"SELECT {columns} FROM jobs {where} ORDER BY created DESC, rowid DESC LIMIT ?"
        with self._lock:
            rows = self._conn.execute(sql, (*params, int(limit))).fetchall()
        return [record_from_row(r) for r in rows]

    def cancel_requested(self, job_id: str) -> bool:
        """Whether anyone (any process) asked to cancel this job."""
        with self._lock:
            row = self._conn.execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return bool(row and row[0])

    # -- writes -------------------------------------------------------------------------------------
    def create_or_reuse(
        self, job_id: str, kind: str, request: dict[str, Any], owner: str | None, *, reuse: bool = True
    ) -> tuple[str, bool]:
        """Insert a queued job, or return the id of an identical done/active job.

        Lookup and insert happen in one ``BEGIN IMMEDIATE`` transaction, so two tabs submitting the same
        request at once get the same job.

        Parameters
        ----------
        job_id:
            Id for the new job if one is created.
        kind, request, owner:
            As for :meth:`JobRunner.submit`.
        reuse:
            ``False`` always creates a new job.

        Returns
        -------
        (job_id, created)
            ``created`` is False when an existing job was reused.
        """
        text = canonical_json(request)
        key = request_key(kind, request)
        if reuse:
            self.recover_stale()  # never join a job whose process has died
        now = time.time()
        with self._transaction() as conn:
            if reuse:
                row = conn.execute(
                    "SELECT id FROM jobs WHERE request_key = ? AND status IN ('done','running','queued') "
                    "AND cancel_requested = 0 ORDER BY (status = 'done') DESC, created DESC LIMIT 1",
                    (key,),
                ).fetchone()
                if row is not None:
                    return str(row[0]), False
            conn.execute(
                "INSERT INTO jobs (id, kind, request_key, request_json, status, owner, host, pid, heartbeat,"
                " created) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                (job_id, kind, key, text, owner, self.host, os.getpid(), now, now),
            )
        return job_id, True

    def mark_running(self, job_id: str) -> bool:
        """Move a queued job to running; False if it was cancelled (or taken) meanwhile."""
        now = time.time()
        changed = self._execute(
            "UPDATE jobs SET status = 'running', started = ?, heartbeat = ?, host = ?, pid = ? "
            "WHERE id = ? AND status = 'queued' AND cancel_requested = 0",
            (now, now, self.host, os.getpid(), job_id),
        )
        return changed == 1

    def set_progress(self, job_id: str, progress: float, message: str) -> None:
        """Persist progress (0..1) and a one-line message of a running job; also a heartbeat."""
        fraction = min(1.0, max(0.0, float(progress)))
        self._execute(
            "UPDATE jobs SET progress = ?, message = ?, heartbeat = ? WHERE id = ? AND status = 'running'",
            (fraction, message, time.time(), job_id),
        )

    def heartbeat(self, job_ids: list[str]) -> None:
        """Refresh the heartbeat of active jobs run by this process."""
        if not job_ids:
            return
        marks = ",".join("?" for _ in job_ids)
        self._execute(
            f"UPDATE jobs SET heartbeat = ? WHERE id IN ({marks}) AND status IN ('queued','running')",
            (time.time(), *job_ids),
        )

    def finish_done(self, job_id: str, result: dict[str, Any]) -> None:
        """Store the result and mark the job done (progress 1)."""
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._execute(
            "UPDATE jobs SET status = 'done', progress = 1, result_json = ?, finished = ?, heartbeat = ? "
            "WHERE id = ? AND status = 'running'",
            (text, time.time(), time.time(), job_id),
        )

    def finish_failed(
        self, job_id: str, error: str, *, field: str | None = None, detail: str | None = None
    ) -> None:
        """Mark an active job failed with a user-facing message (and optional field / detail)."""
        now = time.time()
        self._execute(
            "UPDATE jobs SET status = 'failed', error = ?, error_field = ?, error_detail = ?, finished = ?,"
            " heartbeat = ? WHERE id = ? AND status IN ('queued','running')",
            (error, field, detail, now, now, job_id),
        )

    def finish_cancelled(self, job_id: str, message: str = "cancelled") -> None:
        """Mark an active job cancelled."""
        now = time.time()
        self._execute(
            "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, message = ?, finished = ?, "
            "heartbeat = ? WHERE id = ? AND status IN ('queued','running')",
            (message, now, now, job_id),
        )

    def request_cancel(self, job_id: str) -> bool:
        """Ask for a job to stop; works from any process.

        A queued job is cancelled at once; a running job gets a flag its worker polls.

        Parameters
        ----------
        job_id:
            The job to cancel.

        Returns
        -------
        bool
            True if the job was queued or running (the request was accepted).
        """
        now = time.time()
        with self._transaction() as conn:
            queued = conn.execute(
                "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, message = 'cancelled', "
                "finished = ? WHERE id = ? AND status = 'queued'",
                (now, job_id),
            ).rowcount
            running = conn.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND status = 'running'", (job_id,)
            ).rowcount
        return bool(queued or running)

    def recover_stale(self) -> list[str]:
        """Mark active jobs whose process is gone as failed ("interrupted").

        A job is stale when it was run on this host by a process that no longer exists, or when its
        heartbeat is older than ``stale_after`` seconds (other host, recycled pid, hung process).

        Returns
        -------
        list[str]
            Ids of the jobs marked failed.
        """
        now = time.time()
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, host, pid, heartbeat FROM jobs WHERE status IN ('queued','running')"
            ).fetchall()
        stale: list[str] = []
        for row in rows:
            dead_here = row["host"] == self.host and row["pid"] is not None and not pid_alive(row["pid"])
            silence = None if row["heartbeat"] is None else now - float(row["heartbeat"])
            if dead_here:
                message, detail = INTERRUPTED_MESSAGE, "Its process on this host has ended."
            elif silence is None or silence > self.stale_after:
                message = LOST_MESSAGE.format(seconds=silence if silence is not None else self.stale_after)
                detail = f"No heartbeat within stale_after = {self.stale_after:g} s; marked failed by a reader."
            else:
                continue
            stale.append(row["id"])
            self.finish_failed(row["id"], message, detail=detail)
        return stale

    def delete(self, job_id: str) -> bool:
        """Remove a finished job; active jobs are kept (cancel them first)."""
        return (
            self._execute(
                "DELETE FROM jobs WHERE id = ? AND status IN ('done','failed','cancelled')", (job_id,)
            )
            == 1
        )

    def prune(self, keep: int = 500) -> int:
        """Delete all but the ``keep`` most recent finished jobs; returns how many were deleted."""
        return self._execute(
            "DELETE FROM jobs WHERE status IN ('done','failed','cancelled') AND id NOT IN "
            "(SELECT id FROM jobs ORDER BY created DESC LIMIT ?)",
            (int(keep),),
        )
