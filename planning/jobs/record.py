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

JobStatus = Literal["queued", "running", "done", "failed", "cancelled", "lost"]
STATUSES: tuple[str, ...] = ("queued", "running", "done", "failed", "cancelled", "lost")
ACTIVE_STATUSES: tuple[str, ...] = ("queued", "running")
TERMINAL_STATUSES: tuple[str, ...] = ("done", "failed", "cancelled", "lost")
ESTIMATE_FROM = 0.02  # a time-left estimate once a job has reported this share of its work
# jobs that run one solve per epoch or point: the scenario's time limit bounds each solve, not the job (a timeline of
# 24 epochs at 60 s each said "almost done" from its 60th second on)
LIMIT_PER_SOLVE_KINDS = frozenset({"timeline", "sweep"})
ESTIMATE_AFTER_S = 10.0  # or once it has run this long (any progress, or its time limit): no long wait without one

# A job's columns in store order: schema 1's, then what schema 2 added (kept last, so a schema-1 row is a prefix).
V1_COLUMNS: tuple[str, ...] = (
    "id", "kind", "request_key", "request_json", "status", "progress", "message", "result_json", "error",
    "error_field", "error_detail", "cancel_requested", "owner", "host", "pid", "heartbeat", "created", "started",
    "finished",
)
V2_COLUMNS: tuple[str, ...] = (*V1_COLUMNS, "attempt", "worker_pid", "progressed", "heartbeat_s", "stall_s", "notes")


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

    Liveness: ``heartbeat`` is written every ``heartbeat_s`` seconds by the process running the job (a thread of
    its worker process, or of the runner for jobs run in threads), ``progressed`` each time the job reports
    progress. ``attempt`` counts runs (2 after a retry on a dead worker), ``worker_pid`` is the worker process of
    the current attempt, ``notes`` one line per event worth keeping (a worker's death, a retry).
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
    attempt: int = 0
    worker_pid: int | None = None
    progressed: float | None = None
    heartbeat_s: float | None = None
    stall_s: float | None = None
    notes: str | None = None

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
        """True once the job is done, failed, cancelled or lost (it will not change again)."""
        return self.status in TERMINAL_STATUSES

    @property
    def elapsed(self) -> float | None:
        """Seconds the job has run (until now while running), ``None`` before it starts."""
        if self.started is None:
            return None
        end = self.finished if self.finished is not None else time.time()
        return max(0.0, end - self.started)

    def silent_for(self, now: float | None = None) -> float | None:
        """Seconds since the last heartbeat of a running job (``None`` when not running or never beaten)."""
        if self.status != "running" or self.heartbeat is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.heartbeat)

    def stalled_for(self, now: float | None = None) -> float | None:
        """Seconds since a running job last reported progress (or started), ``None`` when not running."""
        if self.status != "running":
            return None
        last = self.progressed if self.progressed is not None else self.started
        return None if last is None else max(0.0, (time.time() if now is None else now) - last)

    def time_left(self, now: float | None = None) -> float | None:
        """Seconds a running job probably still needs: the time so far × (1 − progress) / progress (its steps'
        progress fractions are shares of the whole job), at most what its time limit leaves
        (``request.scenario.options.time_limit_s`` when the request has one); ``None`` until there is enough to go
        on (progress below ``ESTIMATE_FROM`` or less than a second run) or when the job is not running. After
        ``ESTIMATE_AFTER_S`` any progress above zero gives the pace, and a job with none yet is estimated by its
        time limit: every job over 10 s shows an estimate when it has either (issue 41 §4)."""
        if self.status != "running" or self.started is None:
            return None
        now = time.time() if now is None else now
        spent = max(0.0, now - self.started)
        f = min(max(float(self.progress or 0.0), 0.0), 1.0)
        limit = self._time_limit()
        late = spent > ESTIMATE_AFTER_S
        if spent < 1.0 or (f < ESTIMATE_FROM and not late) or (f <= 0.0 and limit is None):
            return None
        left = spent * (1.0 - f) / f if f > 0.0 else float("inf")
        return left if limit is None else min(left, max(0.0, limit - spent))

    def _time_limit(self) -> float | None:
        """The request's ``scenario.options.time_limit_s`` when it states a positive one and bounds the whole job
        (not for the kinds in ``LIMIT_PER_SOLVE_KINDS``, whose every epoch or point has that limit)."""
        if self.kind in LIMIT_PER_SOLVE_KINDS:
            return None
        scenario = self.request.get("scenario")
        options = scenario.get("options") if isinstance(scenario, dict) else None
        limit = options.get("time_limit_s") if isinstance(options, dict) else None
        return float(limit) if isinstance(limit, (int, float)) and limit > 0 else None

    def time_left_text(self, now: float | None = None) -> str:
        """The estimate in words for a progress line: "about 40 s left", "about 3 min left", "estimating the time
        left" (running, not enough to go on yet), "" when not running."""
        if self.status != "running":
            return ""
        left = self.time_left(now)
        if left is None:
            return "estimating the time left"
        if left < 1.0:
            return "almost done"
        if left < 90:
            return f"about {left:.0f} s left"
        if left < 5400:
            return f"about {left / 60:.0f} min left"
        return f"about {left / 3600:.1f} h left"

    def attention(self, now: float | None = None) -> str | None:
        """What a user watching a running job should know, or ``None`` when all is well.

        ``"no heartbeat for N s"`` once the process running it has been silent for more than twice its heartbeat
        interval (hung, stopped or dead: a reader marks it ``lost`` after the store's ``stale_after``), else ``"no
        progress for N s"`` once it has reported no progress for ``stall_s`` seconds while its heartbeat is fresh
        (alive: slow or stuck in one step).
        """
        now = time.time() if now is None else now
        silent = self.silent_for(now)
        if silent is not None and self.heartbeat_s and silent > 2 * self.heartbeat_s:
            return (f"no heartbeat for {silent:.0f} s (expected every {self.heartbeat_s:g} s): the process running "
                    "it is stopped, hung or dead")
        stalled = self.stalled_for(now)
        if stalled is not None and self.stall_s is not None and stalled >= self.stall_s:
            beat = f"heartbeat {silent:.0f} s ago" if silent is not None else "no heartbeat yet"
            return f"no progress for {stalled:.0f} s (alive: {beat})"
        return None

    def to_dict(self, with_result: bool = True) -> dict[str, Any]:
        """Plain dict for ``--json`` output and APIs (request/result parsed, not as text; ``attention`` added)."""
        data = asdict(self)
        data.pop("request_json")
        data.pop("result_json")
        data["request"] = self.request
        if with_result:
            data["result"] = self.result
        data["elapsed"] = self.elapsed
        data["attention"] = self.attention()
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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


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
        attempt=_int(row["attempt"]) or 0,
        worker_pid=_int(row["worker_pid"]),
        progressed=_number(row["progressed"]),
        heartbeat_s=_number(row["heartbeat_s"]),
        stall_s=_number(row["stall_s"]),
        notes=_text(row["notes"]),
    )
