"""Real browser: the Learn page's two Mélange tabs show the paper's figures beside ours and, where they differ, the
computed reason (issue 38): Fig. 9's three sets of throughputs, Fig. 6's bar at the slider's SLO."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_browser import ARTIFACTS, RENDER_TIMEOUT_MS, _settled, browser, server

__all__ = ["browser", "server"]  # module-scoped fixtures shared with test_browser.py

pytestmark = pytest.mark.e2e


def _open_tab(page: Any, name: str) -> Any:
    """Click the Learn tab ``name``; its panel once the page has settled."""
    page.get_by_role("tab", name=name).click()
    _settled(page, timeout=120_000)
    assert page.get_by_test_id("stException").count() == 0, name
    return page.get_by_role("tabpanel", name=name)


def test_learn_melange_tabs_show_the_papers_figures_and_why(server: str, browser: Any) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 3200})  # a tab's tables and notes in one screenshot
    page.goto(server)
    _settled(page)
    page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="Learn").first.click()
    page.get_by_text("The paper").first.wait_for(timeout=180_000)
    _settled(page, timeout=180_000)
    ARTIFACTS.mkdir(exist_ok=True)

    size = _open_tab(page, "Request size (Mélange)")
    size.get_by_text("Fig. 9's mix (2 A100 + 1 A10G) on three sets of throughputs").wait_for(timeout=RENDER_TIMEOUT_MS)
    text = size.inner_text()
    for shown in ("2 A100 + 1 A10G", "more than 5× and less than 6×", "Fig. 9's own steps show 2 against 0.37",
                  "prints 0.04 req/s"):
        assert shown in text, shown
    size.screenshot(path=str(ARTIFACTS / "e2e_learn_melange_fig9.png"))

    slo = _open_tab(page, "SLOs (Mélange)")
    slo.get_by_text("Mélange measured 1.20× in favour of the A10G at this SLO").wait_for(timeout=RENDER_TIMEOUT_MS)
    text = slo.inner_text()
    for shown in ("Fig. 6's request on the paper's own measured profile", "The input that differs is the A10G's"):
        assert shown in text, shown
    slo.screenshot(path=str(ARTIFACTS / "e2e_learn_melange_fig6.png"))
    page.close()
