"""An impossible SLO in the browser (issue 37 §4): Home and Plan say "infeasible" with the bound and the fix, as the
CLI does, and show no cost."""

from __future__ import annotations

from pathlib import Path

from planning.scenario import Scenario, save_scenario
from tests.app.conftest import app, texts, wait_for_job

IMPOSSIBLE = {
    "name": "impossible-tpot",
    "regions": ["aws:us-east-2"],
    "models": [{"id": "llama-3-70b", "slo": {"prefill_ms": 2000, "decode_ms": 1},
                "demand": {"rate_rps": 2, "input_len": 1024, "output_len": 256}}],
    "options": {"time_limit_s": 60},
}


def test_home_and_plan_say_infeasible_with_the_bound_and_the_fix(planning_home: Path) -> None:
    """The job ends done with status infeasible; Home's KPIs say "no plan" and the page shows the bound sentence
    with its fix; the Plan page shows it too."""
    save_scenario(Scenario.from_dict(IMPOSSIBLE), planning_home / "scenarios" / "impossible-tpot.yaml")
    at = app()
    at.selectbox[0].set_value("saved:impossible-tpot")
    next(b for b in at.button if b.label == "Plan it").click()
    at.run()
    job_id = str(at.session_state["solve_job"])
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    metrics = {m.label: str(m.value) for m in at.metric}
    assert metrics["Cost per hour"] == "no plan"
    shown = texts(at)
    assert "infeasible: TPOT 1 ms <" in shown and "decode_ms to ≥" in shown and "Fix:" in shown
    at.switch_page("views/3_Plan.py")
    at.run()
    assert not at.exception
    assert "infeasible: TPOT 1 ms <" in texts(at)
