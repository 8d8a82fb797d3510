"""``benchmarks/check_plans`` prints, beside ``cost_per_hour``, the bill per hour the Plan page's "Cost per hour"
KPI, the report's headline and the JSON show (issue 38: one number per quantity): for a finance scenario (a
reservation, an owned node and a demand profile over the year) that is the horizon's mean hour, which differs from
``cost_per_hour`` (reserved nodes at $0, owned ones at their power price)."""

from __future__ import annotations

from typing import Any

import pytest

from planning.scenario import Scenario


@pytest.fixture(scope="module")
def planned() -> Any:
    from planning.api import solve
    from tests.finance.conftest import SMALL

    owned = [{"location": "owned:us-east-dc", "shape": "1xL40S", "count": 1, "capex_usd": 20_000,
              "amortisation_years": 3, "power_usd_per_hour": 0.2, "ops_usd_per_hour": 0.3}]
    return solve(Scenario.from_dict({**SMALL, "owned": owned}))


def test_a_finance_plan_row_shows_the_bill_the_plan_page_shows(planned: Any,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.check_plans import print_row, summary
    from planning.billing import cents

    assert planned.has_plan and planned.bill.basis == "horizon"
    row = summary(planned.to_dict(), "off")
    assert row["bill"] == cents(planned.bill.per_hour) and row["bill_basis"] == "horizon"  # the JSON's, in cents
    assert row["cost"] == planned.cost_per_hour
    assert abs(row["bill"] - row["cost"]) > 0.01  # two quantities: the row must not print one for the other
    print_row("fin-small", {**row, "backend": "process", "s_median": 1.0}, 1, "yes", "d")
    line = capsys.readouterr().out
    assert f" {planned.bill.hour_text.removeprefix('$')}h " in line  # the KPI's figure, to the cent
    assert f" {planned.cost_per_hour:,.2f} " in line


def test_a_sharing_row_shows_the_whole_plans_bill() -> None:
    """A sharing run's row shows the bill of the whole plan, the shared GPUs and the dedicated part (the JSON's
    ``bill``; before, the dict carried the dedicated part's bill only and the row printed "—")."""
    from benchmarks.check_plans import bill_text, summary
    from planning.api import solve_shared
    from planning.billing import cents
    from tests.sharing.conftest import SMALL

    shared = solve_shared(Scenario.from_dict(SMALL), method="kvpr")
    assert shared.shared_nodes and shared.dedicated is not None
    row = summary(shared.to_dict(), "kvpr")
    assert row["bill"] == cents(shared.cost_per_hour) == cents(shared.bill.per_hour)
    assert row["bill"] > cents(shared.dedicated.bill.per_hour)  # not the dedicated part's alone
    assert bill_text(row) == f"{row['bill']:,.2f}"
