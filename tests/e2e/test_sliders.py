"""Real browser, issue 41: a What-if slider moved on coral-core shows that position's plan (planned ahead when one
step away) and its diff."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.test_browser import (
    _SERVER_HOME,
    PLAN_TIMEOUT_MS,
    RENDER_TIMEOUT_MS,
    _plan_preset,
    _settled,
    browser,
    server,
)

__all__ = ["browser", "server"]  # module-scoped fixtures shared with test_browser.py

pytestmark = pytest.mark.e2e


def test_demand_slider_shows_its_plan_and_diff(server: str, browser: Any) -> None:
    """The position one step up is planned ahead while the base plan is on screen; moving there shows that
    position's plan, labelled with it; moving on through positions nobody planned ahead ends at the last one's."""
    page = browser.new_page()
    _plan_preset(page, server, "coral-core")
    page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="What-if").first.click()
    _settled(page)
    page.get_by_role("heading", name="Move a slider").wait_for(timeout=RENDER_TIMEOUT_MS)
    _wait_planned_ahead(rate_rps=12.5)  # coral-core's first model, 10 requests/s, at demand ×1.25
    thumb = page.get_by_test_id("stSlider").filter(has_text="Demand ×").get_by_role("slider")
    thumb.focus()
    start = time.monotonic()
    thumb.press("ArrowRight")
    page.get_by_text("Sliders: demand ×1.25 (all models).", exact=True).wait_for(timeout=PLAN_TIMEOUT_MS)
    print(f"\ncoral-core demand slider 1 → 1.25 (planned ahead): its plan on screen after "
          f"{time.monotonic() - start:.2f} s")
    _settled(page)
    metric = page.get_by_test_id("stMetric").filter(has_text="Plan at the sliders")
    assert "$" in metric.inner_text()
    assert page.locator(".js-plotly-plot").filter(has_text="What changed the cost").count() >= 1
    start = time.monotonic()
    for _ in range(3):  # 1.25 → 2.0 in steps of 0.25: each key press a new position
        thumb.press("ArrowRight")
    page.get_by_text("Sliders: demand ×2 (all models).", exact=True).wait_for(timeout=PLAN_TIMEOUT_MS)
    print(f"coral-core demand slider 1.25 → 2: its plan on screen after {time.monotonic() - start:.2f} s")
    _settled(page)
    assert "$" in page.get_by_test_id("stMetric").filter(has_text="Plan at the sliders").inner_text()
    assert page.get_by_test_id("stException").count() == 0
    page.close()
    _wait_until_every_job_ended()


def _wait_planned_ahead(rate_rps: float, bound_s: float = 900.0) -> None:
    """Until the server's job store holds a finished plan whose first model asks ``rate_rps`` (the position one
    step up on Demand, planned in the background: no key is pressed before it exists). A bound on a hang."""
    from pathlib import Path

    from planning.jobs import JobStore

    store = JobStore(Path(_SERVER_HOME["path"]) / "jobs.sqlite")
    deadline = time.monotonic() + bound_s

    def planned() -> bool:
        return any(j.kind == "solve" and j.status == "done"
                   and j.request["scenario"]["models"][0]["demand"]["rate_rps"] == rate_rps
                   for j in store.list_jobs(limit=50))

    while not planned() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert planned(), f"the position one step up (rate {rate_rps} requests/s) was never planned ahead"
    store.close()


def _wait_until_every_job_ended(bound_s: float = 600.0) -> None:
    """The positions passed over were cancelled; their workers outlive this module's server (the job store decides
    about orphaned jobs), so wait until each job has ended rather than leave them solving beside the next module's
    browser test (which then waited 300 s for a dropdown on a starved machine). A bound on a hang, not on speed."""
    from pathlib import Path

    from planning.jobs import JobStore

    store = JobStore(Path(_SERVER_HOME["path"]) / "jobs.sqlite")
    deadline = time.monotonic() + bound_s
    while any(not j.is_terminal for j in store.list_jobs(limit=50)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert all(j.is_terminal for j in store.list_jobs(limit=50)), "a slider job never ended"
