"""The year's bill: its months add up to the sizing's horizon total (same components), committed capacity is
charged by use with its idle part on its own line, and the CSV, the report and the CLI carry it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from planning.scenario import Scenario


@pytest.fixture(scope="module")
def planned() -> Any:
    from planning.api import solve
    from tests.finance.conftest import SMALL

    owned = [{"location": "owned:us-east-dc", "shape": "1xL40S", "count": 1, "capex_usd": 20_000,
              "amortisation_years": 3, "power_usd_per_hour": 0.2, "ops_usd_per_hour": 0.3}]
    return solve(Scenario.from_dict({**SMALL, "owned": owned}))


def test_bill_adds_up_to_the_horizon_total(planned: Any) -> None:
    from planning.api import bill_frame, finance_summary

    assert planned.has_plan
    bill = bill_frame(planned)
    assert list(bill["month"].unique()) == list(range(1, 13))
    summary = finance_summary(planned)
    assert summary["horizon_status"] == "optimal"
    # the bill counts nodes, reservations (used or idle) and the owned pool (fixed + power): the sizing's total
    assert bill["usd"].sum() == pytest.approx(summary["horizon_total_usd"], rel=1e-6)
    assert summary["bill_usd"] == pytest.approx(bill["usd"].sum())
    # every month of a flat year costs the same
    monthly = bill.groupby("month")["usd"].sum()
    assert monthly.max() == pytest.approx(monthly.min(), rel=1e-9)
    assert set(bill["kind"]) <= {"owned", "reserved", "on_demand", "spot", "egress"}
    assert "owned" in set(bill["kind"])


def test_committed_capacity_is_charged_by_use_and_idle(planned: Any) -> None:
    from planning.api import bill_frame

    bill = bill_frame(planned)
    owned = bill[bill["kind"] == "owned"]
    fixed_year = (20_000 / 3 + 0.3 * 8760)  # capex per year + ops, one node
    power = owned["usd"].sum() - fixed_year
    assert power >= -1e-6  # the rest of the owned line is power for the serving hours
    if (owned["model"] == "(idle)").any():  # off-peak epochs leave the owned node idle: on its own line
        assert owned[owned["model"] == "(idle)"]["usd"].sum() > 0
    assert planned.committed_per_hour == pytest.approx(
        fixed_year / 8760 + sum(c.count * c.effective_hourly for c in planned.commitments), rel=1e-6)


def test_csv_report_and_commitments(planned: Any, tmp_path: Path) -> None:
    from planning.api import bill_csv, commitments_frame, plan_report

    text = bill_csv(planned)
    assert text.startswith("# Prices:")
    frame = pd.read_csv(io.StringIO(text), comment="#")
    assert list(frame.columns) == ["month", "model", "region", "cloud", "kind", "usd"]
    commitments = commitments_frame(planned)
    assert (commitments["status"] == "sign").any()
    assert ((commitments["break_even"] > 0) & (commitments["break_even"] < 1)).all()
    report = plan_report(planned)
    for heading in ("Cost by pricing kind", "Commitments", "The bill", "Finance assumptions",
                    "all on-demand and all reserved"):
        assert heading in report


def test_cli_writes_the_bill(tmp_path: Path) -> None:
    import json

    from planning.cli import main
    from tests.finance.conftest import SMALL

    path = tmp_path / "s.json"
    path.write_text(json.dumps({**SMALL, "reservations": [{"region": "aws:us-east-2", "shape": "1xL40S", "count": 2,
                                                              "status": "held"}]}))
    assert main(["solve", str(path), "--json", "--out", str(tmp_path / "p.json"), "--bill",
                 str(tmp_path / "bill.csv")]) == 0
    plan = json.loads((tmp_path / "p.json").read_text())
    assert plan["commitments"][0]["status"] == "held"
    assert set(plan["cost_by_pricing_kind"]) == {"owned", "reserved", "on_demand", "spot"}
    bill = pd.read_csv(tmp_path / "bill.csv", comment="#")
    assert (bill["kind"] == "reserved").any()


def test_exports_run_pools_in_their_region(tmp_path: Path) -> None:
    """SkyPilot recipes of spot and reserved instances name the cloud region (spot via use_spot), never the pool."""
    import json

    from planning.api import export_plan, solve
    from tests.finance.conftest import SMALL

    s = {**SMALL, "spot": {"enabled": True}, "reservations": [
        {"region": "aws:us-east-2", "shape": "1xL40S", "count": 1, "status": "held"}]}
    s.pop("finance")
    plan = solve(Scenario.from_dict(json.loads(json.dumps(s))))
    regions = {i.region for i in plan.instances}
    assert regions & {"aws:us-east-2/reserved", "aws:us-east-2/spot"}
    for f in export_plan(plan, "skypilot"):
        assert "us-east-2/" not in f.text.replace("region aws:us-east-2/", "")  # infra: aws/us-east-2 only
        if f.instance is not None and "/spot" in f.text.splitlines()[0]:
            assert "use_spot: true" in f.text
