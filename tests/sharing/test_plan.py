"""The shared plan: constraints hold on every node, totals cover both parts, availability and budget are shared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planning import api
from planning.cli import main
from planning.result import PlanResult
from planning.scenario import Scenario
from planning.sharing import solve_shared
from planning.sharing.admission import QueuedRequest, moore_hodgson
from planning.sharing.plan import shared_profiles, split_models


def test_split_by_threshold(small: dict[str, Any]) -> None:
    s = Scenario.from_dict(small)
    shared, dedicated = split_models(s, 1.0)
    assert dedicated == ["llama-3-8b"] and len(shared) == 5
    assert split_models(s, None) == ([m.id for m in s.models], [])


def test_shared_nodes_respect_memory_and_compute(small: dict[str, Any]) -> None:
    s = Scenario.from_dict(small)
    for method in ("kvpr", "exact"):
        res = solve_shared(s, method=method)
        assert res.status in ("optimal", "feasible"), res.notes
        placed = sorted(m.model for n in res.shared_nodes for m in n.models)
        assert placed == sorted(res.shared_models) == sorted(split_models(s, 1.0)[0])
        for n in res.shared_nodes:
            assert n.weights_gb + n.kv_pool_gb <= n.capacity_gb + 1e-9
            assert n.load <= 1 + 1e-9
            assert all(0.0 <= m.attainment_estimate <= 1.0 for m in n.models)
        assert res.dedicated is not None and {i.model for i in res.dedicated.instances} == {"llama-3-8b"}
        assert res.cost_per_hour == pytest.approx(res.shared_cost_per_hour + res.dedicated.cost_per_hour)
        ded_gpus = sum(res.dedicated.gpus_by_type().values())
        assert res.n_gpus == len(res.shared_nodes) + ded_gpus
    kvpr, exact = solve_shared(s, method="kvpr"), solve_shared(s, method="exact")
    assert exact.shared_cost_per_hour <= kvpr.shared_cost_per_hour + 1e-9


def test_shared_nodes_leave_availability_and_budget_to_dedicated(small: dict[str, Any]) -> None:
    small["objective"] = {"kind": "served", "budget_per_hour": 20.0}
    s = Scenario.from_dict(small)
    seen: list[Scenario] = []

    def dedicated(sub: Scenario) -> PlanResult:
        seen.append(sub)
        return api.solve(sub, with_baselines=False)

    for avail in ((4, 6, 8), (4, 2, 1)):  # ample; the parts compete for the L40S
        for o, a in zip(small["offers"], avail, strict=True):
            o["available"] = a
        s = Scenario.from_dict(small)
        seen.clear()
        res = solve_shared(s, method="exact", solve_dedicated=dedicated)
        assert res.status in ("optimal", "feasible") and res.dedicated is not None
        used = _usage(res)
        offered = {(o["region"], o["shape"]): o["available"] for o in small["offers"]}
        assert all(k <= offered[key] for key, k in used.items())  # both parts together within availability
        for sub in seen:
            assert sub.objective.budget_per_hour == pytest.approx(20.0 - res.shared_cost_per_hour)
            assert [m.id for m in sub.models] == ["llama-3-8b"]
        assert not seen[0].availability_overrides  # first: the popular models with every node available
        if len(seen) > 1:  # they competed: re-solved on what the shared nodes leave
            left = {(a.region, a.shape): a.nodes for a in seen[1].availability_overrides}
            for n in res.shared_nodes:
                assert left[(n.region, n.shape)] == offered[(n.region, n.shape)] - sum(
                    1 for m in res.shared_nodes if (m.region, m.shape) == (n.region, n.shape))
        assert res.cost_per_hour <= 20.0 + 1e-6


def _usage(res: Any) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = {}
    for n in res.shared_nodes:
        used[(n.region, n.shape)] = used.get((n.region, n.shape), 0) + 1
    for inst in res.dedicated.instances if res.dedicated is not None else ():
        for shape, k in inst.usage.items():
            used[(inst.region, shape)] = used.get((inst.region, shape), 0) + k * inst.count
    return used


_PART_COSTS: dict[tuple[str, str], float | None] = {}  # (part, its scenario's JSON) → its exact cost, or None


def _part_cost(part: str, data: dict[str, Any]) -> float | None:
    """One part of a split solved exactly on its share (``shared``: the packing MILP; ``dedicated``: the
    allocation ILP of the popular models), None when it has no optimal plan. Kept for the session under the
    share's whole scenario: the six availabilities' splits overlap (every share of the smaller ones is one of
    (4, 6, 8)'s), and the same scenario gets the same answer."""
    from dataclasses import replace

    from planning.sharing.plan import pack

    key = (part, json.dumps(data, sort_keys=True))
    if key not in _PART_COSTS:
        scenario = Scenario.from_dict(data)
        shared, popular = split_models(scenario, scenario.options.sharing_threshold_rps)
        cost: float | None = None
        if part == "shared":
            try:
                packing, _, _ = pack(scenario, api.engine_context(), shared, "exact")
                if packing.feasible and packing.status == "optimal":
                    cost = packing.cost_per_hour
            except Exception:  # a share with no single-GPU node: no packing
                pass
        else:
            plan = api.solve(replace(scenario, models=tuple(m for m in scenario.models if m.id in popular)),
                             with_baselines=False)
            cost = plan.cost_per_hour if plan.status == "optimal" else None
        _PART_COSTS[key] = cost
    return _PART_COSTS[key]


def _brute_force_split(data: dict[str, Any]) -> float:
    """Joint optimum of the split: every division of each shape's availability between the parts, each part
    solved exactly (packing MILP, allocation ILP) on its share; the cheapest sum."""
    import copy
    import itertools

    avail = [o["available"] for o in data["offers"]]
    best = float("inf")
    for ks in itertools.product(*[range(a + 1) for a in avail]):
        sh, de = copy.deepcopy(data), copy.deepcopy(data)
        for o, k in zip(sh["offers"], ks, strict=True):
            o["available"] = k
        for o, k, a in zip(de["offers"], ks, avail, strict=True):
            o["available"] = a - k
        shared = _part_cost("shared", sh)
        if shared is None:
            continue
        dedicated = _part_cost("dedicated", de)
        if dedicated is not None:
            best = min(best, shared + dedicated)
    return best


@pytest.mark.parametrize("avail", [(4, 6, 8), (4, 2, 1), (2, 2, 2), (1, 2, 2), (4, 1, 1), (3, 1, 2)])
def test_shared_plan_against_brute_force_over_availability_splits(small: dict[str, Any],
                                                                  avail: tuple[int, int, int]) -> None:
    """Both parts within availability; never below the joint optimum of the split; equal to it when the status
    says optimal; the lower bound it reports when the parts compete is a true lower bound."""
    import re

    for o, a in zip(small["offers"], avail, strict=True):
        o["available"] = a
    res = solve_shared(Scenario.from_dict(small), method="exact")
    brute = _brute_force_split(small)
    assert res.status in ("optimal", "feasible")
    offered = {(o["region"], o["shape"]): o["available"] for o in small["offers"]}
    assert all(k <= offered[key] for key, k in _usage(res).items())
    assert res.cost_per_hour >= brute - 1e-6
    if res.status == "optimal":
        assert res.cost_per_hour == pytest.approx(brute, abs=1e-6)
    for note in res.notes:
        if m := re.search(r"lower bound \$([0-9.,]+)/h", note):
            assert float(m.group(1).replace(",", "")) <= brute + 0.01


def test_budget_below_shared_cost_is_infeasible_with_a_reason(small: dict[str, Any]) -> None:
    small["objective"] = {"kind": "served", "budget_per_hour": 0.5}
    res = solve_shared(Scenario.from_dict(small), method="kvpr")
    assert res.status == "infeasible" and any("budget" in n for n in res.notes)


def test_cli_sharing_json_equals_api(small: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small))
    api_res = api.solve_shared(Scenario.from_dict(small), method="exact")
    assert main(["solve", str(path), "--sharing", "exact", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["cost_per_hour"] == pytest.approx(api_res.cost_per_hour, rel=1e-9)
    assert cli["gpus"] == api_res.gpus() and cli["n_gpus"] == api_res.n_gpus
    assert [[m["model"] for m in n["models"]] for n in cli["shared_nodes"]] == [
        [m.model for m in n.models] for n in api_res.shared_nodes]
    node = cli["shared_nodes"][0]
    assert node["weights_gb"] + node["kv_pool_gb"] + node["free_gb"] == pytest.approx(node["capacity_gb"])
    assert cli["sharing"]["method"] == "exact"
    # the top-level gap is the whole plan's (both parts), not the dedicated part's alone
    assert cli["mip_gap"] == api_res.gap and cli["sharing"]["gap"] == api_res.gap
    assert cli["sharing"]["dedicated_gap"] == (api_res.dedicated.mip_gap if api_res.dedicated else None)
    assert main(["solve", str(path), "--sharing", "kvpr", "--json"]) == 0
    kvpr = json.loads(capsys.readouterr().out)
    assert kvpr["mip_gap"] is None  # the heuristic packing proves no bound: no gap is claimed for the whole plan
    # sharing off: the plain plan
    assert main(["solve", str(path), "--sharing", "off", "--json"]) == 0
    assert "shared_nodes" not in json.loads(capsys.readouterr().out)


def test_profiles_use_the_perf_model(small: dict[str, Any]) -> None:
    s = Scenario.from_dict(small)
    profiles, types = shared_profiles(s, api.engine_context(), ["ft-0", "ft-3"])
    p0, p3 = profiles
    assert p0.weights_gb == pytest.approx(p3.weights_gb)  # same architecture, each its own copy
    assert p0.kv_pool_gb > p3.kv_pool_gb  # 4x the rate → larger SLO-bounded KV pool
    for gpu in p3.gpus:
        assert p0.gpus[gpu].load > p3.gpus[gpu].load > 0
    assert {t.key for t in types} == {"test:r 1xH100", "test:r 1xL40S", "test:r 1xL4"}
    # the perf model's prefill speed feeds Moore–Hodgson admission: a queue it can order
    g = next(iter(p0.gpus.values()))
    speed = p0.input_len / (g.prefill_ms / 1e3)
    reqs = [QueuedRequest.from_prompt(i, 0.0, p0.ttft_s, p0.input_len, speed) for i in range(200)]
    adm = moore_hodgson(reqs)
    assert len(adm.admitted) == min(200, int(p0.ttft_s // (g.prefill_ms / 1e3)))


def test_threshold_sweep_moves_models_between_parts(small: dict[str, Any]) -> None:
    from planning.sharing import threshold_sweep

    rows = threshold_sweep(Scenario.from_dict(small), [0.0, 1.0, None])
    assert [r["shared_models"] for r in rows] == [0, 5, 6]
    assert rows[0]["shared_gpus"] == 0 and all(r["status"] in ("optimal", "feasible") for r in rows)
