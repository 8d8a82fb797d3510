"""A job row as a frozen record, and the request key that dedupes jobs (canonical JSON, SHA-256)."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from planning.errors import PlanningError

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed", "cancelled")
ACTIVE_STATUSES: tuple[str, ...] = ("queued", "running")
TERMINAL_STATUSES: tuple[str, ...] = ("done", "failed", "cancelled")


def canonical_json(request: dict[str, Any]) -> str:
    """Serialize a request so equal requests give equal text (sorted keys, no whitespace, no NaN).

    Parameters
    ----------
    request:
        A JSON-compatible dict (str keys; str/int/float/bool/None/list/dict values).

    Returns
    -------
    str
        Canonical JSON text.

    Raises
    ------
    PlanningError
        If the request is not a dict or holds values JSON cannot represent exactly.
    """
    if not isinstance(request, dict):
        raise PlanningError(
            "request", f"must be a dict, got {type(request).__name__}.", "Pass the request as a plain dict."
        )
    try:
        return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise PlanningError(
            "request",
            f"is not plain JSON ({exc}).",
            "Convert objects with .to_dict() and replace NaN/inf with null before submitting.",
        ) from exc


def request_key(kind: str, request: dict[str, Any]) -> str:
    """Content key used to dedupe jobs: SHA-256 of ``kind`` and the canonical JSON of ``request``.

    Parameters
    ----------
    kind:
        Job kind (``"solve"``, ``"library"``, ``"whatif"`` …).
    request:
        The job's JSON request.

    Returns
    -------
    str
        64 hex digits.
    """
    digest = hashlib.sha256()
    digest.update(kind.encode("utf-8"))
    digest.update(b"\x00")
    digest.update(canonical_json(request).encode("utf-8"))
    return digest.hexdigest()

@dataclass(frozen=True)
class JobRecord:
    """A snapshot of one job row. Times are Unix seconds; ``result`` is ``None`` until the job is done.

    ``error`` is the user-facing message (a ``PlanningError`` message verbatim); ``error_field`` the
    offending input field when the error named one; ``error_detail`` the exception type and a short
    traceback for unexpected errors. ``result_json`` is ``None`` in listings unless asked for.
    """

    id: str
    kind: str
    request_key: str
    request_json: str
    status: JobStatus
    progress: float
    message: str
    result_json: str | None
    error: str | None
    error_field: str | None
    error_detail: str | None
    cancel_requested: bool
    owner: str | None
    host: str | None
    pid: int | None
    heartbeat: float | None
    created: float
    started: float | None
    finished: float | None

    @property
    def request(self) -> dict[str, Any]:
        """The job's request as a dict (empty when the stored text is not a JSON object: a damaged row)."""
        return _json_object(self.request_json) or {}

    @property
    def result(self) -> dict[str, Any] | None:
        """The job's result dict, or ``None`` when not done, not loaded in a listing, or damaged."""
        return _json_object(self.result_json)

    @property
    def finished_ok(self) -> bool:
        return self.status == "done"

    @property
    def is_terminal(self) -> bool:
        """True once the job is done, failed or cancelled (it will not change again)."""
        return self.status in TERMINAL_STATUSES

    @property
    def elapsed(self) -> float | None:
        """Seconds the job has run (until now while running), ``None`` before it starts."""
        if self.started is None:
            return None
        end = self.finished if self.finished is not None else time.time()
        return max(0.0, end - self.started)

    def to_dict(self, with_result: bool = True) -> dict[str, Any]:
        """Plain dict for ``--json`` output and APIs (request/result parsed, not as text)."""
        data = asdict(self)
        data.pop("request_json")
        data.pop("result_json")
        data["request"] = self.request
        if with_result:
            data["result"] = self.result
        data["elapsed"] = self.elapsed
        return data


def _json_object(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _number(value: Any) -> float | None:
    """A stored number, or None when a damaged row holds something else (text, NaN, a blob)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def record_from_row(row: sqlite3.Row) -> JobRecord:
    """A row as a record; numbers a damaged row holds as text read as missing (the listing still works)."""
    return JobRecord(
        id=row["id"],
        kind=row["kind"],
        request_key=row["request_key"],
        request_json=row["request_json"],
        status=row["status"],
        progress=min(max(_number(row["progress"]) or 0.0, 0.0), 1.0),
        message=row["message"],
        result_json=row["result_json"],
        error=row["error"],
        error_field=row["error_field"],
        error_detail=row["error_detail"],
        cancel_requested=bool(row["cancel_requested"]),
        owner=row["owner"],
        host=row["host"],
        pid=row["pid"],
        heartbeat=_number(row["heartbeat"]),
        created=_number(row["created"]) or 0.0,
        started=_number(row["started"]),
        finished=_number(row["finished"]),
    )
