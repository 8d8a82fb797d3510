"""Request-level discrete-event simulator that checks plans: latencies, SLO attainment, goodput, headroom."""

from planning.simulate.bench import BenchNode, NodeOptions, benchmark, replay
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
    RunOptions,
    SimConfig,
    Topology,
    build_topology,
    engine_token_budgets,
    headroom,
    load_trace,
    simulate_plan,
    simulate_topology,
)
from planning.simulate.steps import EngineLimits, InstanceModel

__all__ = [
    "ROUTERS",
    "BenchNode",
    "BenchmarkResult",
    "EngineLimits",
    "HeadroomResult",
    "InstanceModel",
    "InstanceSim",
    "ModelSim",
    "NodeOptions",
    "Percentiles",
    "RunOptions",
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
