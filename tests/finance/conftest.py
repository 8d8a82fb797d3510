"""Small finance scenarios: one model, one AWS region, a few shapes (libraries build in a second)."""

from __future__ import annotations

from typing import Any

import pytest

SMALL: dict[str, Any] = {
    "name": "fin-small",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL4", "1xL40S", "2xL4"],
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                "demand": {"rate_rps": 6, "input_len": 1155, "output_len": 211}}],
    "reservations": [{"region": "aws:us-east-2", "shape": "1xL40S", "count": 4},
                     {"region": "aws:us-east-2", "shape": "1xL4", "count": 3}],
    "finance": {"profile": {"factors": [0.3, 0.6, 1.0, 0.5], "epoch_hours": 6, "source": "test"}},
    "options": {"mip_rel_gap": 1e-6, "templates": "library", "time_limit_s": 120},
}


@pytest.fixture
def small() -> dict[str, Any]:
    import copy

    return copy.deepcopy(SMALL)


def small_sizing_inputs() -> tuple[Any, Any, Any, Any]:
    """SMALL resolved, its template libraries, its epochs and its candidates (the sizing's inputs)."""
    from planning.api import engine_context
    from planning.finance.commitments import candidates_of, epochs_of
    from planning.resolve import resolve_scenario
    from planning.scenario import Scenario
    from planning.templates.sets import build_template_sets

    s = Scenario.from_dict(SMALL)
    ctx = engine_context()
    resolved = resolve_scenario(s, ctx.catalog)
    return resolved, build_template_sets(ctx, resolved), epochs_of(s), candidates_of(s, ctx.catalog)
