"""The job store's SQLite file: where it lives, schema, pragmas, and what happens when the file is damaged."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from planning.errors import PlanningError

SCHEMA_VERSION = 1
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_log = logging.getLogger(__name__)


class _SchemaVersionError(sqlite3.DatabaseError):
    """The file is a job store of another schema version (kept as is: it is not corrupted)."""


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    if isinstance(exc, _SchemaVersionError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _CORRUPT_CODES
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    request_key      TEXT NOT NULL,
    request_json     TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('queued','running','done','failed','cancelled')),
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
    finished         REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (request_key, status);
CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, created);
CREATE INDEX IF NOT EXISTS jobs_by_created ON jobs (created);
"""

# Columns read for listings; the result can be large, so listings leave it out unless asked.
LIGHT_COLUMNS = (
    "id, kind, request_key, request_json, status, progress, message, NULL AS result_json, error, "
    "error_field, error_detail, cancel_requested, owner, host, pid, heartbeat, created, started, finished"
)
FULL_COLUMNS = LIGHT_COLUMNS.replace("NULL AS result_json", "result_json")


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


def open_store_file(path: Path, busy_timeout_ms: int) -> tuple[sqlite3.Connection, Path | None, str | None]:
    """Open (or create) the store file; a corrupted file is moved aside and a fresh one started.

    Returns
    -------
    (connection, moved_aside, notice)
        ``moved_aside`` is where a corrupted file went and ``notice`` says so; both ``None`` otherwise.

    Raises
    ------
    PlanningError
        If the file cannot be opened as a job store, or a corrupted file cannot be moved aside.
    """
    try:
        return connect(path, busy_timeout_ms), None, None
    except sqlite3.DatabaseError as exc:
        if not _is_corruption(exc):
            raise unusable(path, exc) from None
        moved_aside = move_aside(path)
        notice = (f"The job store {path} was corrupted ({exc}); it was moved to "
                  f"{moved_aside.name} and a fresh store was started.")
        _log.warning(notice)
        try:
            return connect(path, busy_timeout_ms), moved_aside, notice
        except sqlite3.DatabaseError as again:
            raise unusable(path, again) from None


def connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open, set pragmas, check integrity and create the schema; closes the connection on failure."""
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
        init_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


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


def init_schema(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        raise _SchemaVersionError(f"schema version {version}, expected {SCHEMA_VERSION}")
    conn.executescript(_SCHEMA)
    if version == 0:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
