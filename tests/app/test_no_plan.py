"""A solve without a plan (issue 23): the KPIs say "no plan", the reason and the fix; no page shows $0 or 0 % as
if it were a result."""

from __future__ import annotations

import re
from pathlib import Path

from planning.scenario import Scenario, save_scenario
from tests.app.conftest import TINY, app, texts, wait_for_job

DOLLAR_ZERO = re.compile(r"\$0(\.0+)?(?![\d.,])")  # "$0", "$0.00" (not "$0.5" or "$05")


def _plan_no_plan(home: Path) -> tuple[object, str]:
    """Plan a saved scenario whose 1 ms time limit passes before any plan (status time_limit, no instances)."""
    data = {**TINY, "name": "too-quick", "options": {"time_limit_s": 0.001}}
    save_scenario(Scenario.from_dict(data), home / "scenarios" / "too-quick.yaml")
    at = app()
    at.selectbox[0].set_value("saved:too-quick")
    next(b for b in at.button if b.label == "Plan it").click()
    at.run()
    job_id = str(at.session_state["solve_job"])
    assert wait_for_job(home, job_id) == "done"
    at.run()
    return at, job_id


def _metrics(at: object) -> dict[str, str]:
    return {m.label: str(m.value) for m in at.metric}  # type: ignore[attr-defined]


def test_home_says_no_plan_with_the_reason_and_the_fix(planning_home: Path) -> None:
    at, _ = _plan_no_plan(planning_home)
    assert not at.exception  # type: ignore[attr-defined]
    metrics = _metrics(at)
    assert metrics["Cost per hour"] == "no plan" and metrics["Served fraction"] == "no plan"
    assert "Cost per month" not in metrics and not any("Savings" in k for k in metrics)
    shown = texts(at)  # type: ignore[arg-type]
    assert "No plan" in shown and "time limit" in shown and "Fix:" in shown
    assert not DOLLAR_ZERO.search(shown) and not any(DOLLAR_ZERO.search(v) for v in metrics.values())
    assert "0.0%" not in " ".join(metrics.values())


def test_plan_page_stops_at_no_plan(planning_home: Path) -> None:
    at, _ = _plan_no_plan(planning_home)
    at.switch_page("views/3_Plan.py")  # type: ignore[attr-defined]
    at.run()  # type: ignore[attr-defined]
    assert not at.exception  # type: ignore[attr-defined]
    assert _metrics(at)["Cost per hour"] == "no plan"
    assert [h.value for h in at.header] == []  # type: ignore[attr-defined]  # no breakdown, simulation or export
    shown = texts(at)  # type: ignore[arg-type]
    assert "Nothing to break down" in shown and not DOLLAR_ZERO.search(shown)
