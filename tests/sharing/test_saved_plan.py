"""A saved plan with shared GPUs: it reads back as the same answer, its bill covers both parts, and
``planning simulate PLAN.json`` simulates it as the scenario planned with ``--sharing`` would be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planning import api
from planning.billing import cents
from planning.cli import main
from planning.errors import PlanningError
from planning.scenario import Scenario, save_scenario
from planning.sharing.result import SharingResult


@pytest.mark.parametrize("method", ["kvpr", "exact"])
def test_a_shared_plan_reads_back_as_the_same_answer(small: dict[str, Any], method: str) -> None:
    """``SharingResult.from_dict(to_dict())`` equals the answer (shared nodes, dedicated part with its own cost,
    gap, status and checks, the comparison, the whole scenario), through JSON text too."""
    res = api.solve_shared(Scenario.from_dict(small), method=method)
    assert res.shared_nodes and res.dedicated is not None  # both parts present: the round trip covers both
    assert res.scenario and len(res.scenario["models"]) == len(small["models"])
    back = SharingResult.from_dict(json.loads(res.to_json()))
    assert back == res
    assert back.dedicated is not None and back.dedicated.cost_per_hour == res.dedicated_cost_per_hour


def test_the_bill_of_a_shared_plan_covers_both_parts(small: dict[str, Any]) -> None:
    """The JSON's ``bill`` and ``provisioning_per_hour`` are the whole plan's (before: the dedicated part's only,
    beside a ``cost_per_hour`` over both parts)."""
    res = api.solve_shared(Scenario.from_dict(small), method="kvpr")
    assert res.dedicated is not None and res.shared_cost_per_hour > 0
    data = res.to_dict()
    assert data["provisioning_per_hour"] == pytest.approx(res.shared_cost_per_hour
                                                          + res.dedicated.provisioning_per_hour, rel=1e-12)
    assert data["bill"]["per_hour"] == cents(res.cost_per_hour)  # no egress, no commitments here
    assert data["bill"]["per_hour"] > res.dedicated.bill.to_dict()["per_hour"]


def test_simulate_a_saved_shared_plan(small: dict[str, Any], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`planning solve --sharing kvpr --json --out P` then `planning simulate P`: the same simulation, request for
    request, as `planning simulate SCENARIO --sharing kvpr` at the same seed; a mismatched `--sharing` and a plan
    without sharing given to `--sharing` are refused with the fix."""
    path = save_scenario(Scenario.from_dict(small), tmp_path / "small.yaml")
    plan = tmp_path / "shared.json"
    assert main(["solve", str(path), "--sharing", "kvpr", "--json", "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(plan), "--duration", "60", "--seed", "3", "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert main(["simulate", str(path), "--sharing", "kvpr", "--duration", "60", "--seed", "3", "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert saved["shared"]["requests"] > 0 and _no_wall(saved) == _no_wall(fresh)
    assert main(["simulate", str(plan), "--sharing", "exact"]) == 2
    assert "drop --sharing" in capsys.readouterr().err


def _no_wall(value: Any) -> Any:
    """A simulation's dict without its wall-clock ``wall_s`` (the only figure two runs of one input differ in)."""
    if isinstance(value, dict):
        return {k: _no_wall(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [_no_wall(v) for v in value]
    return value


def test_a_shared_plan_where_a_plain_plan_is_needed_says_so(small: dict[str, Any], tmp_path: Path) -> None:
    """Steps that read plans without sharing (export, measurements, the Jobs upload) name the shared plan and the
    fix instead of a TypeError about an unexpected key."""
    res = api.solve_shared(Scenario.from_dict(small), method="kvpr")
    path = tmp_path / "shared.json"
    path.write_text(res.to_json(), encoding="utf-8")
    with pytest.raises(PlanningError) as err:
        api.load_plan(path)
    assert "shared GPUs" in str(err.value) and "planning simulate" in str(err.value)
    assert isinstance(api.load_any_plan(path), SharingResult)


def test_a_shared_plan_with_a_horizon_bill_adds_the_shared_gpus_to_every_month() -> None:
    """A dedicated part billed over a horizon (``finance["bill"]`` rows by month): the whole plan's bill keeps the
    horizon basis and each month adds the shared GPUs held all month (price × 730 h)."""
    from planning.billing import HOURS_PER_MONTH
    from planning.result import PlanResult
    from planning.sharing.result import SharedNode

    dedicated = PlanResult(status="optimal", objective="cost", cost_per_hour=3.0, provisioning_per_hour=3.0,
                           penalty_per_hour=0.0, served_fraction=1.0, mip_gap=0.0,
                           finance={"bill": [{"month": 1, "usd": 1000.0}, {"month": 2, "usd": 2500.0},
                                             {"month": 1, "usd": 200.0}]})
    node = SharedNode(region="r", shape="1xL4", gpu="L4", price_per_hour=2.0, capacity_gb=24.0, models=())
    res = SharingResult(sharing="exact", status="optimal", threshold_rps=1.0, shared_nodes=(node,),
                        shared_cost_per_hour=2.0, shared_status="optimal", shared_gap=0.0, dedicated=dedicated,
                        shared_models=(), dedicated_models=())
    bill = res.bill
    assert bill.basis == "horizon" and dedicated.bill.basis == "horizon"
    shared_month = 2.0 * HOURS_PER_MONTH
    assert bill.months == ((1, 1200.0 + shared_month), (2, 2500.0 + shared_month))
    assert bill.per_month == pytest.approx(dedicated.bill.per_month + shared_month, rel=1e-12)
