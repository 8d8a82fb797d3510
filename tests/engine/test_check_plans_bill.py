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


def test_a_sharing_row_shows_no_bill(planned: Any) -> None:
    """A sharing run's dict is its dedicated part's with totals over both parts: its ``bill`` is the dedicated
    part's only, so the row prints none rather than a bill of other components."""
    from benchmarks.check_plans import bill_text, summary

    row = summary(planned.to_dict(), "exact")
    assert row["bill"] is None and bill_text(row) == "—"
