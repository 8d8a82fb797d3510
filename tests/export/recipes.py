"""Checks of exported recipes shared by the export tests: Kubernetes' schemas and the TP/PP/GPU arithmetic."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from planning.export import ExportFile
from planning.export.deploy import K8S_GPU_PRODUCTS, SKYPILOT_ACCELERATORS, VLLM_IMAGE
from planning.result import PlanResult

K8S_SCHEMAS = Path(__file__).parent / "schemas" / "kubernetes-v1.34.0-strict.json"
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@cache
def _k8s_validators() -> dict[str, jsonschema.protocols.Validator]:
    data = json.loads(K8S_SCHEMAS.read_text(encoding="utf-8"))
    return {kind: jsonschema.Draft202012Validator({"$defs": data["$defs"], **schema})
            for kind, schema in data["kinds"].items()}


def validate_k8s(doc: Mapping[str, Any]) -> None:
    """Raise unless ``doc`` is a valid object of a kind the export writes (Kubernetes v1.34 strict schemas),
    with DNS-1035 names (Services need them; everything we name follows the same rule)."""
    validators = _k8s_validators()
    kind = doc.get("kind")
    if kind not in validators:
        raise AssertionError(f"kind {kind!r} is not one the export may write ({', '.join(validators)})")
    validators[kind].validate(dict(doc))
    name = doc["metadata"]["name"]
    if not DNS_LABEL.match(name) or len(name) > (52 if kind == "StatefulSet" else 63):
        raise AssertionError(f"{kind} name {name!r} is not a short DNS-1035 label")


def k8s_docs(files: Iterable[ExportFile]) -> list[dict[str, Any]]:
    return [d for f in files if f.kind == "kubernetes" for d in yaml.safe_load_all(f.text) if d]


def _flag(command: str, name: str, default: int = 1) -> int:
    m = re.search(rf"--{name} (\d+)", command)
    return int(m.group(1)) if m else default


def _serve(command: str) -> tuple[int, int, int] | None:
    """(TP, PP, DP) of the ``vllm serve`` in a command, None when it has none."""
    if "vllm serve" not in command:
        return None
    return _flag(command, "tensor-parallel-size"), _flag(command, "pipeline-parallel-size"), \
        _flag(command, "data-parallel-size")


def _gpu_of_product(product: str) -> str:
    return next(g for g, p in K8S_GPU_PRODUCTS.items() if p == product)


def _gpu_of_accelerator(name: str) -> str:
    return next(g for g, a in SKYPILOT_ACCELERATORS.items() if a == name)


def _check_slots(slots: Sequence[Mapping[str, Any]], tp: int, pp: int, layers: int, where: str) -> None:
    """The head's PLANNING_SLOTS against its serve command: TP divides every node, ranks and layers add up."""
    assert sum(s["gpus"] for s in slots) == tp * pp, f"{where}: {tp} x {pp} != GPUs of the nodes"
    for s in slots:
        assert s["gpus"] % tp == 0 and len(s["layers"]) == s["gpus"] // tp, f"{where}: node {s} vs TP {tp}"
        assert all(j >= 1 for j in s["layers"]), where
    assert sum(len(s["layers"]) for s in slots) == pp, where
    assert sum(sum(s["layers"]) for s in slots) == layers, f"{where}: layers do not sum to {layers}"


def check_arithmetic(plan: PlanResult, files: Sequence[ExportFile], layers: Mapping[str, int]) -> int:
    """Every instance's files request exactly the GPUs the plan's instance uses (per GPU type, all copies), every
    engine's TP × PP (× DP) equals its GPUs with TP dividing every node's GPUs, and layers sum to the model's.
    Returns the number of engines checked."""
    engines = 0
    for idx, inst in enumerate(plan.instances):
        mine = [f for f in files if f.instance == idx]
        if not mine:
            continue
        assert sum(s.layers for s in inst.stages) in (0, layers[inst.model]), f"instance {idx}: plan's layers"
        want = Counter({g: n * inst.count for g, n in inst.gpus.items()})
        for kind in ("skypilot", "kubernetes"):
            got: Counter[str] = Counter()
            for f in (f for f in mine if f.kind == kind):
                docs = [d for d in yaml.safe_load_all(f.text) if d]
                for d in docs:
                    engines += _check_doc(kind, d, docs, layers[inst.model], got, f"{f.name}")
            if any(f.kind == kind for f in mine):
                assert got == want, f"instance {idx} ({kind}): requests {dict(got)}, plan uses {dict(want)}"
    return engines


def _check_doc(kind: str, d: Mapping[str, Any], docs: Sequence[Mapping[str, Any]], layers: int,
               got: Counter[str], where: str) -> int:
    if kind == "skypilot":
        gpu_name, _, n = str(d["resources"]["accelerators"]).partition(":")
        nodes = int(d.get("num_nodes", 1))
        copies = int(d["service"]["replicas"]) if "service" in d else int(d["envs"]["PLANNING_CLUSTERS"])
        got[_gpu_of_accelerator(gpu_name)] += int(n) * nodes * copies
        serve = _serve(d["run"])
        if serve is None:
            return 0
        tp, pp, dp = serve
        if pp > 1:
            _check_slots(json.loads(d["envs"]["PLANNING_SLOTS"]), tp, pp, layers, where)
        else:
            assert tp * dp == int(n) and nodes == 1, f"{where}: TP {tp} x DP {dp} on {n} GPUs"
        return 1
    if d["kind"] not in ("Deployment", "StatefulSet"):
        return 0
    pod = d["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    n = int(container["resources"]["limits"]["nvidia.com/gpu"])
    got[_gpu_of_product(pod["nodeSelector"]["nvidia.com/gpu.product"])] += n * int(d["spec"]["replicas"])
    serve = _serve(container["command"][-1])
    if serve is None:
        return 0
    tp, pp, dp = serve
    if pp > 1:
        env = {e["name"]: e.get("value") for e in container["env"]}
        slots = json.loads(env["PLANNING_SLOTS"])
        _check_slots(slots, tp, pp, layers, where)
        base = d["metadata"]["name"].rsplit("-s", 1)[0]
        for s in slots:  # each slot's StatefulSet asks for that slot's GPUs, as many pods as the head's
            (peer,) = [x for x in docs if x["kind"] == "StatefulSet" and x["metadata"]["name"] == f"{base}-s{s['slot']}"]
            assert peer["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == s["gpus"]
            assert peer["spec"]["replicas"] == d["spec"]["replicas"], where
    else:
        assert tp * dp == n, f"{where}: TP {tp} x DP {dp} on {n} GPUs"
    return 1


def bash_syntax(script: str, where: str) -> None:
    """``bash -n``: the script parses (quotes, heredocs, if/fi)."""
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{where}: bash -n: {done.stderr.strip()[:300]}"


def check_kubernetes_recipes(files: Sequence[ExportFile]) -> None:
    """Schemas, a selector and a headless Service per StatefulSet, unique selectors, /dev/shm and readiness on every
    engine pod, the pinned image, no placeholder in any command, one Ray head per engine, a Namespace."""
    docs = k8s_docs(files)
    for d in docs:
        validate_k8s(d)
    kinds = Counter(d["kind"] for d in docs)
    assert kinds["Namespace"] == 1
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    selectors = [json.dumps(d["spec"]["selector"]["matchLabels"], sort_keys=True) for d in workloads]
    assert len(selectors) == len(set(selectors)), "two workloads share a selector"
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    for d in workloads:
        spec = d["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()), "selector misses pods"
        for c in spec["template"]["spec"]["containers"]:
            assert c["image"] == VLLM_IMAGE and ":latest" not in c["image"]
            assert "readinessProbe" in c
            script = c["command"][-1]
            assert "<" not in script.replace("<<'PLANNING_LAUNCH'", ""), f"placeholder in {d['metadata']['name']}"
            bash_syntax(script, d["metadata"]["name"])
            if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {}):
                assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
        if d["kind"] == "StatefulSet":
            svc = services[spec["serviceName"]]
            assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    for d in docs:
        if d["kind"] == "Service":
            sel = d["spec"]["selector"]
            assert any(all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())
                       for w in workloads), f"Service {d['metadata']['name']} selects no pods"
    heads = Counter()
    for d in workloads:
        script = d["spec"]["template"]["spec"]["containers"][0]["command"][-1]
        if "ray start" in script:
            base = d["metadata"]["name"].rsplit("-s", 1)[0]
            heads[base] += script.count("ray start --head")
    assert all(n == 1 for n in heads.values()), f"Ray heads per engine: {dict(heads)}"


def check_skypilot_recipes(files: Sequence[ExportFile]) -> None:
    """No placeholder in run/setup, the pinned image, one Ray head per engine (rank 0 of the head task only)."""
    for f in files:
        if f.kind != "skypilot":
            continue
        task = yaml.safe_load(f.text)
        assert task["resources"]["image_id"] == f"docker:{VLLM_IMAGE}"
        for part in ("run", "setup"):
            text = task.get(part) or ""
            assert "<" not in text.replace("<<'PLANNING_LAUNCH'", ""), f"placeholder in {f.name} {part}"
            if text:
                bash_syntax(text, f"{f.name} {part}")
        heads = task["run"].count("ray start --head")
        assert heads <= 1
        if heads:
            assert 'if [ "$SKYPILOT_NODE_RANK" = "0" ]' in task["run"]
