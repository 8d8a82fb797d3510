"""Spawned helper processes that do not re-run the caller's script.

The engine starts processes with ``spawn`` (never ``fork``: it also runs inside a threaded server, where forking
can deadlock). A spawned child normally re-imports the parent's main module before it runs its task; for a
plain script without ``if __name__ == "__main__":`` that means running the script again, whose first parallel
call then fails in the child with Python's "bootstrapping phase" RuntimeError, and the caller gets a broken pool
and a screen of tracebacks. The engine's children only run ``planning`` functions on plain data, so they need
nothing from the main module: :func:`spawn_context` gives a spawn context whose processes skip that import (the
preparation data they receive carries no main module), and a script written as a notebook cell works.

Pool workers also exit when their parent dies (``spawn_context(die_with_parent=True)``): a driver killed by a
signal (``kill``, a crashed server) left its pool's workers running the tasks already queued to them, 40 minutes of
CPU in one case, on the cores the next run measured. Job workers do not take this option: the job store decides
what happens to a job whose owner died (``planning.jobs``).
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

_LOCAL = threading.local()  # set while this thread starts one of the engine's processes
_ORIGINAL = multiprocessing.spawn.get_preparation_data
_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


def _preparation_data(name: str) -> dict[str, Any]:
    """``multiprocessing.spawn.get_preparation_data`` without the main module for the engine's own children (other
    processes, started by other code in this interpreter, get the standard data)."""
    data: dict[str, Any] = _ORIGINAL(name)
    if getattr(_LOCAL, "starting", False):
        for key in _MAIN_KEYS:
            data.pop(key, None)
    return data


class EngineProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that does not import the parent's main module (module docstring)."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        if multiprocessing.spawn.get_preparation_data is not _preparation_data:
            multiprocessing.spawn.get_preparation_data = _preparation_data  # idempotent; delegates otherwise
        _LOCAL.starting = True
        try:
            return multiprocessing.context.SpawnProcess._Popen(process_obj)
        finally:
            _LOCAL.starting = False


class BoundProcess(EngineProcess):
    """An :class:`EngineProcess` that exits when its parent dies (module docstring)."""

    def run(self) -> None:
        die_with_parent(self._parent_pid)  # type: ignore[attr-defined]
        super().run()


def die_with_parent(parent_pid: int | None, every_s: float = 1.0) -> None:
    """In a child: a daemon thread that ends this process (exit status 1) within ``every_s`` of its parent's
    death (the parent id changes when the parent exits: the child is re-parented). Not the kernel's
    ``PR_SET_PDEATHSIG``: that fires when the parent *thread* that started the child ends, and a long-lived pool
    is often started from a short-lived thread (a Streamlit script run, a job runner)."""
    if parent_pid is None:
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="planning-parent-watch", daemon=True).start()


class EngineSpawnContext(multiprocessing.context.SpawnContext):
    """The ``spawn`` context with :class:`EngineProcess` as its ``Process``."""

    Process = EngineProcess


class BoundSpawnContext(multiprocessing.context.SpawnContext):
    """The ``spawn`` context with :class:`BoundProcess` as its ``Process``."""

    Process = BoundProcess


_CONTEXT = EngineSpawnContext()
_BOUND = BoundSpawnContext()


def spawn_context(die_with_parent: bool = False) -> multiprocessing.context.SpawnContext:
    """The context the engine's pools, job workers and child solves start processes with; ``die_with_parent``:
    its processes get SIGTERM when the process that started them dies (pools, child solves)."""
    return _BOUND if die_with_parent else _CONTEXT


_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
_SHARE = [1]  # the processes a job run in this (job worker) process may use for its own pool: set per job


def set_job_share(processes: int) -> None:
    """In a job worker: the processes the job it starts now may use, itself included (the runner's count of the
    cores no other job of it runs on; ``planning.jobs.workers.Task.cores``); 1 when the job ends."""
    _SHARE[0] = max(1, int(processes))


def job_share() -> int:
    """What :func:`set_job_share` set for the job running in this process (1 outside a job worker's job: a pool
    worker planning a sweep point or an epoch runs beside others and never gets a pool of its own)."""
    return _SHARE[0]


def shared_pool(workers: int) -> ProcessPoolExecutor:
    """One long-lived process pool per worker count (spawning and importing numpy costs ~1 s per pool).

    "spawn", not fork: the library is also built from worker threads of a running server (Streamlit), where
    forking a multi-threaded process can deadlock on locks held by other threads. The workers do not re-run the
    caller's script (``planning.spawning``), so a script without a ``__main__`` guard works too.
    """
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=spawn_context(die_with_parent=True))
            _POOLS[workers] = pool
            atexit.register(pool.shutdown, wait=False, cancel_futures=True)
        return pool


def discard_pool(pool: ProcessPoolExecutor | Any) -> None:
    """Forget ``pool`` if it is a shared one and shut it down: one of its workers died, which breaks a process pool
    for good; the next :func:`shared_pool` call starts a fresh one."""
    with _POOLS_LOCK:
        for key, cached in list(_POOLS.items()):
            if cached is pool:
                del _POOLS[key]
    pool.shutdown(wait=False, cancel_futures=True)
