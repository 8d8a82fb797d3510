"""Background jobs: persistent SQLite job store, runner (threads or worker processes), progress and cancellation;
who may see a job (workspaces, access, share links)."""

from planning.context import Cancelled, CancelToken, ProgressFn
from planning.jobs.access import Share
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
from planning.jobs.share import ShareToken, load_secret, new_token_id, sign, verify
from planning.jobs.store import JobStore
from planning.jobs.workspace import LOCAL_ID, Workspace, local_workspace, user_workspace, workspace_id

__all__ = [
    "ACTIVE_STATUSES",
    "LOCAL_ID",
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
    "Share",
    "ShareToken",
    "StoreError",
    "Workspace",
    "canonical_json",
    "default_runner",
    "default_store_path",
    "load_secret",
    "local_workspace",
    "new_token_id",
    "request_key",
    "sign",
    "user_workspace",
    "verify",
    "workspace_id",
]
