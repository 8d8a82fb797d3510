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


UNREACHED_S = 1e6  # a deadline (and inner solver cap) no test run reaches, however busy the machine


def unbound_inner_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lift the on-demand engine's wall-clock caps on its inner HiGHS calls (incumbent ILPs 0.5-10 s, the cover
    ILPs of its bounds 2 s and 10 s, its linked cover ILPs' 60 s safety net): whether a capped call stops before its first plan depends on the machine's
    load, so a test of what the search proves must not run under them."""
    from planning.allocate import certify, linked_cover, ondemand, pricing

    for module, name in ((ondemand, "INCUMBENT_MIN_S"), (ondemand, "INCUMBENT_MAX_S"),
                         (certify, "COVER_LIMIT_S"), (pricing, "COVER_ILP_LIMIT_S"),
                         (linked_cover, "LINK_SAFETY_S")):
        assert getattr(module, name) < UNREACHED_S, name  # the cap still exists under this name
        monkeypatch.setattr(module, name, UNREACHED_S)


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
