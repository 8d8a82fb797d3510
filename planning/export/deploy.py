"""Deployable exports of a plan: one SkyPilot task YAML per serving instance and Kubernetes manifests.

A plan instance is a pipeline: stages of consecutive layers, each stage on one or more nodes (data-parallel
copies of the stage), tensor parallelism inside a node. What an engine can run directly:

- **one node** (1 stage, 1 node): ``vllm serve MODEL --tensor-parallel-size T`` — exported as a SkyServe service
  (``service.replicas`` = the plan's instance count) or a Kubernetes ``Deployment``.
- **one node shape, one node per stage**: a multi-node vLLM pipeline on a Ray cluster,
  ``--pipeline-parallel-size S`` with the plan's uneven layer split in ``VLLM_PP_LAYER_PARTITION`` — a SkyPilot
  task with ``num_nodes: S`` or a LeaderWorkerSet of size S.
- **mixed node shapes or several nodes in a stage** (Coral templates): no engine launches these from one
  resource request. The export writes one task per distinct node shape of the pipeline, all carrying the same
  ``PLANNING_*`` environment (layer ranges, stage index, role) and a comment saying how they join one Ray
  cluster; the layout comment lists every stage. It is marked ``deployable: manual`` so nobody takes it for a
  one-command launch.

Every file opens with a comment holding the pipeline layout, the plan's throughput and the price it was planned at.
Nothing here contacts a cloud; the YAML follows SkyPilot's task schema (a test validates it with SkyPilot's own
schema when the package is installed in the dev tools).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from planning.result import InstancePlan, PlanResult

# SkyPilot's accelerator names for the catalog's GPU ids (sky/catalog: `A100` is the 40 GB part).
SKYPILOT_ACCELERATORS: Mapping[str, str] = {
    "H100": "H100", "H200": "H200", "A100-80G": "A100-80GB", "A100-40G": "A100", "L40S": "L40S", "L40": "L40",
    "L4": "L4", "A10G": "A10G", "A40": "A40", "A6000": "RTXA6000", "RTX4090": "RTX4090", "T4": "T4", "V100": "V100",
}
# NVIDIA GPU feature discovery's `nvidia.com/gpu.product` label values (node selectors in Kubernetes).
K8S_GPU_PRODUCTS: Mapping[str, str] = {
    "H100": "NVIDIA-H100-80GB-HBM3", "H200": "NVIDIA-H200", "A100-80G": "NVIDIA-A100-SXM4-80GB",
    "A100-40G": "NVIDIA-A100-SXM4-40GB", "L40S": "NVIDIA-L40S", "L40": "NVIDIA-L40", "L4": "NVIDIA-L4",
    "A10G": "NVIDIA-A10G", "A40": "NVIDIA-A40", "A6000": "NVIDIA-RTX-A6000", "RTX4090": "NVIDIA-GeForce-RTX-4090",
    "T4": "Tesla-T4", "V100": "Tesla-V100-SXM2-16GB",
}
VLLM_IMAGE = "vllm/vllm-openai:latest"


@dataclass(frozen=True)
class ExportFile:
    """One exported file: its suggested name, its text and whether one command launches it."""

    name: str
    text: str
    kind: str  # "skypilot" | "kubernetes"
    deployable: str  # "one-command" | "manual"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:50] or "instance"


def _split_region(region: str) -> tuple[str, str]:
    cloud, _, name = region.partition(":")
    return cloud, name


def _layout_comment(inst: InstancePlan, step_tokens: int | None = None, max_seqs: int | None = None) -> list[str]:
    lines = [f"planning export — {inst.model} ({inst.phase}), template {inst.template_id}, region {inst.region}",
             f"{inst.count} instance(s); planned throughput {inst.throughput:,.1f} {inst.throughput_unit} each; "
             f"${inst.cost_per_hour:,.2f}/h for all {inst.count} at planning prices",
             "pipeline layout (stage: layers [start, end) on nodes):"]
    for k, stage in enumerate(inst.stages):
        nodes = ", ".join(n.shape for n in stage.nodes)
        lines.append(f"  stage {k}: {stage.layers} layers [{stage.layer_start}, {stage.layer_end}) on {nodes}"
                     + (f" ({len(stage.nodes)} data-parallel nodes)" if len(stage.nodes) > 1 else ""))
    if step_tokens and max_seqs:
        lines.append(f"per-step token budget {step_tokens} (--max-num-batched-tokens) and at most {max_seqs} "
                     "sequences (--max-num-seqs): the engine limits the planner's tables assume (vLLM's own defaults "
                     "are 2048 / 256 on GPUs under 70 GiB)")
    elif step_tokens:
        lines.append(f"per-step token budget {step_tokens} (--max-num-batched-tokens): the largest chunk whose step "
                     "keeps the TPOT SLO (planner and simulator assume it)")
    return lines


def _comment(lines: Sequence[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def _tp_and_shapes(inst: InstancePlan) -> tuple[list[str], int]:
    shapes = [node.shape for stage in inst.stages for node in stage.nodes]
    tp = max((node.count for stage in inst.stages for node in stage.nodes), default=1)
    return shapes, tp


def _engine_limits(result: PlanResult, step_tokens: Mapping[int, int] | None,
                   engine_limits: tuple[int, int] | None) -> tuple[dict[int, int], dict[int, int]]:
    """``--max-num-batched-tokens`` and ``--max-num-seqs`` by instance index: ``step_tokens`` as given, and the
    planner's engine limits ``(max_batched_tokens, max_num_seqs)`` for the disaggregated instances without one."""
    budgets, seqs = dict(step_tokens or {}), {}
    if engine_limits is not None:
        for idx, inst in enumerate(result.instances):
            if inst.phase in ("prefill", "decode") and idx not in budgets:
                budgets[idx], seqs[idx] = int(engine_limits[0]), int(engine_limits[1])
    return budgets, seqs


def _serve_command(model_ref: str, tp: int, pp: int, partition: Sequence[int], phase: str,
                   step_tokens: int | None = None, max_seqs: int | None = None) -> str:
    parts = [f"vllm serve {model_ref}", f"--tensor-parallel-size {tp}", "--port 8000"]
    if pp > 1:
        parts += [f"--pipeline-parallel-size {pp}", "--distributed-executor-backend ray"]
    if step_tokens:
        parts.append(f"--max-num-batched-tokens {int(step_tokens)}")
    if max_seqs:
        parts.append(f"--max-num-seqs {int(max_seqs)}")
    if phase in ("prefill", "decode"):
        role = "kv_producer" if phase == "prefill" else "kv_consumer"
        parts.append("--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"" + role + "\"}'")
    command = " \\\n  ".join(parts)
    if pp > 1 and len(set(partition)) > 1:
        command = f"VLLM_PP_LAYER_PARTITION={','.join(str(p) for p in partition)} \\\n" + command
    return command


def _envs(inst: InstancePlan) -> dict[str, str]:
    return {
        "PLANNING_MODEL": inst.model, "PLANNING_PHASE": inst.phase, "PLANNING_TEMPLATE": inst.template_id,
        "PLANNING_LAYER_PARTITION": ",".join(str(s.layers) for s in inst.stages),
        "PLANNING_STAGE_SHAPES": ";".join("+".join(n.shape for n in s.nodes) for s in inst.stages),
    }


def _model_ref(model: str, hf_repos: Mapping[str, str]) -> str:
    return hf_repos.get(model, f"/models/{model}")


def _is_simple(inst: InstancePlan) -> bool:
    shapes, _ = _tp_and_shapes(inst)
    return len(set(shapes)) == 1 and all(len(s.nodes) == 1 for s in inst.stages)


def skypilot_tasks(result: PlanResult, hf_repos: Mapping[str, str] | None = None,
                   step_tokens: Mapping[int, int] | None = None,
                   engine_limits: tuple[int, int] | None = None) -> list[ExportFile]:
    """One SkyPilot task YAML per plan instance (per distinct node shape for mixed pipelines).

    Parameters
    ----------
    result:
        The plan.
    hf_repos:
        Model id → Hugging Face repository used in the serve command (catalog models default to their
        ``hf_repo``; others to ``/models/<id>``).
    step_tokens:
        Instance index → per-step token budget, written as ``--max-num-batched-tokens`` (aggregated instances:
        the TPOT SLO's chunk, ``planning.simulate.engine_token_budgets``); absent: the engine's default.

    Returns
    -------
    list[ExportFile]
        ``kind="skypilot"``; ``deployable`` is ``"one-command"`` for single-shape pipelines, else ``"manual"``.
    """
    repos = dict(hf_repos or {})
    budgets, seqs = _engine_limits(result, step_tokens, engine_limits)
    files: list[ExportFile] = []
    for idx, inst in enumerate(result.instances):
        cloud, region = _split_region(inst.region)
        shapes, tp = _tp_and_shapes(inst)
        if not shapes:
            continue
        partition = [s.layers for s in inst.stages]
        base = _slug(f"{inst.model}-{inst.phase}-{idx}")
        header = _layout_comment(inst, budgets.get(idx), seqs.get(idx))
        if _is_simple(inst):
            gpu = inst.stages[0].nodes[0].gpu
            pp = len(inst.stages)
            task: dict[str, object] = {
                "name": base,
                "resources": {"infra": f"{cloud}/{region}", "accelerators": f"{SKYPILOT_ACCELERATORS[gpu]}:{tp}",
                              "ports": 8000},
                "num_nodes": pp,
                "envs": _envs(inst),
                "setup": "pip install vllm",
            }
            command = _serve_command(_model_ref(inst.model, repos), tp, pp, partition, inst.phase, budgets.get(idx),
                                     seqs.get(idx))
            if pp == 1:
                task["service"] = {"readiness_probe": "/v1/models", "replicas": inst.count}
                task["run"] = command + "\n"
                note = [f"launch: sky serve up {base}.yaml  (SkyServe keeps {inst.count} replica(s))"]
            else:
                task["run"] = ("if [ \"$SKYPILOT_NODE_RANK\" = \"0\" ]; then\n"
                               "  ray start --head --port=6379\n  sleep 10\n  " + command.replace("\n", "\n  ")
                               + "\nelse\n  sleep 5\n  ray start --address=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1):6379 "
                               "--block\nfi\n")
                note = [f"launch: sky launch -c {base}-<i> {base}.yaml, {inst.count} time(s) (one per instance)"]
            files.append(ExportFile(f"{base}.yaml", _comment(header + note) + yaml.safe_dump(task, sort_keys=False),
                                    "skypilot", "one-command"))
            continue
        # Mixed shapes or data-parallel nodes inside a stage: one task per distinct shape, joined by hand.
        distinct = sorted(set(shapes), key=shapes.index)
        for role, shape in enumerate(distinct):
            n_nodes = shapes.count(shape)
            gpu = next(n.gpu for s in inst.stages for n in s.nodes if n.shape == shape)
            count = next(n.count for s in inst.stages for n in s.nodes if n.shape == shape)
            stages_here = [k for k, s in enumerate(inst.stages) if any(n.shape == shape for n in s.nodes)]
            name = f"{base}-{_slug(shape)}"
            task = {
                "name": name,
                "resources": {"infra": f"{cloud}/{region}", "accelerators": f"{SKYPILOT_ACCELERATORS[gpu]}:{count}",
                              "ports": 8000},
                "num_nodes": n_nodes,
                "envs": {**_envs(inst), "PLANNING_ROLE": "head" if role == 0 else "worker",
                         "PLANNING_STAGES_ON_THIS_SHAPE": ",".join(str(k) for k in stages_here),
                         "RAY_HEAD_ADDRESS": "" if role == 0 else "<head-ip>:6379"},
                "setup": "pip install vllm",
                "run": ("ray start --head --port=6379 --block\n" if role == 0
                        else "ray start --address=$RAY_HEAD_ADDRESS --block\n"),
            }
            note = ["deployable: manual — a mixed-GPU pipeline spans several SkyPilot clusters:",
                    f"  1. sky launch -c {base}-{_slug(distinct[0])} (the head), note its IP;",
                    "  2. launch the other shapes' tasks with RAY_HEAD_ADDRESS=<head-ip>:6379;",
                    "  3. on the head run: " + _serve_command(_model_ref(inst.model, repos), count,
                                                              len(inst.stages), partition, inst.phase,
                                                              budgets.get(idx), seqs.get(idx))
                    .replace(" \\\n  ", " ").replace("\\\n", " "),
                    "  vLLM places stages in Ray placement-group order; stages with several data-parallel nodes",
                    "  need one pipeline per node and a router in front (the plan's throughput assumes that)."]
            files.append(ExportFile(f"{name}.yaml", _comment(header + note) + yaml.safe_dump(task, sort_keys=False),
                                    "skypilot", "manual"))
    return files


def _pod_spec(gpu: str, gpu_count: int, cmd: str, envs: Mapping[str, str]) -> dict[str, object]:
    container = {"name": "vllm", "image": VLLM_IMAGE, "command": ["/bin/sh", "-c", cmd],
                 "ports": [{"containerPort": 8000}],
                 "env": [{"name": k, "value": v} for k, v in envs.items()],
                 "resources": {"limits": {"nvidia.com/gpu": gpu_count}}}
    return {"nodeSelector": {"nvidia.com/gpu.product": K8S_GPU_PRODUCTS[gpu]}, "containers": [container]}


def kubernetes_manifests(result: PlanResult, hf_repos: Mapping[str, str] | None = None,
                         namespace: str = "llm-serving",
                         step_tokens: Mapping[int, int] | None = None,
                         engine_limits: tuple[int, int] | None = None) -> list[ExportFile]:
    """Kubernetes manifests: a ``Deployment`` per single-node instance, a LeaderWorkerSet per single-shape pipeline.

    Mixed-shape pipelines get one ``LeaderWorkerSet`` whose leader runs on the first stage's shape and whose
    workers run on the second shape when the pipeline has exactly two node shapes with one node per stage;
    anything else is written as per-shape StatefulSets marked ``deployable: manual``. ``step_tokens`` as in
    :func:`skypilot_tasks`.
    """
    repos = dict(hf_repos or {})
    budgets, seqs = _engine_limits(result, step_tokens, engine_limits)
    files: list[ExportFile] = []
    for idx, inst in enumerate(result.instances):
        shapes, tp = _tp_and_shapes(inst)
        if not shapes:
            continue
        base = _slug(f"{inst.model}-{inst.phase}-{idx}")
        labels = {"app.kubernetes.io/name": base, "planning/model": _slug(inst.model), "planning/phase": inst.phase}
        partition = [s.layers for s in inst.stages]
        command = _serve_command(_model_ref(inst.model, repos), tp, len(inst.stages), partition, inst.phase,
                                 budgets.get(idx), seqs.get(idx))

        envs = _envs(inst)

        def pod_spec(gpu: str, gpu_count: int, cmd: str, envs: dict[str, str] = envs) -> dict[str, object]:
            return _pod_spec(gpu, gpu_count, cmd, envs)

        header = _comment(_layout_comment(inst, budgets.get(idx), seqs.get(idx)))
        first = inst.stages[0].nodes[0]
        if _is_simple(inst) and len(inst.stages) == 1:
            doc: dict[str, object] = {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": base, "namespace": namespace, "labels": labels},
                "spec": {"replicas": inst.count, "selector": {"matchLabels": {"app.kubernetes.io/name": base}},
                         "template": {"metadata": {"labels": labels},
                                      "spec": pod_spec(first.gpu, first.count, command)}},
            }
            files.append(ExportFile(f"{base}.k8s.yaml", header + yaml.safe_dump(doc, sort_keys=False),
                                    "kubernetes", "one-command"))
            continue
        per_stage_single = all(len(s.nodes) == 1 for s in inst.stages)
        distinct = sorted(set(shapes), key=shapes.index)
        if per_stage_single and (len(distinct) == 1 or (len(distinct) == 2 and shapes.count(shapes[0]) == 1)):
            worker = inst.stages[1].nodes[0]
            leader_cmd = ("ray start --head --port=6379 && " + command.replace(" \\\n  ", " ").replace("\\\n", " "))
            doc = {
                "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": base, "namespace": namespace, "labels": labels},
                "spec": {"replicas": inst.count,
                         "leaderWorkerTemplate": {
                             "size": len(inst.stages),
                             "leaderTemplate": {"metadata": {"labels": labels},
                                                "spec": pod_spec(first.gpu, first.count, leader_cmd)},
                             "workerTemplate": {"metadata": {"labels": labels},
                                                "spec": pod_spec(worker.gpu, worker.count,
                                                                 "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block")},
                         }},
            }
            files.append(ExportFile(f"{base}.k8s.yaml", header + yaml.safe_dump(doc, sort_keys=False),
                                    "kubernetes", "one-command"))
            continue
        docs = []
        for shape in distinct:
            node = next(n for s in inst.stages for n in s.nodes if n.shape == shape)
            name = f"{base}-{_slug(shape)}"
            docs.append({
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "spec": {"replicas": shapes.count(shape) * inst.count, "serviceName": name,
                         "selector": {"matchLabels": {"app.kubernetes.io/name": base}},
                         "template": {"metadata": {"labels": labels},
                                      "spec": pod_spec(node.gpu, node.count, "ray start --block --address=<head>:6379")}},
            })
        text = header + "# deployable: manual — join the pods into one Ray cluster per instance, then run on the head:\n" \
            + "#   " + command.replace(" \\\n  ", " ").replace("\\\n", " ") + "\n" + yaml.safe_dump_all(docs, sort_keys=False)
        files.append(ExportFile(f"{base}.k8s.yaml", text, "kubernetes", "manual"))
    return files
