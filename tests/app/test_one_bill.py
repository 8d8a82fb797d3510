"""Issue 38 §1: one bill. The plan's cost per hour, month and year is read off every surface — the KPIs (Home and
Plan), the report (Markdown and HTML), the CLI's Markdown and terminal summary, the bill CSV, the cost-lines CSV and the JSON — and each
quantity has one number. The default suite walks three small plans (on-demand only; owned, reserved and spot
capacity over a day's profile; owned capacity without a profile); the slow test walks every preset (the session's
plans, ``tests/conftest.py``; platform-100 on a tenth of its models, proven optimal)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import TIMEOUT, TINY, planned
from tests.finance.conftest import SMALL

BILL = re.compile(r"Bill: (\$[\d,]+\.\d\d)/h(?:\*\*)?, (\$[\d,]+) per month, (\$[\d,]+) per year")
OWNED = [{"location": "owned:us-east-dc", "shape": "1xL40S", "count": 2, "capex_usd": 20_000,
          "amortisation_years": 3, "power_usd_per_hour": 0.2, "ops_usd_per_hour": 0.3}]


def _kpi_script() -> None:  # an AppTest script: the KPI block of the plan in $BILL_PLAN
    import os
    from pathlib import Path

    from planning.result import PlanResult
    from ui import widgets

    widgets.kpis(PlanResult.from_json(Path(os.environ["BILL_PLAN"]).read_text()))


def _dollars(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


def _kpis(at: AppTest) -> tuple[str, str, str]:
    """Cost per hour and per month as the metrics show them; per year from the month's help."""
    hour = next(m for m in at.metric if m.label == "Cost per hour")
    month = next(m for m in at.metric if m.label == "Cost per month")
    year = re.search(r"per year: (\$[\d,]+)", str(month.help))
    assert year is not None, month.help
    return str(hour.value), str(month.value), year.group(1)


def _bill_lines(text: str) -> set[tuple[str, str, str]]:
    found = set(BILL.findall(text))
    assert found, "no bill line in:\n" + text[:2000]
    return found


def surfaces(result: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, str, str]]:
    """The (per hour, per month, per year) figures each surface shows for ``result``."""
    from planning.api import plan_report, result_summary

    path = tmp_path / "plan.json"
    path.write_text(result.to_json())
    monkeypatch.setenv("BILL_PLAN", str(path))
    at = AppTest.from_function(_kpi_script, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    out = {"KPI": _kpis(at)}
    markdown_text = "\n".join(str(m.value) for m in at.markdown)
    (out["KPI text"],) = _bill_lines(markdown_text)
    (out["report (Markdown)"],) = _bill_lines(plan_report(result, "markdown"))
    html = plan_report(result, "html").replace("<strong>", "**").replace("</strong>", "**")
    (out["report (HTML)"],) = _bill_lines(html)
    (out["CLI Markdown"],) = _bill_lines(result.to_markdown())
    (out["CLI summary"],) = _bill_lines(result_summary(result))
    return out


def check_json(result: Any, shown: tuple[str, str, str]) -> None:
    """The JSON's bill is the same figures to the cent (whole dollars on screen: within half a dollar of them)."""
    bill = json.loads(result.to_json())["bill"]
    exact = result.bill
    for key, text, value in zip(("per_hour", "per_month", "per_year"), shown,
                                (exact.per_hour, exact.per_month, exact.per_year), strict=True):
        assert bill[key] == round(value, 2), key
        assert abs(bill[key] - _dollars(text)) <= (0.005 if key == "per_hour" else 0.505), (key, text, bill[key])


def check_one_number(result: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, str, str]]:
    """Every surface shows the same three figures; the CSVs add up to them; returns the figures by surface."""
    from planning.api import bill_csv, cost_lines_csv

    assert result.has_plan, result.message
    shown = surfaces(result, tmp_path, monkeypatch)
    assert len(set(shown.values())) == 1, shown
    hour, month, year = next(iter(shown.values()))
    check_json(result, (hour, month, year))
    assert abs(_dollars(month) * 12 - _dollars(year)) <= 12  # whole-dollar rounding of each
    bill = result.bill
    rows = pd.read_csv(io.StringIO(bill_csv(result)), comment="#")
    if bill.basis == "horizon":  # the bill CSV, to the cent, adds up to the same month and year
        months = rows["month"].nunique()
        assert abs(rows["usd"].sum() / months - bill.per_month) <= 0.01 * len(rows)
        assert list(rows["month"].drop_duplicates()) == sorted(rows["month"].unique())  # calendar order
        assert all(round(v, 2) == v for v in rows["usd"])  # no float noise
    else:
        assert _dollars(hour) == pytest.approx(result.comparable_cost, abs=0.005)
    lines = pd.read_csv(io.StringIO(cost_lines_csv(result)))
    assert all(round(v, 2) == v for v in lines["cost_per_hour"]) and all(round(v, 2) == v for v in
                                                                           lines["full_cost_per_hour"])
    billed = lines[lines["kind"].isin(["provisioning", "idle committed"])]
    # full cost lines add up to the design hour's full cost (the figure baselines are compared at), marginal to
    # the marginal cost: each named, each one number
    assert billed["full_cost_per_hour"].sum() + result.transfer_per_hour == pytest.approx(
        bill.design_hour_full, abs=0.005 * len(lines) + 1e-9)
    assert billed["cost_per_hour"].sum() == pytest.approx(result.provisioning_per_hour, abs=0.005 * len(lines) + 1e-9)
    return shown


def _solve(d: dict[str, Any]) -> Any:
    from planning.api import solve
    from planning.scenario import Scenario

    return solve(Scenario.from_dict(d))


def test_on_demand_plan_one_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _solve(TINY)
    shown = check_one_number(result, tmp_path, monkeypatch)
    assert result.bill.basis == "design hour" and "Design hour" not in result.to_markdown()
    assert next(iter(shown.values()))[0] == f"${result.comparable_cost:,.2f}"


def test_owned_reserved_spot_over_a_profile_one_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _solve({**SMALL, "owned": OWNED, "spot": {"enabled": True, "max_share": 0.5}})
    check_one_number(result, tmp_path, monkeypatch)
    bill = result.bill
    assert bill.basis == "horizon" and len(bill.months) == 12
    # the design hour (the profile's peak) is named beside the bill, full = marginal + committed
    report = result.to_markdown()
    assert f"full cost ${bill.design_hour_full:,.2f}/h** = marginal ${bill.design_hour_marginal:,.2f}/h" in report
    assert bill.design_hour_full == pytest.approx(bill.design_hour_marginal + bill.committed_per_hour)
    assert "Cost of the nodes" not in report  # the marginal cost is never shown unnamed
    assert "Prices: " + "on-demand;" not in report  # the prices line names the kinds the plan pays


def test_owned_without_profile_bills_the_full_design_hour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a profile the bill is the design hour all year: its full cost, owned nodes' fixed cost included
    (the flat bill once counted only the marginal lines and the idle nodes)."""
    d = {k: v for k, v in SMALL.items() if k not in ("finance", "reservations")}
    result = _solve({**d, "owned": OWNED})
    check_one_number(result, tmp_path, monkeypatch)
    from planning.api import bill_csv

    rows = pd.read_csv(io.StringIO(bill_csv(result)), comment="#")
    assert result.committed_per_hour > 0
    assert rows.groupby("month")["usd"].sum().iloc[0] == pytest.approx(result.comparable_cost * 730, abs=0.01 * len(rows))


def test_home_and_plan_pages_show_the_bill(planning_home: Path) -> None:
    """The KPIs on Home and on Plan, and the Plan page's horizon total, are the bill's figures."""
    from planning.scenario import Scenario, save_scenario

    d = {**SMALL, "name": "fin", "owned": OWNED}
    save_scenario(Scenario.from_dict(d), planning_home / "scenarios" / "fin.yaml")
    at, _ = planned(planning_home, "saved:fin")
    home = _kpis(at)
    at.switch_page("views/3_Plan.py")
    at.run()
    assert not at.exception
    plan = _kpis(at)
    assert home == plan
    horizon = next(m for m in at.metric if m.label == "Horizon total")
    assert horizon.value == home[2]  # one year: the horizon's total is the bill's year
    assert "Bill: " + home[0] in "\n".join(str(m.value) for m in at.markdown)
    assert "**Prices:** owned" in "\n".join(str(m.value) for m in at.markdown)  # by kind
    at.switch_page("views/5_Jobs.py")  # the Jobs table: the same bill, the prices by kind
    at.run()
    row = at.dataframe[0].value.iloc[0]
    assert f"${row['cost $/h']:,.2f}" == home[0] and row["prices"] == "owned"  # the plan runs on the owned pool only


PRESETS = ["coral-core", "coral-extended", "melange-arena", "demystifying", "catalog-wide", "enterprise",
           "long-tail", "platform-100"]
PLATFORM_EVERY = 10  # platform-100's walk plans every 10th of its models (the first popular one and 9 variants)
PLATFORM_LIMIT_S = 3600.0  # a limit its proof does not reach: the plan is the optimum, not the moment's incumbent


def platform_scenario() -> Any:
    """platform-100 as the walk plans it: every offer of the preset (11 regions x 42 shapes, on demand and
    risk-adjusted spot) and its popular/variant mix, with every ``PLATFORM_EVERY``-th model. What the walk checks
    (one number per quantity on every surface) does not depend on how many models share the bill, and the
    dedicated plan of all 100 ran to a 900 s limit under load (column generation of 200 groups: 126 s to its
    first bounds at load 15); this one is proven optimal at a limit it does not reach."""
    from dataclasses import replace

    from planning.api import load_preset_scenario

    scenario = load_preset_scenario("platform-100")
    return replace(scenario, models=scenario.models[::PLATFORM_EVERY],
                   options=replace(scenario.options, time_limit_s=PLATFORM_LIMIT_S))


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_one_number(preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 preset_plans: Any) -> None:
    """Every preset's plan shows one number per quantity on every surface. The plans are the session's
    (``tests/conftest.py``: each preset at its own options, solved once through the CLI's ``--json`` and shared with
    the export walk and the enterprise CLI test); any
    plan reconciles, optimal or not. platform-100: :func:`platform_scenario`, which must end optimal."""
    from planning.api import list_presets, solve

    assert sorted(PRESETS) == sorted(list_presets())  # a new preset joins this walk
    if preset == "platform-100":
        result = solve(platform_scenario())
        assert result.status == "optimal", result.message  # its limit did not bind: the same plan on any machine
    else:
        result = preset_plans(preset)
    check_one_number(result, tmp_path, monkeypatch)
