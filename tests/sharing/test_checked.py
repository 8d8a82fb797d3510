"""Issue 37 §2: a shared plan is never returned dearer than the plan without sharing, nor "feasible" with a failed
SLO check; the losing plan stays as the comparison with why it lost."""

from __future__ import annotations

from typing import Any

import pytest

from planning import api
from planning.checks import with_checks
from planning.result import PlanResult
from planning.scenario import Scenario
from planning.sharing.checked import choose
from planning.sharing.result import SharedModel, SharedNode, SharingResult


def _dedicated(cost: float, models: tuple[str, ...] = ("a", "b", "big")) -> PlanResult:
    scenario = {"name": "s", "models": [{"id": m, "slo": {"prefill_ms": 1000, "decode_ms": 80}} for m in models],
                "options": {"mip_rel_gap": 1e-3}}
    return with_checks(PlanResult("optimal", "cost", cost, cost, 0.0, 1.0, 0.0, scenario=scenario))


def _shared(shared_cost: float, estimates: tuple[float, float] = (0.999, 0.999)) -> SharingResult:
    node = SharedNode("r", "1xL4", "L4", shared_cost, 20.0, (SharedModel("a", "x", 0.1, 5.0, 1.0, 0.2, estimates[0]),
                                                              SharedModel("b", "x", 0.1, 5.0, 1.0, 0.2, estimates[1])))
    part = _dedicated(4.0, ("big",))
    return SharingResult("kvpr", "feasible", 1.0, (node,), shared_cost, "feasible", None, part, ("a", "b"), ("big",))


def test_a_heuristic_dearer_than_dedicated_returns_the_dedicated_plan_and_says_why() -> None:
    out = choose(_shared(7.0), _dedicated(10.0), {"a": 1.0, "b": 1.0})  # 7 + 4 = 11 > 10
    assert out.cost_per_hour == pytest.approx(10.0) and out.status == "optimal"
    assert out.shared_nodes == () and out.comparison["returned"] == "dedicated"
    assert out.comparison["cost_per_hour"] == pytest.approx(11.0) and "$1.00/h more" in out.comparison["why"]
    assert any("lost" in n for n in out.notes)
    assert out.to_dict()["sharing"]["comparison"]["plan"] == "kvpr sharing"


def test_a_cheaper_shared_plan_that_misses_an_slo_loses_to_dedicated() -> None:
    out = choose(_shared(3.0), _dedicated(10.0), {"a": 0.95, "b": 1.0})
    assert out.cost_per_hour == pytest.approx(10.0) and out.comparison["returned"] == "dedicated"
    assert "below 99% SLO attainment (lowest a 95.0%)" in out.comparison["why"]


def test_the_analytic_estimate_decides_when_no_simulation_ran() -> None:
    out = choose(_shared(3.0, (0.80, 0.999)), _dedicated(10.0), {})
    assert out.comparison["returned"] == "dedicated" and "lowest a 80.0%" in out.comparison["why"]


def test_a_shared_plan_that_passes_is_returned_with_its_checks() -> None:
    out = choose(_shared(3.0), _dedicated(10.0), {"a": 0.995, "b": 1.0})
    assert out.cost_per_hour == pytest.approx(7.0) and out.status == "feasible"
    checks = {c.name: c for c in out.checks}
    assert checks["shared ≤ dedicated"].status == "passed"
    assert checks["SLO attainment a"].basis.startswith("simulated")
    assert checks["SLO attainment a"].figures["analytic estimate"] == pytest.approx(0.999)
    assert out.comparison["returned"] == "shared"


def test_without_a_dedicated_plan_an_slo_miss_is_said_as_such() -> None:
    out = choose(_shared(3.0), None, {"a": 0.9, "b": 1.0})
    assert out.status == "slo_miss" and out.shared_nodes
    assert [c.status for c in out.checks if c.name == "shared ≤ dedicated"] == ["not-applicable"]


@pytest.mark.slow
def test_kvpr_on_the_small_tail_is_never_dearer_than_no_sharing(small: dict[str, Any]) -> None:
    scenario = Scenario.from_dict(small)
    plain = api.solve(scenario, with_baselines=False)
    for method in ("kvpr", "exact"):
        res = api.solve_shared(scenario, method=method)
        assert res.status in ("optimal", "feasible")
        assert res.cost_per_hour <= plain.cost_per_hour * (1 + 1e-6) + 1e-6
        assert not any(c.failed and c.kind in ("cost", "slo") for c in res.checks), [c.line() for c in res.checks]
        assert res.comparison["returned"] in ("shared", "dedicated")
