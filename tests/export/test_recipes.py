"""Recipes that run (issue 30): vLLM engine layouts, Kubernetes' schemas, the launch script on a real Ray cluster,
and every preset's export checked file by file against its plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml

from planning import api
from planning.errors import PlanningError
from planning.export import engine_layouts, kubernetes_manifests, skypilot_tasks
from planning.export.engine import apportion
from planning.export.scripts import LAUNCH_SCRIPT
from planning.result import PlanResult
from tests.export.recipes import (
    check_arithmetic,
    check_kubernetes_recipes,
    check_skypilot_recipes,
    k8s_docs,
    validate_k8s,
)
from tests.export.test_export import PLAN, REPOS, _inst, _validate_with_skypilot

LAYERS = {"llama-3-8b": 32, "llama-3-70b": 80, "qwen3-32b": 64, "phi-4": 40}


def test_one_tensor_parallel_size_per_pipeline() -> None:
    """coral-core's qwen3-32b decode pipeline (2xL40S | 2xL40S | 1xL40S): the old export wrote TP 2 x PP 3 for 5
    GPUs; vLLM needs one TP size, so TP 1 and the 2-GPU nodes run two ranks each, every GPU used, layers kept."""
    inst = _inst("qwen3-32b", "decode", [(25, [("2xL40S", "L40S", 2)]), (25, [("2xL40S", "L40S", 2)]),
                                         (14, [("1xL40S", "L40S", 1)])], count=1)
    (engine,) = engine_layouts(inst)
    assert (engine.tp, engine.pp, engine.gpus) == (1, 5, 5)
    assert [s.layers for s in engine.slots] == [25, 25, 14]  # each node keeps the plan's layers
    assert engine.partition == (13, 12, 13, 12, 14) and sum(engine.partition) == 64
    assert any("tensor parallel 1" in n for n in engine.notes)
    # equal GPUs per node keep TP = the node's GPUs, one rank per node
    (same,) = engine_layouts(_inst("llama-3-70b", "prefill", [(30, [("4xH100", "H100", 4)]),
                                                               (50, [("4xH100", "H100", 4)])]))
    assert (same.tp, same.pp, same.partition, same.notes) == (4, 2, (30, 50), ())


def test_data_parallel_stages() -> None:
    # equal data parallelism in every stage: independent pipelines, exactly the plan
    inst = _inst("llama-3-8b", "decode", [(16, [("1xL4", "L4", 1), ("1xL4", "L4", 1)]),
                                          (16, [("1xL4", "L4", 1), ("1xL4", "L4", 1)])])
    (engine,) = engine_layouts(inst)
    assert (engine.copies, engine.tp, engine.pp, engine.partition) == (2, 1, 2, (16, 16))
    # unequal: one pipeline, each stage's nodes as consecutive ranks sharing its layers by planned throughput
    stages = [(38, [("1xL40S", "L40S", 1)] * 3), (26, [("1xL40S", "L40S", 1)] * 2)]
    (long,) = engine_layouts(_inst("qwen3-32b", "prefill", stages))
    assert long.pp == 5 and sum(long.partition[:3]) == 38 and sum(long.partition[3:]) == 26
    assert any("data-parallel nodes run as consecutive pipeline ranks" in n for n in long.notes)
    # one stage on several nodes: one engine per node (the old export could not launch it as one command)
    (dp,) = engine_layouts(_inst("qwen3-32b", "prefill", [(64, [("1xH100", "H100", 1), ("1xH100", "H100", 1)])]))
    assert (dp.copies, dp.tp, dp.pp) == (2, 1, 1)


def test_heads_that_do_not_split_give_data_parallel_copies() -> None:
    """A node whose GPUs the model's heads cannot split: the largest TP they allow, the rest data parallel."""
    inst = _inst("phi-4", "decode", [(40, [("4xL40S", "L40S", 4)])])
    (engine,) = engine_layouts(inst, tp_options=lambda model, gpus: [t for t in (1, 2) if gpus % t == 0])
    assert (engine.tp, engine.dp) == (2, 2) and engine.notes
    ranks_over_layers = _inst("phi-4", "decode", [(1, [("8xL4", "L4", 8)]), (1, [("1xL4", "L4", 1)])])
    with pytest.raises(PlanningError, match="pipeline ranks"):
        engine_layouts(ranks_over_layers)


def test_apportion_keeps_totals_and_minimums() -> None:
    assert apportion([1, 1, 1], 10) == [4, 3, 3]
    assert apportion([0.1, 5.0], 4, [2, 1]) == [2, 2]
    assert sum(apportion([3.3, 0.0, 7.7, 1.0], 27)) == 27
    with pytest.raises(PlanningError):
        apportion([1.0, 1.0], 1)


def test_kubernetes_schema_is_strict() -> None:
    """The restated schemas reject what Kubernetes rejects (a misspelled field, a string where an int goes)."""
    (dep, _svc) = yaml.safe_load_all(next(f for f in kubernetes_manifests(PLAN, REPOS)
                                          if f.name == "llama-3-8b-decode-0.k8s.yaml").text)
    validate_k8s(dep)
    typo = json.loads(json.dumps(dep))
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(jsonschema.ValidationError):
        validate_k8s(typo)
    wrong = json.loads(json.dumps(dep))
    wrong["spec"]["replicas"] = "three"
    with pytest.raises(jsonschema.ValidationError):
        validate_k8s(wrong)
    with pytest.raises(AssertionError, match="kind"):
        validate_k8s({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {}})


def test_synthetic_plan_recipes() -> None:
    files = skypilot_tasks(PLAN, REPOS) + kubernetes_manifests(PLAN, REPOS)
    check_kubernetes_recipes(files)
    check_skypilot_recipes(files)
    assert check_arithmetic(PLAN, files, LAYERS) >= 2 * 6


def test_launch_script_compiles() -> None:
    compile(LAUNCH_SCRIPT, "launch.py", "exec")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 2,
                                                           "resources": {"planning_slot_0": 1}})
    cluster.add_node(num_cpus=1, num_gpus=2, resources={"planning_slot_1": 1})
    cluster.add_node(num_cpus=1, num_gpus=1, resources={"planning_slot_2": 1})
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def _launch(cluster: Any, slots: list[dict[str, Any]], timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAY_ADDRESS": cluster.address, "PLANNING_SLOTS": json.dumps(slots),
           "PLANNING_JOIN_TIMEOUT_S": str(timeout_s)}
    return subprocess.run([sys.executable, "-c", LAUNCH_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.ray  # a local Ray cluster: the [ray] extra, `make test-ray`
def test_launch_script_orders_the_partition_as_vllm_ranks_nodes(ray_cluster: Any) -> None:
    """Three local Ray nodes (2, 2 and 1 fake GPUs, all on one IP): vLLM's rank order puts the node with fewer
    GPUs first after the driver's, so the 1-GPU slot's layers lead the partition; every slot's layers appear."""
    slots = [{"slot": 0, "shape": "2xL40S", "gpus": 2, "layers": [13, 12]},
             {"slot": 1, "shape": "2xL40S", "gpus": 2, "layers": [11, 14]},
             {"slot": 2, "shape": "1xL40S", "gpus": 1, "layers": [14]}]
    done = _launch(ray_cluster, slots)
    assert done.returncode == 0, done.stderr[-2000:]
    env = dict(line.removeprefix("export ").split("=", 1) for line in done.stdout.splitlines())
    partition = [int(j) for j in env["VLLM_PP_LAYER_PARTITION"].split(",")]
    assert partition[0] == 14 and sorted(partition) == sorted([13, 12, 11, 14, 14]) and sum(partition) == 64
    assert env["VLLM_HOST_IP"]
    missing = _launch(ray_cluster, [*slots, {"slot": 3, "shape": "1xL4", "gpus": 1, "layers": [1]}], timeout_s=1)
    assert missing.returncode != 0 and "of 6 GPUs" in missing.stderr
    wrong = _launch(ray_cluster, [{**slots[0], "gpus": 1, "layers": [25]}, slots[1], slots[2]])
    assert wrong.returncode != 0 and "instead of 1" in wrong.stderr


# ------------------------------------------------------------------------------------------------------------
# every preset, through the public API


@pytest.fixture(scope="module")
def preset_exports(preset_plans: Any) -> list[tuple[str, PlanResult, list[Any], dict[str, int]]]:
    """(name, plan, files, layers of every model the preset plans: catalog and its own custom models). The plans
    are the session's (``tests/conftest.py``: solved once at each preset's own options, shared with the one-bill
    walk); their baselines do not enter the export."""
    from planning.resolve import resolve_scenario

    out = []
    # platform-100 (100 models, every offer of the catalog) is planned with sharing in its own benchmark
    # (docs/benchmarks.md, platform-100); a dedicated plan of all its models is not an export test's job
    for name in (n for n in api.list_presets() if n != "platform-100"):
        scenario = api.load_preset_scenario(name)
        plan = preset_plans(name)
        specs = resolve_scenario(scenario, api.engine_context().catalog).specs
        out.append((name, plan, api.export_plan(plan, "all"), {m: s.layers for m, s in specs.items()}))
    return out


@pytest.mark.slow
def test_every_preset_export_passes_both_schemas_and_the_arithmetic(preset_exports) -> None:  # type: ignore[no-untyped-def]
    totals = {"files": 0, "engines": 0}
    for name, plan, files, layers in preset_exports:
        assert plan.instances, name
        for f in files:
            if f.kind == "skypilot":
                _validate_with_skypilot(yaml.safe_load(f.text))
        check_kubernetes_recipes(files)
        check_skypilot_recipes(files)
        totals["engines"] += check_arithmetic(plan, files, layers)
        totals["files"] += len(files)
        covered = {f.instance for f in files if f.instance is not None}
        assert covered == set(range(len(plan.instances))), f"{name}: instances without files"
    assert totals["files"] > 100 and totals["engines"] > 100


@pytest.mark.slow
def test_disaggregated_presets_connect_prefill_and_decode(preset_exports) -> None:  # type: ignore[no-untyped-def]
    """coral-core: the single-node gpt-oss-20b and phi-4 engines sit behind their model's proxy with the
    NixlConnector; qwen3-32b's pipelined engines cannot (vLLM's NixlConnector has no pipeline parallelism) and say
    so in their notes instead of carrying a KV flag that would fail at start."""
    _, plan, files, _ = next(x for x in preset_exports if x[0] == "coral-core")
    docs = k8s_docs(files)
    proxies = {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("pd-proxy")}
    assert proxies == {"gpt-oss-20b-pd-proxy", "phi-4-pd-proxy"}
    for idx, inst in enumerate(plan.instances):
        mine = [f for f in files if f.instance == idx and f.kind == "kubernetes"]
        text = "".join(f.text for f in mine)
        if inst.model == "qwen3-32b":
            assert "kv-transfer-config" not in text and any("no KV transfer" in n for f in mine for n in f.notes)
        else:
            role = "kv_producer" if inst.phase == "prefill" else "kv_consumer"
            assert role in text and "VLLM_NIXL_SIDE_CHANNEL_HOST" in text


@pytest.mark.slow
def test_every_preset_export_deploys_as_planned_or_says_what_differs_and_its_cost(preset_exports) -> None:  # type: ignore[no-untyped-def]
    """Issue 38 §5 target: for every preset, each instance's files either run the plan as it is, or the preview
    shown before export lists what differs with a cost; where a planned KV transfer is lost, the plan that deploys
    as planned is priced (coral-core: qwen3-32b's pipelines)."""
    lost = []
    for name, plan, files, _ in preset_exports:
        preview = api.export_preview(plan, price_alternative=False)
        noted = {f.instance for f in files if f.instance is not None and f.notes}
        assert noted == {d.instance for d in preview.differences}, name
        assert all(d.cost and d.kind in ("kv-transfer", "weights", "layout") for d in preview.differences), name
        if any(d.kind == "kv-transfer" for d in preview.differences):
            lost.append(name)
            priced = api.export_preview(plan)
            text = priced.alternative_text()
            assert priced.alternative_priced and ("$" in text or "has no plan with" in text), name
            assert priced.alternative_cost_per_hour is None or priced.alternative_cost_per_hour > 0
    assert "coral-core" in lost
