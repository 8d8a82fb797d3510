"""Issue 12 §6: the Markdown plan report has no float noise, no scientific notation, no nan, no raw keys."""

from __future__ import annotations

import re

import pytest

from planning import api
from planning.result import PlanResult
from planning.scenario import Scenario
from tests.app.conftest import TINY


@pytest.fixture(scope="module")
def tiny_plan() -> PlanResult:
    return api.solve(Scenario.from_dict(TINY))


def test_markdown_report_reads_like_a_report(tiny_plan: PlanResult) -> None:
    md = tiny_plan.to_markdown()
    assert not re.search(r"\bnan\b", md, flags=re.IGNORECASE)
    assert not re.search(r"\d\.\d+e[+-]\d", md)  # no 3.259e+04
    assert not re.search(r"\d\.\d{5,}", md)  # no 46.525000000000006
    assert "_seconds" not in md and "cost_per_hour" not in md and "savings_pct" not in md
    assert f"${tiny_plan.comparable_cost:,.2f}/h" in md and "per month" in md
    # a baseline that cannot meet demand shows no cost rather than $0.00
    for line in md.splitlines():
        if line.startswith("| single:") and "| no |" in line:
            assert "$0.00" not in line


def test_markdown_cells_format_large_and_missing_numbers() -> None:
    import pandas as pd

    from planning.result import _md_table

    table = _md_table(pd.DataFrame({"throughput": [32590.4, 46.525000000000006, float("nan")],
                                    "served_fraction": [1.0, 0.5, 0.25]}))
    assert "32,590" in table and "46.53" in table and "—" in table and "50.0%" in table
