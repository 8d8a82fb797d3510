"""Issue 12: no page shows a negative saving for an optimal plan against a baseline that serves the same demand,
and a baseline that serves less shows no saving at all.

The two coral-core cases the issue names — demand ×2 (the what-if machinery) and one model at 0 req/s — planned
in the workbench and read off every place a saving is shown: the Home KPI, the Plan page's KPI, baselines table
and baselines chart, the What-if page's variants table, its plan-to-plan diff and a demand sweep. The expected
figures come from ``planning.api`` on the same scenario, so a page that showed some other number would fail too.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from planning import api
from planning.result import PlanResult
from planning.scenario import Scenario, save_scenario
from tests.app.conftest import planned, texts, wait_for_job

TOL = 1e-9


def _demand_x2() -> Scenario:
    base = api.load_preset_scenario("coral-core")
    return replace(api.apply_variants(base, [api.make_variant("demand", k=2.0)]), name="coral-core x2")


def _one_model_idle() -> Scenario:
    base = api.load_preset_scenario("coral-core")
    first = base.models[0]
    idle = replace(first, demand=replace(first.demand, rate_rps=0.0))
    return replace(base, name="coral-core idle", models=(idle, *base.models[1:]))


CASES = {"coral-core-x2": _demand_x2, "coral-core-idle": _one_model_idle}


def _plan_saved(home: Path, name: str, page: str | None = None) -> tuple[AppTest, PlanResult]:
    """Save case ``name`` among the user's scenarios, plan it from Home; the API's answer for the same scenario."""
    scenario = CASES[name]()
    save_scenario(scenario, home / "scenarios" / f"{name}.yaml")
    at, _ = planned(home, choice=f"saved:{name}", page=page)
    expected = api.solve(scenario)
    assert expected.status == "optimal" and expected.served_fraction == pytest.approx(1.0)
    return at, expected


def _assert_savings_kpi(at: AppTest, expected: PlanResult) -> None:
    best = expected.best_baseline()
    assert best is not None
    saving = expected.savings_vs(best)
    assert saving is not None and saving >= -TOL
    kpi = next(m for m in at.metric if m.label.startswith("Savings vs best"))
    assert kpi.value == f"{saving / 100:.1%}" and not kpi.value.startswith("-")
    cost = next(m.value for m in at.metric if m.label == "Cost per hour")
    assert cost == f"${expected.comparable_cost:,.2f}"


def _money(text: str) -> float:
    return float(str(text).replace("$", "").replace(",", ""))


def _assert_baselines_table(frame: pd.DataFrame) -> None:
    """The Plan page's table as people read it: the plan's design-hour full cost first, then each baseline with
    its cost, or "cannot meet demand" (never $0.00/h) and the models it serves short."""
    plan = frame.iloc[0]
    assert plan["plan"] == "this plan (design hour, full cost)"
    rows = frame.iloc[1:]
    meets = rows[rows["$/h"].str.startswith("$")]
    same = meets[meets["served"] == plan["served"]]
    assert len(same) >= 3
    savings = [float(str(v).removesuffix(" %")) for v in same["plan saves"]]
    assert min(savings) >= -TOL, same
    assert all(_money(c) >= _money(plan["$/h"]) - 0.005 for c in same["$/h"])
    short = rows[rows["$/h"] == "cannot meet demand"]
    assert (short["$/month"] == "cannot meet demand").all() and (short["plan saves"] == "—").all()
    assert all(str(note).strip() for note in short["note"])


def _assert_baselines_chart(at: AppTest) -> None:
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "Plan vs homogeneous" in c.proto.spec)
    labels = [str(t) for t in spec["data"][0]["text"]]
    # "plan −12 %" is a saving; "plan +3 %" would be the optimal plan losing to a baseline
    assert not [t for t in labels if re.search(r"plan \+[1-9]", t)], labels


@pytest.mark.parametrize("name", list(CASES))
def test_home_and_plan_page_show_no_negative_saving(planning_home: Path, name: str) -> None:
    at, expected = _plan_saved(planning_home, name)
    assert not at.exception
    _assert_savings_kpi(at, expected)  # Home
    at.switch_page("views/3_Plan.py")
    at.run()
    assert not at.exception
    _assert_savings_kpi(at, expected)  # Plan page KPIs
    table = next(df.value for df in at.dataframe if "plan saves" in df.value)
    _assert_baselines_table(table)
    api_rows = {b.name: b for b in expected.baselines}
    for _, row in table.iloc[1:].iterrows():  # the table shows the API's savings, not a copy of its own
        base = api_rows[row["plan"]]
        want = expected.savings_vs(base) if base.feasible else None
        assert row["plan saves"] == ("—" if not base.feasible else "not comparable" if want is None
                                     else f"{want:.1f} %")
    _assert_baselines_chart(at)


def _run_default_variant(at: Any, planning_home: Path) -> str:
    """Click the What-if page's "Run variant" (its default change) and wait for the job; the variant's label."""
    next(b for b in at.button if b.label == "Run variant").click()
    at.run()
    (label, job_id), = dict(at.session_state["whatif_jobs"]).items()
    assert wait_for_job(planning_home, job_id) == "done"
    return str(label)


def test_whatif_demand_x2_variant_diff_and_sweep_show_no_negative_saving(planning_home: Path) -> None:
    """coral-core planned, then the What-if page's default variant (demand ×2, all models) and a demand sweep."""
    at, _ = planned(planning_home, choice="preset:coral-core", page="views/4_What-if.py")
    label = _run_default_variant(at, planning_home)  # default: demand ×2, all models
    next(t for t in at.text_input if t.label == "Factors k").set_value("1, 2")
    next(b for b in at.button if b.label == "Run sweep").click()
    at.run()
    (_, sweep_id), = dict(at.session_state["sweep_jobs"]).items()
    assert wait_for_job(planning_home, sweep_id) == "done"
    at.run()
    assert not at.exception
    frame = at.dataframe[0].value
    assert set(frame["variant"]) == {"base", label}
    for variant, rows in frame.groupby("variant"):
        plan = rows[rows["method"] == "Plan (mixed)"].iloc[0]
        assert plan["status"] == "optimal", variant
        baselines = rows[rows["method"] != "Plan (mixed)"]
        same = baselines[(baselines["status"] == "meets demand")
                         & ((baselines["served_fraction"] - plan["served_fraction"]).abs() < 1e-4)]
        assert len(same) >= 3 and (same["savings_pct"] >= -TOL).all(), same
        assert baselines[baselines["status"] == "falls short"]["savings_pct"].isna().all()
    # the What-if variant's numbers are the API's answer for demand ×2
    x2 = api.solve(_demand_x2())
    variant_plan = frame[(frame["variant"] == label) & (frame["method"] == "Plan (mixed)")].iloc[0]
    assert variant_plan["cost_per_hour"] == pytest.approx(x2.comparable_cost)
    # the plan-to-plan diff: twice the demand is a dearer plan, drawn as a cost step, never a baseline saving
    assert "Plan-to-plan diff" in [s.value for s in at.subheader]
    assert "The new plan costs" in texts(at) and "more" in texts(at)
    # the sweep: at each demand factor the plan is never dearer than a baseline that meets the same demand
    record = api_sweep_rows(planning_home, sweep_id)
    for x, rows in record.groupby("x"):
        plan = rows[rows["method"] == "Plan (mixed templates)"].iloc[0]
        met = rows[rows["feasible"].astype(bool) & (rows["method"] != "Plan (mixed templates)")]
        assert len(met) >= 3 and (met["cost_per_hour"] >= plan["cost_per_hour"] - TOL).all(), (x, met)
    assert any("Cost vs demand" in c.proto.spec for c in at.get("plotly_chart"))


def test_whatif_on_an_idle_model_shows_no_negative_saving(planning_home: Path) -> None:
    """coral-core with one model at 0 req/s, planned, then varied (demand ×2) on the What-if page."""
    at, _ = _plan_saved(planning_home, "coral-core-idle", page="views/4_What-if.py")
    _run_default_variant(at, planning_home)
    at.run()
    assert not at.exception
    frame = at.dataframe[0].value
    shown = frame[(frame["method"] != "Plan (mixed)") & frame["savings_pct"].notna()]
    assert len(shown) >= 6 and (shown["savings_pct"] >= -TOL).all(), shown
    assert (frame[frame["status"] == "falls short"]["savings_pct"].isna()).all()


def api_sweep_rows(home: Path, job_id: str) -> pd.DataFrame:
    """A finished sweep job's rows (what the sweep chart draws)."""
    from planning.jobs import JobStore

    store = JobStore(home / "jobs.sqlite")
    try:
        result = store.get(job_id).result
    finally:
        store.close()
    assert result is not None
    return pd.DataFrame(result["rows"])
