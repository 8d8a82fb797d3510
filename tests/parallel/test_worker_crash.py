"""A crashed pool worker (issue 37): a task whose process dies (``os._exit``, not an exception) does not fail
``run_tasks`` for the others. Every task the broken pool lost runs again alone in a fresh process; a task that
only crashed once gives its answer, one that crashes again is reported as that task's failure after the others
finished, and the broken shared pool is replaced. The pools here start with ``planning.spawning.spawn_context``."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from planning import spawning
from planning.parallel import WorkerCrashed, run_tasks


def _task(item: tuple[int, str]) -> int:
    """``n * 10``; ``path`` not empty: the first task to find no file at ``path`` writes it and kills its own
    process (exit status 3); ``"always"``: the process dies every time."""
    n, path = item
    if path == "always":
        os._exit(3)
    if path and not os.path.exists(path):
        Path(path).write_text("crashed once", encoding="utf-8")
        os._exit(3)
    return n * 10


def _pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=2, mp_context=spawning.spawn_context(die_with_parent=True))


def test_a_task_that_crashed_once_is_run_again_and_every_answer_comes_back(tmp_path: Path) -> None:
    """Task 2 kills its worker the first time: run_tasks returns every task's answer in order (task 2's from its
    re-run) and reports each task to on_result exactly once."""
    marker = tmp_path / "crashed"
    items = [(n, str(marker) if n == 2 else "") for n in range(5)]
    seen: list[int] = []
    pool = _pool()
    try:
        out = run_tasks(_task, items, workers=2, pool=pool, on_result=lambda i, _r: seen.append(i))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert marker.exists()  # the crash happened
    assert out == [0, 10, 20, 30, 40]
    assert sorted(seen) == [0, 1, 2, 3, 4]


def test_a_task_that_crashes_again_is_its_own_failure_and_the_others_finish() -> None:
    """Task 1 kills its process every time: WorkerCrashed (a PlanningError naming ``workers`` and the fix) names
    task 1 alone, and carries every other task's answer."""
    items = [(0, ""), (1, "always"), (2, ""), (3, "")]
    pool = _pool()
    try:
        with pytest.raises(WorkerCrashed) as err:
            run_tasks(_task, items, workers=2, pool=pool, what="the probe")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert set(err.value.crashed) == {1}
    assert err.value.results[0] == 0 and err.value.results[2:] == [20, 30] and err.value.results[1] is None
    assert err.value.field == "workers" and "the probe" in str(err.value) and "Fix: " in str(err.value)


def test_the_broken_shared_pool_is_replaced(tmp_path: Path) -> None:
    """On the shared pool: the crash breaks it, run_tasks still answers, and the next ``shared_pool`` is a fresh
    pool that runs tasks."""
    workers = 3  # a worker count no other test's shared pool uses
    before = spawning.shared_pool(workers)
    marker = tmp_path / "crashed"
    try:
        out = run_tasks(_task, [(n, str(marker) if n == 0 else "") for n in range(3)], workers=workers)
        assert marker.exists() and out == [0, 10, 20]
        after = spawning.shared_pool(workers)
        assert after is not before
        assert run_tasks(_task, [(5, ""), (6, "")], workers=workers) == [50, 60]
    finally:
        spawning.discard_pool(spawning.shared_pool(workers))
