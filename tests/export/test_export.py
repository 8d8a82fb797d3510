"""Exports: SkyPilot task YAML validated with SkyPilot's own schemas (restated: skypilot_schema.py); what each recipe carries (docs/deploy.md)."""

from __future__ import annotations

import json

import yaml

from planning.export import kubernetes_manifests, skypilot_tasks
from planning.result import InstancePlan, NodeBox, PlanResult, StagePlan
from tests.export.skypilot_schema import validate_task


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
        _inst("phi-4", "prefill", [(40, [("1xL40S", "L40S", 1)])], count=2),                      # P/D pair
        _inst("phi-4", "decode", [(40, [("2xL40S", "L40S", 2)])], count=1),
    ))
REPOS = {"llama-3-8b": "meta-llama/Meta-Llama-3-8B", "llama-3-70b": "meta-llama/Meta-Llama-3-70B",
         "phi-4": "microsoft/phi-4"}


def _validate_with_skypilot(config: dict[str, object]) -> None:
    validate_task(config)


def test_every_skypilot_task_passes_skypilots_schema() -> None:
    files = skypilot_tasks(PLAN, REPOS)
    # one file per single-node engine kind, one per multi-node engine on one shape, one per shape of a mixed
    # engine, and the phi-4 prefill/decode proxy
    assert len(files) == 1 + 1 + 2 + 1 + 2 + 1
    for f in files:
        config = yaml.safe_load(f.text)
        assert config["name"] in f.name
        _validate_with_skypilot(config)


def test_skypilot_tasks_carry_the_plan() -> None:
    files = {f.name: f for f in skypilot_tasks(PLAN, REPOS)}
    single = yaml.safe_load(files["llama-3-8b-decode-0.yaml"].text)
    assert single["resources"]["accelerators"] == "L40S:1"
    assert single["resources"]["infra"] == "aws/us-east-1"
    assert single["resources"]["image_id"] == "docker:vllm/vllm-openai:v0.33.0"
    assert single["service"]["replicas"] == 3 and single["service"]["readiness_probe"]["path"] == "/health"
    assert "meta-llama/Meta-Llama-3-8B" in single["run"] and "kv-transfer" not in single["run"]
    pp = files["llama-3-70b-prefill-1.yaml"]
    config = yaml.safe_load(pp.text)
    assert config["num_nodes"] == 2 and config["resources"]["accelerators"] == "H100:4"
    assert json.loads(config["envs"]["PLANNING_SLOTS"]) == [
        {"slot": 0, "shape": "4xH100", "gpus": 4, "layers": [30]}, {"slot": 1, "shape": "4xH100", "gpus": 4, "layers": [50]}]
    assert "--tensor-parallel-size 4" in config["run"] and "--pipeline-parallel-size 2" in config["run"]
    assert "VLLM_PP_LAYER_PARTITION" in config["run"] and "launch.py" in config["setup"]
    assert "stage 1: 50 layers [30, 80) on 4xH100" in pp.text
    # the pipelined llama-3-70b engines cannot take the NixlConnector: no KV flag, a note saying so
    assert "kv-transfer" not in config["run"] and "no KV transfer" in pp.text and pp.notes
    mixed = {n: f for n, f in files.items() if n.startswith("llama-3-70b-decode-2")}
    assert set(mixed) == {"llama-3-70b-decode-2-2xl40s.yaml", "llama-3-70b-decode-2-4xa100-80g.yaml"}
    assert {f.deployable for f in mixed.values()} == {"manual"}
    head = yaml.safe_load(mixed["llama-3-70b-decode-2-2xl40s.yaml"].text)
    worker = yaml.safe_load(mixed["llama-3-70b-decode-2-4xa100-80g.yaml"].text)
    # one TP size for the pipeline (vLLM's rule): gcd(2, 4) = 2, the A100 node runs two ranks of 30 layers
    assert "--tensor-parallel-size 2" in head["run"] and "--pipeline-parallel-size 3" in head["run"]
    assert json.loads(head["envs"]["PLANNING_SLOTS"])[1] == {"slot": 1, "shape": "4xA100-80G", "gpus": 4,
                                                             "layers": [30, 30]}
    assert "vllm serve" not in worker["run"] and "ray start --head" not in worker["run"]
    assert worker["envs"]["RAY_HEAD_IP"] is None and "${RAY_HEAD_IP:?" in worker["run"]
    dp = yaml.safe_load(files["qwen3-32b-prefill-3.yaml"].text)
    assert dp["service"]["replicas"] == 4 and dp["resources"]["accelerators"] == "H100:1"  # 2 nodes x 2 instances
    proxy = files["phi-4-pd-proxy.yaml"]
    assert proxy.deployable == "manual" and "phi-4-prefill-4" in proxy.text and "phi-4-decode-5" in proxy.text
    assert "kv_producer" in files["phi-4-prefill-4.yaml"].text and "kv_consumer" in files["phi-4-decode-5.yaml"].text


def test_kubernetes_manifests() -> None:
    files = {f.name: f for f in kubernetes_manifests(PLAN, REPOS)}
    assert set(files) == {"00-namespace.k8s.yaml", "phi-4-pd-proxy.k8s.yaml",
                          *(f"{b}.k8s.yaml" for b in ("llama-3-8b-decode-0", "llama-3-70b-prefill-1",
                                                      "llama-3-70b-decode-2", "qwen3-32b-prefill-3",
                                                      "phi-4-prefill-4", "phi-4-decode-5"))}
    dep, svc = yaml.safe_load_all(files["llama-3-8b-decode-0.k8s.yaml"].text)
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] == 3 and svc["kind"] == "Service"
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert dep["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    mixed = list(yaml.safe_load_all(files["llama-3-70b-decode-2.k8s.yaml"].text))
    assert [d["kind"] for d in mixed] == ["StatefulSet", "Service", "StatefulSet", "Service", "Service"]
    head, head_svc, worker, worker_svc, entry = mixed
    assert head["spec"]["selector"] != worker["spec"]["selector"]
    assert head_svc["spec"]["clusterIP"] == worker_svc["spec"]["clusterIP"] == "None"
    assert worker["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert "llama-3-70b-decode-2-s0-${ORDINAL}.llama-3-70b-decode-2-s0.llm-serving" in \
        worker["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert entry["spec"]["selector"] == head["spec"]["selector"]["matchLabels"]
    dp = next(yaml.safe_load_all(files["qwen3-32b-prefill-3.k8s.yaml"].text))
    assert dp["kind"] == "Deployment" and dp["spec"]["replicas"] == 4
    namespace = list(yaml.safe_load_all(files["00-namespace.k8s.yaml"].text))
    assert [d["kind"] for d in namespace] == ["Namespace", "ConfigMap"]
    proxy = next(yaml.safe_load_all(files["phi-4-pd-proxy.k8s.yaml"].text))
    script = proxy["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    # each engine Service listed once per replica it fronts: 2 prefill replicas, 1 decode
    assert script.count("phi-4-prefill-4.llm-serving.svc.cluster.local") == 2
    assert script.count("phi-4-decode-5.llm-serving.svc.cluster.local") == 1


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
    assert len(written) == 2 * len(plan.instances) + 1  # + the namespace file
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
            assert inst.engine is not None
            per_engine = inst.engine.max_batched_tokens  # the plan's T; a pipeline stage's d copies run d chunks
            copies = min(len(s.nodes) for s in inst.stages) if len(inst.stages) > 1 else 1
            assert budgets[idx] == min(per_engine * copies, 8192)
            mine = [f.text for f in files if f.instance == idx and "exec vllm serve" in f.text]  # not Ray workers
            assert mine
            for text in mine:
                assert f"--max-num-batched-tokens {per_engine}" in text
                assert f"per-step token budget {per_engine}" in text
    core = api.solve(api.load_preset_scenario("coral-core"))
    disaggregated = api.export_plan(core, "all")
    settings = api.engine_context().perf.calibration.settings
    for f in disaggregated:
        if f.kind in ("skypilot", "kubernetes") and "exec vllm serve" in f.text:
            engine = core.instances[f.instance].engine  # type: ignore[index]
            assert engine is not None
            if engine.phase == "prefill":  # whole prompts up to the budget whose workspace the tables reserve
                assert f"--max-num-batched-tokens {int(settings.max_batched_tokens)}" in f.text
                assert f"--max-num-seqs {int(settings.max_num_seqs)}" in f.text
            else:  # the planned batch and its KV room; one token per sequence per step
                assert f"--max-num-seqs {engine.max_num_seqs}" in f.text
                assert f"--max-num-batched-tokens {engine.max_num_seqs}" in f.text
                assert engine.batch < engine.max_num_seqs < settings.max_num_seqs
    for f in skypilot_tasks(PLAN, REPOS, {0: 512}):
        _validate_with_skypilot(yaml.safe_load(f.text))


def test_exports_reserve_the_memory_the_plan_counts_on() -> None:
    """Every vLLM command carries --gpu-memory-utilization at the planner's engine budget (perf.engines), so a
    deployment sizes its KV cache as the plan did (vLLM's own default is 0.92 from 0.21 on); none without it."""
    from planning import api
    from planning.perf.engines import planner_memory

    def commands(text: str) -> list[str]:
        """Every vllm serve command of a file (from "vllm serve MODEL" to its last continued line), YAML folding
        undone: in the loaded values and in the comment lines."""
        import re

        strings = ["\n".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))]
        stack: list[object] = list(yaml.safe_load_all(text))
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack += list(item.values())
            elif isinstance(item, list):
                stack += item
            elif isinstance(item, str):
                strings.append(item)
        return [m.group(0) for s in strings for m in re.finditer(r"vllm serve \S+ \\\n(?:.*\\\n)*.*", s)]

    memory = planner_memory(api.engine_context().perf.calibration.settings)
    flag = f"--gpu-memory-utilization {memory.fraction:g}"
    files = skypilot_tasks(PLAN, REPOS, memory_utilization=memory.fraction) + kubernetes_manifests(
        PLAN, REPOS, memory_utilization=memory.fraction)
    found = [c for f in files for c in commands(f.text)]
    assert found and all(flag in c for c in found)
    assert all("--gpu-memory-utilization" not in c for f in skypilot_tasks(PLAN, REPOS) for c in commands(f.text))
    plan = api.solve(api.load_preset_scenario("melange-arena"))
    found = [c for f in api.export_plan(plan, "all") for c in commands(f.text)]
    assert found and all(flag in c for c in found)
