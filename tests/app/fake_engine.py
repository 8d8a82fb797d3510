"""A stand-in for planning.api (opt-in with PLANNING_FAKE_ENGINE=1) to develop pages before the engine lands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from planning.errors import PlanningError
from planning.result import (
    BaselineSummary,
    CapacityUse,
    CostLine,
    GroupService,
    InstancePlan,
    NodeBox,
    PlanResult,
    StagePlan,
)
from planning.scenario import Scenario

DATA = Path(__file__).resolve().parents[2] / "data"
TINY = {
    "name": "tiny",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL40S", "2xL40S", "1xL4"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                "demand": {"rate_rps": 2, "input_len": 500, "output_len": 100}}],
}


def list_presets() -> list[str]:
    return ["coral-core", "tiny"]


def load_preset_scenario(name: str) -> Scenario:
    if name not in list_presets():
        raise PlanningError("preset", f"unknown preset {name!r}.", "use coral-core or tiny.")
    return Scenario.from_dict({**TINY, "name": name})


def validate(scenario: Scenario) -> list[str]:
    return []


def _stages() -> tuple[StagePlan, ...]:
    return (StagePlan(20, 0, 20, (NodeBox("2xL40S", "L40S", 2, 900.0), NodeBox("2xL40S", "L40S", 2, 900.0))),
            StagePlan(12, 20, 32, (NodeBox("1xL4", "L4", 1, 1700.0),)))


def solve(scenario: Scenario, *, progress: Any = None, cancel: Any = None) -> PlanResult:
    for i in range(3):
        if progress:
            progress((i + 1) / 3, f"step {i + 1}")
        time.sleep(0.05)
    rate = scenario.models[0].demand.rate_rps
    cost = 3.0 * max(rate, 0.1)
    return PlanResult(
        status="optimal", objective="cost", cost_per_hour=cost, provisioning_per_hour=cost, penalty_per_hour=0.0,
        served_fraction=1.0, mip_gap=0.0,
        instances=(InstancePlan(scenario.models[0].id, "prefill", "2x2xL40S+1xL4", "aws:us-east-2", 1,
                                {"2xL40S": 2, "1xL4": 1}, {"L40S": 4, "L4": 1}, 1800.0, "prompt tok/s", 0.8,
                                cost, False, _stages()),),
        cost_lines=(CostLine(scenario.models[0].id, "prefill", "aws:us-east-2", "2xL40S", 2, cost * 0.8),
                    CostLine(scenario.models[0].id, "prefill", "aws:us-east-2", "1xL4", 1, cost * 0.2)),
        capacity=(CapacityUse("aws:us-east-2", "2xL40S", "L40S", 2, 8, 1.2),),
        service=(GroupService(scenario.models[0].id, "prefill", 1000.0, 1000.0, "prompt tok/s"),),
        baselines=(BaselineSummary("homogeneous L40S", cost * 1.25, 1.0, True, savings_pct=20.0),),
        timings={"total_seconds": 0.15}, provenance={"perf": "roofline"},
        scenario=scenario.to_dict())


def build_templates(scenario: Scenario, *, progress: Any = None, cancel: Any = None) -> pd.DataFrame:
    rows = [{"model": "llama-3-8b", "phase": ph, "template_id": f"t{i}", "n_nodes": 3, "n_gpus": 5, "n_gpu_types": 2,
             "single_shape": i % 2 == 0, "single_gpu_type": i % 2 == 0, "throughput": 1000.0 + i, "unit": "tok/s", "cost_per_hour": 2.0 + i,
             "region": "aws:us-east-2", "stages_json": "fake"} for i, ph in enumerate(["prefill", "decode"])]
    return pd.DataFrame(rows)


def template_stages(stages_json: str) -> tuple[StagePlan, ...]:
    return _stages() if stages_json else ()


def sweep(scenario: Scenario, kind: str, values: list[float], *, progress: Any = None,
          cancel: Any = None) -> pd.DataFrame:
    return pd.DataFrame([{"x": v, "method": m, "cost_per_hour": v * c, "served_fraction": 1.0, "feasible": True}
                         for v in values for m, c in (("Plan (mixed templates)", 3.0), ("homogeneous L4", 4.0))])


def catalog_frames() -> dict[str, pd.DataFrame]:
    return {"gpus": pd.read_csv(DATA / "gpus.csv"), "configs": pd.read_csv(DATA / "node_configs.csv"),
            "models": pd.DataFrame({"id": ["llama-3-8b", "llama-2-7b"]}), "regions": pd.read_csv(DATA / "regions.csv"),
            "slo_presets": pd.DataFrame(), "availability": pd.DataFrame(columns=["config_id", "nodes"])}


def install(monkeypatch: Any) -> None:
    """Replace the planning.api entry points with these stand-ins for one test."""
    from planning import api

    for name in ("list_presets", "load_preset_scenario", "validate", "solve", "build_templates", "template_stages", "sweep",
                 "catalog_frames"):
        monkeypatch.setattr(api, name, globals()[name])
