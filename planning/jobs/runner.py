"""Background job runner: worker threads, throttled progress, cooperative cancellation, dedupe."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from planning.context import CancelFlag, Cancelled, ProgressFn
from planning.errors import PlanningError
from planning.jobs.dbfile import default_store_path
from planning.jobs.record import JobRecord
from planning.jobs.store import JobStore


class JobToken(CancelFlag):
    """The cancel token of one job: a :class:`~planning.context.CancelFlag` that also sees remote requests.

    Set locally by :meth:`JobRunner.cancel`, or remotely through the store's ``cancel_requested`` flag
    (another process or browser tab); the database is polled at most every ``poll_interval`` seconds. It is
    a :class:`planning.context.CancelToken`, so it is passed as ``cancel`` to engine functions as is.

    Parameters
    ----------
    job_id:
        The job this token belongs to.
    store:
        Store to poll for remote cancel requests; ``None`` for a purely local token.
    poll_interval:
        Seconds between database polls.
    deadline_s:
        Optional wall-clock limit in seconds (see :class:`~planning.context.CancelFlag`).
    """

    def __init__(self, job_id: str = "", store: JobStore | None = None, poll_interval: float = 0.2,
                 deadline_s: float | None = None) -> None:
        super().__init__(deadline_s)
        self.job_id = job_id
        self._store = store
        self._poll_interval = poll_interval
        self._last_poll = 0.0
        self._poll_lock = threading.Lock()

    def requested(self) -> bool:
        """True once cancellation was requested here or in the store."""
        if super().requested():
            return True
        if self._store is None:
            return False
        now = time.monotonic()
        with self._poll_lock:
            if now - self._last_poll < self._poll_interval:
                return False
            self._last_poll = now
        if self._store.cancel_requested(self.job_id):
            self.cancel()
        return super().requested()


JobFn = Callable[[dict[str, Any], ProgressFn, JobToken], dict[str, Any]]

_TRACEBACK_LINES = 12


class _Progress:
    """Throttled progress writer: at most one database write per ``min_interval`` seconds.

    A throttled value is not lost: a timer writes the latest one ``min_interval`` after the last write, so
    a step's message ("ILP: ...") reaches the store even when no further progress call follows it.
    """

    def __init__(self, store: JobStore, job_id: str, min_interval: float) -> None:
        self._store = store
        self._job_id = job_id
        self._min_interval = min_interval
        self._last_write = 0.0
        self._pending: tuple[float, str] | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        self._lock = threading.Lock()

    def __call__(self, fraction: float, message: str = "") -> None:
        try:
            value = float(fraction)
        except (TypeError, ValueError):
            return  # a bad progress value must never kill a solve
        if value != value:  # NaN
            return
        now = time.monotonic()
        with self._lock:
            if self._closed:
                return
            wait_s = self._min_interval - (now - self._last_write)
            if wait_s > 0:
                self._pending = (value, str(message))
                if self._timer is None:
                    self._timer = threading.Timer(wait_s, self._write_pending)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._last_write = now
            self._pending = None
        self._store.set_progress(self._job_id, value, str(message))

    def _write_pending(self) -> None:
        with self._lock:
            self._timer = None
            pending, self._pending = self._pending, None
            if pending is None or self._closed:
                return
            self._last_write = time.monotonic()
        with contextlib.suppress(Exception):  # a busy database must not kill the timer thread loudly
            self._store.set_progress(self._job_id, *pending)

    def flush(self) -> None:
        """Write the last throttled value, if any, and stop: later calls are ignored (the job is ending)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            pending, self._pending = self._pending, None
        if pending is not None:
            self._store.set_progress(self._job_id, *pending)


def _short_traceback(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(text[-_TRACEBACK_LINES:])


# --- worker processes -------------------------------------------------------------------------------------------
# A job function run in a worker process reports back through the job store, as any other process does: progress
# rows, the cancel flag (polled by its JobToken) and the outcome tuple returned to the parent thread below.
_CHILD_STORES: dict[str, JobStore] = {}

Outcome = tuple[str, Any, str]  # ("done", result, "") | ("cancelled", reason, text) | ("error", field, text)
#                                 | ("crash", text, short traceback)


def warm_worker(modules: tuple[str, ...] = ("planning.api",)) -> None:
    """Initializer of a job worker process: import the engine and load the catalog and perf model once, so the
    first job a worker takes does not pay ~2 s of imports (spawned workers start from a bare interpreter)."""
    import importlib

    for name in modules:
        importlib.import_module(name)
    with contextlib.suppress(Exception):  # a broken catalog is reported by the job that needs it, not here
        from planning.api import engine_context

        engine_context()


def _ping() -> int:
    return os.getpid()


def run_in_child(store_path: str, job_id: str, request: dict[str, Any], fn: JobFn, poll_interval: float,
                 progress_interval: float) -> Outcome:
    """Run one job function in this (worker) process; the parent records the outcome."""
    store = _CHILD_STORES.get(store_path)
    if store is None:
        store = _CHILD_STORES[store_path] = JobStore(store_path)
    token = JobToken(job_id, store, poll_interval)
    progress = _Progress(store, job_id, progress_interval)
    try:
        result = fn(request, progress, token)
    except Cancelled as exc:
        progress.flush()
        return ("cancelled", exc.reason, str(exc))
    except PlanningError as exc:
        progress.flush()
        return ("error", exc.field, str(exc))
    except Exception as exc:
        progress.flush()
        return ("crash", f"{type(exc).__name__}: {exc}", _short_traceback(exc))
    progress.flush()
    return ("done", result, "")


def _picklable(fn: JobFn) -> bool:
    """Module-level functions travel to a worker process by name; closures and lambdas run in a thread."""
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


class JobRunner:
    """Runs job functions in worker threads and records everything in a :class:`JobStore`.

    A job function has the signature ``fn(request: dict, progress: ProgressFn, token: JobToken) -> dict``;
    its returned dict must be JSON (e.g. ``PlanResult.to_dict()``). Solver calls release the GIL, so a
    worker thread does not freeze the caller (e.g. a Streamlit script thread).

    Parameters
    ----------
    store:
        The job store (a path or ``None`` opens one at that path / the default path).
    max_workers:
        Jobs that run at the same time; further jobs wait as ``queued``.
    progress_interval:
        Minimum seconds between progress writes (0.2 → at most 5 writes/s per job).
    heartbeat_interval:
        Seconds between heartbeats for this runner's active jobs.
    cancel_poll_interval:
        Seconds a :class:`JobToken` caches the store's cancel flag.
    processes:
        ``True`` runs each job whose function is a module-level function in a long-lived worker process
        (``spawn``; one per ``max_workers``), so a solve does not compete for the GIL with the caller (the
        Streamlit server renders pages in the same process). Progress and cancel go through the store; a
        worker that dies fails its job with a message and is replaced. Closures still run in a thread.
    warm_modules:
        Modules each worker process imports when it starts (``processes=True``).
    """

    def __init__(
        self,
        store: JobStore | str | os.PathLike[str] | None = None,
        max_workers: int = 2,
        *,
        progress_interval: float = 0.2,
        heartbeat_interval: float = 5.0,
        cancel_poll_interval: float = 0.2,
        processes: bool = False,
        warm_modules: tuple[str, ...] = ("planning.api",),
    ) -> None:
        if max_workers < 1:
            raise PlanningError("max_workers", f"must be at least 1, got {max_workers}.", "Use 1 or more.")
        self.store = store if isinstance(store, JobStore) else JobStore(store)
        self.max_workers = max_workers
        self.progress_interval = progress_interval
        self.heartbeat_interval = heartbeat_interval
        self.cancel_poll_interval = cancel_poll_interval
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="planning-job")
        self._lock = threading.Lock()
        self._tokens: dict[str, JobToken] = {}
        self._futures: dict[str, Future[None]] = {}
        self._stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self.processes = processes
        self._warm_modules = warm_modules
        self._procs: ProcessPoolExecutor | None = None
        if processes:
            self._procs = self._new_pool()
            self._procs.submit(_ping)  # start one worker now: its warm-up overlaps the user's first clicks

    # -- public API ---------------------------------------------------------------------------------
    def submit(
        self,
        kind: str,
        request: dict[str, Any],
        fn: JobFn,
        owner: str | None = None,
        *,
        reuse: bool = True,
    ) -> str:
        """Queue ``fn(request, progress, token)`` in the background, or reuse an identical job.

        Identical means same ``kind`` and same canonical JSON of ``request``: a done job is returned
        as is (its result is the cache), a queued/running job is joined. Failed and cancelled jobs
        are never reused.

        Parameters
        ----------
        kind:
            Short job kind (``"solve"``, ``"library"``, ``"whatif"``, ``"sweep"``).
        request:
            Plain-JSON request; everything the result depends on must be in it (catalog/perf
            fingerprints included), because it is the cache key.
        fn:
            The work; must return a JSON dict. Raise ``PlanningError`` for user-facing failures.
        owner:
            Session id, so a session can list its own jobs.
        reuse:
            ``False`` always starts a new job.

        Returns
        -------
        str
            The job id (``JobRunner.get(job_id)`` / ``JobStore(path).get(job_id)`` from anywhere).

        Raises
        ------
        PlanningError
            If the runner was shut down or the request is not plain JSON.
        """
        if self._stop.is_set():
            raise PlanningError("runner", "was shut down.", "Create a new JobRunner or use default_runner().")
        new_id = uuid.uuid4().hex[:16]
        job_id, created = self.store.create_or_reuse(new_id, kind, request, owner, reuse=reuse)
        if not created:
            return job_id
        token = JobToken(job_id, self.store, self.cancel_poll_interval)
        with self._lock:
            self._tokens[job_id] = token
            self._futures[job_id] = self._executor.submit(self._run, job_id, dict(request), fn, token)
        self._ensure_heartbeat()
        return job_id

    def get(self, job_id: str) -> JobRecord:
        """Current record of a job (see :meth:`JobStore.get`)."""
        return self.store.get(job_id)

    def list_jobs(self, owner: str | None = None, limit: int = 50) -> list[JobRecord]:
        """Most recent jobs first, optionally only one owner's (see :meth:`JobStore.list_jobs`)."""
        return self.store.list_jobs(owner=owner, limit=limit)

    def cancel(self, job_id: str) -> bool:
        """Ask a job to stop: sets the local token and the store flag (seen by other processes).

        Returns
        -------
        bool
            True if the job was queued or running.
        """
        with self._lock:
            token = self._tokens.get(job_id)
        if token is not None:
            token.cancel()
        return self.store.request_cancel(job_id)

    def wait(self, job_id: str, timeout: float | None = None, poll: float = 0.05) -> JobRecord:
        """Block until the job is done, failed or cancelled (or ``timeout`` passes).

        Parameters
        ----------
        job_id:
            The job to wait for.
        timeout:
            Seconds; ``None`` waits forever.
        poll:
            Seconds between store reads for jobs run by another process.

        Returns
        -------
        JobRecord
            The last record read (check ``is_terminal`` when a timeout was given).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # A timeout ends the wait early; the job's own errors are recorded in the store.
            with contextlib.suppress(Exception):
                future.result(timeout=remaining)
        while True:
            record = self.store.get(job_id)
            if record.is_terminal or (deadline is not None and time.monotonic() >= deadline):
                return record
            time.sleep(poll)

    def result(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Wait for a job and return its result dict.

        Raises
        ------
        PlanningError
            If the job failed (its message verbatim), was cancelled, or did not finish in time.
        """
        record = self.wait(job_id, timeout)
        if record.status == "done" and record.result is not None:
            return record.result
        if record.status == "failed":
            raise PlanningError(record.error_field or f"job {job_id}", record.error or "failed.", "")
        if record.status == "cancelled":
            raise PlanningError(f"job {job_id}", "was cancelled.", "Submit it again to rerun it.")
        raise PlanningError(
            f"job {job_id}", f"is still {record.status} after {timeout} s.", "Wait longer or cancel it."
        )

    def active_jobs(self) -> list[str]:
        """Ids of jobs this runner has queued or running."""
        with self._lock:
            return [job_id for job_id, fut in self._futures.items() if not fut.done()]

    def shutdown(self, wait: bool = True, cancel: bool = False) -> None:
        """Stop accepting jobs; optionally cancel running ones; optionally wait for workers."""
        if cancel:
            for job_id in self.active_jobs():
                self.cancel(job_id)
        self._stop.set()
        self._executor.shutdown(wait=wait, cancel_futures=cancel)
        with self._lock:
            procs, self._procs = self._procs, None
        if procs is not None:
            procs.shutdown(wait=wait, cancel_futures=True)

    # -- worker side --------------------------------------------------------------------------------
    def _run(self, job_id: str, request: dict[str, Any], fn: JobFn, token: JobToken) -> None:
        try:
            self._run_guarded(job_id, request, fn, token)
        except Exception as exc:  # never let a store hiccup kill the worker thread silently
            with contextlib.suppress(Exception):
                self.store.finish_failed(
                    job_id, f"job runner error: {type(exc).__name__}: {exc}", detail=_short_traceback(exc)
                )
        finally:
            with self._lock:
                self._tokens.pop(job_id, None)

    def _run_guarded(self, job_id: str, request: dict[str, Any], fn: JobFn, token: JobToken) -> None:
        if token.requested():
            self.store.finish_cancelled(job_id)
            return
        if not self.store.mark_running(job_id):
            return  # cancelled while queued (possibly from another process)
        if self.processes and _picklable(fn):
            self._run_in_process(job_id, request, fn)
            return
        progress = _Progress(self.store, job_id, self.progress_interval)
        try:
            result = fn(request, progress, token)
        except Cancelled as exc:  # the one cancel signal of the engine, the library build and job functions
            progress.flush()
            if exc.reason == "time limit":
                self.store.finish_failed(job_id, str(exc), field="time_limit")
            else:
                self.store.finish_cancelled(job_id)
            return
        except PlanningError as exc:
            progress.flush()
            self.store.finish_failed(job_id, str(exc), field=exc.field)
            return
        except Exception as exc:
            progress.flush()
            self.store.finish_failed(job_id, f"{type(exc).__name__}: {exc}", detail=_short_traceback(exc))
            return
        progress.flush()
        self._finish(job_id, result)

    def _finish(self, job_id: str, result: Any) -> None:
        if not isinstance(result, dict):
            self.store.finish_failed(
                job_id,
                f"job function returned {type(result).__name__}, not a dict.",
                detail="Return a JSON dict, e.g. PlanResult.to_dict().",
            )
            return
        try:
            self.store.finish_done(job_id, result)
        except (TypeError, ValueError) as exc:
            self.store.finish_failed(
                job_id,
                f"result is not plain JSON ({exc}).",
                detail="Convert objects with .to_dict() and NaN/inf to null before returning.",
            )

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.max_workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=warm_worker, initargs=(self._warm_modules,))

    def _run_in_process(self, job_id: str, request: dict[str, Any], fn: JobFn) -> None:
        with self._lock:
            if self._procs is None:
                self._procs = self._new_pool()
            procs = self._procs
        try:
            kind, value, text = procs.submit(run_in_child, str(self.store.path), job_id, request, fn,
                                             self.cancel_poll_interval, self.progress_interval).result()
        except BrokenProcessPool:
            with self._lock:
                if self._procs is procs:
                    self._procs = None  # the next job starts a fresh pool
            self.store.finish_failed(job_id, "the worker process running this job died (out of memory or killed).",
                                     detail="Run it again; if it repeats, plan a smaller scenario or raise the "
                                            "machine's memory.")
            return
        if kind == "done":
            self._finish(job_id, value)
        elif kind == "cancelled":
            if value == "time limit":
                self.store.finish_failed(job_id, text, field="time_limit")
            else:
                self.store.finish_cancelled(job_id)
        elif kind == "error":
            self.store.finish_failed(job_id, text, field=value)
        else:
            self.store.finish_failed(job_id, str(value), detail=text)

    def _ensure_heartbeat(self) -> None:
        with self._lock:
            if self._heartbeat_thread is not None and self._heartbeat_thread.is_alive():
                return
            thread = threading.Thread(target=self._heartbeat_loop, name="planning-job-heartbeat", daemon=True)
            self._heartbeat_thread = thread
        thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            active = self.active_jobs()
            with self._lock:  # forget finished futures so the map does not grow forever
                for job_id in [j for j, f in self._futures.items() if f.done()]:
                    self._futures.pop(job_id, None)
            with contextlib.suppress(Exception):  # a busy database must not stop heartbeats for good
                self.store.heartbeat(active)


_DEFAULT_RUNNERS: dict[Path, JobRunner] = {}
_DEFAULT_LOCK = threading.Lock()


def default_runner(path: str | os.PathLike[str] | None = None, max_workers: int = 2, *,
                   processes: bool = False) -> JobRunner:
    """One shared runner per store path in this process (e.g. for all Streamlit sessions).

    Parameters
    ----------
    path:
        Store path; ``None`` means :func:`planning.jobs.store.default_store_path`.
    max_workers, processes:
        Used only when the runner for this path is created (see :class:`JobRunner`).

    Returns
    -------
    JobRunner
    """
    resolved = (Path(path).expanduser() if path is not None else default_store_path()).resolve()
    with _DEFAULT_LOCK:
        runner = _DEFAULT_RUNNERS.get(resolved)
        if runner is None or runner._stop.is_set():
            runner = JobRunner(JobStore(resolved), max_workers=max_workers, processes=processes)
            _DEFAULT_RUNNERS[resolved] = runner
        return runner
