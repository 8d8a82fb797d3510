"""Real browser, issue 41 §5: a What-if slider moved on coral-core shows that position's plan and its diff."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.test_browser import PLAN_TIMEOUT_MS, _plan_preset, _settled, browser, server

__all__ = ["browser", "server"]  # module-scoped fixtures shared with test_browser.py

pytestmark = pytest.mark.e2e


def test_demand_slider_shows_its_plan_and_diff(server: str, browser: Any) -> None:
    page = browser.new_page()
    _plan_preset(page, server, "coral-core")
    page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="What-if").first.click()
    _settled(page)
    page.get_by_role("heading", name="Move a slider").wait_for(timeout=60_000)
    thumb = page.get_by_test_id("stSlider").filter(has_text="Demand ×").get_by_role("slider")
    thumb.focus()
    start = time.monotonic()
    for _ in range(4):  # 1.0 → 2.0 in steps of 0.25: each key press a new position, the previous one cancelled
        thumb.press("ArrowRight")
    page.get_by_text("Sliders: demand ×2 (all models).").wait_for(timeout=PLAN_TIMEOUT_MS)
    seconds = time.monotonic() - start
    _settled(page)
    print(f"\ncoral-core demand slider 1 → 2: its plan on screen after {seconds:.2f} s")
    metric = page.get_by_test_id("stMetric").filter(has_text="Plan at the sliders")
    assert "$" in metric.inner_text()
    assert page.locator(".js-plotly-plot").filter(has_text="What changed the cost").count() >= 1
    assert page.get_by_test_id("stException").count() == 0
    page.close()
