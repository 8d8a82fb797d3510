"""Job worker processes: a pool the runner manages itself, so one worker's death costs one job, not all of them.

Each worker is a long-lived *spawned* process with its own pipe to the runner. It imports the engine once, then
runs one job at a time: progress rows, a heartbeat thread and the cancel flag go through the job store, as in any
other process, and the outcome comes back over the pipe. The runner thread that dispatched the job waits on the
pipe *and* the process sentinel, so a worker that dies (killed for memory, a crash in native code) is seen at once,
reaped with everything it started (each worker leads its own process group), and replaced; the other workers and
their jobs are untouched. A worker whose runner dies marks its job ``lost`` and ends its process group itself, so a
killed server leaves no orphan solving for nobody.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_any
from pathlib import Path
from typing import Any

from planning.context import Cancelled, ProgressFn
from planning.errors import PlanningError
from planning.jobs.reporting import Heartbeat, JobToken, ProgressWriter
from planning.jobs.store import RESUBMIT, JobStore
from planning.spawning import set_job_share, spawn_context

JobFn = Callable[[dict[str, Any], ProgressFn, JobToken], dict[str, Any]]
Outcome = tuple[str, Any, str]  # ("done", result, "") | ("cancelled", reason, text) | ("error", field, text)
#                                 | ("crash", text, short traceback)
SERVER_GONE_MESSAGE = "lost: the process that ran this job (the workbench server or the CLI) stopped while it ran"
_TRACEBACK_LINES = 12
_SIGNAL_HINTS: dict[int, str] = {
    signal.SIGKILL: "e.g. out of memory (the kernel's OOM killer) or kill -9",
    signal.SIGSEGV: "a crash in native code (e.g. the solver library)",
    signal.SIGBUS: "a memory access error (e.g. /dev/shm full)",
    signal.SIGABRT: "aborted by native code",
    signal.SIGTERM: "asked to stop by another program",
    signal.SIGINT: "interrupted",
}
_OOM_EVENTS = Path("/sys/fs/cgroup/memory.events")


def short_traceback(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(text[-_TRACEBACK_LINES:])


def picklable(fn: JobFn) -> bool:
    """Module-level functions travel to a worker process by name; closures and lambdas run in a thread."""
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


# --- the worker process ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One job for a worker process (the function travels by its module and name)."""

    store_path: str
    job_id: str
    request: dict[str, Any]
    fn: JobFn
    poll_interval: float
    progress_interval: float
    heartbeat_interval: float
    cores: int = 1  # processes the job may use, itself included (its baselines' pool): the runner's free cores


_CHILD_STORES: dict[str, JobStore] = {}
_CURRENT: list[tuple[JobStore, str]] = []  # the job this worker runs now (read by the parent watch)


def warm_worker(modules: tuple[str, ...] = ("planning.pipeline",), first: bool = False) -> None:
    """Import the engine and load the catalog and perf model once, so the first job a worker takes does not pay
    ~2 s of imports (spawned workers start from a bare interpreter). The face passes the modules its jobs use
    (``ui.state``: ``planning.api`` and its solve modules); the engine itself never names the face. ``first``:
    also call each of those modules' ``warm_first_worker()``, where one defines it (the baselines' process pool
    a solve alone on the machine runs on, ``planning.baselines.beside``), so a first job does not start it while
    its allocation runs (on two cores that spawn took 0.5-0.8 s from a first coral-core plan, round 21)."""
    import importlib

    for name in modules:
        importlib.import_module(name)
    with contextlib.suppress(Exception):  # a broken catalog is reported by the job that needs it, not here
        from planning.context import engine_context

        engine_context()
    for name in modules if first else ():
        hook = getattr(sys.modules.get(name), "warm_first_worker", None)
        if callable(hook):
            with contextlib.suppress(Exception):  # a warm-up that fails leaves the work to the first job
                hook()


def run_in_child(task: Task) -> Outcome:
    """Run one job function in this (worker) process, with a heartbeat thread; the runner records the outcome."""
    store = _CHILD_STORES.get(task.store_path)
    if store is None:
        store = _CHILD_STORES[task.store_path] = JobStore(task.store_path, recover=False)
    token = JobToken(task.job_id, store, task.poll_interval)
    progress = ProgressWriter(store, task.job_id, task.progress_interval)
    heartbeat = Heartbeat(store, task.heartbeat_interval, lambda: [task.job_id])
    heartbeat.beat()
    heartbeat.start()
    _CURRENT.append((store, task.job_id))
    set_job_share(task.cores)
    try:
        result = task.fn(task.request, progress, token)
    except Cancelled as exc:
        progress.flush()
        return ("cancelled", exc.reason, str(exc))
    except PlanningError as exc:
        progress.flush()
        return ("error", exc.field, str(exc))
    except Exception as exc:
        progress.flush()
        return ("crash", f"{type(exc).__name__}: {exc}", short_traceback(exc))
    finally:
        _CURRENT.clear()
        set_job_share(1)
        heartbeat.stop()
    progress.flush()
    return ("done", result, "")


def _end_own_group() -> None:
    """Kill this worker and every process it started (template-library pools), or just exit."""
    with contextlib.suppress(OSError):
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def _watch_parent() -> None:
    """When the runner's process ends (killed server), mark the current job lost and end this worker's group."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    parent.join()
    for store, job_id in list(_CURRENT):
        with contextlib.suppress(Exception):
            store.finish_lost(job_id, SERVER_GONE_MESSAGE,
                              f"Its worker process {os.getpid()} saw the runner's process end and stopped. {RESUBMIT}")
    _end_own_group()


def worker_main(conn: Connection, warm_modules: tuple[str, ...], ready: Any = None, first: bool = False) -> None:
    """Entry point of a worker process: warm up (:func:`warm_worker`), set ``ready`` (an event of the runner's),
    then run the tasks the runner sends until it sends ``None``."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own group: the runner can reap what a dead worker started, Ctrl-C is the runner's
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, name="planning-worker-parent", daemon=True).start()
    warm_worker(warm_modules, first)
    if ready is not None:
        ready.set()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        except Exception as exc:  # the function could not be unpickled here (its module does not import)
            conn.send(("crash", f"the job could not be loaded in the worker process: {type(exc).__name__}: {exc}",
                       short_traceback(exc)))
            continue
        if task is None:
            return
        conn.send(("started", os.getpid(), ""))  # from here on this process writes the job's heartbeat
        try:
            outcome = run_in_child(task)
        except PlanningError as exc:  # the store could not be opened here (StoreError): the job's error, not a death
            outcome = ("error", exc.field, str(exc))
        except Exception as exc:
            outcome = ("crash", f"{type(exc).__name__}: {exc}", short_traceback(exc))
        try:
            conn.send(outcome)
        except Exception as exc:  # e.g. a result that does not pickle
            conn.send(("crash", f"the job's result could not be sent back: {type(exc).__name__}: {exc}", ""))


# --- the runner's side -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Death:
    """A worker process ended while running a job."""

    pid: int
    exitcode: int | None
    cause: str


@dataclass(frozen=True)
class Abandoned:
    """The runner stopped waiting: the job was finished elsewhere (marked lost by a reader, deleted)."""

    reason: str


def oom_kills() -> int | None:
    """The cgroup's count of out-of-memory kills (cgroup v2), or ``None`` where it cannot be read."""
    try:
        for line in _OOM_EVENTS.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def death_cause(exitcode: int | None, oom: bool = False) -> str:
    """What ended a worker, for people: ``"killed by signal 9 (SIGKILL), e.g. out of memory …"``."""
    if exitcode is None:
        return "ended without an exit status"
    if exitcode < 0:
        number = -exitcode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = "the kernel's out-of-memory killer stopped it" if oom else _SIGNAL_HINTS.get(number, "sent by "
                                                                                             "another program")
        return f"killed by signal {number} ({name}), {hint}"
    return f"exited with code {exitcode}" + (" after an out-of-memory kill" if oom else "")


def death_fix(exitcode: int | None) -> str:
    """What a user can do about a job whose worker died twice."""
    if exitcode is not None and -exitcode in (signal.SIGKILL, signal.SIGBUS):
        return ("If memory ran out: plan a smaller scenario (fewer models, regions or GPU shapes; options.templates: "
                "on-demand), run fewer jobs at once, or give the machine more memory; then submit it again.")
    if exitcode is not None and -exitcode in (signal.SIGTERM, signal.SIGINT):
        return "Something on this machine stopped the worker; submit the job again when it is left alone."
    return ("The worker crashed (native code, or the job called exit): run the same scenario with `planning solve` "
            "to see the error, and report it with the scenario file.")


class Worker:
    """One worker process and the runner's end of its pipe."""

    def __init__(self, ctx: Any, warm_modules: tuple[str, ...], first: bool = False) -> None:
        here, there = ctx.Pipe()
        self.ready = ctx.Event()  # set by the worker once warm (``first``: see :func:`warm_worker`)
        self.process = ctx.Process(target=worker_main, args=(there, warm_modules, self.ready, first),
                                   name="planning-job-worker")
        self.process.start()
        there.close()
        self.conn: Connection = here

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)

    def alive(self) -> bool:
        return self.process.exitcode is None and self.process.is_alive()

    def run(self, task: Task, poll: float, abandon: Callable[[], str | None],
            started: Callable[[], None] = lambda: None) -> Outcome | Death | Abandoned:
        """Send one task and wait for its outcome, the process's death, or ``abandon()`` to give a reason;
        ``started()`` is called when the worker takes the task up (its heartbeat thread runs from then on)."""
        oom_before = oom_kills()
        with contextlib.suppress(OSError, ValueError):  # a dead worker: its sentinel says so below
            self.conn.send(task)
        while True:
            ready = wait_any([self.conn, self.process.sentinel], timeout=poll)
            if self.conn in ready:
                try:
                    outcome: Outcome = self.conn.recv()
                except (EOFError, OSError):
                    ready = [self.process.sentinel]
                else:
                    if outcome[0] != "started":
                        return outcome
                    started()
                    continue
            if ready:
                self.reap()
                oom_after = oom_kills()
                oom = oom_before is not None and oom_after is not None and oom_after > oom_before
                return Death(self.pid, self.process.exitcode, death_cause(self.process.exitcode, oom))
            reason = abandon()
            if reason:
                self.reap()
                return Abandoned(reason)

    def reap(self) -> None:
        """Kill the worker's process group (what it started, e.g. a template pool) and collect the process."""
        for kill in (lambda: os.killpg(self.pid, signal.SIGKILL), self.process.kill):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                kill()
        self.process.join(timeout=10)
        with contextlib.suppress(OSError):
            self.conn.close()

    def stop(self) -> None:
        """Ask an idle worker to exit; kill it if it does not within a few seconds."""
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(timeout=5)
        if self.process.exitcode is None:
            self.reap()
        with contextlib.suppress(OSError):
            self.conn.close()


class PoolClosed(RuntimeError):
    """The pool was closed (the runner shut down)."""


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


class WorkerPool:
    """Up to ``size`` worker processes: idle ones are reused, a dead one is reaped and replaced by a fresh spare.

    Parameters
    ----------
    size:
        At most this many workers run jobs at once (the runner's ``max_workers``).
    warm_modules:
        Modules each worker imports when it starts.
    fill:
        ``False``: one worker starts now and a spare when a job leaves none idle (:meth:`acquire`). ``True`` (a
        server): all ``size`` start now, one after another as each is warm, so a user's first plan finds warm
        workers and no warm-up running beside it (on two cores a spare warming up beside a first coral-core plan
        cost it 0.2-0.3 s, round 21); a worker started when no other lives also runs the warm modules'
        ``warm_first_worker()`` (the baselines' pool, :func:`warm_worker`). That is the worker a first job takes
        (spares go below it in the idle stack); a job beside another gets one core and no pool
        (``JobRunner.cores_for``), so the others need none until they run a job alone, which then starts theirs.
    """

    def __init__(self, size: int, warm_modules: tuple[str, ...], fill: bool = False) -> None:
        self._ctx = spawn_context()  # workers do not re-run the caller's script
        self._size = size
        self._warm = warm_modules
        self._filled = fill
        self._idle: list[Worker] = []  # a stack: the worker that finished last is taken first (its caches)
        self._all: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        _POOLS.add(self)
        self.start_spare()  # start one worker now: its warm-up overlaps the user's first clicks
        if fill and size > 1:
            threading.Thread(target=self._fill, name="planning-worker-fill", daemon=True).start()

    def _start(self) -> Worker:
        with self._lock:
            alone = not self._all
        worker = Worker(self._ctx, self._warm, self._filled and alone)
        with self._lock:
            self._all.add(worker)
        return worker

    def _fill(self) -> None:
        """Start workers until the pool is full, each once the one before is warm (two warming at once on a small
        machine would each take twice as long)."""
        while True:
            with self._lock:
                if self._closed or len(self._all) >= self._size:
                    return
                waiting = [w for w in self._all if not w.ready.is_set()]
            if waiting:
                waiting[0].ready.wait(timeout=120)
                if not waiting[0].alive():
                    return  # a worker that dies warming up is left to acquire's replacement
                continue
            self.start_spare(always=True)

    def start_spare(self, always: bool = False) -> None:
        """Start one idle worker now, so its warm-up overlaps whatever comes next (no-op if one is idle unless
        ``always``, or if the pool is full; a spare that cannot be started is left to the next :meth:`acquire`).
        A spare goes to the bottom of the idle stack: a warm worker that just finished a job is taken before it."""
        with self._lock:  # checked and started under the lock: two deaths at once start one spare, not two
            if self._closed or (self._idle and not always) or len(self._all) >= self._size:
                return
            try:
                worker = Worker(self._ctx, self._warm, self._filled and not self._all)
            except OSError:
                return
            self._all.add(worker)
            self._idle.insert(0, worker)

    def _take_idle(self) -> Worker | None:
        """Under the lock: the idle worker a job takes — the top of the stack that is warm, else the top."""
        if not self._idle:
            return None
        worker = next((w for w in reversed(self._idle) if w.ready.is_set()), self._idle[-1])
        self._idle.remove(worker)
        return worker

    def acquire(self) -> Worker:
        """An idle live worker (a warm one first), or a new one; then, when that left no worker idle and the pool
        has room, a spare starts warming up, so the next job that comes while this one runs (a user's slider
        move beside a neighbour planned ahead) finds a warm worker instead of waiting 2-3 s for one to start
        (round 20, ``docs/benchmarks.md``).

        Raises
        ------
        PoolClosed
            After :meth:`close`.
        """
        while True:
            with self._lock:
                if self._closed:
                    raise PoolClosed("the job runner was shut down")
                worker = self._take_idle()
            if worker is None:
                worker = self._start()
            elif not worker.alive():
                self.discard(worker, replace=False)
                continue
            self.start_spare()
            return worker

    def release(self, worker: Worker) -> None:
        """Give back a worker that finished its job."""
        with self._lock:
            keep = not self._closed and worker in self._all
            if keep:
                self._idle.append(worker)
        if not keep:
            self._forget(worker)
            worker.stop()

    def discard(self, worker: Worker, replace: bool = True) -> None:
        """Reap a dead (or abandoned) worker and, unless closing, start a spare in its place."""
        worker.reap()
        self._forget(worker)
        if replace:
            self.start_spare()

    def _forget(self, worker: Worker) -> None:
        with self._lock:
            self._all.discard(worker)
            if worker in self._idle:
                self._idle.remove(worker)

    def pids(self) -> list[int]:
        """Process ids of the pool's workers (idle and busy)."""
        with self._lock:
            return [w.pid for w in self._all]

    def close(self) -> None:
        """Stop idle workers now; busy ones stop when their job ends (:meth:`release`)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            for worker in idle:
                self._all.discard(worker)
        for worker in idle:
            worker.stop()

    def kill_all(self) -> None:
        """Kill every worker (interpreter exit: none may outlive the runner)."""
        with self._lock:
            self._closed = True
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.reap()


@atexit.register
def _kill_pools_at_exit() -> None:
    for pool in list(_POOLS):
        pool.kill_all()
