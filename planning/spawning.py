"""Spawned helper processes that do not re-run the caller's script.

The engine starts processes with ``spawn`` (never ``fork``: it also runs inside a threaded server, where forking
can deadlock). A spawned child normally re-imports the parent's main module before it runs its task; for a
plain script without ``if __name__ == "__main__":`` that means running the script again, whose first parallel
call then fails in the child with Python's "bootstrapping phase" RuntimeError, and the caller gets a broken pool
and a screen of tracebacks. The engine's children only run ``planning`` functions on plain data, so they need
nothing from the main module: :func:`spawn_context` gives a spawn context whose processes skip that import (the
preparation data they receive carries no main module), and a script written as a notebook cell works.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import threading
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


class EngineSpawnContext(multiprocessing.context.SpawnContext):
    """The ``spawn`` context with :class:`EngineProcess` as its ``Process``."""

    Process = EngineProcess


_CONTEXT = EngineSpawnContext()


def spawn_context() -> EngineSpawnContext:
    """The context the engine's pools, job workers and child solves start processes with."""
    return _CONTEXT
