"""Issue 37 §1: every plan carries its checks (cost ≤ each comparable baseline, SLO per model, served, gap), in its
JSON, the CLI text and the Markdown report; a failed check says its cause and fix; a failed SLO check makes the
status ``slo_miss`` (CLI exit 4), never ``feasible``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning import api
from planning.checks import plan_checks, settle_status, with_checks, with_simulation
from planning.cli import main
from planning.result import CHECK_STATUSES, BaselineSummary, EnginePlan, InstancePlan, PlanResult
from planning.scenario import Scenario


def _plan(cost: float = 10.0, baselines: tuple[BaselineSummary, ...] = (), *, status: str = "optimal",
          gap: float | None = 0.0, step_ms: float = 50.0, served: float = 1.0) -> PlanResult:
    """A small plan of one model whose decode instance runs a planned step of ``step_ms`` (TPOT SLO 80 ms)."""
    engine = EnginePlan("decode", 8.0, 10, 10, 0.0, step_ms)
    inst = InstancePlan("m", "decode", "m/decode:t", "r", 1, {"1xL4": 1}, {"L4": 1}, 100.0, "tok/s", 0.5, cost,
                        True, engine=engine)
    scenario = {"name": "s", "models": [{"id": "m", "slo": {"prefill_ms": 1500, "decode_ms": 80}}],
                "options": {"mip_rel_gap": 1e-3}}
    return PlanResult(status, "cost", cost, cost, 0.0, served, gap, instances=(inst,), baselines=baselines,
                      scenario=scenario)


def _baseline(name: str, cost: float, served: float = 1.0, *, ran: bool = True) -> BaselineSummary:
    return BaselineSummary(name, cost, served, served >= 1.0, ran=ran)


def _by_name(result: PlanResult) -> dict[str, Any]:
    return {c.name: c for c in result.checks}


def test_a_baseline_cheaper_than_the_plan_fails_its_check_with_cause_and_fix() -> None:
    result = with_checks(_plan(10.0, (_baseline("homo", 12.0), _baseline("homo-ilp", 9.0))))
    checks = _by_name(result)
    assert checks["cost ≤ homo"].status == "passed"
    lost = checks["cost ≤ homo-ilp"]
    assert lost.status == "failed" and lost.figures == {"plan $/h": 10.0, "homo-ilp $/h": 9.0}
    assert "homo-ilp" in lost.cause
    assert lost.cause and lost.fix
    assert result.status == "optimal"  # a cost check is a warning; only SLO checks move the status


def test_baselines_that_serve_other_demand_or_did_not_run_are_not_applicable() -> None:
    result = with_checks(_plan(10.0, (_baseline("short", 5.0, served=0.5), _baseline("late", 0.0, ran=False))))
    checks = _by_name(result)
    assert checks["cost ≤ short"].status == "not-applicable"
    assert checks["cost ≤ late"].status == "not-applicable"


def test_an_slo_miss_is_never_feasible_and_a_simulation_can_clear_it() -> None:
    slow = with_checks(_plan(step_ms=95.0))
    slo = _by_name(slow)["SLO attainment m"]
    assert slo.status == "failed" and "analytic" in slo.basis and "95" in slo.cause and slo.fix
    assert slow.status == "slo_miss" and slow.has_plan
    cleared = with_simulation(slow, {"m": 0.995})
    assert cleared.status == "feasible" and _by_name(cleared)["SLO attainment m"].basis == "simulated"
    missed = with_simulation(with_checks(_plan()), {"m": 0.9})
    assert missed.status == "slo_miss" and _by_name(missed)["SLO attainment m"].figures["attainment"] == 0.9
    assert with_checks(_plan(step_ms=79.0)).status == "optimal"


def test_served_shortfall_and_open_gap_fail_with_a_fix() -> None:
    checks = _by_name(with_checks(_plan(served=0.8, gap=0.05, status="feasible")))
    assert checks["served fraction"].status == "failed" and checks["served fraction"].fix
    assert checks["proven gap"].status == "failed" and "time_limit_s" in checks["proven gap"].fix
    assert settle_status("feasible", plan_checks(_plan(gap=0.05, status="feasible"))) == "feasible"


def test_a_solved_plan_carries_its_checks_in_json_text_and_markdown(tiny: dict[str, Any]) -> None:
    result = api.solve(Scenario.from_dict(tiny))
    assert result.checks and all(c.status in CHECK_STATUSES for c in result.checks)
    kinds = {c.kind for c in result.checks}
    assert kinds == {"cost", "slo", "served", "gap"}
    assert not any(c.failed for c in result.checks), [c.line() for c in result.checks if c.failed]
    again = PlanResult.from_json(result.to_json())
    assert again.checks == result.checks
    assert "check: passed" in api.result_summary(result)
    assert "## Checks" in result.to_markdown()


def test_cli_exits_4_on_an_slo_miss(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    missed = with_checks(_plan(step_ms=120.0))
    import planning.api_measurements as face  # what `planning solve` calls (not planning.api: no pandas)

    monkeypatch.setattr(face, "solve_scenario", lambda *a, **k: replace(missed))
    assert main(["solve", "--preset", "coral-core", "--sharing", "off"]) == 4
    assert "slo_miss" in capsys.readouterr().out


def test_simulated_checks_replace_the_analytic_ones(tiny: dict[str, Any]) -> None:
    """The Plan page's simulation turns each model's SLO check into a simulated one (said so in its basis)."""
    result = api.solve(Scenario.from_dict(tiny))
    sim = api.simulate(result, duration_s=60, seed=0)
    checked = api.simulated_checks(result, sim)
    slo = [c for c in checked.checks if c.kind == "slo"]
    assert [c.name for c in slo] == ["SLO attainment llama-3-8b"] and slo[0].basis == "simulated"
    assert slo[0].figures["attainment"] == pytest.approx(sim.model("llama-3-8b").attainment)
    assert checked.status == ("slo_miss" if slo[0].failed else result.status)
