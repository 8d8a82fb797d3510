"""Engine fixtures: an isolated PLANNING_HOME and a tiny scenario that solves in about a second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import planning.context as context

TINY: dict[str, Any] = {
    "name": "tiny",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL4", "1xL40S", "1xA10G"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1500, "decode_ms": 80},
                "demand": {"rate_rps": 2, "input_len": 1024, "output_len": 128}}],
    "options": {"nmax": 3, "rho": 12, "K": 0.1, "time_limit_s": 30},
}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.getbasetemp() / "planning-home"
    monkeypatch.setenv("PLANNING_HOME", str(home))
    context._CTX = None
    yield home
    context._CTX = None


@pytest.fixture
def tiny() -> dict[str, Any]:
    import copy

    return copy.deepcopy(TINY)
