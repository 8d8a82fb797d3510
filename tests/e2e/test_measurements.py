"""Real browser: a plan exported, "measured" 20 % slower than predicted on one instance, is flagged and re-planned
on the Measurements page (issue 40)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planning import api
from tests.e2e.test_browser import _settled, browser, server
from tests.measurements.test_close_loop import SCENARIO, _result_file

__all__ = ["browser", "server"]

pytestmark = pytest.mark.e2e
JOB_TIMEOUT_MS = 300_000


def test_measurements_page_flags_and_replans(server: str, browser: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    plan = api.solve(api.parse_scenario_text(json.dumps(SCENARIO)))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(api.result_json(plan), encoding="utf-8")
    slow = _result_file(plan, 0, 1.2, tmp_path)

    page = browser.new_page()
    page.goto(server)
    _settled(page)
    page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="Measurements").first.click()
    _settled(page)
    uploaders = page.get_by_test_id("stFileUploaderDropzoneInput")
    # the page's uploaders in order: benchmark files to import, then the plan and its results to check
    uploaders.nth(1).set_input_files(str(plan_path))
    uploaders.nth(2).set_input_files(str(slow))
    page.get_by_role("button", name="Check the plan").click()
    page.get_by_text("miss their prediction or SLOs").wait_for(timeout=JOB_TIMEOUT_MS)
    _settled(page)
    assert page.get_by_text("Instance(s) 0 miss").count() == 1
    assert page.get_by_text("re-planned with your measurements").count() == 1
    assert page.get_by_text("Plan diff").count() == 1
    assert page.get_by_test_id("stException").count() == 0
