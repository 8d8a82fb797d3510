"""A cancel during a real library build, through the job runner, is recorded as ``cancelled`` (not failed)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

import planning.api as api
import planning.context as context
from planning.jobs import Cancelled, JobRunner, JobStore, JobToken, ProgressFn
from planning.jobs.runner import Cadence
from planning.scenario import Scenario
from ui.jobs import library_job, solve_job, solve_request

TINY: dict[str, Any] = {
    "name": "tiny-cancel",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL4", "1xL40S", "1xA10G"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1500, "decode_ms": 80},
                "demand": {"rate_rps": 2, "input_len": 1024, "output_len": 128}}],
    "options": {"nmax": 3, "rho": 12, "K": 0.1, "time_limit_s": 30, "workers": 1, "templates": "library"},
}


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An engine context whose template cache is empty, so the library is really built (not loaded)."""
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(context, "_CTX", None)
    ctx = dataclasses.replace(api.engine_context(), cache_dir=tmp_path / "templates")
    monkeypatch.setattr(context, "_CTX", ctx)
    return tmp_path / "templates"


WAIT_S = 120  # how long a test waits for a job or an event before calling it hung: never a claim on speed


def _cancel_inside_library_build(job: Any, messages: list[str]) -> Any:
    """``job`` whose progress callback cancels the job's token at the library's first per-template report."""

    def wrapped(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        def watch(fraction: float, message: str) -> None:
            messages.append(message)
            progress(fraction, message)
            if message.startswith("library build:") and "templates)" in message:
                token.cancel()  # what JobRunner.cancel does locally (the Jobs page's Cancel button)

        result: dict[str, Any] = job(request, watch, token)
        return result

    return wrapped


@pytest.mark.parametrize("job", [library_job, solve_job], ids=["library-job", "solve-job"])
def test_cancel_during_real_library_build_is_recorded_cancelled(job: Any, fresh_cache: Path, tmp_path: Path) -> None:
    runner = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1,
                       cadence=Cadence(progress_interval=0.0))
    messages: list[str] = []
    try:
        job_id = runner.submit("library", solve_request(Scenario.from_dict(TINY)),
                               _cancel_inside_library_build(job, messages))
        record = runner.wait(job_id, timeout=120)
    finally:
        runner.shutdown()
    assert record.status == "cancelled", (record.status, record.error)
    assert record.error is None or "cancel" in record.error.lower()
    assert any(m.startswith("library build:") and "templates)" in m for m in messages)
    assert not any(m.startswith("ILP") for m in messages)  # it stopped inside the build
    assert not list(fresh_cache.glob("*.parquet"))  # a cancelled build leaves no library behind


def test_progress_names_each_step_of_a_solve(fresh_cache: Path) -> None:
    messages: list[str] = []
    result = api.solve(Scenario.from_dict(TINY), progress=lambda f, m: messages.append(m))
    assert result.status == "optimal"
    steps = [m.split(":")[0] for m in messages]
    for step in ("library build", "ILP", "baselines", "diagnostics"):
        assert step in steps, (step, sorted(set(steps)))
    assert steps.index("library build") < steps.index("ILP") < steps.index("baselines") < steps.index("diagnostics")


def test_a_time_limit_is_recorded_as_failed_not_cancelled(tmp_path: Path) -> None:
    runner = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1)

    def slow(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        raise Cancelled("time limit", "library build")

    try:
        record = runner.wait(runner.submit("slow", {}, slow), timeout=WAIT_S)
    finally:
        runner.shutdown()
    assert record.status == "failed"
    assert record.error_field == "time_limit" and "time limit" in (record.error or "")


def test_a_throttled_step_message_still_reaches_the_store(tmp_path: Path) -> None:
    """The ILP step's message, reported right after the library's, is written once the interval has passed
    (before, the store showed the library message through the whole ILP)."""
    import threading

    runner = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=1,
                       cadence=Cadence(progress_interval=0.2))
    reported, release = threading.Event(), threading.Event()

    def steps(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        progress(0.02, "library build: serving templates")
        progress(0.8, "ILP: 1,234 templates after the LP reduction")  # throttled: within 0.2 s of the first
        reported.set()
        release.wait(WAIT_S)  # the long ILP: no further progress calls
        return {}

    try:
        job_id = runner.submit("steps", {}, steps)
        assert reported.wait(WAIT_S)
        deadline = time.monotonic() + WAIT_S  # the timer writes 0.2 s after the first write; a hang ends the wait
        record = runner.get(job_id)
        while record.message.startswith("library") and time.monotonic() < deadline:
            time.sleep(0.05)
            record = runner.get(job_id)
        assert record.status == "running"
        assert record.message.startswith("ILP") and record.progress == pytest.approx(0.8)
        release.set()
        assert runner.wait(job_id, timeout=WAIT_S).status == "done"
    finally:
        release.set()
        runner.shutdown()


def test_progress_names_each_step_of_an_on_demand_solve(fresh_cache: Path) -> None:
    """The default engine (templates on demand) reports pricing, then baselines and diagnostics, and builds no
    library."""
    messages: list[str] = []
    scenario = Scenario.from_dict({**TINY, "options": {**TINY["options"], "templates": "on-demand"}})
    result = api.solve(scenario, progress=lambda f, m: messages.append(m))
    assert result.status == "optimal"
    steps = [m.split(":")[0] for m in messages]
    assert "library build" not in steps, sorted(set(steps))
    assert steps.index("pricing") < steps.index("baselines") < steps.index("diagnostics")
    assert not list(fresh_cache.glob("*.parquet"))
