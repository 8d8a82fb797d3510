"""Plan page: KPIs, breakdown, capacity, service, instances with a pipeline diagram, baselines, exports."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import app, planned, texts


def test_plan_without_a_job_points_home() -> None:
    at = app("pages/3_Plan.py")
    assert not at.exception
    assert "No plan yet" in texts(at)


def test_plan_page_draws_every_section(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="pages/3_Plan.py")
    assert not at.exception
    assert [m.label for m in at.metric][:1] == ["Cost per hour"]
    headers = [h.value for h in at.header]
    assert headers == ["Cost breakdown", "GPUs used vs available", "Served vs demanded", "Instances", "Baselines",
                       "Export"]
    charts = at.get("plotly_chart")
    assert len(charts) >= 6  # treemap, bars, capacity, service, pipeline, baselines
    assert len(at.dataframe) >= 2  # instances and baselines tables
    assert at.selectbox[0].label == "Pipeline layout of"


def test_failed_job_shows_its_error_and_page_stays_usable(planning_home: Path) -> None:
    from planning.jobs import JobStore

    at, _ = planned(planning_home)
    store = JobStore(planning_home / "jobs.sqlite")
    new_id, _ = store.create_or_reuse("badjob0000000000", "solve", {"x": 1}, None, reuse=False)
    store.mark_running(new_id)
    store.finish_failed(new_id, "models[0].slo.decode_ms: must be > 0, got -1. Fix: use a value > 0.")
    store.close()
    at.query_params["job"] = new_id
    at.switch_page("pages/3_Plan.py")
    at.run()
    assert not at.exception
    assert "must be > 0" in texts(at)


def test_optimal_plan_never_shows_a_negative_saving(planning_home: Path) -> None:
    """Issue 12: the plan and the baselines count the same components, so an optimal plan never 'loses'."""
    at, _ = planned(planning_home, page="pages/3_Plan.py")
    assert not at.exception
    saving = next(m for m in at.metric if m.label.startswith("Savings vs best"))
    assert not str(saving.value).startswith("-")
    baselines = next(df.value for df in at.dataframe if "savings_pct" in df.value)
    comparable = baselines.iloc[1:]
    comparable = comparable[comparable["savings_pct"].notna()]
    assert len(comparable) >= 1 and (comparable["savings_pct"] >= -1e-9).all()
    plan_cost = float(baselines.iloc[0]["cost_per_hour"])
    cost_metric = next(m for m in at.metric if m.label == "Cost per hour")
    assert cost_metric.value == f"${plan_cost:,.2f}"  # the KPI and the comparison table show the same cost


def test_plan_page_offers_report_and_deployment_downloads(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="pages/3_Plan.py")
    labels = [b.label for b in at.get("download_button")]
    assert {"Report (printable HTML)", "Report (Markdown)", "Deployment files (SkyPilot + Kubernetes, zip)",
            "Plan JSON"} <= set(labels)
