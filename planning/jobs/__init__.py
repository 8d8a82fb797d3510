"""Background jobs: persistent SQLite job store, runner (threads or worker processes), progress and cancellation."""

from planning.context import Cancelled, CancelToken, ProgressFn
from planning.jobs.dbfile import StoreError, default_store_path
from planning.jobs.record import (
    ACTIVE_STATUSES,
    STATUSES,
    TERMINAL_STATUSES,
    JobRecord,
    JobStatus,
    canonical_json,
    request_key,
)
from planning.jobs.reporting import JobToken
from planning.jobs.runner import JobFn, JobRunner, default_runner
from planning.jobs.store import JobStore

__all__ = [
    "ACTIVE_STATUSES",
    "STATUSES",
    "TERMINAL_STATUSES",
    "CancelToken",
    "Cancelled",
    "JobFn",
    "JobRecord",
    "JobRunner",
    "JobStatus",
    "JobStore",
    "JobToken",
    "ProgressFn",
    "StoreError",
    "canonical_json",
    "default_runner",
    "default_store_path",
    "request_key",
]
