"""The library's process pool: one long-lived spawn pool per worker count; batches of chunks per task."""

from __future__ import annotations

import atexit
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from planning.spawning import spawn_context
from planning.templates.chunks import ChunkResult, solve_chunk_general, solve_chunk_monotone
from planning.templates.partitions import Block

_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


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


def solve_batch(args: tuple[np.ndarray, int, bool, list[tuple[Block, np.ndarray]]]) -> list[ChunkResult]:
    tab, L, monotone, items = args
    return [solve_task((pattern, ids, tab, L, monotone)) for pattern, ids in items]


def solve_task(args: tuple[Block, np.ndarray, np.ndarray, int, bool]) -> ChunkResult:
    pattern, ids, tables, layers, monotone = args
    fn = solve_chunk_monotone if monotone else solve_chunk_general
    return fn(pattern, ids, tables, layers)
