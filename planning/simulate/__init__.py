"""Request-level discrete-event simulator that checks plans: latencies, SLO attainment, goodput, headroom."""

from planning.simulate.bench import benchmark, replay
from planning.simulate.metrics import (
    BenchmarkResult,
    HeadroomResult,
    InstanceSim,
    ModelSim,
    Percentiles,
    SimResult,
)
from planning.simulate.run import (
    ROUTERS,
    SimConfig,
    Topology,
    build_topology,
    engine_token_budgets,
    headroom,
    load_trace,
    simulate_plan,
    simulate_topology,
)
from planning.simulate.steps import InstanceModel

__all__ = [
    "ROUTERS",
    "BenchmarkResult",
    "HeadroomResult",
    "InstanceModel",
    "InstanceSim",
    "ModelSim",
    "Percentiles",
    "SimConfig",
    "SimResult",
    "Topology",
    "benchmark",
    "build_topology",
    "engine_token_budgets",
    "headroom",
    "load_trace",
    "replay",
    "simulate_plan",
    "simulate_topology",
]
