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


def test_uncertainty_badges_are_coloured_by_band_width_not_method() -> None:
    """Issue 12 §6: ±57 % calibrated must not look more trustworthy than ±13 % roofline."""
    from ui.widgets import badge_colour, uncertainty_band

    wide, narrow = "calibrated (±40% prefill, ±57% decode)", "roofline (±13% prefill, ±14% decode)"
    assert uncertainty_band(wide) == 57 and uncertainty_band(narrow) == 14
    order = ["green", "blue", "orange", "red"]
    assert order.index(badge_colour(wide)) > order.index(badge_colour(narrow))
    assert badge_colour(narrow) == "green" and badge_colour(wide) == "red"


def test_baseline_colours_never_collide() -> None:
    """Issue 12 §6: every method in the what-if/sweep charts has its own colour, even two on one GPU type."""
    from planning.viz.whatif import _method_colors

    methods = ["Plan (mixed)", "homo", "homo-ilp", "single:L4", "single:L40S", "single:A10G", "single:H100",
               "single:A100", "memp", "homogeneous L40S", *[f"variant {k}" for k in range(10)]]
    colours = _method_colors(methods)
    assert len({c.upper() for c in colours.values()}) == len(methods)
    assert colours["Plan (mixed)"] == "#1B1B1B"
