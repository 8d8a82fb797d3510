"""Shared fixtures for the perf-model tests: one PerfModel over the shipped catalog and calibration."""

from __future__ import annotations

import pytest

from planning.perf import PerfModel

# The coral-extended setup (Coral Sec. 6.1): models and node shapes the solvers need T̂ tables for.
CORAL_MODELS = ("qwen3-32b", "gpt-oss-20b", "phi-4", "qwen3-235b-a22b", "gpt-oss-120b", "llama-3-70b")
CORAL_SHAPES = tuple(f"{n}x{g}" for g in ("L40S", "L4", "A10G", "H100", "A100-80G") for n in (1, 2, 4, 8))
# Coral Table 3 SLOs (prefill ms, decode ms) used as realistic budgets in the property tests.
CORAL_SLO = {"phi-4": (1200, 60), "gpt-oss-20b": (900, 30), "qwen3-32b": (1600, 100), "llama-3-70b": (1500, 80),
             "gpt-oss-120b": (1000, 40), "qwen3-235b-a22b": (1800, 120)}


@pytest.fixture(scope="session")
def pm() -> PerfModel:
    return PerfModel()
