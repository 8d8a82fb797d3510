"""AppTest fixtures: a private PLANNING_HOME per test, fresh Streamlit caches, helpers to wait for jobs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from planning.jobs import TERMINAL_STATUSES, JobStore

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120  # seconds an AppTest script run may take (first runs load the catalog)


@pytest.fixture(autouse=True)
def planning_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets its own job store and saved-scenario folder; caches never leak between tests."""
    home = tmp_path / "planning-home"
    monkeypatch.setenv("PLANNING_HOME", str(home))
    # jobs in threads: a worker-process pool per test's store would cost a spawn and warm-up each; the process
    # path is tested in tests/jobs/test_process_jobs.py and by the real browser (tests/e2e)
    monkeypatch.setenv("PLANNING_JOB_PROCESSES", "0")
    st.cache_data.clear()
    yield home
    st.cache_data.clear()


def app(page: str = "app.py") -> AppTest:
    """An AppTest of the app (entry point app.py, so page links resolve) showing ``page``, run once."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    if page != "app.py":
        at.switch_page(page)
        at.run()
    return at


def wait_for_job(home: Path, job_id: str, timeout: float = 300.0) -> str:
    """Block until a job is terminal (run_every timers do not fire in AppTest); return its status."""
    store = JobStore(home / "jobs.sqlite")
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            record = store.get(job_id)
            if record.status in TERMINAL_STATUSES:
                return record.status
            time.sleep(0.1)
    finally:
        store.close()
    raise AssertionError(f"job {job_id} still running after {timeout} s")


def texts(at: AppTest) -> str:
    """All markdown/caption/alert text of a run, for assertions on messages."""
    parts: list[str] = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "subheader", "title"):
        parts += [str(e.value) for e in getattr(at, kind)]
    return "\n".join(parts)


TINY = {
    "name": "tiny",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL40S", "2xL40S", "1xL4"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                "demand": {"rate_rps": 2, "input_len": 500, "output_len": 100}}],
}


def save_tiny(home: Path) -> None:
    """Put a one-model, one-region scenario among the user's saved scenarios (fast to plan)."""
    from planning.scenario import Scenario, save_scenario

    save_scenario(Scenario.from_dict(TINY), home / "scenarios" / "tiny.yaml")


def planned(home: Path, choice: str = "saved:tiny", page: str | None = None) -> tuple[AppTest, str]:
    """Plan ``choice`` from Home, wait for the job, rerun; optionally switch to ``page`` afterwards."""
    if choice == "saved:tiny":
        save_tiny(home)
    at = app()
    at.selectbox[0].set_value(choice)
    next(b for b in at.button if b.label == "Plan it").click()
    at.run()
    job_id = str(at.session_state["solve_job"])
    assert wait_for_job(home, job_id) == "done"
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at, job_id
