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

AHEAD_TABLE = ("CREATE TABLE IF NOT EXISTS job_ahead (job_id TEXT NOT NULL, owner TEXT NOT NULL,"
               " PRIMARY KEY (job_id, owner))")
"""Holds taken as work planned ahead (``JobRunner.submit(background=True)``: the What-if sliders' neighbours): a
job held only so is not one the holder asked for, and is not listed as theirs (:func:`listed_by`)."""

TABLES = (
    "CREATE TABLE IF NOT EXISTS job_access (job_id TEXT NOT NULL, owner TEXT NOT NULL, granted REAL NOT NULL,"
    " PRIMARY KEY (job_id, owner))",
    "CREATE INDEX IF NOT EXISTS job_access_by_owner ON job_access (owner, job_id)",
    "CREATE TABLE IF NOT EXISTS job_shares (token_id TEXT PRIMARY KEY, job_id TEXT NOT NULL, owner TEXT NOT NULL,"
    " created REAL NOT NULL, expires REAL NOT NULL, revoked REAL)",
    "CREATE INDEX IF NOT EXISTS job_shares_by_job ON job_shares (job_id)",
    AHEAD_TABLE,
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
        if not has_ahead_table(conn):  # a store of the build before holds planned ahead
            conn.execute(AHEAD_TABLE)
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


def has_ahead_table(conn: sqlite3.Connection) -> bool:
    """Whether the store records holds planned ahead (a read-only store of an older build may not)."""
    row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_ahead'").fetchone()
    return bool(row and row[0])


def holder_of(workspace: str, session: str | None = None) -> str:
    """The holder key of a workspace (``session`` None), or of one session of it: ``"<workspace>:<session>"``."""
    return workspace if session is None else f"{workspace}:{session}"


def held_by(workspace: str) -> tuple[str, tuple[str, int, str]]:
    """A SQL condition on ``job_access.owner`` and its parameters: rows of ``workspace`` or of its sessions."""
    prefix = f"{workspace}:"
    return "(owner = ? OR substr(owner, 1, ?) = ?)", (workspace, len(prefix), prefix)


def listed_by(workspace: str) -> tuple[str, tuple[str, int, str]]:
    """A SQL condition on ``jobs.id`` and its parameters: the jobs ``workspace`` (or one of its sessions) asked
    for, leaving out those it holds only as work planned ahead (:data:`AHEAD_TABLE`)."""
    condition, params = held_by(workspace)
    return (f"id IN (SELECT job_id FROM job_access a WHERE {condition} AND NOT EXISTS "
            "(SELECT 1 FROM job_ahead h WHERE h.job_id = a.job_id AND h.owner = a.owner))"), params


def grant(conn: sqlite3.Connection, job_id: str, holder: str | None, now: float, *, ahead: bool = False) -> None:
    """Let ``holder`` (a workspace or ``"<workspace>:<session>"``) hold ``job_id`` (idempotent; nothing for an
    anonymous submit). ``ahead``: a new hold taken as work planned ahead; a hold granted without it (the holder
    now asks for the job) is no longer planned ahead."""
    if holder is None:
        return
    new = conn.execute("INSERT OR IGNORE INTO job_access (job_id, owner, granted) VALUES (?, ?, ?)",
                       (job_id, holder, now)).rowcount
    if not has_ahead_table(conn):
        return
    if ahead and new:
        conn.execute("INSERT OR IGNORE INTO job_ahead (job_id, owner) VALUES (?, ?)", (job_id, holder))
    elif not ahead:
        conn.execute("DELETE FROM job_ahead WHERE job_id = ? AND owner = ?", (job_id, holder))


def allowed(conn: sqlite3.Connection, job_id: str, owner: str) -> bool:
    """Whether the workspace ``owner`` may see ``job_id`` (it, or one of its sessions, holds it)."""
    condition, params = held_by(owner)
    row = conn.execute(f"SELECT 1 FROM job_access WHERE job_id = ? AND {condition}", (job_id, *params)).fetchone()
    return row is not None


def withdraw(conn: sqlite3.Connection, job_id: str, owner: str, now: float, *, link: bool = False) -> str:
    """Take the holder ``owner``'s interest in a job away (call inside a write transaction).

    ``link``: ``owner`` opened the job's link (``?job=``), so it may stand in for the one anonymous session that
    held it (:func:`orphan_hold`: a reloaded page is a new session of the same workspace); never for a job another
    user (a signed-in workspace, or a second session) holds too.

    Returns
    -------
    str
        ``"not found"`` when ``owner`` does not hold it; ``"withdrawn"`` when others still hold the job (it goes on
        for them, untouched); ``"cancelled"`` when ``owner`` was its only holder and it was queued or running
        (queued: cancelled at once; running: its cancel flag is set); ``"deleted"`` when it was finished and
        nobody holds it any more.
    """
    if not _drop_hold(conn, job_id, owner):
        held = orphan_hold(conn, job_id, owner) if link else None
        if held is None:
            return "not found"
        _drop_hold(conn, job_id, held)
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


def _drop_hold(conn: sqlite3.Connection, job_id: str, holder: str) -> bool:
    """Remove ``holder``'s hold of ``job_id`` (planned ahead or asked for); False when it held none."""
    if has_ahead_table(conn):
        conn.execute("DELETE FROM job_ahead WHERE job_id = ? AND owner = ?", (job_id, holder))
    return conn.execute("DELETE FROM job_access WHERE job_id = ? AND owner = ?", (job_id, holder)).rowcount > 0


def orphan_hold(conn: sqlite3.Connection, job_id: str, owner: str) -> str | None:
    """The hold the session ``owner`` (``"<workspace>:<session>"``) may take over by the job's link: the job's one
    holder when it is another session of the same workspace (an anonymous session: without sign-in every browser
    session, a reloaded page included, is a new one); None for a workspace holder (signed in: its own hold
    already counts), or when the job has any other holder or several."""
    workspace, sep, _ = owner.rpartition(":")
    if not sep:
        return None
    rows = conn.execute("SELECT owner FROM job_access WHERE job_id = ?", (job_id,)).fetchall()
    if len(rows) != 1:
        return None
    held = str(rows[0][0])
    other, other_sep, _ = held.rpartition(":")
    return held if other_sep and other == workspace and held != owner else None


def forget_missing(conn: sqlite3.Connection) -> None:
    """Drop access rows and share links of jobs no longer in the store (after a delete or a prune)."""
    conn.execute("DELETE FROM job_access WHERE job_id NOT IN (SELECT id FROM jobs)")
    conn.execute("DELETE FROM job_shares WHERE job_id NOT IN (SELECT id FROM jobs)")
    if has_ahead_table(conn):
        conn.execute("DELETE FROM job_ahead WHERE NOT EXISTS (SELECT 1 FROM job_access a WHERE "
                     "a.job_id = job_ahead.job_id AND a.owner = job_ahead.owner)")


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
