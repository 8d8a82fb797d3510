"""A running job's best answer so far, beside the job store's rows (issue 41 §5: a far slider move shows its own
plan while the solver still proves it).

A solve finds a first plan long before its proof: a coral-extended slider moved to SLOs ×2 from a far position had
its first plan after 0.36 s, within 1.4 % after 2.5 s, and its proof after 12.4 s (round 21). The job's progress
writer hands each better plan here (:meth:`planning.jobs.reporting.ProgressWriter.plan`); a page reads it while
the job runs. The table is apart from ``jobs`` (a store of an older schema, or one opened by an older version of
the workbench, has no such rows and needs none), holds one row per *running* job (a write drops the rows of jobs
that have ended: their results supersede them), and is best effort: a write the store refuses is dropped, a read
of a store without the table answers None.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from planning.jobs.dbfile import StoreError
from planning.jobs.store import JobStore

MAX_CHARS = 4_000_000  # a partial plan larger than this is not kept (a final result has no such limit)
_TABLE = "CREATE TABLE IF NOT EXISTS partials (job_id TEXT PRIMARY KEY, written REAL NOT NULL, result_json TEXT NOT NULL)"


def write_partial(store: JobStore, job_id: str, result: dict[str, Any]) -> bool:
    """Keep ``result`` (plain JSON) as the best answer so far of ``job_id`` if that job is running; True when
    kept. Rows of jobs no longer running are dropped in the same transaction."""
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if len(text) > MAX_CHARS:
        return False
    try:
        with store._transaction(f"recording the best plan so far of job {job_id}") as conn:
            conn.execute(_TABLE)
            conn.execute("DELETE FROM partials WHERE job_id NOT IN (SELECT id FROM jobs WHERE status = 'running')")
            kept = conn.execute(
                "INSERT OR REPLACE INTO partials (job_id, written, result_json) SELECT ?, ?, ? "
                "WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ? AND status = 'running')",
                (job_id, time.time(), text, job_id)).rowcount
    except StoreError:
        return False
    return kept == 1


def read_partial(store: JobStore, job_id: str) -> tuple[float, str] | None:
    """``(written, result_json)`` of the running job's best answer so far; None when it has none, has ended,
    or the store holds no partial answers at all."""
    row = _running_row(store, job_id, "p.written, p.result_json")
    return None if row is None else (float(row[0]), str(row[1]))


def partial_written(store: JobStore, job_id: str) -> float | None:
    """When the running job's best answer so far was written (None: it has none): what a page polls to know that
    a better plan came, without reading the plan."""
    row = _running_row(store, job_id, "p.written")
    return None if row is None else float(row[0])


def _running_row(store: JobStore, job_id: str, columns: str) -> tuple[Any, ...] | None:
    """``columns`` of the job's partials row while the job runs (None: no row, not running, or no table)."""
    try:
        with store._sql(f"reading the best plan so far of job {job_id}") as conn:
            row = conn.execute(f"SELECT {columns} FROM partials p JOIN jobs j ON j.id = p.job_id "
                               "WHERE p.job_id = ? AND j.status = 'running'", (job_id,)).fetchone()
    except (StoreError, sqlite3.Error):
        return None
    return None if row is None else tuple(row)
