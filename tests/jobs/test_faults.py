"""Fault suite of issue 28: a killed worker, a killed server, a full disk, a read-only store, 8 solves at once.

Nothing here is timed: every wait polls the store for a state, with timeouts generous enough for a loaded 2-core
machine. Real solves use the small coral-core preset, held mid-solve (``_children.held_solve_job``) so a fault
lands inside the solve however fast or slow the machine is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from planning.jobs import JobRecord, JobRunner, JobStore
from planning.jobs.runner import Cadence
from planning.jobs.store import INTERRUPTED_MESSAGE, pid_alive
from planning.jobs.workers import SERVER_GONE_MESSAGE
from tests.jobs._children import held_solve_job, pid_job, self_killing_job

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def poll(probe: Callable[[], T | None], what: str, timeout: float = 180.0) -> T:
    """Call ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def coral() -> tuple[dict[str, Any], float]:
    """coral-core's scenario dict and its plan cost solved here, in this process, alone."""
    from planning import api

    scenario = api.load_preset_scenario("coral-core")
    return scenario.to_dict(), api.solve(scenario).cost_per_hour


def solve_request(scenario: dict[str, Any], release: Path, tag: str) -> dict[str, Any]:
    return {"scenario": scenario, "release": str(release), "tag": tag}


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[JobRunner]:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, processes=True,
                  cadence=Cadence(heartbeat_interval=0.5, progress_interval=0.05, cancel_poll_interval=0.05))
    yield r
    r.shutdown(wait=True, cancel=True)
    r.store.close()


def held(runner: JobRunner, job_id: str) -> JobRecord | None:
    record = runner.get(job_id)
    assert not record.is_terminal, (record.status, record.error)
    return record if record.message.startswith("held:") and record.worker_pid else None


def test_killing_one_worker_costs_only_its_job_which_is_retried_once(
        runner: JobRunner, tmp_path: Path, coral: tuple[dict[str, Any], float]) -> None:
    scenario, alone = coral
    release = tmp_path / "release"
    a = runner.submit("solve", solve_request(scenario, release, "a"), held_solve_job)
    b = runner.submit("solve", solve_request(scenario, release, "b"), held_solve_job)
    held_a = poll(lambda: held(runner, a), "job a held mid-solve in its worker")
    held_b = poll(lambda: held(runner, b), "job b held mid-solve in its worker")
    assert held_a.worker_pid != held_b.worker_pid  # one worker each

    os.kill(held_a.worker_pid or 0, signal.SIGKILL)  # as the kernel's OOM killer would
    poll(lambda: runner.get(a).attempt == 2 or None, "job a's retry")
    release.touch()
    done_a, done_b = runner.wait(a, timeout=300), runner.wait(b, timeout=300)

    assert done_b.status == "done" and done_b.result is not None
    assert done_b.result["cost_per_hour"] == alone  # identical plan cost, as when solved alone
    assert done_b.attempt == 1 and done_b.worker_pid == held_b.worker_pid and not done_b.notes  # untouched
    assert done_a.status == "done" and done_a.result is not None, (done_a.status, done_a.error)
    assert done_a.result["cost_per_hour"] == alone
    assert done_a.attempt == 2 and done_a.worker_pid != held_a.worker_pid
    assert done_a.notes is not None and f"worker process {held_a.worker_pid}" in done_a.notes
    assert "killed by signal 9 (SIGKILL)" in done_a.notes and "retried once" in done_a.notes
    assert not pid_alive(held_a.worker_pid or 0)
    assert held_a.worker_pid not in runner.worker_pids()  # replaced, not reused


def test_a_second_death_fails_the_job_with_the_cause_and_the_fix(runner: JobRunner) -> None:
    record = runner.wait(runner.submit("die", {"n": 1}, self_killing_job), timeout=300)
    assert record.status == "failed" and record.attempt == 2
    assert record.error is not None and "died twice" in record.error
    assert "attempt 1: killed by signal 9 (SIGKILL), e.g. out of memory" in record.error
    assert "attempt 2: killed by signal 9 (SIGKILL)" in record.error
    assert "Fix: If memory ran out: plan a smaller scenario" in record.error
    assert record.error_field == "worker"
    assert record.notes is not None and len(record.notes.splitlines()) == 2  # both deaths kept
    after = runner.wait(runner.submit("pid", {"n": 2}, pid_job), timeout=300)
    assert after.status == "done"  # the runner and its pool stay usable


def _start_server(store: Path, request: dict[str, Any]) -> subprocess.Popen[str]:
    import json

    code = (f"from tests.jobs._children import serve_held_solve; "
            f"serve_held_solve({str(store)!r}, {json.dumps(request)!r})")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _held_in(store: Path) -> JobRecord | None:
    with JobStore(store, recover=False) as s:
        jobs = s.list_jobs()
    return jobs[0] if jobs and jobs[0].message.startswith("held:") and jobs[0].worker_pid else None


@pytest.mark.parametrize("worker_too", [False, True], ids=["server-killed", "server-and-worker-killed"])
def test_killing_the_server_mid_job_leaves_it_lost_and_a_restart_runs_it(
        tmp_path: Path, coral: tuple[dict[str, Any], float], worker_too: bool) -> None:
    scenario, alone = coral
    store = tmp_path / "jobs.sqlite"
    release = tmp_path / "release"
    request = solve_request(scenario, release, "served")
    server = _start_server(store, request)
    try:
        record = poll(lambda: _held_in(store), "the server's job held mid-solve")
        assert record.pid == server.pid and record.status == "running"
        worker = record.worker_pid or 0
        if worker_too:  # both die at once (e.g. the machine's OOM killer, or kill -9 of both)
            os.kill(server.pid, signal.SIGSTOP)  # frozen: the server cannot react to its worker's death
            os.kill(worker, signal.SIGKILL)  # dead: the worker cannot react to its server's death
        server.kill()
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    poll(lambda: not pid_alive(worker), "the orphaned worker to end")
    with JobStore(store) as reopened:  # a restart opens the store: the job is lost, not running
        lost = reopened.get(record.id)
    assert lost.status == "lost"
    assert lost.error == (INTERRUPTED_MESSAGE if worker_too else SERVER_GONE_MESSAGE)
    assert "Submit the same request again" in (lost.error_detail or "")

    release.touch()
    restarted = JobRunner(JobStore(store), max_workers=1, processes=True,
                          cadence=Cadence(heartbeat_interval=0.5))
    try:
        again = restarted.submit("solve", request, held_solve_job)
        assert again != record.id  # a lost job is never joined
        finished = restarted.wait(again, timeout=300)
    finally:
        restarted.shutdown(wait=True)
    assert finished.status == "done" and finished.result is not None
    assert finished.result["cost_per_hour"] == alone


def test_eight_concurrent_solves_give_identical_costs(tmp_path: Path, coral: tuple[dict[str, Any], float]) -> None:
    from ui.jobs import solve_job

    scenario, alone = coral
    runner = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=4, processes=True,
                       cadence=Cadence(heartbeat_interval=0.5, progress_interval=0.05))
    ids: list[str] = []
    start = threading.Barrier(8)
    lock = threading.Lock()

    def submit(n: int) -> None:
        start.wait()  # eight submits at the same instant, from eight threads (eight browser tabs)
        job = runner.submit("solve", {"scenario": scenario, "copy": n}, solve_job)
        with lock:
            ids.append(job)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert len(set(ids)) == 8
        records = [runner.wait(job, timeout=600) for job in ids]
    finally:
        runner.shutdown(wait=True)
    assert [r.status for r in records] == ["done"] * 8, [(r.status, r.error) for r in records]
    assert {r.result["cost_per_hour"] for r in records if r.result} == {alone}
    assert len({r.worker_pid for r in records}) <= 4  # the pool's workers were reused, never more than max_workers
