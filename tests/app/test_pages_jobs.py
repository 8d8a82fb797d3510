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
    assert row["cost $/h"] > 0 and abs(row["cost $/month"] - 730 * row["cost $/h"]) <= 1
    assert row["age"].endswith("ago")
    next(b for b in at.button if b.label == "Open on the Plan page").click()
    at.run()
    assert not at.exception
    assert "Cost breakdown" in [h.value for h in at.header]
