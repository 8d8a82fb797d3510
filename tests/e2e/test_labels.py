"""Real browser, issue 38: the KPI labels and values of a plan read whole at 1280 and 1920 px (st.metric cuts
what does not fit with an ellipsis: "Savings vs best ho…", "optimal…", the simulation's "×1.04 dem…")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_browser import PLAN_TIMEOUT_MS, RENDER_TIMEOUT_MS, _plan_preset, _settled, browser, server

__all__ = ["browser", "server"]  # module-scoped fixtures shared with test_browser.py

pytestmark = pytest.mark.e2e

# every text box inside a metric that is narrower than its text: Streamlit's markdown container cuts it with "…"
CUT = """() => Array.from(document.querySelectorAll('[data-testid="stMetric"] [data-testid="stMarkdownContainer"]'))
  .filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.trim())"""


@pytest.mark.parametrize("width", [1280, 1920])
def test_home_kpis_are_not_cut(server: str, browser: Any, width: int) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": 1000})
    _plan_preset(page, server, "coral-core")
    # the KPIs of one run reach the browser one after the other: the last one, then a finished script
    page.get_by_test_id("stMetric").filter(has_text="Solver status").wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    _settled(page)
    labels = page.get_by_test_id("stMetricLabel").all_inner_texts()
    assert any("Savings vs best" in t for t in labels) and any("Solver status" in t for t in labels)
    assert page.evaluate(CUT) == []
    page.close()


def test_plan_page_and_simulation_kpis_are_not_cut(server: str, browser: Any) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 1000})
    _plan_preset(page, server, "coral-core")
    page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="Plan").first.click()
    _settled(page)
    page.get_by_role("button", name="Check with simulation").click()
    page.get_by_test_id("stMetric").filter(has_text="Headroom").wait_for(timeout=PLAN_TIMEOUT_MS)
    _settled(page)
    assert page.get_by_test_id("stMetric").filter(has_text="Goodput").count() == 1
    assert page.evaluate(CUT) == []
    page.close()
