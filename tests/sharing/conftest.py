"""Sharing fixtures: an isolated PLANNING_HOME and a small long-tail scenario with explicit single-GPU offers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import planning.context as context

SMALL: dict[str, Any] = {
    "name": "small-tail",
    "mode": "aggregated",
    "regions": [],
    "shapes": ["1xH100", "1xL40S", "1xL4"],
    "offers": [
        {"region": "test:r", "shape": "1xH100", "price_per_hour": 4.0, "available": 4, "source": "test"},
        {"region": "test:r", "shape": "1xL40S", "price_per_hour": 1.8, "available": 6, "source": "test"},
        {"region": "test:r", "shape": "1xL4", "price_per_hour": 0.8, "available": 8, "source": "test"},
    ],
    "models": [
        {"id": "llama-3-8b", "slo": {"prefill_ms": 1500, "decode_ms": 80},
         "demand": {"rate_rps": 3, "input_len": 1024, "output_len": 128}},
        *[{"id": f"ft-{i}", "base": "llama-3-8b", "slo": {"prefill_ms": 3000, "decode_ms": 100},
           "demand": {"rate_rps": 0.2 / (i + 1), "input_len": 1024, "output_len": 128, "burstiness": 3}}
          for i in range(4)],
        {"id": "code-0", "base": "gpt-oss-20b", "slo": {"prefill_ms": 2000, "decode_ms": 100},
         "demand": {"rate_rps": 0.05, "input_len": 2048, "output_len": 28}},
    ],
    "options": {"nmax": 2, "rho": 12, "K": 0.0, "time_limit_s": 30, "sharing": "kvpr", "sharing_threshold_rps": 1.0},
}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.getbasetemp() / "planning-home"
    monkeypatch.setenv("PLANNING_HOME", str(home))
    context._CTX = None
    yield home
    context._CTX = None


@pytest.fixture()
def small() -> dict[str, Any]:
    import copy

    return copy.deepcopy(SMALL)
