"""Finance report: titled by the scenario, states every assumption, compares like with like, renders cleanly."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from planning import api
from planning.report import HOURS_PER_MONTH, build_report, report_html, report_markdown
from planning.result import BaselineSummary, PlanResult


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return api.solve(api.load_preset_scenario("coral-core"))


def test_report_names_scenario_and_assumptions(plan: PlanResult) -> None:
    md = report_markdown(plan)
    assert md.startswith("# Serving plan — coral-core")
    for model in ("qwen3-32b", "gpt-oss-20b", "phi-4"):
        assert model in md
    assert "| qwen3-32b | 1,600 | 100 | 10 | 755 in / 354 out tokens |" in md  # SLOs and traffic
    assert "aws:us-east-2, aws:ap-northeast-2" in md and "on-demand" in md
    assert "SkyPilot catalog" in md and "2026-" in md  # price source and date
    assert f"{plan.provisioning_per_hour * HOURS_PER_MONTH:,.2f}" in md
    assert "nan" not in md.lower().split() and not re.search(r"\d\.\d{7,}", md) and "e+" not in md


def test_savings_compare_provisioning_with_provisioning(plan: PlanResult) -> None:
    rep = build_report(plan)
    table = next(s for s in rep.sections if s.heading.startswith("Compared")).tables[0]
    assert table.rows[0][:2] == ("this plan (design hour, full cost)", f"${plan.comparable_cost:,.2f}")
    for row in table.rows[1:]:
        base = next(b for b in plan.baselines if b.name == row[0])
        if not base.feasible:  # never "$0.00/h" for a baseline that cannot meet demand
            assert row[1] == row[2] == "cannot meet demand" and row[4] == "—"
        elif abs(base.served_fraction - plan.served_fraction) < 1e-9:
            expected = 100 * (1 - plan.provisioning_per_hour / base.cost_per_hour)
            assert row[4] == f"{expected:.1f} %"
            assert expected > 0  # the optimal plan never loses to a baseline serving the same demand
        else:
            assert row[4].startswith("not comparable")


def test_unequal_demand_is_not_a_saving(plan: PlanResult) -> None:
    short = BaselineSummary("cheap-but-short", 1.0, 0.5, False, note="x" * 5000,
                            served_by_group={"a/prefill": 0.5, "a/decode": 0.92, "b/decode": 1.0})
    serves_more = BaselineSummary("serves-more", 1.0, 1.0, True)
    modified = replace(plan, baselines=(short, serves_more), served_fraction=0.95)  # a plan that falls short
    md = report_markdown(modified)
    assert "| cheap-but-short | cannot meet demand | cannot meet demand | 50.0 % (worst model) | — | serves " \
           "a/prefill 50 %, a/decode 92 %; xxx" in md  # the worst model and the rest that fall short, in order
    assert "$1.00" not in md.split("cheap-but-short")[1].split("\n")[0]
    assert "not comparable (serves different demand)" in md
    assert "x" * 201 not in md and "…" in md  # long notes are clipped


def test_html_is_self_contained_and_printable(plan: PlanResult) -> None:
    page = report_html(plan)
    assert page.startswith("<!DOCTYPE html>") and "<title>Serving plan — coral-core</title>" in page
    assert "<script" not in page and "http://" not in page.split("<body>")[0]
    assert "@media print" in page
    assert page.count("<table>") >= 4


def test_infeasible_plan_report_says_so() -> None:
    bad = PlanResult(status="infeasible", objective="cost", cost_per_hour=0.0, provisioning_per_hour=0.0,
                     penalty_per_hour=0.0, served_fraction=0.0, mip_gap=None,
                     baselines=(BaselineSummary("homo", 10.0, 1.0, True),),
                     diagnostics=("capacity: aws:us-east-2 1xL40S short by 3 nodes",), scenario={"name": "tiny"})
    md = report_markdown(bad)
    assert "# Serving plan — tiny" in md and "**no plan** (infeasible)" in md
    assert "$0" not in md and "0 per month" not in md  # no cost is stated for a plan that does not exist
    assert "not comparable" in md and "short by 3 nodes" in md


def test_html_has_its_date_and_charts(plan: PlanResult) -> None:
    """Issue 38 §6: the printable report had no charts and no date."""
    import datetime as dt

    from planning.report import report_charts, svg_bars

    rep = build_report(plan, today=dt.date(2026, 11, 28))
    assert rep.written == "2026-11-28"
    page = report_html(plan)
    assert f"Written {dt.date.today().isoformat()}" in page
    assert f"Written {dt.date.today().isoformat()}." in report_markdown(plan)
    charts = report_charts(plan)
    versus = next(c for c in charts if c.title.startswith("This plan against the baselines"))
    assert versus.bars[0] == ("this plan", plan.comparable_cost)
    assert [name for name, _ in versus.bars[1:]] == [b.name for b in sorted(
        (b for b in plan.baselines if b.ran and b.feasible), key=lambda b: b.cost_per_hour)]
    assert page.count("<svg") == len(charts) >= 1 and "<script" not in page
    svg = svg_bars(versus)
    assert svg.count("<rect") == len(versus.bars) and f"${plan.comparable_cost:,.2f}" in svg


def test_report_lists_the_checks_and_a_failed_one_with_its_fix(plan: PlanResult) -> None:
    """Issue 37 §1: the report has a Checks section; a baseline made cheaper than the plan shows as failed with
    its cause and fix (never silent)."""
    from planning.checks import with_checks

    md = report_markdown(plan)
    assert "## Checks" in md and "passed" in md and "cost ≤ homo" in md
    cheap = BaselineSummary("cheap", plan.comparable_cost * 0.5, 1.0, True)
    worse = with_checks(replace(plan, baselines=(*plan.baselines, cheap)))
    md = report_markdown(worse)
    line = next(x for x in md.splitlines() if "cost ≤ cheap" in x)
    assert "failed" in line and "Fix:" in line
