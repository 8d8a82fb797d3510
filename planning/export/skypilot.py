"""SkyPilot task YAML of a plan: SkyServe services for single-node engines, Ray clusters for multi-node ones.

- A **single-node engine** is a SkyServe service (``sky serve up FILE``): ``service.replicas`` = instance count ×
  equal engines, readiness probe ``/health``, the pinned vLLM image as ``image_id``.
- A **multi-node engine on one node shape** is one task with ``num_nodes`` (``sky launch``, once per instance):
  node rank 0 is the Ray head and runs the launch script and ``vllm serve``; the others join it.
- A **multi-node engine over several shapes** needs one SkyPilot cluster per shape (a task has one resource
  shape): the head task (slot 0's shape) first, then one task per other shape started with
  ``--env RAY_HEAD_IP=$(sky status --ip HEAD-CLUSTER)``; its run refuses to start without it. Marked
  ``deployable: manual``. The clusters must reach each other (same region and network).
- A disaggregated model gets a proxy task (vLLM's toy proxy at the pinned tag) started with the SkyServe
  endpoints of its prefill and decode services (``--env PREFILL_ENDPOINTS=... --env DECODE_ENDPOINTS=...``).

Every node joins Ray with its ``planning_slot_<k>`` resource (:mod:`planning.export.scripts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planning.export.deploy import (
    NIXL_PORT,
    NODE_SCRATCH,
    SERVE_PORT,
    SKYPILOT_ACCELERATORS,
    SKYPILOT_CLOUDS,
    TOY_PROXY_PATH,
    TOY_PROXY_URL,
    VLLM_IMAGE,
    VLLM_VERSION,
    ExportFile,
    InstanceRecipe,
    comment,
    dump_yaml,
    instance_envs,
    instance_recipes,
    layout_comment,
    proxy_members,
    serve_command,
    slots_json,
    slug,
    split_region,
)
from planning.export.engine import EngineLayout, TpOptions
from planning.export.scripts import launch_and_serve, ray_head, ray_worker, write_launch_script
from planning.result import PlanResult

LAUNCH_PATH = f"{NODE_SCRATCH}/launch.py"


def _resources(region: str, gpu: str | None, gpus: int, ports: list[int]) -> tuple[dict[str, Any], list[str]]:
    """SkyPilot resources and header lines (a region SkyPilot does not know is left to the user)."""
    from planning.pools import kind_of, site_of

    cloud, name = split_region(site_of(region))  # a pricing pool ({region}/spot, /reserved) runs in its region
    res: dict[str, Any] = {}
    notes: list[str] = []
    if cloud in SKYPILOT_CLOUDS:
        res["infra"] = f"{cloud}/{name}"
        if kind_of(region) == "spot" and gpu is not None:  # the plan's GPU nodes; a CPU proxy stays on demand
            res["use_spot"] = True
        elif kind_of(region) == "reserved":
            notes.append(f"reserved capacity in {site_of(region)}: the reservation applies to matching instances")
    else:
        notes.append(f"region {region} is not a cloud SkyPilot knows: add resources.infra (e.g. aws/us-east-1)")
    if gpu is not None:
        res["accelerators"] = f"{SKYPILOT_ACCELERATORS.get(gpu, gpu)}:{gpus}"
    else:
        res["cpus"] = "4+"
    res["image_id"] = f"docker:{VLLM_IMAGE}"
    if ports:
        res["ports"] = ports if len(ports) > 1 else ports[0]
    return res, notes


def _yaml(header: list[str], task: dict[str, Any]) -> str:
    return comment(header) + dump_yaml([task])


def _single_node(r: InstanceRecipe, k: int, engine: EngineLayout) -> ExportFile:
    name = r.name(k)
    settings = r.settings_for(engine)
    slot = engine.slots[0]
    kv = settings.kv_connector
    resources, notes = _resources(r.inst.region, slot.gpu, slot.gpus, [SERVE_PORT, NIXL_PORT] if kv else [SERVE_PORT])
    run = "set -euo pipefail\n"
    if kv:
        run += ("export VLLM_NIXL_SIDE_CHANNEL_HOST=\"$(hostname -I | awk '{print $1}')\"\n"
                f"export VLLM_NIXL_SIDE_CHANNEL_PORT={NIXL_PORT}\n")
    run += "exec " + serve_command(engine, settings) + "\n"
    task: dict[str, Any] = {
        "name": name, "resources": resources, "envs": instance_envs(r.inst, r.idx),
        "service": {"readiness_probe": {"path": "/health", "initial_delay_seconds": 1800},
                    "replicas": r.inst.count * engine.copies},
        "run": run,
    }
    header = layout_comment(r.inst, r.engines, r.settings, r.notes) + notes + r.weights_header("skypilot") + [
        f"launch: sky serve up -n {name} {name}.yaml  (SkyServe keeps {r.inst.count * engine.copies} replica(s); "
        "gated models: add --secret HF_TOKEN)"]
    return ExportFile(f"{name}.yaml", _yaml(header, task), "skypilot", "one-command" if r.one_command else "manual",
                      instance=r.idx, notes=tuple(engine.notes) + r.notes)


def _multi_node(r: InstanceRecipe, k: int, engine: EngineLayout) -> list[ExportFile]:
    name = r.name(k)
    settings = r.settings_for(engine)
    shapes: list[str] = []
    for s in engine.slots:
        if s.shape not in shapes:
            shapes.append(s.shape)
    mixed = len(shapes) > 1
    files = []
    for role, shape in enumerate(shapes):
        slots = [s for s in engine.slots if s.shape == shape]
        head_task = role == 0
        task_name = name if not mixed else f"{name}-{slug(shape, lead=False)}"
        resources, notes = _resources(r.inst.region, slots[0].gpu, slots[0].gpus, [SERVE_PORT] if head_task else [])
        clusters = r.inst.count * engine.copies
        envs: dict[str, str | None] = {**instance_envs(r.inst, r.idx), "PLANNING_CLUSTERS": str(clusters),
                                       "PLANNING_SHAPE_SLOTS": ",".join(str(s.index) for s in slots)}
        pick = "SLOT=\"$(echo \"$PLANNING_SHAPE_SLOTS\" | cut -d, -f$((SKYPILOT_NODE_RANK + 1)))\"\n"
        gpus = slots[0].gpus
        if head_task:
            envs["PLANNING_SLOTS"] = slots_json(engine)
            worker = ray_worker("$HEAD_IP", gpus, "$SLOT").replace("\n", "\n  ").rstrip()
            serve = launch_and_serve(LAUNCH_PATH, serve_command(engine, settings)).replace("\n", "\n  ").rstrip()
            run = ("set -uo pipefail\n" + pick + "HEAD_IP=\"$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\"\n"
                   "if [ \"$SKYPILOT_NODE_RANK\" = \"0\" ]; then\n"
                   f"  {ray_head(gpus, '$SLOT')}\n  {serve}\nelse\n  {worker}\nfi\n")
        else:
            envs["RAY_HEAD_IP"] = None  # required: sky launch refuses to start without --env RAY_HEAD_IP=...
            run = ("set -uo pipefail\n"
                   ": \"${RAY_HEAD_IP:?start this task with --env RAY_HEAD_IP=IP-of-the-head-cluster, from sky status --ip}\"\n"
                   + pick + ray_worker("$RAY_HEAD_IP", gpus, "$SLOT"))
        task: dict[str, Any] = {"name": task_name, "resources": resources, "num_nodes": len(slots), "envs": envs}
        if head_task:
            task["setup"] = write_launch_script(LAUNCH_PATH)
        task["run"] = run
        head_cluster = f"{name}-<i>"
        if not mixed:
            launch = [f"launch: sky launch -c {name}-<i> {task_name}.yaml, {clusters} time(s) (PLANNING_CLUSTERS, i = "
                      f"1..{clusters}: one cluster per pipeline); "
                      f"the endpoint is port {SERVE_PORT} of the head (sky status --endpoint {SERVE_PORT} {name}-<i>)"]
        else:
            launch = ["deployable: manual — one SkyPilot cluster per node shape, joined into one Ray cluster:",
                      f"  1. sky launch -c {head_cluster} {name}-{slug(shapes[0], lead=False)}.yaml  (the head: slot 0's shape)",
                      *[f"  {n + 2}. sky launch -c {name}-<i>-{slug(s, lead=False)} {name}-{slug(s, lead=False)}.yaml "
                        f"--env RAY_HEAD_IP=$(sky status --ip {head_cluster})" for n, s in enumerate(shapes[1:])],
                      "  the head starts vllm serve once every node has joined; repeat for each pipeline (i = 1.."
                      f"{clusters}, PLANNING_CLUSTERS); the clusters must reach each other on Ray's ports (same region and VPC, a "
                      "security group that allows traffic between them)"]
        header = layout_comment(r.inst, r.engines, r.settings, r.notes) + notes + r.weights_header("skypilot") + launch
        files.append(ExportFile(f"{task_name}.yaml", _yaml(header, task), "skypilot",
                                "manual" if mixed or not r.one_command else "one-command", instance=r.idx,
                                notes=tuple(engine.notes) + r.notes))
    return files


def _proxy(model: str, members: Mapping[str, list[tuple[str, int]]], region: str) -> ExportFile:
    name = f"{slug(model)}-pd-proxy"
    resources, notes = _resources(region, None, 0, [SERVE_PORT])
    run = ("set -euo pipefail\n"
           f"mkdir -p {NODE_SCRATCH}\n"
           f"python3 -c \"import urllib.request; urllib.request.urlretrieve('{TOY_PROXY_URL}', "
           f"'{TOY_PROXY_PATH}')\"\n"
           "hosts() { for e in $1; do e=\"${e#http://}\"; printf '%s ' \"${e%:*}\"; done; }\n"
           "ports() { for e in $1; do printf '%s ' \"${e##*:}\"; done; }\n"
           f"exec python3 {TOY_PROXY_PATH} --host 0.0.0.0 --port {SERVE_PORT} \\\n"
           "  --prefiller-hosts $(hosts \"$PREFILL_ENDPOINTS\") --prefiller-ports $(ports \"$PREFILL_ENDPOINTS\") \\\n"
           "  --decoder-hosts $(hosts \"$DECODE_ENDPOINTS\") --decoder-ports $(ports \"$DECODE_ENDPOINTS\")\n")
    task = {"name": name, "resources": resources, "envs": {"PREFILL_ENDPOINTS": None, "DECODE_ENDPOINTS": None},
            "run": run}
    p = " ".join(f"$(sky serve status --endpoint {svc})" for svc, _ in members["prefill"])
    d = " ".join(f"$(sky serve status --endpoint {svc})" for svc, _ in members["decode"])
    header = [f"planning export — prefill/decode proxy of {model}: vLLM's toy_proxy_server.py (v{VLLM_VERSION}), "
              "NixlConnector KV transfer; a reference proxy (round robin, no retries)", *notes,
              "deployable: manual — start the prefill and decode services first, then:",
              f"  sky launch -c {name} {name}.yaml --env PREFILL_ENDPOINTS=\"{p}\" --env DECODE_ENDPOINTS=\"{d}\"",
              f"entry point: port {SERVE_PORT} of this cluster (OpenAI API); the decode replicas read KV from the "
              f"prefill replicas on port {NIXL_PORT}: keep them in one region and network"]
    return ExportFile(f"{name}.yaml", _yaml(header, task), "skypilot", "manual")


def skypilot_tasks(result: PlanResult, hf_repos: Mapping[str, str] | None = None,
                   step_tokens: Mapping[int, int] | None = None, engine_limits: tuple[int, int] | None = None,
                   tp_options: TpOptions | None = None,
                   model_layers: Mapping[str, int] | None = None,
                   memory_utilization: float | None = None) -> list[ExportFile]:
    """SkyPilot YAML of every instance and the prefill/decode proxies (module docstring).

    Parameters
    ----------
    result:
        The plan.
    hf_repos:
        Model id → Hugging Face repository for ``vllm serve`` (others: ``/models/<id>``).
    step_tokens, engine_limits:
        ``--max-num-batched-tokens`` per instance index, and the planner's (tokens, sequences) limits for
        disaggregated instances (:func:`planning.export.deploy.engine_limits`).
    tp_options, model_layers:
        Usable TP sizes per (model, GPUs); layer counts for one-node explicit templates.
    memory_utilization:
        ``--gpu-memory-utilization`` of every engine: the share of each GPU's memory the plan's KV budget assumes
        (the planner's engine, ``perf.engines.planner_memory``); None: vLLM's default.

    Returns
    -------
    list[ExportFile]
        ``kind="skypilot"``; ``deployable`` is ``"manual"`` for multi-shape engines and proxies.
    """
    recipes = instance_recipes(result, hf_repos, step_tokens, engine_limits, tp_options, model_layers,
                               memory_utilization)
    files: list[ExportFile] = []
    for r in recipes:
        for k, engine in enumerate(r.engines):
            files += _multi_node(r, k, engine) if engine.multi_node else [_single_node(r, k, engine)]
    regions = {r.inst.model: r.inst.region for r in recipes}
    for model, members in proxy_members(recipes).items():
        files.append(_proxy(model, members, regions[model]))
    return files
