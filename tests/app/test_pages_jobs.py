"""Jobs page: lists this session's jobs and opens a finished plan on the Plan page."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import app, planned, texts


def test_jobs_page_empty() -> None:
    at = app("views/5_Jobs.py")
    assert not at.exception
    assert "No jobs yet." in texts(at)


def test_jobs_page_lists_and_opens_a_plan(planning_home: Path) -> None:
    at, job_id = planned(planning_home, page="views/5_Jobs.py")
    assert not at.exception
    table = at.dataframe[0].value
    assert job_id in set(table["id"]) and set(table["status"]) == {"done"}
    row = table.set_index("id").loc[job_id]
    # issue 12: scenario name, objective, cost and age, not only ids
    assert row["scenario"] == "tiny" and row["objective"] == "min cost" and row["what"] == "plan"
    # the bill per hour to the cent and per month to the dollar: 730 × half a cent apart at most
    assert row["cost $/h"] > 0 and abs(row["cost $/month"] - 730 * row["cost $/h"]) <= 730 * 0.005 + 0.5
    assert row["age"].endswith("ago")
    next(b for b in at.button if b.label == "Open on the Plan page").click()
    at.run()
    assert not at.exception
    assert "Cost breakdown" in [h.value for h in at.header]


def _crafted_jobs(home: Path) -> None:
    """A running job of this process that reports no progress, and a lost one (issue 28 §2)."""
    import os
    import time

    from planning.jobs import JobStore

    now = time.time()
    with JobStore(home / "jobs.sqlite") as store:
        store.create_or_reuse("stalled00000000", "solve", {"scenario": {"name": "slow one"}}, None)
        store.mark_running("stalled00000000", heartbeat_s=60.0, stall_s=30.0)
        store.set_worker("stalled00000000", os.getpid(), 2)
        store._execute("UPDATE jobs SET progressed = ?, message = 'ILP: solving' WHERE id = 'stalled00000000'",
                       (now - 100,))
        store.create_or_reuse("lost000000000000", "solve", {"scenario": {"name": "gone"}}, None)
        store.mark_running("lost000000000000")
        store.finish_lost("lost000000000000", "lost: the server stopped", "Submit the same request again.")


def test_jobs_page_shows_stalls_retries_and_lost_jobs(planning_home: Path) -> None:
    _crafted_jobs(planning_home)
    at = app("views/5_Jobs.py")
    at.toggle[0].set_value(False).run()  # everyone's jobs
    assert not at.exception
    table = at.dataframe[0].value.set_index("id")
    stalled = table.loc["stalled00000000"]
    assert stalled["status"] == "running" and stalled["attempt"] == 2
    assert stalled["attention"].startswith("no progress for 1") and "alive: heartbeat" in stalled["attention"]
    assert table.loc["lost000000000000", "status"] == "lost"
    assert "lost: the process running the job" in texts(at)
    live = [p.text for p in at.get("progress")]  # the live panel of running jobs
    assert any("no progress for" in str(t) and "attempt 2" in str(t) for t in live), live


def test_jobs_page_says_a_damaged_store_was_recovered(planning_home: Path) -> None:
    planning_home.mkdir(parents=True, exist_ok=True)
    (planning_home / "jobs.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x07" * 5000)
    at = app("views/5_Jobs.py")
    assert not at.exception
    warning = " ".join(str(w.value) for w in at.warning)
    assert "was damaged" in warning and "0 jobs could be read" in warning and ".corrupt-" in warning
