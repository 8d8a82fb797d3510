"""The enterprise preset through the CLI (`planning solve --preset enterprise --json`): commitments and costs by pricing kind are
in the JSON and agree with each other, with the design hour's costs and with the horizon's bill."""

from __future__ import annotations

import json
from typing import Any

import pytest


@pytest.mark.slow
def test_enterprise_json_commitments_and_costs_by_kind_agree(preset_plans: Any) -> None:
    """The CLI's JSON of the enterprise preset at its own options (300 s): the session's, ``tests/conftest.py``
    (``planning solve --preset enterprise --json --out PLAN``, solved once and shared with the one-bill and export
    walks)."""
    run = preset_plans.cli("enterprise")
    assert run.code == 0
    plan = json.loads(run.text)
    assert plan["status"] in ("optimal", "feasible")
    # costs by pricing kind: the four kinds, adding up to the comparable $/h (provisioning + committed + transfer)
    kinds = plan["cost_by_pricing_kind"]
    assert set(kinds) == {"owned", "reserved", "on_demand", "spot"}
    comparable = plan["provisioning_per_hour"] + plan["committed_per_hour"] + plan["transfer_per_hour"]
    assert sum(kinds.values()) + plan["transfer_per_hour"] == pytest.approx(comparable, rel=1e-9)
    # the owned cluster (2 × 8xH100) is paid every hour: its fixed cost at least, served or idle
    fixed_owned = 2 * (250_000 / 4 / 8760 + 3.0)
    assert kinds["owned"] >= fixed_owned - 1e-6
    # commitments: every field the issue names; the reserved kind is exactly their fees (nothing held before)
    sizing = plan["finance"]["sizing"]
    assert sizing["total_usd"] is not None, sizing["message"]
    signed = [c for c in plan["commitments"] if c["status"] == "sign"]
    for c in plan["commitments"]:
        assert {"region", "shape", "count", "term_years", "upfront_usd", "hourly_usd"} <= set(c)
        assert c["count"] > 0 and c["term_years"] == 1
    assert kinds["reserved"] == pytest.approx(sum(c["count"] * c["effective_hourly"] for c in signed), rel=1e-9)
    assert plan["committed_per_hour"] == pytest.approx(fixed_owned + kinds["reserved"], rel=1e-9)
    chosen = {k: v for k, v in sizing["commitments"].items() if v}
    assert sorted(chosen.values()) == sorted(c["count"] for c in signed)
    # the bill adds up to the horizon total, which is never above all on-demand (R = 0 is one of its options)
    assert sum(plan["finance"]["bill_totals"]["kind"].values()) == pytest.approx(sizing["total_usd"], rel=1e-6)
    on_demand = plan["finance"]["comparisons"]["all on-demand"]  # the sizing's R = 0 step: there with any plan
    assert sizing["total_usd"] <= on_demand["total_usd"] * (1 + 1e-9)
    assert sizing["bound_usd"] <= sizing["total_usd"] * (1 + 1e-9)
