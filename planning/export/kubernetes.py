"""Kubernetes manifests of a plan: ``kubectl apply -f DIR`` starts every instance.

Files (kinds: Namespace, ConfigMap, Deployment, StatefulSet, Service; nothing needs a CRD or operator):

- ``00-namespace.k8s.yaml``: the Namespace, and the ConfigMap ``planning-launch`` holding the launch script
  (:data:`planning.export.scripts.LAUNCH_SCRIPT`) when some engine spans several nodes.
- one file per instance. A single-node engine is a ``Deployment`` (replicas = instance count × equal engines)
  with a ``Service`` in front. A multi-node engine is one ``StatefulSet`` per node slot, each with its own
  selector and its own headless ``Service`` (``publishNotReadyAddresses``, so workers find a head that is not
  ready yet); pod ordinal r of every slot forms pipeline r, slot 0 is its Ray head and runs ``vllm serve``
  (one Ray head per instance), a ``Service`` fronts the heads. Pods get a memory-backed ``/dev/shm``, a
  readiness probe (``/health`` on engines, ``ray status`` on Ray workers), the pinned image, the GPU product as
  node selector and ``HF_TOKEN`` from the optional Secret ``hf-token``.
- ``<model>-pd-proxy.k8s.yaml`` per disaggregated model: vLLM's toy proxy (pinned tag) in front of the model's
  prefill and decode Services, listed once per replica (round robin by replica).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from planning.export.deploy import (
    K8S_GPU_PRODUCTS,
    NIXL_PORT,
    NODE_SCRATCH,
    RAY_PORT,
    SERVE_PORT,
    SHM_PATH,
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
)
from planning.export.engine import EngineLayout, NodeSlot, TpOptions
from planning.export.scripts import LAUNCH_SCRIPT, launch_and_serve, ray_head, ray_worker
from planning.export.weights import mount_weights
from planning.result import PlanResult

LAUNCH_CONFIGMAP = "planning-launch"
LAUNCH_DIR = "/etc/planning"
SHM_SIZE = "8Gi"
PART_OF = "planning-export"


def _labels(name: str, recipe: InstanceRecipe | None = None, role: str = "serve") -> dict[str, str]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": PART_OF, "planning/role": role}
    if recipe is not None:
        labels |= {"planning/instance": str(recipe.idx), "planning/model": slug(recipe.inst.model),
                   "planning/phase": recipe.inst.phase}
    return labels


def _env(recipe: InstanceRecipe, engine: EngineLayout, kv: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in instance_envs(recipe.inst, recipe.idx).items()]
    env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token",
                                                                   "optional": True}}})
    if engine.multi_node:
        env.append({"name": "PLANNING_SLOTS", "value": slots_json(engine)})
    if kv:
        env += [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_PORT)}]
    return env


def _pod(slot: NodeSlot, script: str, env: list[dict[str, Any]], *, serving: bool, ray: bool,
         kv: bool, launch: bool) -> dict[str, Any]:
    ports = [{"name": "http", "containerPort": SERVE_PORT}] if serving else []
    if ray:
        ports.append({"name": "ray", "containerPort": RAY_PORT})
    if kv:
        ports.append({"name": "nixl", "containerPort": NIXL_PORT})
    probe: dict[str, Any] = (
        {"httpGet": {"path": "/health", "port": SERVE_PORT}, "initialDelaySeconds": 30, "periodSeconds": 10,
         "failureThreshold": 3} if serving else
        {"exec": {"command": ["/bin/sh", "-c", f"ray status --address=\"$(cat {NODE_SCRATCH}/ray-head):{RAY_PORT}\" >/dev/null"]},
         "initialDelaySeconds": 15, "periodSeconds": 30, "timeoutSeconds": 20})
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": SHM_PATH}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}]
    if launch:
        mounts.append({"name": "launch", "mountPath": LAUNCH_DIR, "readOnly": True})
        volumes.append({"name": "launch", "configMap": {"name": LAUNCH_CONFIGMAP}})
    container = {"name": "vllm", "image": VLLM_IMAGE, "command": ["/bin/bash", "-c", script], "ports": ports,
                 "env": env, "resources": {"limits": {"nvidia.com/gpu": slot.gpus}}, "volumeMounts": mounts,
                 "readinessProbe": probe}
    return {"metadata": {"labels": {}}, "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": K8S_GPU_PRODUCTS.get(slot.gpu, slot.gpu)},
        "terminationGracePeriodSeconds": 60, "containers": [container], "volumes": volumes}}


def _template(labels: dict[str, str], pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["labels"] = labels
    return pod


def _service(name: str, namespace: str, labels: dict[str, str], selector: str, port: int = SERVE_PORT,
             headless: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"app.kubernetes.io/name": selector},
                            "ports": [{"name": "http" if not headless else "ray",
                                       "port": port, "targetPort": port}]}
    if headless:
        spec |= {"clusterIP": "None", "publishNotReadyAddresses": True}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace,
                                                                "labels": labels}, "spec": spec}


def _engine_docs(recipe: InstanceRecipe, k: int, engine: EngineLayout, namespace: str) -> list[dict[str, Any]]:
    name = recipe.name(k)
    settings = recipe.settings_for(engine)
    serve = serve_command(engine, settings)
    replicas = recipe.inst.count * engine.copies
    kv = settings.kv_connector
    if not engine.multi_node:
        labels = _labels(name, recipe)
        script = "set -euo pipefail\nexec " + serve + "\n"
        pod = _pod(engine.slots[0], script, _env(recipe, engine, kv), serving=True, ray=False, kv=kv,
                   launch=False)
        if recipe.weights is not None:
            pod = mount_weights(pod, recipe.weights, slug)
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": name, "namespace": namespace, "labels": labels},
                      "spec": {"replicas": replicas, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                               "template": _template(labels, pod)}}
        return [deployment, _service(name, namespace, labels, name)]
    docs: list[dict[str, Any]] = []
    head_set = f"{name}-s0"
    for slot in engine.slots:
        set_name = f"{name}-s{slot.index}"
        head = slot.index == 0
        labels = _labels(set_name, recipe, "serve" if head else "ray-worker")
        if head:
            script = ("set -euo pipefail\n" + ray_head(slot.gpus, str(slot.index)) + "\n"
                      + launch_and_serve(f"{LAUNCH_DIR}/launch.py", serve))
        else:
            address = f"{head_set}-${{ORDINAL}}.{head_set}.{namespace}.svc.cluster.local"
            script = ("set -uo pipefail\nORDINAL=\"${HOSTNAME##*-}\"\n"
                      f"HEAD=\"{address}\"\nmkdir -p {NODE_SCRATCH} && echo \"$HEAD\" > {NODE_SCRATCH}/ray-head\n"
                      + ray_worker("$HEAD", slot.gpus, str(slot.index)))
        pod = _pod(slot, script, _env(recipe, engine, kv and head), serving=head, ray=True,
                   kv=kv and head, launch=head)
        if recipe.weights is not None:  # every rank loads its layers from the weights
            pod = mount_weights(pod, recipe.weights, slug)
        docs.append({"apiVersion": "apps/v1", "kind": "StatefulSet",
                     "metadata": {"name": set_name, "namespace": namespace, "labels": labels},
                     "spec": {"replicas": replicas, "serviceName": set_name, "podManagementPolicy": "Parallel",
                              "selector": {"matchLabels": {"app.kubernetes.io/name": set_name}},
                              "template": _template(labels, pod)}})
        docs.append(_service(set_name, namespace, labels, set_name, RAY_PORT, headless=True))
    docs.append(_service(name, namespace, _labels(name, recipe), head_set))
    return docs


def _proxy_docs(model: str, prefill: list[tuple[str, int]], decode: list[tuple[str, int]],
                namespace: str) -> list[dict[str, Any]]:
    """vLLM's toy proxy for one model: each engine Service listed once per replica it fronts."""
    name = f"{slug(model)}-pd-proxy"

    def hosts(items: list[tuple[str, int]]) -> list[str]:
        return [f"{svc}.{namespace}.svc.cluster.local" for svc, n in items for _ in range(n)]

    p_hosts, d_hosts = hosts(prefill), hosts(decode)
    fetch = (f"mkdir -p {NODE_SCRATCH} && python3 -c \"import urllib.request; urllib.request.urlretrieve({TOY_PROXY_URL!r}, "
             f"{TOY_PROXY_PATH!r})\"")
    run = ["python3", TOY_PROXY_PATH, "--host", "0.0.0.0", "--port", str(SERVE_PORT),
           "--prefiller-hosts", *p_hosts, "--prefiller-ports", *[str(SERVE_PORT)] * len(p_hosts),
           "--decoder-hosts", *d_hosts, "--decoder-ports", *[str(SERVE_PORT)] * len(d_hosts)]
    script = "set -euo pipefail\n" + fetch + "\nexec " + " ".join(shlex.quote(a) for a in run) + "\n"
    labels = _labels(name, role="pd-proxy") | {"planning/model": slug(model)}
    container = {"name": "proxy", "image": VLLM_IMAGE, "command": ["/bin/bash", "-c", script],
                 "ports": [{"name": "http", "containerPort": SERVE_PORT}],
                 "resources": {"requests": {"cpu": "2", "memory": "2Gi"}},
                 "readinessProbe": {"httpGet": {"path": "/healthcheck", "port": SERVE_PORT},
                                    "initialDelaySeconds": 5, "periodSeconds": 10}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": name, "namespace": namespace, "labels": labels},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                           "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}
    return [deployment, _service(name, namespace, labels, name)]


def kubernetes_manifests(result: PlanResult, hf_repos: Mapping[str, str] | None = None,
                         namespace: str = "llm-serving", step_tokens: Mapping[int, int] | None = None,
                         engine_limits: tuple[int, int] | None = None, tp_options: TpOptions | None = None,
                         model_layers: Mapping[str, int] | None = None,
                         memory_utilization: float | None = None) -> list[ExportFile]:
    """Kubernetes manifests of every instance, the namespace and the prefill/decode proxies (module docstring).

    Parameters
    ----------
    result:
        The plan.
    hf_repos:
        Model id → Hugging Face repository for ``vllm serve`` (others: ``/models/<id>``).
    namespace:
        Namespace of every object (created by ``00-namespace.k8s.yaml``).
    step_tokens, engine_limits:
        ``--max-num-batched-tokens`` per instance index, and the planner's (tokens, sequences) limits for
        disaggregated instances (:func:`planning.export.deploy.engine_limits`).
    tp_options, model_layers:
        Usable TP sizes per (model, GPUs); layer counts for one-node explicit templates.
    memory_utilization:
        ``--gpu-memory-utilization`` of every engine (:func:`planning.export.skypilot.skypilot_tasks`).

    Returns
    -------
    list[ExportFile]
        ``kind="kubernetes"``, all ``deployable="one-command"`` (``kubectl apply -f DIR``).
    """
    ns = slug(namespace)
    recipes = instance_recipes(result, hf_repos, step_tokens, engine_limits, tp_options, model_layers,
                               memory_utilization)
    head: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": ns, "labels": {"app.kubernetes.io/part-of": PART_OF}}}]
    if any(e.multi_node for r in recipes for e in r.engines):
        head.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": LAUNCH_CONFIGMAP, "namespace": ns,
                                  "labels": {"app.kubernetes.io/part-of": PART_OF}},
                     "data": {"launch.py": LAUNCH_SCRIPT}})
    files = [ExportFile("00-namespace.k8s.yaml", comment([
        f"planning export — namespace {ns} and shared objects; apply the folder: kubectl apply -f DIR",
        "gated models (Llama) read HF_TOKEN from the optional Secret hf-token (key: token):",
        f"  kubectl -n {ns} create secret generic hf-token --from-literal=token=hf_..."]) + dump_yaml(head),
        "kubernetes", "one-command")]
    for r in recipes:
        docs = [d for k, e in enumerate(r.engines) for d in _engine_docs(r, k, e, ns)]
        lines = layout_comment(r.inst, r.engines, r.settings, r.notes) + r.weights_header("kubernetes")
        entry = f"{r.base}.{ns}.svc.cluster.local:{SERVE_PORT}" if len(r.engines) == 1 else \
            f"{r.base}-e<k>.{ns}.svc.cluster.local:{SERVE_PORT}"
        lines.append(f"endpoint: http://{entry} (Service; port-forward or an Ingress to reach it from outside)")
        files.append(ExportFile(f"{r.base}.k8s.yaml", comment(lines) + dump_yaml(docs), "kubernetes",
                                "one-command" if r.one_command else "manual", instance=r.idx, notes=tuple(n for e in r.engines for n in e.notes) + r.notes))
    for model, members in proxy_members(recipes).items():
        lines = [f"planning export — prefill/decode proxy of {model}: vLLM's toy_proxy_server.py (v{VLLM_VERSION}), "
                 "NixlConnector KV transfer",
                 f"entry point: http://{slug(model)}-pd-proxy.{ns}.svc.cluster.local:{SERVE_PORT}/v1 (OpenAI API)",
                 "a reference proxy (round robin, no retries); llm-d or NVIDIA Dynamo route by load and KV cache"]
        files.append(ExportFile(f"{slug(model)}-pd-proxy.k8s.yaml",
                                comment(lines) + dump_yaml(_proxy_docs(model, members["prefill"], members["decode"], ns)),
                                "kubernetes", "one-command"))
    return files
