"""Placements beside this process (``planning.templates.placing``) fill the spaces' caches exactly as placing them
here does: the same entries in the same order, the same library rows, on a real spawn pool, on a pool whose
workers die, on a pool that never starts a batch, and nothing stored when a cancel stops it."""

from __future__ import annotations

from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Any

import numpy as np
import pytest

import planning.templates.placing as placing
from planning.context import CancelFlag, Cancelled
from planning.spawning import spawn_context
from planning.templates.placing import BATCH, place_beside
from planning.templates.search import MultisetSpace

from .test_search_rows import _space


def _jobs(seeds: list[int], corrected: bool) -> list[tuple[MultisetSpace, np.ndarray]]:
    """Spaces with every multiset asked for, one after a subset of them was placed already (so a batch list mixes
    spaces, patterns and rows already in the cache)."""
    jobs = []
    for seed in seeds:
        sp = _space(seed, corrected)
        P = sp.all_multisets()
        if seed % 2:
            sp.throughput(P[::3])
        jobs.append((sp, P))
    return jobs


def _state(jobs: list[tuple[MultisetSpace, np.ndarray]]) -> list[Any]:
    """What a plan reads of each space: its cache in insertion order (values and placements) and its rows."""
    out = []
    for sp, P in jobs:
        entries = [(c, v, p[0], p[1].tolist(), [np.asarray(r).tolist() for r in p[2]]) for c, (v, p) in sp.cache.items()]
        out.append((entries, sp.frame(P).to_dicts(), sp.stats.evaluated))
    return out


def _here(seeds: list[int], corrected: bool) -> list[Any]:
    jobs = _jobs(seeds, corrected)
    for sp, P in jobs:
        sp.throughput(P)
    return _state(jobs)


class _Counted(Executor):
    """A real spawn pool, its workers up before the placements start, that keeps the futures it hands out."""

    def __init__(self) -> None:
        self.pool = ProcessPoolExecutor(2, mp_context=spawn_context())
        list(self.pool.map(int, range(4)))  # both workers spawned and importing done before the test's batches
        self.futures: list[Future[Any]] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut = self.pool.submit(fn, *args, **kwargs)
        self.futures.append(fut)
        return fut


@pytest.fixture(scope="module")
def pool() -> Any:
    counted = _Counted()
    yield counted
    counted.pool.shutdown()


@pytest.mark.parametrize("corrected", [False, True])
def test_a_spawn_pool_places_what_this_process_places(pool: _Counted, corrected: bool) -> None:
    """A real spawn pool, whichever side places which batch (it depends on the machine's timing)."""
    seeds = [0, 1, 2, 3, 8, 9]
    jobs = _jobs(seeds, corrected)
    assert sum(len(sp.pending(P).tasks) for sp, P in jobs) > 2 * BATCH, "enough batches for both sides"
    pool.futures.clear()
    place_beside(jobs, pool)
    assert pool.futures, "the batches went to the pool"
    assert _state(jobs) == _here(seeds, corrected)


class _Eager(Executor):
    """A pool whose workers have placed every batch by the time this process looks (run at submit)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_running_or_notify_cancel()
        fut.set_result(fn(*args, **kwargs))
        return fut


def test_what_the_workers_placed_is_taken_not_placed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    here: list[int] = []
    real = placing._place_here

    def counted(job: Any, a: int, out: Any) -> float:
        here.append(a)
        return real(job, a, out)

    monkeypatch.setattr(placing, "_place_here", counted)
    jobs = _jobs([4, 5], corrected=True)
    place_beside(jobs, _Eager())
    assert here == []
    assert _state(jobs) == _here([4, 5], corrected=True)


class _Idle(Executor):
    """A pool whose batches are never begun: this process must place every one of them."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        return Future()


class _Dead(Executor):
    """A pool whose every worker died at once (a broken process pool): each batch fails."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_running_or_notify_cancel()
        fut.set_exception(RuntimeError("A process in the process pool was terminated abruptly"))
        return fut


class _Shut(Executor):
    """A pool that takes no more work (shut down, or broken by a worker's death before this call)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        raise RuntimeError("cannot schedule new futures after shutdown")


@pytest.mark.parametrize("pool_kind", [_Idle, _Dead, _Shut, type(None)])
def test_whatever_the_workers_do_the_caches_are_the_same(pool_kind: type) -> None:
    jobs = _jobs([4, 5], corrected=True)
    place_beside(jobs, None if pool_kind is type(None) else pool_kind())
    assert _state(jobs) == _here([4, 5], corrected=True)


def test_a_cancel_stores_nothing() -> None:
    jobs = _jobs([6, 7], corrected=False)
    before = [dict(sp.cache) for sp, _P in jobs]
    token = CancelFlag()
    token.cancel()
    with pytest.raises(Cancelled):
        place_beside(jobs, _Idle(), token)
    assert [dict(sp.cache) for sp, _P in jobs] == before
    assert all(sp.pending(P).tasks for sp, P in jobs)
