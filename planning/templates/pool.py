"""The library's pool tasks: batches of chunks per task, on the engine's long-lived spawn pool
(:func:`planning.spawning.shared_pool`, re-exported here)."""

from __future__ import annotations

import numpy as np

from planning.spawning import shared_pool
from planning.templates.chunks import ChunkResult, solve_chunk_general, solve_chunk_monotone
from planning.templates.partitions import Block

__all__ = ["shared_pool", "solve_batch", "solve_task"]


def solve_batch(args: tuple[np.ndarray, int, bool, list[tuple[Block, np.ndarray]]]) -> list[ChunkResult]:
    tab, L, monotone, items = args
    return [solve_task((pattern, ids, tab, L, monotone)) for pattern, ids in items]


def solve_task(args: tuple[Block, np.ndarray, np.ndarray, int, bool]) -> ChunkResult:
    pattern, ids, tables, layers, monotone = args
    fn = solve_chunk_monotone if monotone else solve_chunk_general
    return fn(pattern, ids, tables, layers)
