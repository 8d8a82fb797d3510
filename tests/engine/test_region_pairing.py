"""A model's prefill and decode are planned in the same regions, in the same proportions (issue 12 §4), through
the public interface: `planning solve --json` on coral-extended, whose unpaired optimum put gpt-oss-120b's and
phi-4's prefill in aws:us-east-2 and their decode in gcp:us-central1 with no KV transfer priced or timed."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from planning.cli import main


def test_coral_extended_pairs_every_model_by_region(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "--preset", "coral-extended", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
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
