"""Who may see a job, and its share links: the ``job_access`` and ``job_shares`` tables of the job store.

Identical requests share one job, so a job can have several holders: ``job_access(job_id, owner)`` holds one row
for each *holder* that asked for it (the ``jobs.owner`` column keeps the first asker's workspace). A holder is a
workspace id (``"u-…"`` with sign-in), or one browser session of the shared local workspace,
``"<workspace>:<session>"`` (:func:`holder_of`): without sign-in every session lists the one workspace's jobs, yet
each session's cancel counts for itself. A workspace sees a job when it or one of its sessions holds it.

This table is the one rule of whose cancel counts (:func:`withdraw`): a holder's cancel withdraws their own
interest; the job itself is cancelled (or, when finished, deleted) only when nobody else holds it. It lives in the
store, so it survives a server restart and holds across processes.
``job_shares`` records each share link's token id, its job, who made it, when it expires and whether it was
revoked; a link whose token id is not in the table (revoked and pruned, or from another store) opens nothing.

The functions take an open connection: :class:`~planning.jobs.store.JobStore` calls them under its lock,
inside its own transactions.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

TABLES = (
    "CREATE TABLE IF NOT EXISTS job_access (job_id TEXT NOT NULL, owner TEXT NOT NULL, granted REAL NOT NULL,"
    " PRIMARY KEY (job_id, owner))",
    "CREATE INDEX IF NOT EXISTS job_access_by_owner ON job_access (owner, job_id)",
    "CREATE TABLE IF NOT EXISTS job_shares (token_id TEXT PRIMARY KEY, job_id TEXT NOT NULL, owner TEXT NOT NULL,"
    " created REAL NOT NULL, expires REAL NOT NULL, revoked REAL)",
    "CREATE INDEX IF NOT EXISTS job_shares_by_job ON job_shares (job_id)",
)


@dataclass(frozen=True)
class Share:
    """One share link as the store records it (the token itself is never stored, only its id)."""

    token_id: str
    job_id: str
    owner: str
    created: float
    expires: float
    revoked: float | None


def has_tables(conn: sqlite3.Connection) -> bool:
    """Whether the store already has the access tables (a read-only store of an older build may not)."""
    row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_access'").fetchone()
    return bool(row and row[0])


def ensure_tables(conn: sqlite3.Connection) -> None:
    """Create the tables in a store that lacks them and grant every existing job to its recorded owner.

    The migration runs once, in one ``BEGIN IMMEDIATE`` transaction (two processes opening an old store at once:
    the second finds the tables made).
    """
    if has_tables(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not has_tables(conn):
            for statement in TABLES:
                conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO job_access (job_id, owner, granted) "
                         "SELECT id, owner, created FROM jobs WHERE owner IS NOT NULL")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def holder_of(workspace: str, session: str | None = None) -> str:
    """The holder key of a workspace (``session`` None), or of one session of it: ``"<workspace>:<session>"``."""
    return workspace if session is None else f"{workspace}:{session}"


def held_by(workspace: str) -> tuple[str, tuple[str, int, str]]:
    """A SQL condition on ``job_access.owner`` and its parameters: rows of ``workspace`` or of its sessions."""
    prefix = f"{workspace}:"
    return "(owner = ? OR substr(owner, 1, ?) = ?)", (workspace, len(prefix), prefix)


def grant(conn: sqlite3.Connection, job_id: str, holder: str | None, now: float) -> None:
    """Let ``holder`` (a workspace or ``"<workspace>:<session>"``) hold ``job_id`` (idempotent; nothing for an
    anonymous submit)."""
    if holder is not None:
        conn.execute("INSERT OR IGNORE INTO job_access (job_id, owner, granted) VALUES (?, ?, ?)",
                     (job_id, holder, now))


def allowed(conn: sqlite3.Connection, job_id: str, owner: str) -> bool:
    """Whether the workspace ``owner`` may see ``job_id`` (it, or one of its sessions, holds it)."""
    condition, params = held_by(owner)
    row = conn.execute(f"SELECT 1 FROM job_access WHERE job_id = ? AND {condition}", (job_id, *params)).fetchone()
    return row is not None


def withdraw(conn: sqlite3.Connection, job_id: str, owner: str, now: float) -> str:
    """Take the holder ``owner``'s interest in a job away (call inside a write transaction).

    Returns
    -------
    str
        ``"not found"`` when ``owner`` does not hold it; ``"withdrawn"`` when others still hold the job (it goes on
        for them, untouched); ``"cancelled"`` when ``owner`` was its only holder and it was queued or running
        (queued: cancelled at once; running: its cancel flag is set); ``"deleted"`` when it was finished and
        nobody holds it any more.
    """
    if conn.execute("DELETE FROM job_access WHERE job_id = ? AND owner = ?", (job_id, owner)).rowcount == 0:
        return "not found"
    others = conn.execute("SELECT count(*) FROM job_access WHERE job_id = ?", (job_id,)).fetchone()[0]
    if others:
        return "withdrawn"
    queued = conn.execute("UPDATE jobs SET status = 'cancelled', cancel_requested = 1, message = 'cancelled', "
                          "finished = ? WHERE id = ? AND status = 'queued'", (now, job_id)).rowcount
    running = conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND status = 'running'",
                           (job_id,)).rowcount
    if queued or running:
        return "cancelled"
    conn.execute("DELETE FROM jobs WHERE id = ? AND status IN ('done','failed','cancelled','lost')", (job_id,))
    forget_missing(conn)
    return "deleted"


def forget_missing(conn: sqlite3.Connection) -> None:
    """Drop access rows and share links of jobs no longer in the store (after a delete or a prune)."""
    conn.execute("DELETE FROM job_access WHERE job_id NOT IN (SELECT id FROM jobs)")
    conn.execute("DELETE FROM job_shares WHERE job_id NOT IN (SELECT id FROM jobs)")


def record_share(conn: sqlite3.Connection, share: Share) -> None:
    """Remember a new share link (its token id, job, maker and expiry)."""
    conn.execute("INSERT INTO job_shares (token_id, job_id, owner, created, expires, revoked) VALUES (?,?,?,?,?,?)",
                 (share.token_id, share.job_id, share.owner, share.created, share.expires, share.revoked))


def find_share(conn: sqlite3.Connection, token_id: str) -> Share | None:
    """The recorded share link with this token id, or ``None``."""
    row = conn.execute("SELECT token_id, job_id, owner, created, expires, revoked FROM job_shares "
                       "WHERE token_id = ?", (token_id,)).fetchone()
    return None if row is None else Share(*tuple(row))


def list_shares(conn: sqlite3.Connection, owner: str) -> list[Share]:
    """The share links ``owner`` made, newest first."""
    rows = conn.execute("SELECT token_id, job_id, owner, created, expires, revoked FROM job_shares "
                        "WHERE owner = ? ORDER BY created DESC", (owner,)).fetchall()
    return [Share(*tuple(r)) for r in rows]


def revoke_share(conn: sqlite3.Connection, token_id: str, owner: str, now: float) -> bool:
    """Revoke a share link ``owner`` made; False when there is no such live link of theirs."""
    return conn.execute("UPDATE job_shares SET revoked = ? WHERE token_id = ? AND owner = ? AND revoked IS NULL",
                        (now, token_id, owner)).rowcount == 1
