"""Small scenarios for timeline tests (one region, a few shapes: libraries build in seconds)."""

from __future__ import annotations

from typing import Any

import pytest

from planning.scenario import Scenario

TWO_MODELS: dict[str, Any] = {
    "name": "tl-small",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL40S", "2xL40S", "1xL4", "2xL4"],
    "models": [
        {"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
         "demand": {"rate_rps": 4, "input_len": 1155, "output_len": 211}},
        {"id": "phi-4", "slo": {"prefill_ms": 1200, "decode_ms": 60},
         "demand": {"rate_rps": 2, "input_len": 2048, "output_len": 28}},
    ],
    "options": {"mip_rel_gap": 0.0, "time_limit_s": 60, "K": 0.1},
}


@pytest.fixture
def small() -> Scenario:
    return Scenario.from_dict(TWO_MODELS)
