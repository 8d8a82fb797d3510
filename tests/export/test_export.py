"""Exports: SkyPilot task YAML validated with SkyPilot's own schema; Kubernetes manifests well-formed."""

from __future__ import annotations

import yaml

from planning.export import kubernetes_manifests, skypilot_tasks
from planning.result import InstancePlan, NodeBox, PlanResult, StagePlan


def _inst(model: str, phase: str, stages: list[tuple[int, list[tuple[str, str, int]]]], count: int = 2) -> InstancePlan:
    start = 0
    built = []
    for layers, nodes in stages:
        built.append(StagePlan(layers, start, start + layers, tuple(NodeBox(s, g, c, 100.0) for s, g, c in nodes)))
        start += layers
    usage: dict[str, int] = {}
    gpus: dict[str, int] = {}
    for _, nodes in stages:
        for s, g, c in nodes:
            usage[s] = usage.get(s, 0) + 1
            gpus[g] = gpus.get(g, 0) + c
    return InstancePlan(model, phase, "t1", "aws:us-east-1", count, usage, gpus, 1000.0, "tok/s", 1.5, 12.0,
                        len(usage) == 1, tuple(built))


PLAN = PlanResult(
    status="optimal", objective="cost", cost_per_hour=40.0, provisioning_per_hour=40.0, penalty_per_hour=0.0,
    served_fraction=1.0, mip_gap=0.0,
    instances=(
        _inst("llama-3-8b", "decode", [(32, [("1xL40S", "L40S", 1)])], count=3),                  # one node
        _inst("llama-3-70b", "prefill", [(30, [("4xH100", "H100", 4)]), (50, [("4xH100", "H100", 4)])]),  # PP 2
        _inst("llama-3-70b", "decode", [(20, [("2xL40S", "L40S", 2)]), (60, [("4xA100-80G", "A100-80G", 4)])]),
        _inst("qwen3-32b", "prefill", [(64, [("1xH100", "H100", 1), ("1xH100", "H100", 1)])]),   # DP in a stage
    ))
REPOS = {"llama-3-8b": "meta-llama/Meta-Llama-3-8B", "llama-3-70b": "meta-llama/Meta-Llama-3-70B"}


def _validate_with_skypilot(config: dict[str, object]) -> None:
    from sky.utils import common_utils, schemas

    service = config.pop("service", None)
    common_utils.validate_schema(config, schemas.get_task_schema(), "Invalid task YAML: ")
    if service is not None:
        common_utils.validate_schema(service, schemas.get_service_schema(), "Invalid service YAML: ")


def test_every_skypilot_task_passes_skypilots_schema() -> None:
    files = skypilot_tasks(PLAN, REPOS)
    assert len(files) == 1 + 1 + 2 + 1  # mixed pipeline: one task per distinct shape
    for f in files:
        config = yaml.safe_load(f.text)
        assert config["name"] in f.name
        _validate_with_skypilot(config)


def test_skypilot_tasks_carry_the_plan() -> None:
    files = {f.name: f for f in skypilot_tasks(PLAN, REPOS)}
    single = yaml.safe_load(files["llama-3-8b-decode-0.yaml"].text)
    assert single["resources"]["accelerators"] == "L40S:1"
    assert single["resources"]["infra"] == "aws/us-east-1"
    assert single["service"]["replicas"] == 3
    assert "meta-llama/Meta-Llama-3-8B" in single["run"]
    pp = files["llama-3-70b-prefill-1.yaml"]
    config = yaml.safe_load(pp.text)
    assert config["num_nodes"] == 2 and config["resources"]["accelerators"] == "H100:4"
    assert "VLLM_PP_LAYER_PARTITION=30,50" in config["run"]
    assert "--pipeline-parallel-size 2" in config["run"] and "kv_producer" in config["run"]
    assert "stage 1: 50 layers [30, 80) on 4xH100" in pp.text
    mixed = [f for f in files.values() if f.name.startswith("llama-3-70b-decode-2")]
    assert {f.deployable for f in mixed} == {"manual"}
    accels = sorted(yaml.safe_load(f.text)["resources"]["accelerators"] for f in mixed)
    assert accels == ["A100-80GB:4", "L40S:2"]
    dp = files["qwen3-32b-prefill-3-1xh100.yaml"]
    assert "2 data-parallel nodes" in dp.text and yaml.safe_load(dp.text)["num_nodes"] == 2


def test_kubernetes_manifests() -> None:
    files = {f.name: f for f in kubernetes_manifests(PLAN, REPOS)}
    assert len(files) == 4
    dep = yaml.safe_load(files["llama-3-8b-decode-0.k8s.yaml"].text)
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] == 3
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert dep["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    lws = yaml.safe_load(files["llama-3-70b-decode-2.k8s.yaml"].text)
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert leader["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    manual = files["qwen3-32b-prefill-3.k8s.yaml"]
    assert manual.deployable == "manual"
    sets = list(yaml.safe_load_all(manual.text))
    assert [d["kind"] for d in sets] == ["StatefulSet"] and sets[0]["spec"]["replicas"] == 4


def test_cli_export_from_a_solved_preset(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from planning import api
    from planning.cli import main

    plan = api.solve(api.load_preset_scenario("melange-arena"))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(plan.to_json())
    out = tmp_path / "deploy"
    assert main(["export", str(plan_path), "--format", "all", "--out", str(out)]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(f.name for f in api.export_plan(plan, "all"))
    assert len(written) == 2 * len(plan.instances)
    for path in out.glob("*.yaml"):
        if not path.name.endswith(".k8s.yaml"):
            _validate_with_skypilot(yaml.safe_load(path.read_text()))
    assert main(["export", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "file").write_text("x")
    assert main(["export", str(plan_path), "--out", str(tmp_path / "file")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_aggregated_instances_carry_the_step_budget_the_simulator_uses() -> None:
    """--max-num-batched-tokens of an aggregated instance is the TPOT SLO's chunk (build_topology's budget), in
    the serve command and the layout comment of every file; disaggregated instances get the engine limits the
    planner's tables assume (vLLM's own defaults are lower on GPUs under 70 GiB and would cap planned batches)."""
    import re

    from planning import api
    from planning.simulate import build_topology, engine_token_budgets

    scenario = api.load_preset_scenario("long-tail")
    plan = api.solve(scenario)
    topo = build_topology(plan, scenario, api.engine_context().perf)
    budgets = engine_token_budgets(plan, scenario, api.engine_context().perf)
    assert budgets == {i: item.token_budget for i, item in enumerate(topo.instances)}
    assert all(64 <= b <= 8192 for b in budgets.values()) and len(set(budgets.values())) > 1
    for kind in ("skypilot", "kubernetes"):
        files = api.export_plan(plan, kind)
        for idx, inst in enumerate(plan.instances):
            base = re.sub(r"[^a-z0-9-]+", "-", f"{inst.model}-{inst.phase}-{idx}".lower())
            mine = [f.text for f in files if f.name.startswith((base + ".", base + "-"))]  # "-<shape>": mixed
            assert mine
            for text in mine:
                assert f"--max-num-batched-tokens {budgets[idx]}" in text
                assert f"per-step token budget {budgets[idx]}" in text
    disaggregated = api.export_plan(api.solve(api.load_preset_scenario("coral-core")), "all")
    settings = api.engine_context().perf.calibration.settings
    for f in disaggregated:
        if f.kind in ("skypilot", "kubernetes") and "vllm serve" in f.text:
            assert f"--max-num-batched-tokens {int(settings.max_batched_tokens)}" in f.text
            assert f"--max-num-seqs {int(settings.max_num_seqs)}" in f.text
    for f in skypilot_tasks(PLAN, REPOS, {0: 512}):
        _validate_with_skypilot(yaml.safe_load(f.text))
