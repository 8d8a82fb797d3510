"""Stalls are visible (issue 28 §2): heartbeats apart from progress, "no progress for N s", "no heartbeat", lost.

Waits poll the store for states (no fixed sleeps standing in for "long enough").
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planning.cli import main
from planning.jobs import JobRunner, JobStore, JobToken, ProgressFn
from planning.jobs.runner import Cadence
from planning.jobs.store import LOST_MESSAGE, pid_alive
from planning.jobs.workers import death_cause
from tests.jobs._children import hung_job, pid_job, quiet_job
from tests.jobs.test_faults import poll

BEAT = 0.25


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[JobRunner]:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1, processes=True, warm_modules=("planning.jobs",),
                  cadence=Cadence(heartbeat_interval=BEAT, stall_after=0.5,
                                  progress_interval=0.02, cancel_poll_interval=0.02))
    yield r
    r.shutdown(wait=True, cancel=True)
    r.store.close()


def test_no_progress_is_flagged_while_the_worker_heartbeat_goes_on(
        runner: JobRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that reported progress once and then works quietly, its worker's heartbeat going on, is flagged "no
    progress for N s (alive: heartbeat …)" in the record, the CLI's list and its JSON, and the heartbeat goes on
    being written while progress is not. Each flag is read at one instant: the poll's ``now``, and the CLI's clock
    frozen there (a busy machine may delay one 0.25 s heartbeat past 0.5 s, and a reading at that moment says "no
    heartbeat", rightly; under load 19 the second reading of the same record did, 2026-11-29)."""
    import planning.jobs.record as record_module

    release = tmp_path / "release"
    job = runner.submit("quiet", {"release": str(release)}, quiet_job)

    def no_progress_flag() -> tuple[Any, float, str] | None:
        r, now = runner.get(job), time.time()
        flag = r.attention(now=now) or ""
        return (r, now, flag) if r.message == "thinking" and flag.startswith("no progress for") else None

    stalled, seen_at, flag = poll(no_progress_flag, "the no-progress flag after the job's one progress report")
    assert stalled.status == "running"
    assert flag.startswith("no progress for") and "alive: heartbeat" in flag
    progressed = stalled.progressed or 0.0
    # the worker's heartbeat thread keeps writing while the job reports nothing: the two are separate
    poll(lambda: (runner.get(job).heartbeat or 0.0) > progressed + 2 * BEAT, "heartbeats after the last progress")
    assert runner.get(job).progressed == progressed

    with monkeypatch.context() as frozen:  # the CLI reads the store at the instant the flag was seen: a later
        frozen.setattr(record_module, "time", SimpleNamespace(time=lambda: seen_at))  # heartbeat is as fresh
        assert main(["jobs", "--store", str(runner.store.path), "list"]) == 0
        listed = capsys.readouterr().out
        assert "[no progress for " in listed and "thinking" in listed  # the CLI shows it
        assert main(["jobs", "--store", str(runner.store.path), "list", "--json"]) == 0
        assert '"attention": "no progress for' in capsys.readouterr().out

    release.touch()
    done = runner.wait(job, timeout=120)
    assert done.status == "done" and done.attention() is None


def _no_beat(attention: str | None) -> bool:
    return (attention or "").startswith("no heartbeat for")


def test_a_stopped_worker_is_flagged_by_its_missing_heartbeat_and_recovers(runner: JobRunner, tmp_path: Path) -> None:
    release = tmp_path / "release"
    job = runner.submit("quiet", {"release": str(release), "n": 2}, quiet_job)
    record = poll(lambda: (r := runner.get(job)).worker_pid and r.message == "thinking" and r, "the job in its worker")
    worker = record.worker_pid or 0
    os.kill(worker, signal.SIGSTOP)  # hung: alive, but nothing in it runs
    try:
        flagged = poll(lambda: (r := runner.get(job)).attention() and _no_beat(r.attention()) and r,
                       "the no-heartbeat flag")
        assert flagged.status == "running"  # flagged, not yet lost: stale_after (120 s) has not passed
        assert (flagged.attention() or "").startswith("no heartbeat for")
        # the flag rises as soon as the silence passes 2 heartbeat intervals (a reader's arithmetic, not a timer)
        last = flagged.heartbeat or 0.0
        assert flagged.attention(now=last + 2 * BEAT + 0.01) is not None
        assert not _no_beat(flagged.attention(now=last + 2 * BEAT - 0.01))
    finally:
        os.kill(worker, signal.SIGCONT)
    poll(lambda: not _no_beat(runner.get(job).attention()), "the heartbeat to come back")
    release.touch()
    assert runner.wait(job, timeout=120).status == "done"


def test_a_hung_worker_is_marked_lost_after_stale_after_and_replaced(tmp_path: Path) -> None:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite", stale_after=2.0), max_workers=1, processes=True,
                  warm_modules=("planning.jobs",),
                  cadence=Cadence(heartbeat_interval=BEAT, progress_interval=0.02))
    try:
        job = r.submit("hung", {"n": 1}, hung_job)  # stuck in C holding the GIL: its heartbeat thread starves
        record = poll(lambda: (x := r.get(job)).worker_pid and x.message == "thinking" and x, "the job in its worker")
        worker = record.worker_pid or 0
        lost = poll(lambda: (x := r.get(job)).is_terminal and x, "the job to be marked lost")
        assert lost.status == "lost" and (lost.error or "").startswith(LOST_MESSAGE.split("{")[0])
        poll(lambda: not pid_alive(worker), "the runner to kill the hung worker")
        after = r.wait(r.submit("pid", {"n": 1}, pid_job), timeout=120)  # its slot was freed
        assert after.status == "done" and after.result is not None and after.result["pid"] != worker
    finally:
        r.shutdown(wait=True, cancel=True)


def test_jobs_run_in_threads_get_their_heartbeat_from_the_runner(tmp_path: Path) -> None:
    gate = threading.Event()

    def silent(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        gate.wait(120)
        return {}

    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1,
                  cadence=Cadence(heartbeat_interval=BEAT, stall_after=0.3))
    try:
        job = r.submit("silent", {}, silent)
        started = poll(lambda: (x := r.get(job)).status == "running" and x, "the job to start")
        poll(lambda: (r.get(job).heartbeat or 0.0) > (started.heartbeat or 0.0) + BEAT, "a runner heartbeat")
        assert r.get(job).heartbeat_s == BEAT and r.get(job).progressed == started.progressed
        poll(lambda: (r.get(job).attention() or "").startswith("no progress for"), "the no-progress flag")
        gate.set()
        assert r.wait(job, timeout=60).status == "done"
    finally:
        gate.set()
        r.shutdown(wait=True)


@pytest.mark.parametrize(("exitcode", "oom", "says"), [
    (-9, False, "killed by signal 9 (SIGKILL), e.g. out of memory (the kernel's OOM killer) or kill -9"),
    (-9, True, "killed by signal 9 (SIGKILL), the kernel's out-of-memory killer stopped it"),
    (-11, False, "killed by signal 11 (SIGSEGV), a crash in native code"),
    (7, False, "exited with code 7"),
])
def test_a_workers_death_is_told_in_words(exitcode: int, oom: bool, says: str) -> None:
    assert death_cause(exitcode, oom).startswith(says)
