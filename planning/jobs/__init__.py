"""Background jobs: persistent SQLite job store, worker-thread runner, progress and cancellation."""

from planning.jobs.runner import CancelToken, JobCancelled, JobFn, JobRunner, ProgressFn, default_runner
from planning.jobs.store import (
    ACTIVE_STATUSES,
    STATUSES,
    TERMINAL_STATUSES,
    JobRecord,
    JobStatus,
    JobStore,
    canonical_json,
    default_store_path,
    request_key,
)

__all__ = [
    "ACTIVE_STATUSES",
    "STATUSES",
    "TERMINAL_STATUSES",
    "CancelToken",
    "JobCancelled",
    "JobFn",
    "JobRecord",
    "JobRunner",
    "JobStatus",
    "JobStore",
    "ProgressFn",
    "canonical_json",
    "default_runner",
    "default_store_path",
    "request_key",
]
