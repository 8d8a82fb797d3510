"""Exact placements of many spaces at once, on a process pool beside this process (issue 41 §3).

A cold solve with baselines first places every single-GPU-type multiset of every group
(``planning.allocate.ondemand_sets.single_type_sets``): 528 blocks of placements on catalog-wide, 2.0 s of one
core, while the baselines' processes, just spawned, wait for those very sets. :func:`place_beside` sends the
blocks to that pool in batches and works through them here too, taking from the last batch back each one no
worker has begun (``Future.cancel`` succeeds only on a batch still queued), then each batch a worker has not
finished yet, so it never waits for a worker and is never slower than placing them here alone, however late the
workers come up (at a process's start they are still spawning: coral-core's few blocks are all placed here). A
placement is a pure function of its block and the space's tables, and :meth:`MultisetSpace.fill` stores every
space's results in the order :meth:`MultisetSpace.throughput` would, so the caches, and every plan built on them,
are the ones of placing here alone (a test asserts it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import BrokenExecutor, Executor, Future
from typing import Any

import numpy as np

from planning.context import CancelToken, check_cancel
from planning.templates.chunks import ChunkResult
from planning.templates.partitions import Block
from planning.templates.pool import solve_batch
from planning.templates.search import MultisetSpace, Pending

BATCH = 4
"""Placement blocks per pool task: small enough that this process and the workers share the last ones out."""


def place_beside(jobs: Sequence[tuple[MultisetSpace, np.ndarray]], pool: Executor | None,
                 cancel: CancelToken | None = None) -> None:
    """Place every multiset of each (space, padded rows) of ``jobs`` not yet placed: on ``pool`` and here
    (module docstring); with ``pool`` None, here alone. A batch whose worker fails (a broken pool) is placed here.

    Raises
    ------
    Cancelled
        When ``cancel`` is set; then nothing of the unfinished spaces is stored.
    """
    pending = [(sp, sp.pending(P)) for sp, P in jobs]
    batches = [(j, a) for j, (_sp, pend) in enumerate(pending) for a in range(0, len(pend.tasks), BATCH)]
    futures = _submitted(pool, [_args(*pending[j], a) for j, a in batches])
    if futures is None:
        for sp, pend in pending:
            sp.place(pend, cancel)
        return
    results: list[list[ChunkResult | None]] = [[None] * len(pend.tasks) for _sp, pend in pending]
    here = [0.0] * len(pending)
    try:
        for (j, a), fut in zip(reversed(batches), reversed(futures), strict=True):
            if fut.cancel():  # still queued: no worker has begun it
                check_cancel(cancel, "placing templates")
                here[j] += _place_here(pending[j], a, results[j])
        for (j, a), fut in zip(batches, futures, strict=True):
            if not fut.cancelled():
                check_cancel(cancel, "placing templates")
                here[j] += _collect(fut, pending[j], a, results[j])
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    for (sp, pend), got, seconds in zip(pending, results, here, strict=True):
        if pend.tasks:
            sp.fill(pend, [r for r in got if r is not None], seconds)


def _submitted(pool: Executor | None, args: list[Any]) -> list[Future[list[ChunkResult]]] | None:
    """Every batch sent to ``pool``, or None (place here alone) without a pool or when it takes no more work (a
    broken or shut-down pool: the caller's own solve still plans)."""
    if pool is None:
        return None
    futures: list[Future[list[ChunkResult]]] = []
    try:
        for arg in args:
            futures.append(pool.submit(solve_batch, arg))
    except (BrokenExecutor, RuntimeError):
        for fut in futures:
            fut.cancel()
        return None
    return futures


def _args(sp: MultisetSpace, pend: Pending, a: int) -> tuple[np.ndarray, int, bool, list[tuple[Block, np.ndarray]]]:
    return sp.tables, sp.layers, sp.monotone, pend.tasks[a : a + BATCH]


def _place_here(job: tuple[MultisetSpace, Pending], a: int, out: list[ChunkResult | None]) -> float:
    """Place batch ``a`` of ``job`` in this process into ``out``; its seconds."""
    t0 = time.perf_counter()
    for i, res in enumerate(solve_batch(_args(*job, a))):
        out[a + i] = res
    return time.perf_counter() - t0


def _collect(fut: Future[list[ChunkResult]], job: tuple[MultisetSpace, Pending], a: int,
             out: list[ChunkResult | None]) -> float:
    """A worker's batch ``a`` into ``out`` if it is done; else it is placed here at once, never waited for (a
    batch handed to a worker that is still starting up cannot be taken back, and a small list would otherwise
    wait for the spawn); the seconds spent here."""
    if fut.done() and fut.exception() is None:
        for i, res in enumerate(fut.result()):
            out[a + i] = res
        return 0.0
    fut.cancel()
    return _place_here(job, a, out)  # also when its worker failed (a broken pool): the placement is a pure function
