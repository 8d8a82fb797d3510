"""The job store's SQLite file: where it lives, schema, pragmas, its errors, and what happens when it is damaged."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planning.errors import PlanningError
from planning.jobs.record import V1_COLUMNS, V2_COLUMNS
from planning.jobs.salvage import salvage_rows, wal_damage

SCHEMA_VERSION = 2  # 2: status 'lost'; attempt, worker_pid, progressed, heartbeat_s, stall_s, notes
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_READONLY, _IOERR, _FULL, _CANTOPEN, _BUSY, _LOCKED, _PERM = 8, 10, 13, 14, 5, 6, 3
_EMPTY_AFTER_S = 2.0  # a 0-byte file younger than this is a store being created by another process, not damage
_log = logging.getLogger(__name__)


class _SchemaVersionError(sqlite3.DatabaseError):
    """The file is a job store of another schema version (kept as is: it is not corrupted)."""


class StoreError(PlanningError):
    """The job store's file cannot be read or written: read-only, disk full, I/O error, busy, damaged.

    ``kind`` says which (``"read-only"``, ``"full"``, ``"io"``, ``"busy"``, ``"damaged"``, ``"other"``); the
    field is always ``jobs.store_path`` and the message names the file, what was being done, and the fix.
    """

    def __init__(self, kind: str, problem: str, fix: str) -> None:
        super().__init__("jobs.store_path", problem, fix)
        self.kind = kind


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    if isinstance(exc, _SchemaVersionError):
        return False
    code = _code(exc)
    if code is not None:
        return code in _CORRUPT_CODES
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _disk_full(path: Path) -> bool:
    try:
        stats = os.statvfs(path.parent)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < 64 * 1024


def store_error(path: Path, exc: sqlite3.Error, doing: str, code: int | None = None) -> StoreError:
    """The store's own error for an SQLite failure: what was being done, on which file, and the fix.

    Parameters
    ----------
    path:
        The store file.
    exc:
        The ``sqlite3`` error.
    doing:
        What the store was doing, e.g. ``"recording job 1a2b… as done"``.
    code:
        The SQLite result code, when ``exc`` does not carry it.
    """
    code = _code(exc) if code is None else code
    name = getattr(exc, "sqlite_errorname", None)
    cause = f"{exc}: {name}" if name else str(exc)
    if code == _FULL or (code in (_IOERR, _CANTOPEN) and _disk_full(path)):
        return StoreError("full", f"the disk holding the job store {path} is full: {doing} failed ({cause}); "
                          "nothing was half-written (the write was rolled back).",
                          "Free space on that disk (or delete old jobs: they only cache results), or point "
                          "PLANNING_HOME at a disk with room, and run it again.")
    if code in (_READONLY, _PERM) or (code == _CANTOPEN and not _writable(path)):
        return StoreError("read-only", f"the job store {path} is read-only: {doing} failed ({cause}).",
                          "Make the file and its folder writable (e.g. chmod u+w), or point PLANNING_HOME at a "
                          "writable folder.")
    if code in (_BUSY, _LOCKED):
        return StoreError("busy", f"the job store {path} stayed locked by another process: {doing} failed "
                          f"({cause}).", "Run it again in a moment; if it persists, stop the other process using "
                          "the store (another workbench or CLI on the same PLANNING_HOME).")
    if code in _CORRUPT_CODES:
        return StoreError("damaged", f"the job store {path} is damaged: {doing} failed ({cause}).",
                          "Run the command again: opening the store moves the damaged file aside and recovers the "
                          "jobs it can read.")
    if code in (_IOERR, _CANTOPEN):
        return StoreError("io", f"the job store {path} could not be read or written: {doing} failed ({cause}).",
                          "Check the disk and the path (a network or removable drive that went away?), or point "
                          "PLANNING_HOME at a local folder.")
    return StoreError("other", f"the job store {path} failed: {doing} failed ({cause}).",
                      "Run it again; if it repeats, point PLANNING_HOME at another folder.")


def _writable(path: Path) -> bool:
    target = path if path.exists() else path.parent
    return os.access(target, os.W_OK) and os.access(path.parent, os.W_OK)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    request_key      TEXT NOT NULL,
    request_json     TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('queued','running','done','failed','cancelled','lost')),
    progress         REAL NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),
    message          TEXT NOT NULL DEFAULT '',
    result_json      TEXT,
    error            TEXT,
    error_field      TEXT,
    error_detail     TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    owner            TEXT,
    host             TEXT,
    pid              INTEGER,
    heartbeat        REAL,
    created          REAL NOT NULL,
    started          REAL,
    finished         REAL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    worker_pid       INTEGER,
    progressed       REAL,
    heartbeat_s      REAL,
    stall_s          REAL,
    notes            TEXT
)"""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (request_key, status)",
    "CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, created)",
    "CREATE INDEX IF NOT EXISTS jobs_by_created ON jobs (created)",
)
_V2_DEFAULTS = {"attempt": "0", "worker_pid": "NULL", "progressed": "NULL", "heartbeat_s": "NULL",
                "stall_s": "NULL", "notes": "NULL"}


def select_columns(version: int, with_result: bool) -> str:
    """The SELECT list of a job row for a store of ``version`` (a read-only schema-1 store gets defaults)."""
    names = [c if c != "result_json" or with_result else "NULL AS result_json" for c in V1_COLUMNS]
    extra = [c if version >= 2 else f"{_V2_DEFAULTS[c]} AS {c}" for c in V2_COLUMNS[len(V1_COLUMNS):]]
    return ", ".join(names + extra)


def default_store_path() -> Path:
    """Where the job store lives unless the caller says otherwise.

    Returns
    -------
    Path
        ``$PLANNING_HOME/jobs.sqlite`` when ``PLANNING_HOME`` is set, else ``~/.cache/planning/jobs.sqlite``.
    """
    home = os.environ.get("PLANNING_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "planning"
    return base / "jobs.sqlite"


@dataclass
class OpenedStore:
    """What :func:`open_store_file` found: the connection, and what a user must be told about the file."""

    conn: sqlite3.Connection
    version: int
    read_only: bool = False
    read_only_code: int = _READONLY  # SQLITE_FULL when it was opened read-only because its disk is full
    moved_aside: Path | None = None
    recovered: int | None = None
    notice: str | None = None


def _damage_before_open(path: Path) -> str | None:
    """Damage SQLite would not report but silently turn into an empty store: an old 0-byte file, a broken log."""
    wal = path.with_name(path.name + "-wal")
    try:
        size = path.stat().st_size
        age = time.time() - path.stat().st_mtime
        wal_size = wal.stat().st_size if wal.exists() else 0
    except OSError:
        return None
    if size == 0 and wal_size == 0 and age > _EMPTY_AFTER_S:
        return "the file is empty (0 bytes: truncated, or replaced by an empty file)"
    damage = wal_damage(wal) if wal_size else None
    return f"{damage} ({wal.name})" if damage else None


def open_store_file(path: Path, busy_timeout_ms: int) -> OpenedStore:
    """Open (or create) the store file.

    A damaged file (not SQLite, a malformed image, a 0-byte file, a write-ahead log that fails its checksums) is
    moved aside with its ``-wal``/``-shm`` files, a fresh store is started, and the jobs that can still be read from
    the damaged copy are copied into it (:func:`planning.jobs.salvage.salvage_rows`); the notice says how many and
    where the damaged file went. A store that cannot be written (read-only file, folder or file system) is opened
    read-only: listing works, writes raise :class:`StoreError`.

    Returns
    -------
    OpenedStore

    Raises
    ------
    PlanningError
        If the file cannot be opened as a job store at all, or a damaged file cannot be moved aside.
    """
    damage = _damage_before_open(path)
    if damage is None:
        try:
            conn, version = connect(path, busy_timeout_ms)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                problem = store_error(path, exc, "opening the store") if path.is_file() else None
                if problem is not None and problem.kind == "full":  # reading needs no room: list, show
                    return _open_read_only(path, exc, _FULL, f"the disk holding it is full: {exc}")
                if problem is not None and (not _writable(path) or _code(exc) in (_READONLY, _PERM)):
                    return _open_read_only(path, exc, _READONLY, f"the file, its folder or its file system is not "
                                           f"writable: {exc}")
                if isinstance(exc, sqlite3.OperationalError) and problem is not None:
                    raise problem from None
                raise unusable(path, exc) from None
            damage = str(exc)
        else:
            if _writable(path):
                return OpenedStore(conn, version)
            return OpenedStore(conn, version, read_only=True, notice=_read_only_notice(path, "it is not writable"))
    moved_aside = move_aside(path)
    try:
        conn, version = connect(path, busy_timeout_ms)
    except sqlite3.DatabaseError as again:
        raise unusable(path, again) from None
    wal = moved_aside.with_name(moved_aside.name + "-wal")
    rows = salvage_rows(moved_aside, wal if wal.exists() else None)
    recovered, copy_error = _copy_rows(conn, rows)
    notice = (f"The job store {path} was damaged ({damage}). It was moved to {moved_aside} and a fresh store was "
              f"started; {recovered} job{'s' if recovered != 1 else ''} could be read from the damaged file and "
              f"{'were' if recovered != 1 else 'was'} copied into it.")
    if copy_error:
        notice += f" Copying stopped: {copy_error}."
    _log.warning(notice)
    return OpenedStore(conn, version, moved_aside=moved_aside, recovered=recovered, notice=notice)


def _copy_rows(conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> tuple[int, str | None]:
    """Insert salvaged rows into a fresh store in one transaction; rows the schema refuses are skipped."""
    if not rows:
        return 0, None
    copied = 0
    try:
        conn.execute("BEGIN IMMEDIATE")
        for row in rows:
            names = [c for c in V2_COLUMNS if c in row]
            marks = ", ".join("?" for _ in names)
            try:
                conn.execute(f"INSERT OR IGNORE INTO jobs ({', '.join(names)}) VALUES ({marks})",
                             [row[c] for c in names])
                copied += 1
            except sqlite3.IntegrityError:
                continue
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return 0, str(exc)
    return copied, None


def _read_only_notice(path: Path, why: str, code: int = _READONLY) -> str:
    fix = ("free space on that disk, or point PLANNING_HOME at a disk with room" if code == _FULL else
           "make the file and its folder writable, or point PLANNING_HOME at a writable folder")
    return (f"The job store {path} was opened read-only ({why}): jobs can be listed and shown, not run or "
            f"cancelled. Fix: {fix}.")


def _open_read_only(path: Path, exc: BaseException, code: int, why: str) -> OpenedStore:
    """Open a store that cannot be written: ``mode=ro`` first, then ``immutable=1`` (a read-only file system)."""
    uri = path.resolve().as_uri()
    last: BaseException = exc
    for flags in ("mode=ro", "immutable=1"):
        conn = sqlite3.connect(f"{uri}?{flags}", uri=True, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (1, SCHEMA_VERSION):
                raise _SchemaVersionError(f"schema version {version}, expected {SCHEMA_VERSION}")
            conn.execute("SELECT count(*) FROM jobs").fetchone()
        except sqlite3.DatabaseError as err:
            conn.close()
            if isinstance(err, _SchemaVersionError):
                raise unusable(path, err) from None
            last = err
            continue
        return OpenedStore(conn, version, read_only=True, read_only_code=code, notice=_read_only_notice(path, why, code))
    raise unusable(path, last) from None


def connect(path: Path, busy_timeout_ms: int) -> tuple[sqlite3.Connection, int]:
    """Open, set pragmas, check integrity and create or upgrade the schema; closes the connection on failure."""
    conn = sqlite3.connect(
        str(path),
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,  # autocommit; multi-statement writes use BEGIN IMMEDIATE
        check_same_thread=False,
    )
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        check = conn.execute("PRAGMA quick_check").fetchone()
        if check is None or check[0] != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({check[0] if check else 'no answer'})")
        version = init_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn, version


def unusable(path: Path, exc: BaseException) -> PlanningError:
    return PlanningError(
        "jobs.store_path",
        f"{path} is not a usable job store ({exc}).",
        "Point PLANNING_HOME at another folder or delete the file; it only caches job results.",
    )


def move_aside(path: Path) -> Path:
    """Rename a corrupted database (and its WAL/SHM files) to ``<name>.corrupt-<time>``; returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        os.replace(path, target)
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
    except OSError as exc:
        raise PlanningError(
            "jobs.store_path",
            f"{path} is corrupted and could not be moved aside ({exc.strerror or exc}).",
            "Delete the file or point PLANNING_HOME at another folder; it only caches job results.",
        ) from None
    return target


def init_schema(conn: sqlite3.Connection) -> int:
    """Create the schema in a new file, or upgrade a schema-1 store in place; returns the schema version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return version
    if version not in (0, 1):
        raise _SchemaVersionError(f"schema version {version}, expected {SCHEMA_VERSION}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have done it meanwhile
        if version in (0, 1):
            old = [row[1] for row in conn.execute("PRAGMA table_info(jobs)")]
            if old and "notes" not in old:
                # A schema-1 table. SQLite cannot change a CHECK constraint in place: copy into one of the new shape.
                conn.execute(_SCHEMA.format(table="jobs_v2"))
                columns = ", ".join(c for c in V1_COLUMNS if c in old)
                conn.execute(f"INSERT INTO jobs_v2 ({columns}) SELECT {columns} FROM jobs")
                conn.execute("DROP TABLE jobs")
                conn.execute("ALTER TABLE jobs_v2 RENAME TO jobs")
            else:
                conn.execute(_SCHEMA.format(table="jobs"))
            for statement in _INDEXES:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION
