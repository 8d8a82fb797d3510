"""Plan page: KPIs, breakdown, capacity, service, instances with a pipeline diagram, baselines, exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from planning import api
from tests.app.conftest import app, planned, texts, wait_for_job


def test_plan_without_a_job_points_home() -> None:
    at = app("views/3_Plan.py")
    assert not at.exception
    assert "No plan yet" in texts(at)


def test_plan_page_draws_every_section(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/3_Plan.py")
    assert not at.exception
    assert [m.label for m in at.metric][:1] == ["Cost per hour"]
    headers = [h.value for h in at.header]
    assert headers == ["Cost breakdown", "GPUs used vs available", "Served vs demanded", "Check with simulation",
                       "Instances", "Baselines",
                       "Compare clouds and regions", "Export"]
    charts = at.get("plotly_chart")
    assert len(charts) >= 6  # treemap, bars, capacity, service, pipeline, baselines
    assert len(at.dataframe) >= 2  # instances and baselines tables
    assert "Pipeline layout of" in [s.label for s in at.selectbox]


def test_failed_job_shows_its_error_and_page_stays_usable(planning_home: Path) -> None:
    from planning.jobs import JobStore

    at, _ = planned(planning_home)
    store = JobStore(planning_home / "jobs.sqlite")
    new_id, _ = store.create_or_reuse("badjob0000000000", "solve", {"x": 1}, None, reuse=False)
    store.mark_running(new_id)
    store.finish_failed(new_id, "models[0].slo.decode_ms: must be > 0, got -1. Fix: use a value > 0.")
    store.close()
    at.query_params["job"] = new_id
    at.switch_page("views/3_Plan.py")
    at.run()
    assert not at.exception
    assert "must be > 0" in texts(at)


def test_optimal_plan_never_shows_a_negative_saving(planning_home: Path) -> None:
    """Issue 12: the plan and the baselines count the same components, so an optimal plan never 'loses'."""
    at, _ = planned(planning_home, page="views/3_Plan.py")
    assert not at.exception
    saving = next(m for m in at.metric if m.label.startswith("Savings vs best"))
    assert not str(saving.value).startswith("-")
    baselines = next(df.value for df in at.dataframe if "plan saves" in df.value)
    comparable = baselines.iloc[1:]
    comparable = comparable[comparable["plan saves"].str.endswith(" %")]
    assert len(comparable) >= 1 and all(float(v.removesuffix(" %")) >= -1e-9 for v in comparable["plan saves"])
    cost_metric = next(m for m in at.metric if m.label == "Cost per hour")
    # the KPI (the bill: a plan without a horizon bills its design hour) and the comparison table agree
    assert cost_metric.value == baselines.iloc[0]["$/h"]


def test_plan_page_offers_report_and_deployment_downloads(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/3_Plan.py")
    labels = [b.label for b in at.get("download_button")]
    assert {"Report (printable HTML)", "Report (Markdown)", "Deployment files (SkyPilot + Kubernetes, zip)",
            "Plan JSON"} <= set(labels)


def test_simulation_panel_checks_the_plan_in_the_background(planning_home: Path) -> None:
    """Issue 10: "Check with simulation" runs api.simulate + headroom as a job; KPIs and CDFs vs SLO appear."""
    at, plan_job = planned(planning_home, page="views/3_Plan.py")
    next(b for b in at.button if b.label == "Check with simulation").click()
    at.run()
    sim_job = dict(at.session_state["sim_jobs"])[plan_job]
    assert wait_for_job(planning_home, sim_job) == "done"
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    attainment = float(metrics["SLO attainment"].rstrip("%")) / 100
    assert 0.0 <= attainment <= 1.0
    assert metrics["Headroom (× demand)"].startswith("×") and float(metrics["Headroom (× demand)"][1:]) > 0
    assert "tok/s" in metrics["Goodput"]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("TTFT distribution vs SLO" in t for t in titles) and any("TPOT distribution vs SLO" in t for t in titles)
    assert "Simulated" in texts(at) and "requests over" in texts(at)


def test_compare_clouds_and_regions_side_by_side_on_demand_and_spot(planning_home: Path) -> None:
    """Issue 12 finance: the same demand per market, on-demand next to spot, monthly cost, spot cheaper."""
    at, plan_job = planned(planning_home, page="views/3_Plan.py")
    next(b for b in at.button if b.label == "Compare clouds and regions").click()
    at.run()
    job = dict(at.session_state["market_jobs"])[plan_job]
    assert wait_for_job(planning_home, job) == "done"
    at.run()
    assert not at.exception
    table = next(df.value for df in at.dataframe if "spot $/h" in df.value)
    assert table["where"].iloc[0] == "all regions (mixed optimum)"
    row = table.iloc[0]
    assert row["spot $/h"] < row["on-demand $/h"]  # the tiny scenario's region sells spot below on-demand
    assert row["spot saves"] == pytest.approx((row["on-demand $/h"] - row["spot $/h"]) / row["on-demand $/h"])
    assert abs(row["on-demand $/month"] - 730 * row["on-demand $/h"]) < 730 * 0.006
    assert "reclaimed at short notice" in texts(at)


def test_sharing_section_for_many_models(planning_home: Path) -> None:
    """Issue 14 UI: a many-model preset gets the sharing section; the job's shared nodes, memory and cost appear,
    and the shared figure adds the shared GPUs and the dedicated part exactly."""
    at, plan_job = planned(planning_home, choice="preset:long-tail", page="views/3_Plan.py")
    assert "Share GPUs between low-traffic models" in [h.value for h in at.header]
    at.radio[0].set_value("exact")  # KVPR loses to the dedicated plan on long-tail (below): the exact plan shares
    next(b for b in at.button if b.label == "Plan with sharing").click()
    at.run()
    job = dict(at.session_state["shared_jobs"])[plan_job]
    assert wait_for_job(planning_home, job) == "done"
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    dedicated = float(metrics["Dedicated plan (this page)"][1:-2].replace(",", ""))
    shared = float(metrics["With shared GPUs"][1:-2].replace(",", ""))
    change = float(metrics["Difference"].rstrip("%")) / 100
    assert abs((shared - dedicated) / dedicated - change) < 0.001 + 0.01 / dedicated
    from planning.jobs import JobStore

    with JobStore(planning_home / "jobs.sqlite") as store:
        out = store.get(job).result
    assert out is not None and shared == round(out["cost_per_hour"], 2)  # the shared plan's total, counted once
    assert out["bill"]["per_hour"] == shared  # and the bill its JSON carries is the same number
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("weights vs KV pool" in s for s in specs) and any("Dedicated plan vs shared plan" in s for s in specs)
    # the shared GPUs simulated request by request: KPIs and one row per shared model, worst first
    within = metrics["Requests within SLO"]
    assert within.endswith("%") and 0.0 <= float(within.rstrip("%")) <= 100.0
    table = next(d.value for d in at.dataframe if "within SLO" in d.value.columns)
    assert len(table) >= 10 and list(table["within SLO"]) == sorted(table["within SLO"])
    assert "Moore–Hodgson" in texts(at)
    # the popular models' dedicated instances of the shared plan are simulated too, and the headline counts both
    popular = set(table[table["GPU"] == "dedicated"]["model"])
    assert {"llama-3-8b", "gpt-oss-20b", "qwen3-32b"} <= popular  # the joint split may dedicate a few more
    preset = {m.id for m in api.load_preset_scenario("long-tail").models}
    assert len(table) == len(preset) and set(table["model"]) == preset  # every model once, shared or dedicated
    weighted = float((table["within SLO"] * table["requests"]).sum() / table["requests"].sum())
    assert float(within.rstrip("%")) / 100 == pytest.approx(weighted, abs=5e-5)
    assert metrics["On shared GPUs"].endswith("%")
    at.switch_page("views/5_Jobs.py")  # the Jobs table: the sharing job's bill is the shared plan's total
    at.run()
    jobs = at.dataframe[0].value
    assert float(jobs[jobs["id"] == job]["cost $/h"].iloc[0]) == shared


def test_kvpr_that_loses_shows_the_dedicated_plan_and_why(planning_home: Path) -> None:
    """Issue 37 §2: KVPR on long-tail is dearer than no sharing; the section says it lost, and why, and lists the
    checks of the plan returned (the dedicated one)."""
    at, plan_job = planned(planning_home, choice="preset:long-tail", page="views/3_Plan.py")
    next(b for b in at.button if b.label == "Plan with sharing").click()
    at.run()
    assert wait_for_job(planning_home, dict(at.session_state["shared_jobs"])[plan_job]) == "done"
    at.run()
    assert not at.exception
    lost = [w.value for w in at.warning if "lost to the plan without sharing" in w.value]
    assert lost and "more than serving every model on dedicated templates" in lost[0]
    assert any(e.label.startswith("Checks:") for e in at.expander)


def test_sharing_section_hidden_for_one_model(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/3_Plan.py")
    assert "Share GPUs between low-traffic models" not in [h.value for h in at.header]


def test_plan_page_shows_capacity_and_cost_with_their_band(planning_home: Path) -> None:
    """Issue 9 §5: the plan's capacity and cost carry the validation-derived uncertainty band."""
    at, _ = planned(planning_home, page="views/3_Plan.py")
    assert not at.exception
    shown = texts(at)
    assert "How far to trust the capacity" in shown and "costs up to $" in shown
    band_table = next(df.value for df in at.dataframe if "capacity_high" in df.value)
    assert (band_table["capacity_low"] < band_table["capacity_high"]).all()


def test_cost_charts_add_up_to_the_cost_kpi(planning_home: Path) -> None:
    """Issue 12: the Cost breakdown counts what the KPI and every comparison count (the nodes); the initialization
    allowance is a caption, not a block of the chart (coral-core plans carry one)."""
    at, _ = planned(planning_home, choice="preset:coral-core", page="views/3_Plan.py")
    assert not at.exception
    kpi = next(m.value for m in at.metric if m.label == "Cost per hour")
    treemap = next(c.proto.spec for c in at.get("plotly_chart") if "Cost breakdown (full cost, design hour)" in c.proto.spec)
    assert kpi.split("/")[0] in treemap  # "$26.00" in "Cost breakdown (full cost, design hour) — $26.00"
    assert "init penalty" not in treemap
    assert "initialization allowance" in texts(at)


def test_plan_page_lists_the_plans_checks(planning_home: Path) -> None:
    """Issue 37 §1: the Plan page shows the plan's check list (an expander with every check) and no failed check
    of an optimal plan."""
    at, _ = planned(planning_home, page="views/3_Plan.py")
    assert not at.exception
    label = next(e.label for e in at.expander if e.label.startswith("Checks:"))
    assert "passed" in label and " 0 failed" in label
    table = next(df.value for df in at.dataframe if "basis" in df.value)
    assert {"cost ≤ homo", "served fraction", "proven gap"} <= set(table["check"])


def test_histogram_plans_instances_table_shows_what_each_copy_serves(planning_home: Path) -> None:
    """Issue 38: a Mélange-style histogram (melange-arena, 8 req/s) shows each instance's capacity for the mix it
    is assigned (assigned req/s ÷ load), so throughput × utilisation × copies adds up to the demand; the fastest
    class's rate (343 req/s for an A100) is not what an instance serves."""
    at, _ = planned(planning_home, "preset:melange-arena", page="views/3_Plan.py")
    assert not at.exception
    table = next(df.value for df in at.dataframe if "throughput_unit" in df.value)
    assert set(table["throughput_unit"]) == {"req/s"}
    served = table["throughput"] * table["utilisation"] * table["count"]
    assert float(served.sum()) == pytest.approx(8.0, rel=1e-3)  # utilisation is rounded to 4 digits
    assert (table["throughput"] < 100).all()
