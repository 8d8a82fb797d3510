"""The planner's queueing headroom holds in the simulator: presets' optimal plans attain >= 99 % at their planned rate.

Slow (solves each preset once). The headroom rule is docs/perf-model.md Sec. 3c; the measured table for every
preset is there and in docs/simulator.md (``benchmarks/bench_simulate.py --presets``).
"""

from __future__ import annotations

import pytest

from planning import api
from planning.simulate import SimConfig, build_topology, simulate_topology


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["coral-core", "melange-arena"])
def test_preset_plan_attains_99_percent_under_poisson_arrivals(preset: str) -> None:
    scenario = api.load_preset_scenario(preset)
    plan = api.solve(scenario)
    assert plan.status == "optimal"
    topo = build_topology(plan, scenario, api.engine_context().perf)
    res = simulate_topology(topo, SimConfig(duration_s=600, seed=0))
    assert res.requests > 1000 and res.finish_events == res.requests
    assert res.attainment >= 0.99, (res.attainment, res.bottlenecks())
    for m in res.models:  # no model left far behind (coral-core's phi-4 prefill TTFT tail: 98.5 % at seed 0)
        assert m.attainment >= 0.98, (m.model, m.attainment, m.ttft_ms.p99, m.tpot_ms.p99, res.bottlenecks())
