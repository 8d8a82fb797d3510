"""Shared runs for the measurement tests: the simulator's own benchmark of Llama-3-8B on one A10G."""

from __future__ import annotations

import pytest

from planning.perf.model import PerfModel
from planning.simulate.bench import benchmark
from planning.simulate.metrics import BenchmarkResult


@pytest.fixture(scope="session")
def perf() -> PerfModel:
    return PerfModel()


@pytest.fixture(scope="session")
def a10g_run(perf: PerfModel) -> BenchmarkResult:
    """A closed loop of 8 clients, 512 → 128 tokens, 64 requests."""
    return benchmark("llama-3-8b", "A10G", input_len=512, output_len=128, concurrency=8, requests=64, perf=perf)
