"""A model's prefill and decode are planned in the same regions, in the same proportions (issue 12 §4), through
the public interface: `planning solve --json` on coral-extended, whose unpaired optimum put gpt-oss-120b's and
phi-4's prefill in aws:us-east-2 and their decode in gcp:us-central1 with no KV transfer priced or timed."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest


def test_coral_extended_pairs_every_model_by_region(preset_plans: Any) -> None:
    """The CLI's run is the session's (``tests/conftest.py``: ``planning solve --preset coral-extended --json
    --out PLAN``, solved once and shared with the preset walks)."""
    run = preset_plans.cli("coral-extended")
    assert run.code == 0
    plan = json.loads(run.text)
    assert plan["status"] == "optimal"
    served: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for inst in plan["instances"]:
        served[(inst["model"], inst["phase"])][inst["region"]] += inst["load"] * inst["throughput"]
    models = {m for m, _ in served}
    assert len(models) == 6
    for m in models:
        pre, dec = served[(m, "prefill")], served[(m, "decode")]
        assert set(pre) == set(dec), m  # the same regions
        tp, td = sum(pre.values()), sum(dec.values())
        for region in pre:  # the same share of the model's requests in each region
            assert pre[region] / tp == pytest.approx(dec[region] / td, abs=1e-6), (m, region)
