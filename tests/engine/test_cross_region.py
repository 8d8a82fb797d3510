"""``options.kv_transfer: cross-region`` (issue 12 §4) through the public interface: a two-region AWS scenario
where only us-east-1 sells L40S (cheap prefill) and only us-west-2 sells H100 (the 12 ms TPOT needs one for
decode). Paired per region, both phases run on H100 in us-west-2; across regions, prefill moves to the L40S and
the plan pays the KV egress (AWS inter-region $0.02/GB, data/egress.csv) on its own cost line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from planning.cli import main
from planning.result import KvFlow, PlanResult
from planning.scenario import Scenario
from planning.simulate.run import SimConfig, simulate_plan
from planning.transfer import continent, transfer

SCENARIO: dict[str, Any] = {
    "name": "two-aws-regions",
    "mode": "disaggregated",
    "models": [{"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 12},
                "demand": {"rate_rps": 0.2, "input_len": 1024, "output_len": 256}}],
    "regions": ["aws:us-east-1", "aws:us-west-2"],
    "shapes": ["1xL40S", "1xH100"],
    "availability_overrides": [{"region": "aws:us-east-1", "shape": "1xH100", "nodes": 0},
                               {"region": "aws:us-west-2", "shape": "1xL40S", "nodes": 0}],
    "options": {"time_limit_s": 60, "kv_transfer": "cross-region"},
    "objective": {"kind": "cost"},
}
# llama-3-8b: 32 layers × 8 KV heads × 128 dims × 2 (K and V) × 2 bytes = 131,072 B per token
KV_BYTES = 1024 * 32 * 8 * 128 * 2 * 2


def _solve(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> dict[str, Any]:
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "options": {**SCENARIO["options"], "kv_transfer": mode}}))
    assert main(["solve", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cross_region_pays_the_kv_egress_on_its_own_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = _solve(tmp_path, capsys, "same-region")
    cross = _solve(tmp_path, capsys, "cross-region")
    assert same["status"] == cross["status"] == "optimal"
    assert same["transfer_per_hour"] == 0.0
    assert {(i["phase"], i["region"]) for i in same["instances"]} == {("prefill", "aws:us-west-2"), ("decode", "aws:us-west-2")}
    assert {(i["phase"], i["region"]) for i in cross["instances"]} == {("prefill", "aws:us-east-1"), ("decode", "aws:us-west-2")}
    usd = 0.02 * KV_BYTES * 0.2 * 3600 / 1e9  # $/GB × bytes per request × requests/s × s/h
    assert cross["transfer_per_hour"] == pytest.approx(usd, rel=1e-9)
    lines = [c for c in cross["cost_lines"] if c["kind"] == "transfer"]
    assert len(lines) == 1 and lines[0]["cost_per_hour"] == pytest.approx(usd)
    assert cross["cost_per_hour"] == pytest.approx(cross["provisioning_per_hour"] + cross["penalty_per_hour"] + usd)
    assert cross["provisioning_per_hour"] + usd < same["provisioning_per_hour"]  # the L40S prefill pays for the egress
    (flow,) = cross["kv_flows"]
    assert (flow["model"], flow["src"], flow["dst"], flow["share"]) == ("llama-3-8b", "aws:us-east-1", "aws:us-west-2", pytest.approx(1.0))
    assert flow["one_way_ms"] == pytest.approx(25.0)  # data/wan.csv, same continent
    assert flow["transfer_s"] == pytest.approx(0.025 + KV_BYTES / (5e9 / 8))
    assert any("cross-region KV" in d and "aws:us-west-2" in d for d in cross["diagnostics"])
    plan = PlanResult.from_dict(cross)
    assert plan.kv_flows[0].cross_region and plan.comparable_cost == pytest.approx(plan.provisioning_per_hour + usd)
    assert "Cross-region KV transfers" in plan.to_markdown()
    # the baselines count the same components: an ILP baseline that crosses regions includes its egress
    ilp = next(b for b in cross["baselines"] if b["name"] == "homo-ilp")
    assert ilp["feasible"] and ilp["cost_per_hour"] == pytest.approx(cross["provisioning_per_hour"] + usd)


def test_old_plan_json_reads_without_transfer() -> None:
    plan = PlanResult.from_dict({"status": "optimal", "objective": "cost", "cost_per_hour": 2.0,
                                 "provisioning_per_hour": 2.0, "penalty_per_hour": 0.0, "served_fraction": 1.0,
                                 "mip_gap": 0.0})
    assert plan.transfer_per_hour == 0.0 and plan.kv_flows == () and plan.comparable_cost == 2.0


def test_transfer_prices_and_delays_by_cloud_and_continent() -> None:
    assert transfer("aws:us-east-1", "aws:us-west-2").usd_per_gb == 0.02  # within AWS
    assert transfer("aws:us-east-1", "gcp:us-central1").usd_per_gb == 0.09  # AWS internet egress
    assert transfer("gcp:us-central1", "aws:us-east-1").usd_per_gb == 0.12  # GCP premium tier
    assert transfer("runpod:us", "lambda:us-east-1").usd_per_gb == 0.0
    assert continent("azure:eastus") == continent("lambda:us-east-1") == continent("runpod:us") == "north-america"
    assert continent("gcp:europe-west4") == "europe" and continent("aws:ap-northeast-2") == "asia"
    assert transfer("aws:us-east-2", "aws:ap-northeast-2").one_way_s > transfer("aws:us-east-2", "gcp:us-central1").one_way_s
    assert continent("paper:melange") != continent("paper:demystifying")


# --- the simulator: cross-region shares and the WAN hand-off ------------------------------------------------

@pytest.fixture(scope="module")
def cross_plan() -> tuple[PlanResult, Scenario]:
    from planning import api

    sc = Scenario.from_dict(SCENARIO)
    plan = api.solve(sc)
    assert plan.kv_flows and plan.kv_flows[0].cross_region
    return plan, sc


def test_the_simulator_adds_the_wan_hand_off(cross_plan: tuple[PlanResult, Scenario]) -> None:
    """Same plan, same arrivals: with the WAN's latency and bandwidth taken out of the flow, every request ends
    earlier by its WAN hand-off, 25 ms + 134 MB at 5 Gbit/s = 239.7 ms (up to one decode step of alignment)."""
    plan, sc = cross_plan
    cfg = SimConfig(duration_s=300, seed=1)
    wan = simulate_plan(plan, sc, cfg).model("llama-3-8b")
    instant = replace(plan, kv_flows=tuple(replace(f, one_way_ms=0.0, wan_gbps=1e9) for f in plan.kv_flows))
    fast = simulate_plan(instant, sc, cfg).model("llama-3-8b")
    assert wan.requests == fast.requests > 30
    handoff_ms = 25.0 + KV_BYTES / (5e9 / 8) * 1e3
    assert wan.e2e_ms.mean - fast.e2e_ms.mean == pytest.approx(handoff_ms, abs=10.0)
    assert wan.tpot_ms.mean > fast.tpot_ms.mean + 0.5 * handoff_ms / 255  # TPOT counts the hand-off
    assert wan.ttft_ms.mean == pytest.approx(fast.ttft_ms.mean)  # the first token is made by the prefill


def test_the_simulator_splits_a_regions_prefills_by_the_plans_flows() -> None:
    """One prefill region, decode in two; the plan sends 1/4 of the requests' KV to us-east-2 and 3/4 to
    us-west-2: the decode engines get those shares (smooth weighted round-robin), whatever their capacities."""
    from tests.simulate.conftest import small_plan

    plan, scenario = small_plan()
    pre = next(i for i in plan.instances if i.phase == "prefill")
    dec = next(i for i in plan.instances if i.phase == "decode" and i.template_id == "1x1xH100")
    insts = (replace(pre, count=1, region="aws:us-east-2"),
             replace(dec, throughput=900, region="aws:us-east-2"), replace(dec, throughput=900, region="aws:us-west-2"))
    flows = (KvFlow("llama-3-8b", "aws:us-east-2", "aws:us-east-2", 0.25),
             KvFlow("llama-3-8b", "aws:us-east-2", "aws:us-west-2", 0.75, 1.0, 25.0, 0.1, 5.0))
    res = simulate_plan(replace(plan, instances=insts, kv_flows=flows), scenario, SimConfig(duration_s=120, seed=3))
    assert res.finish_events == res.requests
    by = {(x.phase, x.region): x.requests for x in res.instances}
    assert by[("decode", "aws:us-east-2")] + by[("decode", "aws:us-west-2")] == by[("prefill", "aws:us-east-2")] > 100
    assert by[("decode", "aws:us-west-2")] == pytest.approx(3 * by[("decode", "aws:us-east-2")], abs=4)


def test_the_option_lists_every_ordered_region_pair_only_when_asked() -> None:
    from planning.allocate.certify import allocation_problem, transfer_prices
    from planning.api import engine_context
    from planning.resolve import resolve_scenario

    ctx = engine_context()
    cross = resolve_scenario(Scenario.from_dict(SCENARIO), ctx.catalog)
    prices = transfer_prices(cross)
    assert {(p.sender, p.src, p.dst) for p in prices} == {("llama-3-8b/prefill", "aws:us-east-1", "aws:us-west-2"),
                                                          ("llama-3-8b/prefill", "aws:us-west-2", "aws:us-east-1")}
    assert all(p.usd_per_hour == pytest.approx(0.02 * KV_BYTES * 0.2 * 3600 / 1e9) for p in prices)
    same = resolve_scenario(Scenario.from_dict({**SCENARIO, "options": {"kv_transfer": "same-region"}}), ctx.catalog)
    assert allocation_problem(same, []).transfers == ()
    assert allocation_problem(cross, []).transfers == prices
