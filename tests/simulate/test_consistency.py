"""Planner ↔ simulator consistency on a preset: the optimal plan at its planned rate under Poisson arrivals.

Slow (solves coral-core). Findings with numbers are in docs/simulator.md; bench_simulate.py --presets runs all.
"""

from __future__ import annotations

import pytest

from planning import api
from planning.simulate import SimConfig, build_topology, simulate_topology


@pytest.mark.slow
def test_coral_core_plan_attains_or_names_the_saturated_instance() -> None:
    scenario = api.load_preset_scenario("coral-core")
    plan = api.solve(scenario)
    topo = build_topology(plan, scenario, api.engine_context().perf)
    res = simulate_topology(topo, SimConfig(duration_s=300, seed=0))
    assert res.finish_events == res.requests
    failing = {m.model for m in res.models if m.attainment < 0.99}
    found = {b["model"]: b for b in res.bottlenecks()}
    assert set(found) == failing
    for b in found.values():
        # the simulator points at a heavily loaded instance of the failing model and phase
        assert b["instance"].startswith(f"{b['model']}/{b['phase']}/")
        assert max(b["utilisation"], b["kv_peak"]) >= 0.9, b
    # served throughput matches the planned demand when nothing drops (conservation at plan level)
    for g in plan.service:
        if g.phase == "decode":
            sim = res.model(g.model)
            assert sim.output_tokens_per_s == pytest.approx(g.served, rel=0.15)
