"""Persistent job store in SQLite (WAL): one row per background job, readable from any process or tab."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from planning.errors import PlanningError, quote
from planning.jobs import access
from planning.jobs.dbfile import StoreError, default_store_path, open_store_file, select_columns, store_error
from planning.jobs.record import JobRecord, canonical_json, record_from_row, request_key

INTERRUPTED_MESSAGE = ("lost: the process that ran this job (the workbench server or the CLI) ended before the job "
                       "finished")
LOST_MESSAGE = "lost: no heartbeat from the process running this job for {seconds:.0f} s (it died or hung)"
RESUBMIT = "Submit the same request again: an identical request starts a fresh job (lost jobs are never reused)."


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (signal 0 probes without sending; a zombie is dead)."""
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
    try:  # Linux: a killed process whose parent has not reaped it yet still answers signal 0
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


class JobStore:
    """SQLite-backed job table shared by threads, processes and browser tabs.

    One connection per store object (``check_same_thread=False``) guarded by a lock; every write is a
    short autocommit statement or a ``BEGIN IMMEDIATE`` transaction, and ``busy_timeout`` makes a
    concurrent writer wait instead of failing. Opening the store marks jobs whose process died as
    ``lost``; reads (:meth:`get`, :meth:`list_jobs`) also mark active jobs whose heartbeat is older than
    ``stale_after`` as ``lost``, so a dead job is seen without reopening the store.

    A damaged database file (not SQLite, a malformed image, an old 0-byte file, a write-ahead log failing its
    checksums) is renamed to ``<name>.corrupt-<UTC time>`` with its ``-wal``/``-shm`` files, the jobs still
    readable in it are copied into a fresh store (:attr:`recovered`), and :attr:`notice` says how many and where
    the damaged file went. A file that cannot be written is opened read-only (:attr:`read_only`, a notice); every
    write then raises :class:`~planning.jobs.dbfile.StoreError` (a ``PlanningError`` on ``jobs.store_path``), as
    does any write that finds the disk full — SQLite rolls the write back, so nothing is half-written.

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

    read_only: bool
    """The file cannot be written: reads work, writes raise ``StoreError``."""
    recovered: int | None
    """Jobs copied from a damaged file on open; ``None`` when the file was sound."""

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
        self._lock = threading.RLock()
        self._last_reap = 0.0
        opened = open_store_file(self.path, busy_timeout_ms)
        self._conn, self._version, self._read_only_code = opened.conn, opened.version, opened.read_only_code
        self.read_only, self.recovered = opened.read_only, opened.recovered
        self.moved_aside: Path | None = opened.moved_aside
        """Where a damaged file was moved on open; ``None`` otherwise."""
        self.notice: str | None = opened.notice
        """What a user must be told about the file (damaged and recovered, read-only); ``None`` otherwise."""
        if not self.read_only:
            with self._sql("adding the job-access tables", write=True) as conn:
                access.ensure_tables(conn)
        with self._sql("reading the job-access tables") as conn:
            self._access = access.has_tables(conn)  # a read-only store of an older build: owners from jobs.owner
            self._ahead = self._access and access.has_ahead_table(conn)
        if recover and not self.read_only:
            try:
                self.recover_stale()
            except StoreError as exc:  # a full disk must not stop anyone from reading the store
                self.notice = f"{self.notice} {exc}" if self.notice else str(exc)

    # -- plumbing -----------------------------------------------------------------------------------
    def _reap_lost(self) -> None:
        """On reads: mark dead/silent active jobs failed, at most every ``min(1, stale_after / 4)`` seconds."""
        now = time.monotonic()
        if now - self._last_reap < min(1.0, self.stale_after / 4):
            return
        self._last_reap = now
        if self.read_only:
            return
        try:
            self.recover_stale()
        except StoreError:  # busy or full: the next read tries again
            self._last_reap = 0.0

    @contextmanager
    def _sql(self, doing: str, write: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; an SQLite failure becomes the store's own :class:`StoreError`."""
        if write and self.read_only:
            raise store_error(self.path, sqlite3.OperationalError("the store was opened read-only"), doing, self._read_only_code)
        with self._lock:
            try:
                yield self._conn
            except (sqlite3.OperationalError, sqlite3.DataError) as exc:
                raise store_error(self.path, exc, doing) from None
            except sqlite3.DatabaseError as exc:
                if type(exc) is not sqlite3.DatabaseError:  # IntegrityError, ProgrammingError …: a bug, not the file
                    raise
                raise store_error(self.path, exc, doing) from None

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        """A short write transaction that takes the write lock up front (no deadlock on upgrade)."""
        with self._sql(doing, write=True) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite may already have rolled back (disk full)
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    def _execute(self, sql: str, params: tuple[Any, ...] = (), *, doing: str = "writing a job") -> int:
        with self._sql(doing, write=True) as conn:
            return conn.execute(sql, params).rowcount

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
        with self._sql(f"reading job {quote(job_id, 40)}") as conn:
            row = conn.execute(f"SELECT {select_columns(self._version, True)} FROM jobs WHERE id = ?",
                               (job_id,)).fetchone()
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
            Only the jobs this owner (workspace) asked for, alone or with others (``job_access``), not those it
            holds only as work planned ahead (``access.listed_by``); ``None`` lists everyone's.
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
            if self._access:
                condition, held = access.listed_by(owner) if self._ahead else access.held_by(owner)
                clauses.append(condition if self._ahead else f"id IN (SELECT job_id FROM job_access WHERE {condition})")
                params.extend(held)
            else:
                clauses.append("owner = ?")
                params.append(owner)
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        columns = select_columns(self._version, with_result)
        self._reap_lost()
        sql = f"SELECT {columns} FROM jobs {where} ORDER BY created DESC, rowid DESC LIMIT ?"
        with self._sql("listing jobs") as conn:
            rows = conn.execute(sql, (*params, int(limit))).fetchall()
        return [record_from_row(r) for r in rows]

    def cancel_requested(self, job_id: str) -> bool:
        """Whether anyone (any process) asked to cancel this job."""
        with self._sql("reading a cancel flag") as conn:
            row = conn.execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return bool(row and row[0])

    # -- writes -------------------------------------------------------------------------------------
    def create_or_reuse(
        self,
        job_id: str,
        kind: str,
        request: dict[str, Any],
        owner: str | None,
        *,
        reuse: bool = True,
        holder: str | None = None,
        ahead: bool = False,
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
        holder:
            Who holds the job in ``job_access`` (whose cancel counts, :meth:`withdraw`), when not ``owner``:
            one session of a shared workspace, ``"<owner>:<session>"``.
        ahead:
            The hold is work planned ahead (``JobRunner.submit(background=True)``): not listed as the holder's.

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
        with self._transaction(f"recording a new {quote(kind, 40)} job") as conn:
            if reuse:
                row = conn.execute(
                    "SELECT id FROM jobs WHERE request_key = ? AND status IN ('done','running','queued') "
                    "AND cancel_requested = 0 ORDER BY (status = 'done') DESC, created DESC LIMIT 1",
                    (key,),
                ).fetchone()
                if row is not None:
                    access.grant(conn, str(row[0]), holder or owner, now, ahead=ahead)  # the second asker holds it too
                    return str(row[0]), False
            conn.execute(
                "INSERT INTO jobs (id, kind, request_key, request_json, status, owner, host, pid, heartbeat,"
                " created) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                (job_id, kind, key, text, owner, self.host, os.getpid(), now, now),
            )
            access.grant(conn, job_id, holder or owner, now, ahead=ahead)
        return job_id, True

    def mark_running(self, job_id: str, *, heartbeat_s: float | None = None, stall_s: float | None = None) -> bool:
        """Move a queued job to running (attempt 1); False if it was cancelled (or taken) meanwhile.

        Parameters
        ----------
        job_id:
            The queued job.
        heartbeat_s:
            How often the process running it will refresh its heartbeat (readers flag it after twice that).
        stall_s:
            Seconds without progress after which readers say "no progress for N s".
        """
        now = time.time()
        changed = self._execute(
            "UPDATE jobs SET status = 'running', started = ?, heartbeat = ?, progressed = ?, host = ?, pid = ?, "
            "attempt = 1, heartbeat_s = ?, stall_s = ? WHERE id = ? AND status = 'queued' AND cancel_requested = 0",
            (now, now, now, self.host, os.getpid(), heartbeat_s, stall_s, job_id),
            doing=f"starting job {job_id}",
        )
        return changed == 1

    def set_worker(self, job_id: str, worker_pid: int | None, attempt: int) -> None:
        """Record which worker process runs the current attempt of a running job."""
        self._execute("UPDATE jobs SET worker_pid = ?, attempt = ?, heartbeat = ? WHERE id = ? AND status = 'running'",
                      (worker_pid, attempt, time.time(), job_id), doing=f"recording the worker of job {job_id}")

    def note_retry(self, job_id: str, attempt: int, note: str) -> bool:
        """Start ``attempt`` of a running job after its worker died: progress back to 0, the note kept.

        Returns
        -------
        bool
            False when the job is no longer running (cancelled, or marked lost meanwhile).
        """
        now = time.time()
        return self._execute(
            "UPDATE jobs SET attempt = ?, progress = 0, message = ?, progressed = ?, heartbeat = ?, worker_pid = NULL,"
            " notes = COALESCE(notes || char(10), '') || ? WHERE id = ? AND status = 'running'",
            (attempt, f"retrying (attempt {attempt}): {note}", now, now, note, job_id),
            doing=f"recording a retry of job {job_id}",
        ) == 1

    def set_progress(self, job_id: str, progress: float, message: str) -> None:
        """Persist progress (0..1) and a one-line message of a running job, and when it was reported."""
        fraction = min(1.0, max(0.0, float(progress)))
        self._execute(
            "UPDATE jobs SET progress = ?, message = ?, progressed = ? WHERE id = ? AND status = 'running'",
            (fraction, message, time.time(), job_id),
            doing=f"recording the progress of job {job_id}",
        )

    def heartbeat(self, job_ids: list[str]) -> None:
        """Refresh the heartbeat of active jobs run by this process (a thread does it, apart from progress)."""
        if not job_ids:
            return
        marks = ",".join("?" for _ in job_ids)
        self._execute(
            f"UPDATE jobs SET heartbeat = ? WHERE id IN ({marks}) AND status IN ('queued','running')",
            (time.time(), *job_ids),
            doing="writing a heartbeat",
        )

    def finish_done(self, job_id: str, result: dict[str, Any]) -> None:
        """Store the result and mark the job done (progress 1)."""
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._execute(
            "UPDATE jobs SET status = 'done', progress = 1, result_json = ?, finished = ?, heartbeat = ? "
            "WHERE id = ? AND status = 'running'",
            (text, time.time(), time.time(), job_id),
            doing=f"storing the result of job {job_id} ({len(text):,} characters)",
        )

    def finish_failed(
        self, job_id: str, error: str, *, field: str | None = None, detail: str | None = None,
        note: str | None = None,
    ) -> None:
        """Mark an active job failed with a user-facing message (and optional field / detail / note to keep)."""
        now = time.time()
        self._execute(
            "UPDATE jobs SET status = 'failed', error = ?, error_field = ?, error_detail = ?, finished = ?,"
            " heartbeat = ?, notes = CASE WHEN ? IS NULL THEN notes ELSE COALESCE(notes || char(10), '') || ? END"
            " WHERE id = ? AND status IN ('queued','running')",
            (error, field, detail, now, now, note, note, job_id),
            doing=f"recording job {job_id} as failed",
        )

    def finish_lost(self, job_id: str, error: str, detail: str) -> bool:
        """Mark an active job ``lost``: the process running it is gone or silent. False if it was no longer active."""
        now = time.time()
        return self._execute(
            "UPDATE jobs SET status = 'lost', error = ?, error_detail = ?, finished = ? "
            "WHERE id = ? AND status IN ('queued','running')",
            (error, detail, now, job_id),
            doing=f"recording job {job_id} as lost",
        ) == 1

    def finish_cancelled(self, job_id: str, message: str = "cancelled") -> None:
        """Mark an active job cancelled."""
        now = time.time()
        self._execute(
            "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, message = ?, finished = ?, "
            "heartbeat = ? WHERE id = ? AND status IN ('queued','running')",
            (message, now, now, job_id),
            doing=f"recording job {job_id} as cancelled",
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
        with self._transaction(f"cancelling job {quote(job_id, 40)}") as conn:
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
        """Mark active jobs whose process is gone as ``lost``.

        A job is lost when the process that runs it (the runner: a workbench server or a CLI) was on this host and
        no longer exists, or when its heartbeat is older than ``stale_after`` seconds (and three of its own heartbeat
        intervals): another host's process that died, a recycled pid, a hung process. Nothing is written to a
        read-only store.

        Returns
        -------
        list[str]
            Ids of the jobs marked lost.
        """
        if self.read_only:
            return []
        now = time.time()
        with self._sql("looking for jobs whose process died") as conn:
            rows = conn.execute(
                "SELECT id, host, pid, heartbeat, heartbeat_s FROM jobs WHERE status IN ('queued','running')"
            ).fetchall()
        lost: list[str] = []
        for row in rows:
            dead_here = row["host"] == self.host and row["pid"] is not None and not pid_alive(row["pid"])
            silence = None if row["heartbeat"] is None else now - float(row["heartbeat"])
            limit = max(self.stale_after, 3 * float(row["heartbeat_s"] or 0.0))
            if dead_here:
                message = INTERRUPTED_MESSAGE
                detail = f"Its process (pid {row['pid']} on {self.host}) has ended. {RESUBMIT}"
            elif silence is None or silence > limit:
                message = LOST_MESSAGE.format(seconds=silence if silence is not None else limit)
                detail = f"No heartbeat within {limit:g} s (stale_after); marked lost by a reader. {RESUBMIT}"
            else:
                continue
            if self.finish_lost(row["id"], message, detail):
                lost.append(row["id"])
        return lost

    def delete(self, job_id: str) -> bool:
        """Remove a finished job (for everyone: its access rows and share links go too); active jobs are kept
        (cancel them first)."""
        with self._transaction(f"deleting job {job_id}") as conn:
            deleted = conn.execute("DELETE FROM jobs WHERE id = ? AND status IN ('done','failed','cancelled','lost')",
                                   (job_id,)).rowcount == 1
            if deleted and self._access:
                access.forget_missing(conn)
        return deleted

    def prune(self, keep: int = 500) -> int:
        """Delete all but the ``keep`` most recent finished jobs (with their access rows and share links); returns
        how many were deleted."""
        with self._transaction("pruning old jobs") as conn:
            deleted = conn.execute(
                "DELETE FROM jobs WHERE status IN ('done','failed','cancelled','lost') AND id NOT IN "
                "(SELECT id FROM jobs ORDER BY created DESC LIMIT ?)",
                (int(keep),),
            ).rowcount
            if self._access:
                access.forget_missing(conn)
        return int(deleted)

    # -- who may see a job, share links (planning.jobs.access) ----------------------------------------------------
    def can_see(self, job_id: str, owner: str) -> bool:
        """Whether the workspace ``owner`` asked for ``job_id`` (alone or as one of several identical requests)."""
        with self._sql(f"checking access to job {quote(job_id, 40)}") as conn:
            if not self._access:
                row = conn.execute("SELECT 1 FROM jobs WHERE id = ? AND owner = ?", (job_id, owner)).fetchone()
                return row is not None
            return access.allowed(conn, job_id, owner)

    def withdraw(self, job_id: str, owner: str, *, link: bool = False) -> str:
        """The holder ``owner``'s cancel or removal: their interest goes; the job only when nobody else holds it.

        The one rule of whose cancel counts (:meth:`JobRunner.cancel` with ``by`` asks it); it is stored, so it
        holds after a server restart and for every process sharing the store.

        Parameters
        ----------
        job_id:
            The job.
        owner:
            A holder: a workspace id, or ``"<workspace>:<session>"`` (:func:`planning.jobs.access.holder_of`).
        link:
            ``owner`` opened the job's link: it stands in for the job's one anonymous session holder of its own
            workspace (:func:`planning.jobs.access.orphan_hold`), never for another user's hold.

        Returns
        -------
        str
            As :func:`planning.jobs.access.withdraw`: ``"not found"``, ``"withdrawn"``, ``"cancelled"`` (a queued
            job is marked cancelled, a running one gets its cancel flag) or ``"deleted"``.
        """
        with self._transaction(f"withdrawing from job {quote(job_id, 40)}") as conn:
            return access.withdraw(conn, job_id, owner, time.time(), link=link)

    def add_share(self, job_id: str, owner: str, token_id: str, expires: float) -> access.Share:
        """Record a share link ``owner`` makes for their job (refused for a job they cannot see).

        Raises
        ------
        PlanningError
            On ``job_id`` when ``owner`` cannot see the job (worded as for an unknown id).
        """
        if not self.can_see(job_id, owner):
            raise PlanningError("job_id", f"no job {quote(job_id, 80)} in {self.path}.",
                                "Share one of your own finished plans (Jobs page).")
        share = access.Share(token_id, job_id, owner, time.time(), float(expires), None)
        with self._transaction(f"recording a share link of job {quote(job_id, 40)}") as conn:
            access.record_share(conn, share)
        return share

    def find_share(self, token_id: str) -> access.Share | None:
        """The recorded share link with this token id (``None``: unknown, so it opens nothing)."""
        if not self._access:
            return None
        with self._sql("reading a share link") as conn:
            return access.find_share(conn, token_id)

    def shares(self, owner: str) -> list[access.Share]:
        """The share links ``owner`` made, newest first (revoked ones included, marked)."""
        if not self._access:
            return []
        with self._sql("listing share links") as conn:
            return access.list_shares(conn, owner)

    def revoke_share(self, token_id: str, owner: str) -> bool:
        """Revoke one of ``owner``'s share links; False if it is not theirs or already revoked."""
        with self._transaction("revoking a share link") as conn:
            return access.revoke_share(conn, token_id, owner, time.time())
