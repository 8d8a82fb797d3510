"""Jobs in worker processes (issue 11 §4): the workbench's solves do not share the server's GIL.

The outcome, progress and cancel contract is the thread runner's (tests/jobs/test_jobs.py): what changes is where
the function runs. A worker that dies is replaced and its job retried once (tests/jobs/test_faults.py for kills).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planning.jobs import JobRunner, JobStore
from planning.jobs.runner import Cadence
from tests.jobs._children import children_job, failing_job, looping_job, pid_job, share_job


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[JobRunner]:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1, processes=True, warm_modules=("planning.jobs",),
                  cadence=Cadence(progress_interval=0.02, cancel_poll_interval=0.02))
    yield r
    r.shutdown(wait=True, cancel=True)


def test_a_module_level_job_runs_in_another_process_and_a_closure_in_a_thread(runner: JobRunner) -> None:
    job = runner.submit("pid", {"n": 1}, pid_job)
    record = runner.wait(job, timeout=60)
    assert record.status == "done" and record.result is not None
    assert record.result["pid"] != os.getpid()
    assert record.message == "half way"  # written by the worker process through the store

    def closure(request: dict[str, Any], progress: Any, token: Any) -> dict[str, Any]:
        return {"pid": os.getpid()}

    local = runner.wait(runner.submit("pid", {"n": 2}, closure), timeout=60)
    assert local.result == {"pid": os.getpid()}


def test_cancel_reaches_the_worker_process_through_the_store(runner: JobRunner) -> None:
    """A cancel asked while the job runs in its worker process ends it as cancelled, without a result: had the
    flag not reached the worker, ``looping_job`` (which runs until cancelled) would have run to its hang bound and
    finished ("done")."""
    job = runner.submit("loop", {"n": 1}, looping_job)
    deadline = time.monotonic() + 120  # a bound on a hang, not on speed
    while runner.get(job).status != "running" or runner.get(job).progress <= 0:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.02)
    runner.cancel(job)
    record = runner.wait(job, timeout=120)
    assert record.status == "cancelled" and record.result is None


@pytest.mark.parametrize(("how", "field", "says"), [
    ("planning", "models[0].slo", "is impossible"),
    ("bug", None, "ZeroDivisionError: a bug"),
])
def test_errors_in_the_worker_are_recorded_as_in_a_thread(runner: JobRunner, how: str, field: str | None,
                                                          says: str) -> None:
    record = runner.wait(runner.submit("fail", {"how": how}, failing_job), timeout=60)
    assert record.status == "failed" and says in (record.error or "")
    if field:
        assert record.error_field == field
    else:
        assert "ZeroDivisionError" in (record.error_detail or "")  # the worker's traceback is kept


def test_a_worker_that_exits_on_every_attempt_fails_its_job_and_the_next_job_gets_a_new_one(
        runner: JobRunner) -> None:
    record = runner.wait(runner.submit("fail", {"how": "die"}, failing_job), timeout=120)
    assert record.status == "failed" and record.attempt == 2  # retried once, then failed with the cause
    assert "the worker process running this job died twice" in (record.error or "")
    assert "attempt 1: exited with code 7; attempt 2: exited with code 7" in (record.error or "")
    after = runner.wait(runner.submit("pid", {"n": 3}, pid_job), timeout=120)
    assert after.status == "done" and after.result is not None
    assert after.result["pid"] not in (None, os.getpid())


def test_a_solve_in_a_worker_process_equals_the_in_process_solve(tmp_path: Path) -> None:
    from planning import api
    from ui.jobs import solve_job, solve_request

    scenario = api.load_preset_scenario("melange-arena")
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1, processes=True)
    try:
        record = r.wait(r.submit("solve", solve_request(scenario), solve_job), timeout=300)
    finally:
        r.shutdown(wait=True)
    assert record.status == "done" and record.result is not None
    here = api.solve(scenario)
    assert record.result["cost_per_hour"] == pytest.approx(here.cost_per_hour, rel=1e-9)
    assert record.result["status"] == here.status


def test_cancelling_a_real_on_demand_solve_in_a_worker_process_is_recorded_cancelled(tmp_path: Path) -> None:
    """The Jobs page's Cancel on a default-engine solve (options.templates: on-demand) running in a worker process:
    the flag travels through the store to the worker's token, the on-demand engine raises Cancelled at its next
    check, and the job is ``cancelled`` — not ``failed``, and not finished."""
    from planning.scenario import Scenario
    from tests.jobs._children import on_demand_solve_held_in_pricing
    from tests.jobs.test_library_cancel import TINY
    from ui.jobs import solve_request

    scenario = Scenario.from_dict({**TINY, "options": {**TINY["options"], "templates": "on-demand",
                                                       "time_limit_s": 300}})
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1, processes=True,
                  cadence=Cadence(progress_interval=0.0, cancel_poll_interval=0.02))
    try:
        job = r.submit("solve", solve_request(scenario), on_demand_solve_held_in_pricing)
        deadline = time.monotonic() + 120
        while not r.get(job).message.startswith("pricing: column generation round"):
            assert r.get(job).status in ("queued", "running"), r.get(job)
            assert time.monotonic() < deadline, "the solve never reached the on-demand engine's pricing"
            time.sleep(0.02)
        r.cancel(job)
        record = r.wait(job, timeout=60)
    finally:
        r.shutdown(wait=True)
    assert record.status == "cancelled", (record.status, record.error, record.error_detail)
    assert record.error is None or "cancel" in record.error.lower()
    assert record.result is None
    # the last progress written is the first column-generation round's (~0.12): the engine stopped there, before
    # its group bounds (0.57 of the solve), fixing and the ILP
    assert record.progress < 0.5, record.progress


def test_a_job_alone_gets_the_free_cores_and_one_beside_another_gets_what_is_left(tmp_path: Path) -> None:
    """The runner gives a job starting in a worker the cores no other running job takes (``cores_for``): 4 of 4
    alone, 3 while another job runs, 1 for a background job (a slider's prefetch); the worker sees it as
    ``spawning.job_share`` for that job only."""
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, processes=True, warm_modules=("planning.jobs",),
                  cadence=Cadence(progress_interval=0.02, cancel_poll_interval=0.02))
    r.cores = 4
    try:
        alone = r.wait(r.submit("share", {"n": 1}, share_job, owner="a"), timeout=120)
        assert alone.result == {"share": 4}
        background = r.wait(r.submit("share", {"n": 2}, share_job, owner="a", background=True), timeout=120)
        assert background.result == {"share": 1}
        loop = r.submit("loop", {"n": 1}, looping_job, owner="b")
        deadline = time.monotonic() + 120  # a bound on a hang, not on speed
        while r.get(loop).status != "running":
            assert time.monotonic() < deadline, "the looping job never started"
            time.sleep(0.02)
        beside = r.wait(r.submit("share", {"n": 3}, share_job, owner="a"), timeout=120)
        assert beside.result == {"share": 3}
        r.cancel(loop)
        assert r.wait(loop, timeout=120).status == "cancelled"
    finally:
        r.shutdown(wait=True, cancel=True)


def test_a_job_with_two_cores_runs_its_baselines_on_a_pool_and_answers_as_one_process_does(tmp_path: Path) -> None:
    """With two cores to itself a job's baselines run on a pool of two processes in its worker (before, a job
    worker always ran them one after another), and answer exactly what the same baselines answer in turn here;
    with one core (another job beside it) no pool is made."""
    from planning.allocate.synthetic import Synthetic, random_problem
    from planning.baselines import run_all_baselines

    spec = Synthetic(groups=3, templates_per_group=8, regions=2, shapes=4, max_available=6, demand_scale=0.6)
    serial = [[b.name, b.cost_per_hour, b.feasible, b.note] for b in run_all_baselines(random_problem(3, spec))]
    for cores, workers, pools in ((2, 2, [2]), (1, 1, [])):
        r = JobRunner(JobStore(tmp_path / f"jobs{cores}.sqlite"), max_workers=1, processes=True,
                      warm_modules=("planning.jobs",))
        r.cores = cores
        try:
            got = r.wait(r.submit("share", {"baselines": True, "seed": 3}, share_job), timeout=300)
        finally:
            r.shutdown(wait=True, cancel=True)
        assert got.status == "done", got.error
        assert got.result is not None
        assert (got.result["share"], got.result["workers"], got.result["pools"]) == (cores, workers, pools)
        assert got.result["answers"] == serial


def test_taking_the_last_idle_worker_starts_a_warm_spare_for_the_next_job() -> None:
    """A job that takes the pool's last idle worker starts a spare, so a job that comes while it runs (a slider
    move beside a neighbour planned ahead) is handed a worker that is already up, not one it waits 2-3 s for."""
    from planning.jobs.workers import WorkerPool

    pool = WorkerPool(2, ("planning.jobs",))
    try:
        first = pool.acquire()  # the one started with the pool; it leaves none idle, so a spare starts beside it
        before = set(pool.pids())
        assert len(before) == 2 and first.pid in before
        second = pool.acquire()  # the spare, not a new process; the pool is full, so no third
        assert second.pid in before and second.pid != first.pid
        assert set(pool.pids()) == before
        pool.release(first)
        pool.release(second)
        again = pool.acquire()  # one of the two idle ones; the other stays idle, so no spare is started
        assert again.pid in before and set(pool.pids()) == before
        pool.release(again)
    finally:
        pool.close()


def test_a_pool_of_one_starts_no_spare() -> None:
    from planning.jobs.workers import WorkerPool

    pool = WorkerPool(1, ("planning.jobs",))
    try:
        worker = pool.acquire()
        assert pool.pids() == [worker.pid]
        pool.release(worker)
    finally:
        pool.close()


def test_a_filled_pool_warms_every_worker_and_its_first_job_finds_the_baselines_pool_started() -> None:
    """A server's pool (``fill``) starts all its workers, one after another as each is warm; the first one started
    also starts the baselines' pool a job alone on the machine uses, and a first job is given that worker, not a
    spare, so the spawn never runs beside a user's first plan (round 21: a first coral-core job 2.1 → 1.3 s)."""
    from planning.jobs.workers import WorkerPool

    pool = WorkerPool(2, ("planning.jobs",), fill=True)
    try:
        deadline = time.monotonic() + 120
        while not (len(pool.pids()) == 2 and all(w.ready.is_set() for w in pool._all)):
            assert time.monotonic() < deadline, "the filled pool did not warm two workers within 120 s"
            time.sleep(0.05)
        first_started = pool._idle[-1]  # spares go below: the worker started first is on top of the idle stack
        worker = pool.acquire()
        assert worker is first_started
        assert set(pool.pids()) == {w.pid for w in pool._all} and len(pool.pids()) == 2  # full: no third
        pool.release(worker)
    finally:
        pool.close()


def test_a_first_job_on_a_filled_runner_runs_where_the_baselines_pool_was_started(tmp_path: Path) -> None:
    """Through the runner: the first job finds its worker with the baselines' pool already started (one process
    per core on two to eight cores, through ``planning.baselines.beside.warm_first_worker``; the job itself
    starts none), and the next job alone runs on the same worker: the one that finished last, whose caches are
    warm."""
    from planning.baselines.beside import alone_pool_size

    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, processes=True,
                  warm_modules=("planning.jobs", "planning.baselines.beside"), fill=True)
    try:
        first = r.wait(r.submit("kids", {"i": 1}, children_job), timeout=120)
        again = r.wait(r.submit("kids", {"i": 2}, children_job), timeout=120)
    finally:
        r.shutdown(wait=True, cancel=True)
    assert first.status == again.status == "done", (first.error, again.error)
    assert first.result is not None and again.result is not None
    assert first.result["children"] == alone_pool_size()
    assert again.result["pid"] == first.result["pid"]
