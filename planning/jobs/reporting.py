"""What a running job reports through: its cancel token, a throttled progress writer and a heartbeat thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from planning.context import CancelFlag
from planning.jobs.dbfile import StoreError
from planning.jobs.partials import write_partial
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


class ProgressWriter:
    """Throttled progress writer: at most one database write per ``min_interval`` seconds.

    A throttled value is not lost: a timer writes the latest one ``min_interval`` after the last write, so
    a step's message ("ILP: ...") reaches the store even when no further progress call follows it. Progress is
    best effort: a store that refuses the write (locked by a stopped process, disk full) never fails the job.
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
        with contextlib.suppress(StoreError):
            self._store.set_progress(self._job_id, value, str(message))

    def plan(self, result: Any) -> None:
        """Keep ``result`` (an object with ``to_dict()``, e.g. a ``PlanResult``, or a plain dict) as the job's best
        answer so far (:mod:`planning.jobs.partials`): a solve that finds this method on its progress callback
        hands it each better plan before its proof (:func:`planning.context.plan_listener`). Best effort, and
        ignored once the job is ending."""
        if self._closed:
            return
        data = result.to_dict() if hasattr(result, "to_dict") else result
        with contextlib.suppress(Exception):  # a plan that does not serialise, a refusing store: never the job's end
            write_partial(self._store, self._job_id, data)

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
            with contextlib.suppress(StoreError):
                self._store.set_progress(self._job_id, *pending)


class Heartbeat:
    """A daemon thread refreshing the heartbeat of jobs every ``interval`` seconds, apart from their progress.

    It runs in the process that runs the jobs (a worker process, or the runner for jobs run in threads), so a
    reader sees the heartbeat stop when that process dies, hangs or is stopped, however the job's own steps go.

    Parameters
    ----------
    store:
        The store to write to.
    interval:
        Seconds between heartbeats.
    job_ids:
        Callable returning the ids to refresh at each beat.
    """

    def __init__(self, store: JobStore, interval: float, job_ids: Callable[[], list[str]]) -> None:
        self._store = store
        self._interval = interval
        self._job_ids = job_ids
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="planning-job-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def beat(self) -> None:
        """Write one heartbeat now (a full or busy store is tried again at the next beat)."""
        with contextlib.suppress(Exception):
            self._store.heartbeat(self._job_ids())

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
