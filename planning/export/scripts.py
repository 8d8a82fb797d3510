"""Shell and Python the recipes run: Ray head and workers of a multi-node engine, and the launch script that
waits for every node and computes ``VLLM_PP_LAYER_PARTITION`` in the order vLLM ranks the nodes.

vLLM's Ray executor (``vllm/v1/executor/ray_executor.py`` at the pinned version) ranks its GPU workers by
(not on the driver's node, workers on the node, node IP as text): the node running ``vllm serve`` first, then
nodes with fewer GPUs, then by IP. Node IPs are only known at launch, so the layer partition is computed there:
every node joins Ray with a custom resource ``planning_slot_<k>`` naming its place in the plan, and the launch
script reads the nodes back, sorts them as vLLM will, and concatenates each slot's layers per rank. Each node
keeps the layer count the export gave it; the layer ranges follow vLLM's rank order.
"""

from __future__ import annotations

import shlex

from planning.export.deploy import RAY_PORT

LAUNCH_SCRIPT = '''\
"""planning export: wait for this engine's Ray cluster, then print the environment `vllm serve` needs.

PLANNING_SLOTS (JSON, pipeline order): [{"slot": k, "shape": "2xL40S", "gpus": 2, "layers": [13, 12]}, ...].
Prints `export VLLM_HOST_IP=...` and `export VLLM_PP_LAYER_PARTITION=...` for `eval`.
"""
import json
import os
import sys
import time

import ray

slots = {s["slot"]: s for s in json.loads(os.environ["PLANNING_SLOTS"])}
need = sum(s["gpus"] for s in slots.values())
timeout = float(os.environ.get("PLANNING_JOIN_TIMEOUT_S", "1800"))
ray.init(address="auto", logging_level="ERROR")
start = time.time()
while True:
    nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU", 0) > 0]
    have = sum(int(n["Resources"]["GPU"]) for n in nodes)
    if have >= need and len(nodes) >= len(slots):
        break
    if time.time() - start > timeout:
        sys.exit(f"planning: {have} of {need} GPUs ({len(nodes)} of {len(slots)} nodes) joined Ray "
                 f"in {timeout:.0f} s; check the worker nodes' logs")
    time.sleep(5)


def slot_of(node):
    keys = [k for k in node["Resources"] if k.startswith("planning_slot_")]
    if len(keys) != 1 or int(keys[0].rsplit("_", 1)[1]) not in slots:
        sys.exit(f"planning: node {node['NodeManagerAddress']} carries {keys}, not exactly one planning_slot_N "
                 f"resource with N in {sorted(slots)}")
    return slots[int(keys[0].rsplit("_", 1)[1])]


here = ray.get_runtime_context().get_node_id()
head_ip = next(n["NodeManagerAddress"] for n in nodes if n["NodeID"] == here)
# vLLM's Ray executor ranks workers: driver's node first, then nodes with fewer workers, then IP (as text)
order = sorted(nodes, key=lambda n: (n["NodeManagerAddress"] != head_ip, int(n["Resources"]["GPU"]),
                                     n["NodeManagerAddress"]))
seen, partition = set(), []
for node in order:
    slot = slot_of(node)
    if slot["slot"] in seen or int(node["Resources"]["GPU"]) != slot["gpus"]:
        sys.exit(f"planning: slot {slot['slot']} ({slot['shape']}) joined twice or with "
                 f"{int(node['Resources']['GPU'])} GPUs instead of {slot['gpus']}")
    seen.add(slot["slot"])
    partition += slot["layers"]
print(f"export VLLM_HOST_IP={head_ip}")
print("export VLLM_PP_LAYER_PARTITION=" + ",".join(str(j) for j in partition))
'''


def slot_resources(slot_expr: str) -> str:
    """``--resources`` JSON naming the node's slot; ``slot_expr`` is a number or a shell variable (``$SLOT``)."""
    return f"--resources=\"{{\\\"planning_slot_{slot_expr}\\\": 1}}\""


def ray_head(gpus: int | str, slot_expr: str) -> str:
    """Start this node as the engine's Ray head (returns once Ray runs)."""
    return f"ray start --head --port={RAY_PORT} --num-gpus={gpus} {slot_resources(slot_expr)}"


def ray_worker(head: str, gpus: int | str, slot_expr: str) -> str:
    """Join the head at ``head`` (an address expression), retrying until it is up, then stay while it lives."""
    return (f"until ray start --address=\"{head}:{RAY_PORT}\" --num-gpus={gpus} {slot_resources(slot_expr)}; "
            "do sleep 5; done\n"
            f"while ray status --address=\"{head}:{RAY_PORT}\" >/dev/null 2>&1; do sleep 30; done\n"
            "echo 'planning: the Ray head is gone; exiting so the node restarts' >&2; exit 1\n")


def launch_and_serve(script_path: str, serve: str) -> str:
    """Wait for every node, export the partition, then run ``serve`` (the engine) in the foreground."""
    return f"eval \"$(python3 {shlex.quote(script_path)})\"\necho \"layer partition: $VLLM_PP_LAYER_PARTITION\"\nexec {serve}\n"


def write_launch_script(path: str) -> str:
    """Shell that writes :data:`LAUNCH_SCRIPT` to ``path`` (SkyPilot setup; Kubernetes mounts a ConfigMap)."""
    return f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0])}\ncat > {shlex.quote(path)} <<'PLANNING_LAUNCH'\n" \
        f"{LAUNCH_SCRIPT}PLANNING_LAUNCH\n"

