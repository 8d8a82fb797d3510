"""Background job runner: worker threads or worker processes, throttled progress, retries, cancellation, dedupe."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planning.context import Cancelled
from planning.errors import PlanningError
from planning.jobs.dbfile import StoreError, default_store_path
from planning.jobs.fairshare import FairQueue, Place, Waiting, max_jobs_per_user
from planning.jobs.record import JobRecord
from planning.jobs.reporting import JobToken, ProgressWriter
from planning.jobs.store import RESUBMIT, JobStore
from planning.jobs.workers import (
    Abandoned,
    Death,
    JobFn,
    Outcome,
    PoolClosed,
    Task,
    WorkerPool,
    death_fix,
    picklable,
    short_traceback,
)

__all__ = ["Cadence", "JobFn", "JobRunner", "JobToken", "default_runner"]


@dataclass(frozen=True)
class Cadence:
    """How often a runner writes and reads a job's signs of life.

    Parameters
    ----------
    progress_interval:
        Minimum seconds between progress writes (0.2 → at most 5 writes/s per job).
    heartbeat_interval:
        Seconds between heartbeats: written by a thread of the worker process running a job, or of the runner
        for queued jobs and jobs run in threads. Readers flag a job silent for twice this ("no heartbeat for N s").
    cancel_poll_interval:
        Seconds a :class:`JobToken` caches the store's cancel flag.
    stall_after:
        Seconds without progress after which readers show "no progress for N s" (stored with each job).
    """

    progress_interval: float = 0.2
    heartbeat_interval: float = 5.0
    cancel_poll_interval: float = 0.2
    stall_after: float = 30.0


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
    per_user:
        Jobs one owner runs at the same time (``None``: env ``PLANNING_MAX_JOBS_PER_USER``, default 2). Queued
        jobs start round-robin across owners (:mod:`planning.jobs.fairshare`).
    cadence:
        How often progress, heartbeats and cancel flags are written and read (:class:`Cadence`).
    processes:
        ``True`` runs each job whose function is a module-level function in a long-lived worker process
        (``spawn``; at most ``max_workers``, managed by :class:`~planning.jobs.workers.WorkerPool`), so a solve
        does not compete for the GIL with the caller (the Streamlit server renders pages in the same process).
        Progress, heartbeat and cancel go through the store. A worker that dies costs only its own job: it is
        replaced, and the job is retried (``retries`` times) and then failed with the cause. Closures still run
        in a thread.
    warm_modules:
        Modules each worker process imports when it starts (``processes=True``).
    fill:
        ``True`` (a server) starts all ``max_workers`` worker processes warm at once (``WorkerPool``'s ``fill``).
    retries:
        How many times a job whose worker process died is run again (solves are deterministic and idempotent).
    """

    def __init__(
        self,
        store: JobStore | str | os.PathLike[str] | None = None,
        max_workers: int = 2,
        *,
        cadence: Cadence | None = None,
        processes: bool = False,
        warm_modules: tuple[str, ...] = ("planning.pipeline",),
        fill: bool = False,
        retries: int = 1,
        per_user: int | None = None,
    ) -> None:
        if max_workers < 1:
            raise PlanningError("max_workers", f"must be at least 1, got {max_workers}.", "Use 1 or more.")
        self.store = store if isinstance(store, JobStore) else JobStore(store)
        self.max_workers = max_workers
        cadence = cadence or Cadence()
        self.progress_interval = cadence.progress_interval
        self.heartbeat_interval = cadence.heartbeat_interval
        self.cancel_poll_interval = cadence.cancel_poll_interval
        self.stall_after = cadence.stall_after
        self.retries = max(0, int(retries))
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="planning-job")
        self._lock = threading.Lock()
        self._tokens: dict[str, JobToken] = {}
        self._futures: dict[str, Future[None]] = {}
        self._fair = FairQueue(max_workers, max_jobs_per_user() if per_user is None else max(1, int(per_user)))
        self._pending: dict[str, tuple[dict[str, Any], JobFn, JobToken]] = {}  # queued here, not yet started
        self._stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._in_process: set[str] = set()  # jobs whose worker process writes their heartbeat
        self._unrecorded: dict[str, str] = {}  # outcomes the store refused (disk full): retried by the heartbeat
        self.processes = processes
        self.cores = os.cpu_count() or 1  # what ``cores_for`` and the background lane share out (tests set it)
        self._pool = WorkerPool(max_workers, warm_modules, fill) if processes else None  # starts a worker now

    # -- public API ---------------------------------------------------------------------------------
    def submit(
        self,
        kind: str,
        request: dict[str, Any],
        fn: JobFn,
        owner: str | None = None,
        *,
        reuse: bool = True,
        fair_key: str | None = None,
        background: bool = False,
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
            The user's workspace id: lists their jobs, caps their running jobs, and holds the job in the
            store's ``job_access`` table (a reused job too), so their cancel counts (see :meth:`cancel`).
        reuse:
            ``False`` always starts a new job.
        fair_key:
            Who shares the workers fairly and holds the job, when not ``owner``: without sign-in every browser
            session is the one local owner (one workspace), yet each session, ``"<owner>:<session>"``, is its own
            user for the per-user cap, the round-robin and whose cancel counts (``cancel(..., by=fair_key)``).
        background:
            Work nobody waits for yet (a prefetch): it runs only in slots no user's job could take, and is
            cancelled when a user's job needs its slot (:mod:`planning.jobs.fairshare`). A user's identical request
            joining it later promotes it to a user's job. Until then it is not listed as its holder's job
            (:meth:`JobStore.list_jobs`).

        Returns
        -------
        str
            The job id (``JobRunner.get(job_id)`` / ``JobStore(path).get(job_id)`` from anywhere).

        Raises
        ------
        PlanningError
            If the runner was shut down or the request is not plain JSON; a
            :class:`~planning.jobs.dbfile.StoreError` when the store cannot record the job (read-only, disk full).
        """
        if self._stop.is_set():
            raise PlanningError("runner", "was shut down.", "Create a new JobRunner or use default_runner().")
        new_id = uuid.uuid4().hex[:16]
        user = fair_key or owner
        job_id, created = self.store.create_or_reuse(new_id, kind, request, owner, reuse=reuse, holder=user,
                                                     ahead=background)
        if not created:
            with self._lock:
                if not background:
                    self._fair.promote(job_id)
            self._dispatch()  # a promoted job may start now, or stop a background job to take its slot
            return job_id
        token = JobToken(job_id, self.store, self.cancel_poll_interval)
        with self._lock:
            self._tokens[job_id] = token
            self._fair.push(job_id, user, background=background)
            self._pending[job_id] = (dict(request), fn, token)
        self._dispatch()
        self._ensure_heartbeat()
        return job_id

    @property
    def per_user(self) -> int:
        """Jobs one owner runs at the same time (further ones wait in the fair queue)."""
        return self._fair.per_user

    def place(self, job_id: str) -> Place | None:
        """Where a job queued by this runner stands ("2nd in your queue, 5 ahead overall"); ``None`` otherwise."""
        with self._lock:
            return self._fair.place(job_id)

    def queue(self) -> tuple[list[Waiting], dict[str, str | None]]:
        """This runner's queued jobs in the order they will start, and its running jobs (id → owner)."""
        with self._lock:
            return self._fair.queued(), self._fair.running()

    @property
    def cores(self) -> int:
        """The cores the jobs share: what :meth:`cores_for` gives out and bounds the background lane with."""
        return self._fair.cores

    @cores.setter
    def cores(self, value: int) -> None:
        with self._lock:
            self._fair.cores = max(1, int(value))

    def cores_for(self, job_id: str) -> int:
        """The processes a job starting now in a worker may use, itself included: the cores no other running job
        takes (one each), at least 1; a background job (a slider's prefetch) gets 1, so a user's job that starts
        beside it finds its core. A solve alone on a two-core server thus runs its baselines beside its
        allocation as the CLI does (``planning.baselines.beside.workers_for``); two jobs at once get one each,
        as before, so concurrent jobs never multiply processes past the cores."""
        with self._lock:
            if self._fair.is_background(job_id):
                return 1
            others = sum(1 for j in self._fair.running() if j != job_id)
        return max(1, self.cores - others)

    def _dispatch(self) -> None:
        """Start queued jobs while a slot is free, the fair-share pick first; then stop a background job whose
        slot a user's queued job needs (it starts when that job ends)."""
        while True:
            with self._lock:
                job_id = self._fair.start_next()
                if job_id is None:
                    victim = self._fair.preempt()
                    break
                request, fn, token = self._pending.pop(job_id)
                try:
                    self._futures[job_id] = self._executor.submit(self._run, job_id, request, fn, token)
                    continue
                except RuntimeError:  # the executor was shut down without waiting for the queue
                    self._fair.remove(job_id)
                    self._tokens.pop(job_id, None)
            with contextlib.suppress(Exception):
                self.store.finish_lost(job_id, "lost: the job runner shut down before the job could start",
                                       RESUBMIT)
        if victim is not None:
            self.cancel(victim)

    def get(self, job_id: str) -> JobRecord:
        """Current record of a job (see :meth:`JobStore.get`)."""
        return self.store.get(job_id)

    def list_jobs(self, owner: str | None = None, limit: int = 50) -> list[JobRecord]:
        """Most recent jobs first, optionally only one owner's (see :meth:`JobStore.list_jobs`)."""
        return self.store.list_jobs(owner=owner, limit=limit)

    def cancel(self, job_id: str, *, by: str | None = None, link: bool = False) -> bool:
        """Ask a job to stop: sets the local token and the store flag (seen by other processes).

        Parameters
        ----------
        job_id:
            The job.
        by:
            The user who cancels (the ``fair_key or owner`` they submitted with). The store decides
            (:meth:`JobStore.withdraw`): their interest goes; the job stops only when nobody else holds it; a job
            they do not hold is untouched. The store keeps who holds what, so the rule outlives this runner.
            ``None``: the server or an admin, which stops it.
        link:
            ``by`` opened the job's link (``?job=``): without sign-in it may cancel a job whose one holder is
            another anonymous session of its workspace (its own page before a reload), never one another user
            holds (:meth:`JobStore.withdraw`).

        Returns
        -------
        bool
            True if the job was queued or running and the cancel was accepted (stopped, or interest withdrawn).
        """
        if by is not None:
            record = self.store.find(job_id)
            if record is None or record.is_terminal:
                return False  # a finished job is removed (Jobs page), never "cancelled"
            outcome = self.store.withdraw(job_id, by, link=link)
            if outcome == "cancelled":  # the store marked it (queued: cancelled; running: flagged)
                self._stop_here(job_id)
            return outcome in ("cancelled", "withdrawn")
        accepted = self.store.request_cancel(job_id)  # first: a thread stopped here may finish the job at once
        self._stop_here(job_id)
        return accepted

    def _stop_here(self, job_id: str) -> None:
        """Drop a cancelled job from this runner's fair queue, and set its token so a job run here stops at once."""
        with self._lock:
            token = self._tokens.get(job_id)
            if self._pending.pop(job_id, None) is not None:  # still in the fair queue: it never starts
                self._fair.remove(job_id)
                self._tokens.pop(job_id, None)
        if token is not None:
            token.cancel()

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
        if record.status in ("failed", "lost"):
            raise PlanningError(record.error_field or f"job {job_id}", record.error or f"{record.status}.", "")
        if record.status == "cancelled":
            raise PlanningError(f"job {job_id}", "was cancelled.", "Submit it again to rerun it.")
        raise PlanningError(
            f"job {job_id}", f"is still {record.status} after {timeout} s.", "Wait longer or cancel it."
        )

    def active_jobs(self) -> list[str]:
        """Ids of jobs this runner has queued or running."""
        with self._lock:
            return [job_id for job_id, fut in self._futures.items() if not fut.done()] + list(self._pending)

    def shutdown(self, wait: bool = True, cancel: bool = False) -> None:
        """Stop accepting jobs; optionally cancel running and queued ones; optionally wait for the queue and the
        workers (without ``wait``, jobs still queued are marked lost)."""
        if cancel:
            for job_id in self.active_jobs():
                self.cancel(job_id)
        self._stop.set()
        while wait:  # queued jobs start as running ones end: wait until the fair queue is empty
            with self._lock:
                futures = list(self._futures.values())
                if not self._pending and all(f.done() for f in futures):
                    break
            concurrent.futures.wait(futures, timeout=self.heartbeat_interval)
        self._executor.shutdown(wait=wait, cancel_futures=cancel)
        if self._pool is not None:
            self._pool.close()  # idle workers stop now, busy ones when their job ends

    def worker_pids(self) -> list[int]:
        """Process ids of this runner's worker processes (``processes=True``), idle and busy."""
        return self._pool.pids() if self._pool is not None else []

    # -- worker side --------------------------------------------------------------------------------
    def _run(self, job_id: str, request: dict[str, Any], fn: JobFn, token: JobToken) -> None:
        try:
            self._run_guarded(job_id, request, fn, token)
        except StoreError as exc:  # e.g. the disk filled up while recording: say so, or keep trying
            self._record_failure(job_id, f"the job's outcome could not be recorded: {exc}")
        except Exception as exc:  # never let a store hiccup kill the worker thread silently
            self._record_failure(job_id, f"job runner error: {type(exc).__name__}: {exc}", short_traceback(exc))
        finally:
            with self._lock:
                self._tokens.pop(job_id, None)
                self._fair.remove(job_id)
            self._dispatch()  # a slot is free: the next owner's job starts

    def _record_failure(self, job_id: str, error: str, detail: str | None = None) -> None:
        try:
            self.store.finish_failed(job_id, error, detail=detail)
        except Exception:  # the heartbeat loop tries again until the store takes it
            with self._lock:
                self._unrecorded[job_id] = error

    def _run_guarded(self, job_id: str, request: dict[str, Any], fn: JobFn, token: JobToken) -> None:
        if token.requested():
            self.store.finish_cancelled(job_id)
            return
        if not self.store.mark_running(job_id, heartbeat_s=self.heartbeat_interval, stall_s=self.stall_after):
            return  # cancelled while queued (possibly from another process)
        if self._pool is not None and picklable(fn):
            self._run_in_process(job_id, request, fn, token)
            return
        progress = ProgressWriter(self.store, job_id, self.progress_interval)
        try:
            result = fn(request, progress, token)
        except Cancelled as exc:  # the one cancel signal of the engine, the library build and job functions
            progress.flush()
            self._record(job_id, ("cancelled", exc.reason, str(exc)))
            return
        except PlanningError as exc:
            progress.flush()
            self._record(job_id, ("error", exc.field, str(exc)))
            return
        except Exception as exc:
            progress.flush()
            self._record(job_id, ("crash", f"{type(exc).__name__}: {exc}", short_traceback(exc)))
            return
        progress.flush()
        self._record(job_id, ("done", result, ""))

    def _record(self, job_id: str, outcome: Outcome) -> None:
        """Store a job's outcome: done, cancelled (a time limit is a failure on ``time_limit``), failed."""
        kind, value, text = outcome
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
            if isinstance(exc, PlanningError):
                raise
            self.store.finish_failed(
                job_id,
                f"result is not plain JSON ({exc}).",
                detail="Convert objects with .to_dict() and NaN/inf to null before returning.",
            )

    def _run_in_process(self, job_id: str, request: dict[str, Any], fn: JobFn, token: JobToken) -> None:
        """Run a job in a worker process; on the worker's death retry it ``retries`` times, then fail it."""
        assert self._pool is not None

        def handed_over() -> None:  # the worker beats from now on; until then (starting up) this runner does
            with self._lock:
                self._in_process.add(job_id)

        try:
            deaths: list[Death] = []
            attempt = 1
            while True:
                try:
                    worker = self._pool.acquire()
                except PoolClosed:
                    self.store.finish_lost(job_id, "lost: the job runner shut down before the job could run again",
                                           RESUBMIT)
                    return
                except OSError as exc:  # no process could be started (memory, process limit)
                    self.store.finish_failed(job_id, f"no worker process could be started ({exc}).",
                                             detail="Close other programs or jobs and submit it again.")
                    return
                self.store.set_worker(job_id, worker.pid, attempt)
                task = Task(str(self.store.path), job_id, request, fn, self.cancel_poll_interval,
                            self.progress_interval, self.heartbeat_interval, self.cores_for(job_id))
                outcome = worker.run(task, poll=self.heartbeat_interval, abandon=lambda: self._abandoned(job_id),
                                     started=handed_over)
                with self._lock:
                    self._in_process.discard(job_id)
                if isinstance(outcome, Abandoned):
                    self._pool.discard(worker)
                    return
                if not isinstance(outcome, Death):
                    self._pool.release(worker)
                    self._record(job_id, outcome)
                    return
                self._pool.discard(worker)
                deaths.append(outcome)
                note = f"attempt {attempt}: its worker process {outcome.pid} was {outcome.cause}"
                if not self._retry(job_id, token, deaths, attempt, note):
                    return
                attempt += 1
        finally:
            with self._lock:
                self._in_process.discard(job_id)

    def _retry(self, job_id: str, token: JobToken, deaths: list[Death], attempt: int, note: str) -> bool:
        """After a worker's death: record it, and say whether to run the job again."""
        record = self.store.find(job_id)
        if record is None or record.is_terminal:
            return False
        if record.cancel_requested or token.requested():
            self.store.finish_cancelled(job_id)
            return False
        if attempt > self.retries:
            causes = "; ".join(f"attempt {i + 1}: {d.cause}" for i, d in enumerate(deaths))
            times = "once" if len(deaths) == 1 else "twice" if len(deaths) == 2 else f"{len(deaths)} times"
            self.store.finish_failed(
                job_id, f"the worker process running this job died {times} ({causes}). Fix: "
                f"{death_fix(deaths[-1].exitcode)}", field="worker", detail=note, note=note)
            return False
        again = "once" if self.retries == 1 else f"up to {self.retries} times"
        return self.store.note_retry(job_id, attempt + 1, f"{note}; retried {again} (solves are deterministic)")

    def _abandoned(self, job_id: str) -> str | None:
        """Why the runner should stop waiting for a worker: its job was finished elsewhere (lost, deleted)."""
        record = self.store.find(job_id)
        if record is None:
            return "the job was deleted"
        return f"the job was marked {record.status}" if record.is_terminal else None

    def _ensure_heartbeat(self) -> None:
        with self._lock:
            if self._heartbeat_thread is not None and self._heartbeat_thread.is_alive():
                return
            thread = threading.Thread(target=self._heartbeat_loop, name="planning-job-heartbeat", daemon=True)
            self._heartbeat_thread = thread
        thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            self._housekeeping()
        self._housekeeping()

    def _housekeeping(self) -> None:
        """Heartbeats of queued and thread-run jobs (workers beat their own); retry outcomes the store refused."""
        with self._lock:  # forget finished futures so the map does not grow forever
            for job_id in [j for j, f in self._futures.items() if f.done()]:
                self._futures.pop(job_id, None)
            beating = [j for j in self._futures if j not in self._in_process] + list(self._pending)
            unrecorded = dict(self._unrecorded)
        with contextlib.suppress(Exception):  # a busy or full store must not stop heartbeats for good
            self.store.heartbeat(beating)
        for job_id, error in unrecorded.items():
            with contextlib.suppress(Exception):
                self.store.finish_failed(job_id, error)
                with self._lock:
                    self._unrecorded.pop(job_id, None)


_DEFAULT_RUNNERS: dict[Path, JobRunner] = {}
_DEFAULT_LOCK = threading.Lock()


def default_runner(path: str | os.PathLike[str] | None = None, max_workers: int = 2, *, processes: bool = False,
                   warm_modules: tuple[str, ...] = ("planning.pipeline",), fill: bool = False) -> JobRunner:
    """One shared runner per store path in this process (e.g. for all Streamlit sessions).

    Parameters
    ----------
    path:
        Store path; ``None`` means :func:`planning.jobs.store.default_store_path`.
    max_workers, processes, warm_modules, fill:
        Used only when the runner for this path is created (see :class:`JobRunner`).

    Returns
    -------
    JobRunner
    """
    resolved = (Path(path).expanduser() if path is not None else default_store_path()).resolve()
    with _DEFAULT_LOCK:
        runner = _DEFAULT_RUNNERS.get(resolved)
        if runner is None or runner._stop.is_set():
            runner = JobRunner(JobStore(resolved), max_workers=max_workers, processes=processes,
                               warm_modules=warm_modules, fill=fill)
            _DEFAULT_RUNNERS[resolved] = runner
        return runner
