"""Plan and What-if pages with finance inputs: costs by pricing kind, commitments, the bill chart and CSV, spot
risk; the What-if form varies reservation terms and interruption rates."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import planned, texts
from tests.finance.conftest import SMALL


def _planned_finance(home: Path) -> object:
    from planning.scenario import Scenario, save_scenario

    d = {**SMALL, "name": "fin", "spot": {"enabled": True, "max_share": 0.5}}
    save_scenario(Scenario.from_dict(d), home / "scenarios" / "fin.yaml")
    at, _ = planned(home, "saved:fin", page="views/3_Plan.py")
    return at


def test_plan_page_shows_the_finance_section(planning_home: Path) -> None:
    at = _planned_finance(planning_home)
    assert not at.exception  # type: ignore[attr-defined]
    headers = [h.value for h in at.header]  # type: ignore[attr-defined]
    assert headers[0] == "Finance: owned, reserved, on-demand and spot"
    labels = [m.label for m in at.metric]  # type: ignore[attr-defined]
    for label in ("Committed $/h", "Horizon total", "All on-demand", "All reserved"):
        assert label in labels
    horizon = next(m for m in at.metric if m.label == "Horizon total")  # type: ignore[attr-defined]
    assert str(horizon.value).startswith("$")
    subheaders = [h.value for h in at.subheader]  # type: ignore[attr-defined]
    assert {"Commitments", "The bill"} <= set(subheaders)
    assert "Commitment sizing: optimal" in texts(at)  # type: ignore[arg-type]


def test_what_if_offers_terms_and_interruptions(planning_home: Path) -> None:
    at = _planned_finance(planning_home)
    at.switch_page("views/4_What-if.py")  # type: ignore[attr-defined]
    at.run()  # type: ignore[attr-defined]
    kinds = at.selectbox[0].options  # type: ignore[attr-defined]
    assert "Reservation term (years)" in kinds and "Spot interruption rates × k" in kinds
