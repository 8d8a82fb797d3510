"""Job store and runner: completion, dedupe, progress across store objects, cancel, failure, processes."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planning.errors import PlanningError
from planning.jobs import (
    Cancelled,
    JobRunner,
    JobStore,
    JobToken,
    ProgressFn,
    default_runner,
    default_store_path,
    request_key,
)
from planning.jobs.runner import Cadence
from planning.jobs.store import INTERRUPTED_MESSAGE
from planning.spawning import spawn_context
from tests.jobs import _children

WAIT_S = 120  # how long a test waits for a job or an event before calling it hung: never a claim on speed


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.sqlite"


@pytest.fixture
def runner(store_path: Path) -> Iterator[JobRunner]:
    r = JobRunner(JobStore(store_path), max_workers=2,
                  cadence=Cadence(progress_interval=0.02, cancel_poll_interval=0.02))
    yield r
    r.shutdown(wait=True, cancel=True)
    r.store.close()


def add(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    progress(0.5, "adding")
    return {"sum": request["a"] + request["b"]}


def test_submit_runs_in_background_and_stores_result(runner: JobRunner, store_path: Path) -> None:
    job_id = runner.submit("add", {"a": 2, "b": 3}, add, owner="alice")
    record = runner.wait(job_id, timeout=WAIT_S)
    assert record.status == "done"
    assert record.result == {"sum": 5}
    assert record.progress == 1.0
    assert record.owner == "alice"
    assert record.started is not None and record.finished is not None and record.finished >= record.started
    # A fresh store object (as after a page reload) sees the same job and result.
    with JobStore(store_path) as other:
        again = other.get(job_id)
    assert again.result == {"sum": 5}
    assert again.request == {"a": 2, "b": 3}


def test_runs_in_a_worker_thread(runner: JobRunner) -> None:
    seen: dict[str, str] = {}

    def where(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        seen["thread"] = threading.current_thread().name
        return {}

    runner.wait(runner.submit("where", {}, where), timeout=WAIT_S)
    assert seen["thread"] != threading.current_thread().name
    assert seen["thread"].startswith("planning-job")


def test_identical_requests_reuse_the_job(runner: JobRunner) -> None:
    calls: list[int] = []

    def counted(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        calls.append(1)
        return {"ok": True}

    first = runner.submit("count", {"x": 1, "y": [1, 2]}, counted)
    runner.wait(first, timeout=WAIT_S)
    # Same request, keys in another order: same canonical JSON, same job, no second run.
    second = runner.submit("count", {"y": [1, 2], "x": 1}, counted)
    assert second == first
    assert len(calls) == 1
    # A different kind or request is a new job; reuse=False forces a rerun.
    other_kind = runner.submit("count2", {"x": 1, "y": [1, 2]}, counted)
    assert other_kind != first
    forced = runner.submit("count", {"x": 1, "y": [1, 2]}, counted, reuse=False)
    assert forced != first
    runner.wait(other_kind, timeout=WAIT_S)
    runner.wait(forced, timeout=WAIT_S)
    assert len(calls) == 3


def test_a_running_identical_job_is_joined(runner: JobRunner) -> None:
    gate = threading.Event()

    def blocked(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        gate.wait(WAIT_S)
        return {"done": True}

    first = runner.submit("slow", {"n": 1}, blocked)
    second = runner.submit("slow", {"n": 1}, blocked)
    assert second == first
    gate.set()
    assert runner.wait(first, timeout=WAIT_S).status == "done"


def test_request_key_is_canonical_and_rejects_non_json() -> None:
    assert request_key("k", {"a": 1, "b": 2}) == request_key("k", {"b": 2, "a": 1})
    assert request_key("k", {"a": 1}) != request_key("k", {"a": 2})
    with pytest.raises(PlanningError, match="request"):
        request_key("k", {"a": float("nan")})
    with pytest.raises(PlanningError, match="request"):
        request_key("k", {"a": object()})


def test_progress_is_visible_from_a_second_store(runner: JobRunner, store_path: Path) -> None:
    reached = threading.Event()
    release = threading.Event()

    def staged(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        progress(0.4, "stage 2 of 5")
        reached.set()
        release.wait(WAIT_S)
        return {}

    job_id = runner.submit("staged", {}, staged)
    assert reached.wait(WAIT_S)
    with JobStore(store_path) as other:
        record = other.get(job_id)
        assert record.status == "running"
        assert record.progress == pytest.approx(0.4)
        assert record.message == "stage 2 of 5"
    release.set()
    runner.wait(job_id, timeout=WAIT_S)


def test_progress_writes_are_throttled(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an injected clock: of 1000 progress calls at one instant only the first is written; the next call after
    ``min_interval`` has passed is written; ``flush`` writes the last throttled value, and later calls none."""
    from planning.jobs import reporting

    now = [1000.0]
    monkeypatch.setattr(reporting, "time", SimpleNamespace(monotonic=lambda: now[0]))  # the writer's clock only
    store = JobStore(store_path)
    writes: list[tuple[float, str]] = []
    monkeypatch.setattr(store, "set_progress", lambda job_id, p, m: writes.append((p, m)))
    writer = reporting.ProgressWriter(store, "job", min_interval=60.0)  # its timer (real time) never fires here
    for i in range(1000):
        writer(i / 1000, f"step {i}")
    assert writes == [(0.0, "step 0")]
    now[0] += 60.0
    writer(0.5, "half")
    assert writes == [(0.0, "step 0"), (0.5, "half")]
    writer(0.6, "throttled")
    writer.flush()
    writer(0.9, "after the end")
    assert writes == [(0.0, "step 0"), (0.5, "half"), (0.6, "throttled")]
    store.close()


def test_cancel_stops_a_running_job(runner: JobRunner) -> None:
    """A cancel asked while the job runs ends it as cancelled, without a result. The job runs until its token is
    set (a loop over ``token.check()``), bounded only by ``WAIT_S`` so that a cancel that never arrives fails as
    "done" instead of hanging; it was 500 rounds of 10 ms, which a busy machine could outrun before the cancel."""
    started = threading.Event()

    def loop(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        started.set()
        hang = time.monotonic() + WAIT_S
        while time.monotonic() < hang:
            token.check()
            time.sleep(0.01)
        return {"finished": True}

    job_id = runner.submit("loop", {}, loop)
    assert started.wait(WAIT_S)
    assert runner.cancel(job_id) is True
    record = runner.wait(job_id, timeout=WAIT_S)
    assert record.status == "cancelled"
    assert record.result is None
    assert runner.cancel(job_id) is False  # nothing left to cancel
    # A cancelled job is not reused: the same request runs again.
    assert runner.submit("loop", {}, add_quick) != job_id


def test_cancel_is_accepted_when_the_worker_finishes_before_cancel_returns(runner: JobRunner,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker thread may record "cancelled" the moment its token is set (a busy machine switches threads
    there): the cancel was still accepted, never reported as "had already finished" (admin page, CI 2026-11-28)."""
    started = threading.Event()

    def loop(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        started.set()
        while not token.is_set():
            time.sleep(0.005)
        raise Cancelled()

    stop_here = runner._stop_here

    def stop_and_let_the_worker_finish(job_id: str) -> None:
        stop_here(job_id)
        deadline = time.monotonic() + WAIT_S
        while runner.store.get(job_id).status != "cancelled":  # the worker wins the race
            assert time.monotonic() < deadline, "the worker never recorded the cancel"
            time.sleep(0.005)

    monkeypatch.setattr(runner, "_stop_here", stop_and_let_the_worker_finish)
    job_id = runner.submit("race", {}, loop)
    assert started.wait(WAIT_S)
    assert runner.cancel(job_id) is True
    assert runner.wait(job_id, timeout=WAIT_S).status == "cancelled"


def add_quick(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    return {}


def test_cancel_from_another_store_reaches_the_worker(runner: JobRunner, store_path: Path) -> None:
    started = threading.Event()

    def loop(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        started.set()
        while not token.is_set():  # threading.Event-style check, as engine functions do
            time.sleep(0.005)
        raise Cancelled()

    job_id = runner.submit("remote-cancel", {}, loop)
    assert started.wait(WAIT_S)
    with JobStore(store_path) as other:  # e.g. a second browser tab served by another process
        assert other.request_cancel(job_id) is True
    assert runner.wait(job_id, timeout=WAIT_S).status == "cancelled"


def test_cancel_a_queued_job_never_runs_it(store_path: Path) -> None:
    runner = JobRunner(JobStore(store_path), max_workers=1)
    gate = threading.Event()
    ran: list[str] = []

    def blocker(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        gate.wait(WAIT_S)
        return {}

    def record_run(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        ran.append("ran")
        return {}

    first = runner.submit("block", {}, blocker)
    queued = runner.submit("queued", {}, record_run)
    assert runner.get(queued).status == "queued"
    assert runner.cancel(queued)
    assert runner.get(queued).status == "cancelled"
    gate.set()
    runner.wait(first, timeout=WAIT_S)
    runner.shutdown(wait=True)
    assert ran == []
    assert runner.get(queued).status == "cancelled"


def test_failing_jobs_keep_messages_and_leave_the_runner_usable(runner: JobRunner) -> None:
    def bad_input(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        raise PlanningError(
            "models[0].slo.ttft_ms", "50 ms is below the fastest prefill.", "Relax to 180 ms."
        )

    def crash(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        return {"x": 1 / request["zero"]}

    planning_failure = runner.wait(runner.submit("bad", {}, bad_input), timeout=WAIT_S)
    assert planning_failure.status == "failed"
    assert planning_failure.error == (
        "models[0].slo.ttft_ms: 50 ms is below the fastest prefill. Fix: Relax to 180 ms."
    )
    assert planning_failure.error_field == "models[0].slo.ttft_ms"

    crashed = runner.wait(runner.submit("crash", {"zero": 0}, crash), timeout=WAIT_S)
    assert crashed.status == "failed"
    assert crashed.error is not None and crashed.error.startswith("ZeroDivisionError:")
    assert crashed.error_detail is not None and "Traceback" in crashed.error_detail
    with pytest.raises(PlanningError, match="ZeroDivisionError"):
        runner.result(crashed.id)

    # Failed jobs are not reused, and the runner still works.
    assert runner.submit("crash", {"zero": 0}, crash) != crashed.id
    assert runner.result(runner.submit("add", {"a": 1, "b": 1}, add), timeout=WAIT_S) == {"sum": 2}


def test_non_dict_or_non_json_results_fail_clearly(runner: JobRunner) -> None:
    def returns_list(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> Any:
        return [1, 2]

    def returns_nan(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        return {"x": float("nan")}

    listed = runner.wait(runner.submit("list", {}, returns_list), timeout=WAIT_S)
    assert listed.status == "failed" and "not a dict" in (listed.error or "")
    nan = runner.wait(runner.submit("nan", {}, returns_nan), timeout=WAIT_S)
    assert nan.status == "failed" and "not plain JSON" in (nan.error or "")


def test_list_jobs_filters_by_owner_and_limits(runner: JobRunner) -> None:
    ids = [runner.submit("add", {"a": i, "b": 0}, add, owner="alice" if i % 2 else "bob") for i in range(6)]
    for job_id in ids:
        runner.wait(job_id, timeout=WAIT_S)
    alice = runner.list_jobs(owner="alice")
    assert {r.id for r in alice} == {ids[1], ids[3], ids[5]}
    assert all(r.result is None for r in alice)  # listings leave results out
    newest_two = runner.list_jobs(limit=2)
    assert [r.id for r in newest_two] == [ids[5], ids[4]]


def test_get_unknown_job_names_the_field(store_path: Path) -> None:
    with JobStore(store_path) as store, pytest.raises(PlanningError, match="job_id"):
        store.get("nope")


def test_default_store_path_honours_planning_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / "jobs.sqlite"
    monkeypatch.delenv("PLANNING_HOME")
    assert default_store_path() == Path.home() / ".cache" / "planning" / "jobs.sqlite"


def test_default_runner_is_one_per_path(tmp_path: Path) -> None:
    a = default_runner(tmp_path / "a.sqlite")
    assert default_runner(tmp_path / "a.sqlite") is a
    b = default_runner(tmp_path / "b.sqlite")
    assert b is not a
    for r in (a, b):
        r.shutdown()
    assert default_runner(tmp_path / "a.sqlite") is not a  # a shut-down runner is replaced
    default_runner(tmp_path / "a.sqlite").shutdown()


def test_store_uses_wal(store_path: Path) -> None:
    with JobStore(store_path) as store:
        mode = store._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_not_a_database_is_moved_aside(tmp_path: Path) -> None:
    bogus = tmp_path / "jobs.sqlite"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with JobStore(bogus) as store:  # issue 8: a corrupted store is moved aside and a fresh one starts
        assert store.moved_aside is not None and store.moved_aside.read_bytes() == b"this is not sqlite" * 100
        assert store.notice and "moved" in store.notice
        assert store.list_jobs() == []


# -- processes ---------------------------------------------------------------------------------------


def test_two_processes_write_concurrently_without_lock_errors(store_path: Path) -> None:
    JobStore(store_path).close()  # create the schema once, as the app does on start
    ctx = spawn_context()  # the engine's spawn: the child never re-runs the caller's __main__ (an AppTest script)
    errors = ctx.Queue()
    go = ctx.Barrier(2)
    writes = 200  # per process; each loop iteration is 4 writes, so 400 statements each
    procs = [
        ctx.Process(target=_children.hammer, args=(str(store_path), w, writes, errors, go)) for w in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)  # generous: spawn start-up is slow on a loaded 2-core machine; the test is about lock errors
        assert p.exitcode == 0
    assert [errors.get(timeout=WAIT_S) for _ in procs] == [0, 0]
    with JobStore(store_path) as store:
        done = store.list_jobs(kind="hammer", status="done", limit=10_000)
    assert len(done) == writes  # 2 processes × writes/2 jobs


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_restart_marks_dead_running_jobs_lost(store_path: Path) -> None:
    with JobStore(store_path) as store:
        dead, _ = store.create_or_reuse("dead", "solve", {"n": 1}, None)
        store.mark_running(dead)
        silent, _ = store.create_or_reuse("silent", "solve", {"n": 2}, None)
        store.mark_running(silent)
        alive, _ = store.create_or_reuse("alive", "solve", {"n": 3}, None)
        store.mark_running(alive)
        finished, _ = store.create_or_reuse("finished", "solve", {"n": 4}, None)
        store.mark_running(finished)
        store.finish_done(finished, {"ok": 1})
        # Simulate: 'dead' ran in a process that has exited; 'silent' on another host that stopped
        # sending heartbeats; 'alive' runs in this (live) process.
        store._execute("UPDATE jobs SET pid = ? WHERE id = 'dead'", (_dead_pid(),))
        store._execute(
            "UPDATE jobs SET host = 'elsewhere', heartbeat = ? WHERE id = 'silent'", (time.time() - 3600,)
        )
    with JobStore(store_path) as reopened:
        assert reopened.get("dead").status == "lost"  # issue 28: lost, not running (and not a failed solve)
        assert reopened.get("dead").error == INTERRUPTED_MESSAGE
        assert "submit the same request again" in (reopened.get("dead").error_detail or "").lower()
        assert reopened.get("silent").status == "lost"
        assert reopened.get("alive").status == "running"
        assert reopened.get("alive").pid == os.getpid()
        assert reopened.get("finished").status == "done"
        # A new identical request does not join the interrupted job.
        new_id, created = reopened.create_or_reuse("again", "solve", {"n": 1}, None)
        assert created and new_id == "again"


# -- CLI ---------------------------------------------------------------------------------------------


def test_cli_lists_shows_and_cancels(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import json

    from planning.cli import jobs as commands

    parser = argparse.ArgumentParser(prog="planning")
    commands.register(parser.add_subparsers(dest="command"))

    def run(*argv: str) -> tuple[int, str]:
        args = parser.parse_args(["jobs", "--store", str(store_path), *argv])
        code = args.func(args)
        return code, capsys.readouterr().out

    with JobStore(store_path) as store:
        done, _ = store.create_or_reuse("donejob", "solve", {"n": 1}, "alice")
        store.mark_running(done)
        store.finish_done(done, {"cost": 12.5})
        store.create_or_reuse("queuedjob", "solve", {"n": 2}, "bob")
    code, out = run("list", "--json")
    assert code == 0 and {j["id"] for j in json.loads(out)} == {"donejob", "queuedjob"}
    code, out = run("show", "donejob", "--json")
    assert code == 0 and json.loads(out)["result"] == {"cost": 12.5}
    code, out = run("cancel", "queuedjob")
    assert code == 0 and "cancel requested" in out
    code, out = run("cancel", "donejob")
    assert code == 1 and "not active" in out
    code, out = run("list", "--owner", "bob")
    assert "cancelled" in out and "donejob" not in out


def test_job_in_another_process_shows_progress_and_obeys_cancel(store_path: Path) -> None:
    """A job run by another process's runner shows its progress here (running, progress > 0, its message, its
    pid) and obeys a cancel sent from here: it ends cancelled below 100 % and the child exits cleanly. The job
    runs until cancelled (``looping_job``), and every wait is a bound on a hang, never on speed."""
    ctx = spawn_context()  # the engine's spawn: the child never re-runs the caller's __main__ (an AppTest script)
    job_ids = ctx.Queue()
    child = ctx.Process(target=_children.serve_one_job, args=(str(store_path), job_ids))
    child.start()
    job_id = job_ids.get(timeout=WAIT_S)  # spawn start-up is slow on a loaded machine: a bound on a hang
    with JobStore(store_path) as tab2:
        deadline = time.monotonic() + WAIT_S
        while tab2.get(job_id).progress == 0:
            assert time.monotonic() < deadline, "the child's job never reported progress"
            time.sleep(0.02)
        seen = tab2.get(job_id)
        assert seen.status == "running" and seen.progress > 0 and seen.message.startswith("step")
        assert seen.pid == child.pid
        assert tab2.request_cancel(job_id)
        child.join(WAIT_S)
        assert child.exitcode == 0
        final = tab2.get(job_id)
    assert final.status == "cancelled"
    assert final.progress < 1.0
