"""Plan page, Export: what the deployment files run differently from the plan and what it costs, before download."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planning import api
from planning.scenario import Scenario, save_scenario
from tests.app.conftest import planned, texts, wait_for_job

# qwen3-32b on small L4/L40S nodes, disaggregated: its plan pipelines both phases, which vLLM's NixlConnector
# cannot connect (docs/deploy.md), so the export check has a lost KV transfer to show and to price
PIPELINED: dict[str, Any] = {
    "name": "pipelined-l4", "mode": "disaggregated", "regions": ["aws:us-east-1"],
    "shapes": ["1xL4", "1xL40S", "2xL40S"],
    "models": [{"id": "qwen3-32b", "slo": {"prefill_ms": 5000, "decode_ms": 200},
                "demand": {"rate_rps": 0.5, "input_len": 1000, "output_len": 200}}],
}


def test_export_check_says_what_the_preview_says(planning_home: Path) -> None:
    """The tiny plan: the page shows exactly api.export_preview's answer (a caption, or its table)."""
    from planning.jobs.store import JobStore

    at, job_id = planned(planning_home, page="views/3_Plan.py")
    assert not at.exception
    store = JobStore(planning_home / "jobs.sqlite")
    try:
        record = store.get(job_id)
    finally:
        store.close()
    assert record.result_json is not None
    preview = api.export_preview(api.plan_from_json(record.result_json), price_alternative=False)
    tables = [df.value for df in at.dataframe if "what it costs" in df.value.columns]
    if preview.deploys_as_planned:
        assert "Every instance of this plan deploys as planned." in texts(at) and not tables
    else:
        assert list(tables[0]["what differs"]) == [r["what differs"] for r in preview.rows()]


def test_export_check_lists_the_lost_kv_transfer_and_prices_the_alternative(planning_home: Path) -> None:
    save_scenario(Scenario.from_dict(PIPELINED), planning_home / "scenarios" / "pipelined-l4.yaml")
    at, _ = planned(planning_home, "saved:pipelined-l4", page="views/3_Plan.py")
    assert not at.exception
    table = next(df.value for df in at.dataframe if "what it costs" in df.value.columns)
    assert set(table["model"]) == {"qwen3-32b"} and table["what differs"].str.startswith("no KV transfer").all()
    assert any("differ from the plan" in str(w.value) for w in at.warning)
    next(b for b in at.button if b.label.startswith("Price the plan that deploys as planned")).click()
    at.run()
    job_id = str(next(iter(at.session_state["export_alternative_jobs"].values())))
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    said = " ".join(str(i.value) for i in at.info)
    assert "options.max_stages: 1" in said  # priced, or said to have no plan without pipelines


def test_the_files_are_simulated_as_exported_on_the_page(planning_home: Path) -> None:
    """The lost KV transfer's button runs the plan and the plan as its files deploy it through the simulator in
    the background; the page shows both per model (qwen3-32b served round robin by its two pipelines without KV
    transfer meets its SLOs less often than the connected plan)."""
    save_scenario(Scenario.from_dict(PIPELINED), planning_home / "scenarios" / "pipelined-l4.yaml")
    at, _ = planned(planning_home, "saved:pipelined-l4", page="views/3_Plan.py")
    next(b for b in at.button if b.label == "Simulate the files as exported").click()
    at.run()
    job_id = str(next(iter(at.session_state["export_simulation_jobs"].values())))
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception
    table = next(df.value for df in at.dataframe if "SLO attainment as exported" in df.value.columns)
    row = table.set_index("model").loc["qwen3-32b"]
    assert 0 <= row["SLO attainment as exported"] < row["SLO attainment as planned"] <= 1
    assert row["goodput as exported (tok/s)"] < row["goodput as planned (tok/s)"]
    said = " ".join(str(c.value) for c in at.caption)
    assert "Simulated as exported (120 s of Poisson arrivals" in said and "round robin" in said
