"""Deployable exports of a plan, the shared part: pinned engine, file type, header comment, the vLLM command.

Rooms: ``engine`` (how an instance runs on vLLM: engines, TP, pipeline ranks, layer partition), ``scripts``
(the shell and launch scripts every recipe uses: Ray head and workers, the partition computed at launch),
``skypilot`` (task and SkyServe YAML), ``kubernetes`` (Namespace, ConfigMap, Deployments, StatefulSets with
their headless Services, Services, the prefill/decode proxy); this module holds what they share. The recipes
are described in docs/deploy.md.

Every file opens with a comment holding the pipeline layout, the plan's throughput and price, the engine each
copy runs (TP × PP, layers per rank) and anything that differs from the plan. Nothing here contacts a cloud.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import yaml

from planning.errors import PlanningError
from planning.export.bench import bench_lines
from planning.export.engine import EngineLayout, TpOptions, engine_layouts
from planning.export.weights import WeightsSource
from planning.result import InstancePlan, PlanResult

if TYPE_CHECKING:
    from planning.context import EngineContext

VLLM_VERSION = "0.33.0"
"""The engine every recipe pins (PyPI ``vllm`` 0.33.0, 2026-11; its image ``vllm/vllm-openai:v0.33.0``). The
launch script follows this version's Ray executor rank order and the NixlConnector rules; check both before
moving the pin (docs/deploy.md)."""
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
TOY_PROXY_URL = (f"https://raw.githubusercontent.com/vllm-project/vllm/v{VLLM_VERSION}/tests/v1/kv_connector/"
                 "nixl_integration/toy_proxy_server.py")
"""vLLM's reference prefill/decode proxy for NixlConnector (round robin over the listed engines), fetched at
the pinned tag when the proxy starts."""
SERVE_PORT = 8000
# Paths on the *deployed* node or pod (never on the machine running the planner). The files a recipe fetches or
# writes at start (launch script, toy proxy, the Ray head's address) go under the task's own working directory
# (SkyPilot's workdir or home, the image's WORKDIR in a pod; setup, run and probes all start there), not a fixed
# machine path: two tasks on one node never share them. SHM_PATH is where Linux, NCCL and vLLM's workers expect
# shared memory, which a pod must mount explicitly (a memory-backed emptyDir).
NODE_SCRATCH = ".planning"
TOY_PROXY_PATH = f"{NODE_SCRATCH}/toy_proxy_server.py"
SHM_PATH = "/dev/shm"
RAY_PORT = 6379
NIXL_PORT = 5600  # VLLM_NIXL_SIDE_CHANNEL_PORT: the decode engine reads a request's KV from here

# SkyPilot's accelerator names for the catalog's GPU ids (sky/catalog: `A100` is the 40 GB part).
SKYPILOT_ACCELERATORS: Mapping[str, str] = {
    "H100": "H100", "H200": "H200", "A100-80G": "A100-80GB", "A100-40G": "A100", "L40S": "L40S", "L40": "L40",
    "L4": "L4", "A10G": "A10G", "A40": "A40", "A6000": "RTXA6000", "RTX4090": "RTX4090", "T4": "T4", "V100": "V100",
}
SKYPILOT_CLOUDS = frozenset({"aws", "gcp", "azure", "lambda", "runpod", "oci", "paperspace", "fluidstack", "vast",
                             "cudo", "nebius", "kubernetes"})
# NVIDIA GPU feature discovery's `nvidia.com/gpu.product` label values (node selectors in Kubernetes).
K8S_GPU_PRODUCTS: Mapping[str, str] = {
    "H100": "NVIDIA-H100-80GB-HBM3", "H200": "NVIDIA-H200", "A100-80G": "NVIDIA-A100-SXM4-80GB",
    "A100-40G": "NVIDIA-A100-SXM4-40GB", "L40S": "NVIDIA-L40S", "L40": "NVIDIA-L40", "L4": "NVIDIA-L4",
    "A10G": "NVIDIA-A10G", "A40": "NVIDIA-A40", "A6000": "NVIDIA-RTX-A6000", "RTX4090": "NVIDIA-GeForce-RTX-4090",
    "T4": "Tesla-T4", "V100": "Tesla-V100-SXM2-16GB",
}


@dataclass(frozen=True)
class ExportFile:
    """One exported file: its suggested name, its text and whether one command launches it.

    ``instance`` is the plan instance it deploys (None for shared files: namespace, proxies); ``notes`` say
    what the recipe does differently from the plan (vLLM's limits), also written in the file's header.
    """

    name: str
    text: str
    kind: str  # "skypilot" | "kubernetes"
    deployable: str  # "one-command" | "manual"
    instance: int | None = None
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class EngineSettings:
    """What the serve command of one instance carries besides its layout (from the plan and the perf model)."""

    model_ref: str
    phase: str
    step_tokens: int | None = None
    max_seqs: int | None = None
    kv_connector: bool = False
    memory_utilization: float | None = None  # --gpu-memory-utilization: the plan's KV budget (perf.engines)
    bench: tuple[str, ...] = ()  # header lines: the benchmark command that measures the instance (export.bench)


def slug(text: str, lead: bool = True) -> str:
    """A DNS-1035 label fragment: lower case, digits and dashes, at most 40 characters, starting with a letter
    (``lead``; a suffix such as ``2xl40s`` may start with a digit)."""
    out = "".join(c if c.isalnum() and c.isascii() else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    out = out.strip("-")[:40].strip("-")
    return out if out[:1].isalpha() or (out and not lead) else f"m-{out}"[:40].strip("-")


class _Dumper(yaml.SafeDumper):
    """YAML for people: no anchors/aliases for repeated label maps, multi-line strings as ``|`` blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(line != line.rstrip() for line in value.split("\n")):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump_yaml(docs: Sequence[Mapping[str, Any]]) -> str:
    """One or more YAML documents, readable (see :class:`_Dumper`) and loadable by ``yaml.safe_load_all``."""
    return yaml.dump_all([dict(d) for d in docs], Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def instance_base(inst: InstancePlan, idx: int) -> str:
    """File and object name stem of instance ``idx``."""
    return slug(f"{inst.model}-{inst.phase}-{idx}")


def split_region(region: str) -> tuple[str, str]:
    cloud, _, name = region.partition(":")
    return cloud, name


def comment(lines: Sequence[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def layout_comment(inst: InstancePlan, engines: Sequence[EngineLayout], settings: EngineSettings,
                   extra: Sequence[str] = ()) -> list[str]:
    """The header of every file of one instance: plan, engines, deviations from the plan, engine limits."""
    lines = [f"planning export — {inst.model} ({inst.phase}), template {inst.template_id}, region {inst.region}",
             f"{inst.count} instance(s); planned throughput {inst.throughput:,.1f} {inst.throughput_unit} each; "
             f"${inst.cost_per_hour:,.2f}/h for all {inst.count} at planning prices",
             "plan's pipeline (stage: layers [start, end) on nodes):"]
    for k, stage in enumerate(inst.stages):
        nodes = ", ".join(n.shape for n in stage.nodes)
        lines.append(f"  stage {k}: {stage.layers} layers [{stage.layer_start}, {stage.layer_end}) on {nodes}"
                     + (f" ({len(stage.nodes)} data-parallel nodes)" if len(stage.nodes) > 1 else ""))
    lines.append(f"vLLM {VLLM_VERSION} engines per instance:")
    for e in engines:
        ranks = "; ".join(f"{s.shape} layers {'+'.join(str(j) for j in s.rank_layers)}" for s in e.slots)
        lines.append(f"  {e.copies} x TP {e.tp} x PP {e.pp}" + (f" x DP {e.dp}" if e.dp > 1 else "")
                     + f" = {e.gpus} GPUs: {ranks}")
    for note in (*[n for e in engines for n in e.notes], *extra):
        lines.append(f"differs from the plan: {note}")
    plan = inst.engine
    if plan is not None and plan.phase in ("decode", "aggregated"):
        if plan.phase == "aggregated":
            lines.append(f"per-step token budget {plan.max_batched_tokens} (--max-num-batched-tokens): the largest "
                         "chunk whose step keeps the TPOT SLO (planner and simulator assume it)")
        per = ", ".join(f"{e.copies * e.dp} x {engine_flags(inst, e)[0]}" for e in engines)  # type: ignore[index]
        lines.append(f"planned batch {plan.batch:g} sequences per instance ({plan.step_ms:g} ms per step of all of "
                     f"them), at most {plan.max_num_seqs} admitted: the batch and the KV room the plan keeps for "
                     f"its fluctuation (--max-num-seqs per engine: {per})")
    elif settings.step_tokens and settings.max_seqs:
        lines.append(f"per-step token budget {settings.step_tokens} (--max-num-batched-tokens) and at most "
                     f"{settings.max_seqs} sequences (--max-num-seqs): the engine limits the planner's tables assume "
                     "(vLLM's own defaults are 2048 / 256 on GPUs under 70 GiB)")
    elif settings.step_tokens:
        lines.append(f"per-step token budget {settings.step_tokens} (--max-num-batched-tokens): the largest chunk "
                     "whose step keeps the TPOT SLO (planner and simulator assume it)")
    return lines + list(settings.bench)


def engine_share(inst: InstancePlan, engine: EngineLayout) -> float:
    """The share of ``inst``'s traffic one scheduler of ``engine`` carries: its nodes' planned throughput over their
    stage's (the smallest over the stages), per data-parallel rank (1 for an engine spanning every node)."""
    share = 1.0
    for k, stage in enumerate(inst.stages):
        total = sum(max(n.throughput, 0.0) for n in stage.nodes)
        mine = [s.shape for s in engine.slots if s.stage == k]
        if total <= 0 or not mine:
            continue
        rate = {n.shape: max(n.throughput, 0.0) for n in reversed(stage.nodes)}
        share = min(share, sum(rate.get(shape, 0.0) for shape in mine) / total)
    return share / max(engine.dp, 1)


def engine_flags(inst: InstancePlan, engine: EngineLayout) -> tuple[int, int] | None:
    """(``--max-num-seqs``, ``--max-num-batched-tokens``) of one scheduler of ``engine``: the plan's engine limits
    (``InstancePlan.engine``) on its share of the instance; None when the plan carries none."""
    if inst.engine is None:
        return None
    return inst.engine.split(engine_share(inst, engine))


def kv_transfer_config(phase: str) -> dict[str, str]:
    """NixlConnector settings of a prefill (producer) or decode (consumer) engine (vLLM's multi-host example)."""
    return {"kv_connector": "NixlConnector", "kv_role": "kv_producer" if phase == "prefill" else "kv_consumer",
            "kv_load_failure_policy": "fail"}


def serve_args(engine: EngineLayout, settings: EngineSettings) -> list[str]:
    """``vllm serve`` and its flags for one engine (one flag per item; the launch scripts join them)."""
    parts = [f"vllm serve {settings.model_ref}", "--host 0.0.0.0", f"--port {SERVE_PORT}",
             f"--tensor-parallel-size {engine.tp}"]
    if engine.pp > 1:
        parts += [f"--pipeline-parallel-size {engine.pp}", "--distributed-executor-backend ray"]
    if engine.dp > 1:
        parts.append(f"--data-parallel-size {engine.dp}")
    if settings.step_tokens:
        parts.append(f"--max-num-batched-tokens {int(settings.step_tokens)}")
    if settings.max_seqs:
        parts.append(f"--max-num-seqs {int(settings.max_seqs)}")
    if settings.kv_connector:
        parts.append(f"--kv-transfer-config '{json.dumps(kv_transfer_config(settings.phase), separators=(',', ':'))}'")
    if settings.memory_utilization:  # the share of each GPU's memory the plan's KV budget assumes
        parts.append(f"--gpu-memory-utilization {settings.memory_utilization:g}")
    return parts


def serve_command(engine: EngineLayout, settings: EngineSettings) -> str:
    """The serve command as one shell command over several lines."""
    return " \\\n  ".join(serve_args(engine, settings))


def engine_limits(result: PlanResult, step_tokens: Mapping[int, int] | None,
                  limits: tuple[int, int] | None) -> tuple[dict[int, int], dict[int, int]]:
    """``--max-num-batched-tokens`` and ``--max-num-seqs`` by instance index: ``step_tokens`` as given, and the
    planner's engine limits ``(max_batched_tokens, max_num_seqs)`` for the disaggregated instances without one."""
    budgets, seqs = dict(step_tokens or {}), {}
    if limits is not None:
        for idx, inst in enumerate(result.instances):
            if inst.phase in ("prefill", "decode") and idx not in budgets:
                budgets[idx], seqs[idx] = int(limits[0]), int(limits[1])
    return budgets, seqs


def instance_envs(inst: InstancePlan, idx: int) -> dict[str, str]:
    """The ``PLANNING_*`` environment every container of an instance carries (what it is, for operators)."""
    return {
        "PLANNING_INSTANCE": str(idx), "PLANNING_MODEL": inst.model, "PLANNING_PHASE": inst.phase,
        "PLANNING_TEMPLATE": inst.template_id[:200],
    }


def slots_json(engine: EngineLayout) -> str:
    """The engine's nodes for the launch script: ``[{"slot", "shape", "gpus", "layers"}]`` in pipeline order."""
    return json.dumps([{"slot": s.index, "shape": s.shape, "gpus": s.gpus, "layers": list(s.rank_layers)}
                       for s in engine.slots], separators=(",", ":"))


@dataclass(frozen=True)
class InstanceRecipe:
    """Everything both formats need to write one instance: its engines and serve settings."""

    idx: int
    inst: InstancePlan
    base: str
    engines: tuple[EngineLayout, ...]
    settings: EngineSettings
    notes: tuple[str, ...] = ()
    weights: WeightsSource | None = None  # where vllm serve reads the weights (planning.export.weights)

    def weights_header(self, fmt: str) -> list[str]:
        """The header lines on the model's weights (``fmt``: skypilot or kubernetes)."""
        return self.weights.header(fmt, slug) if self.weights is not None else []

    @property
    def one_command(self) -> bool:
        """False when the weights need a step first (a volume to create, or no source at all)."""
        return self.weights is None or self.weights.deployable

    def settings_for(self, engine: EngineLayout) -> EngineSettings:
        """Serve settings of one engine: the plan's engine limits on its share of the instance
        (:func:`engine_flags`), the KV connector only on single-rank engines (vLLM's NixlConnector refuses
        pipeline-parallel engines, docs/deploy.md)."""
        settings = self.settings
        flags = engine_flags(self.inst, engine)
        if flags is not None:
            settings = replace(settings, max_seqs=flags[0], step_tokens=flags[1])
        if not settings.kv_connector or engine.pp == 1:
            return settings
        return replace(settings, kv_connector=False)

    def connectable(self) -> bool:
        """A disaggregated instance whose every engine carries the KV connector (joins its model's proxy)."""
        return self.settings.kv_connector and all(e.pp == 1 for e in self.engines)

    def name(self, k: int) -> str:
        """Object name of engine ``k`` (the base alone when the instance has one engine kind)."""
        return self.base if len(self.engines) == 1 else f"{self.base}-e{k}"


def _placement(inst: InstancePlan, layers: Mapping[str, int]) -> InstancePlan | None:
    """``inst`` with a placement: its own, or one node holding every layer for a one-node explicit template
    (Mélange imports); None when there is none to give (a multi-node explicit template)."""
    if inst.stages:
        return inst
    from planning.catalog.schema import parse_shape
    from planning.result import NodeBox, StagePlan

    if len(inst.usage) != 1 or sum(inst.usage.values()) != 1 or inst.model not in layers:
        return None
    shape = next(iter(inst.usage))
    count, gpu = parse_shape(shape)
    stage = StagePlan(layers[inst.model], 0, layers[inst.model], (NodeBox(shape, gpu, count, inst.throughput),))
    return replace(inst, stages=(stage,))


def instance_recipes(result: PlanResult, hf_repos: Mapping[str, str] | None = None,
                     step_tokens: Mapping[int, int] | None = None, limits: tuple[int, int] | None = None,
                     tp_options: TpOptions | None = None, model_layers: Mapping[str, int] | None = None,
                     memory_utilization: float | None = None) -> list[InstanceRecipe]:
    """The engines and serve settings of every instance (instances without a placement are left out).

    A model whose plan has both prefill and decode instances is disaggregated: its single-rank engines carry
    the NixlConnector and sit behind the model's proxy; its pipelined engines cannot (vLLM refuses pipeline
    parallelism with the NixlConnector) and serve whole requests, which their notes say.
    """
    repos = dict(hf_repos or {})
    budgets, seqs = engine_limits(result, step_tokens, limits)
    phases: dict[str, set[str]] = {}
    for inst in result.instances:
        phases.setdefault(inst.model, set()).add(inst.phase)
    out = []
    for idx, raw in enumerate(result.instances):
        placed = _placement(raw, model_layers or {})
        if placed is None:
            continue
        inst = placed
        disaggregated = {"prefill", "decode"} <= phases[inst.model] and inst.phase in ("prefill", "decode")
        engines = tuple(engine_layouts(inst, tp_options))
        weights = WeightsSource.of(inst.model, repos.get(inst.model))
        settings = EngineSettings(weights.ref, inst.phase, budgets.get(idx), seqs.get(idx),
                                  kv_connector=disaggregated, memory_utilization=memory_utilization,
                                  bench=bench_lines(idx, inst, result.scenario, weights.ref, VLLM_VERSION,
                                                    [e.tp for e in engines], result.provenance))
        notes: tuple[str, ...] = (weights.note(),) if weights.note() else ()
        if disaggregated and any(e.pp > 1 for e in engines):
            notes += (f"no KV transfer: vLLM {VLLM_VERSION}'s NixlConnector does not support pipeline-parallel "
                     "engines (vLLM issue #52913), so this engine serves whole requests (prefill and decode) outside "
                     f"the {inst.model} prefill/decode proxy. Fix: plan this model with single-stage templates "
                     "(options.max_stages: 1) or in aggregated mode",)
        out.append(InstanceRecipe(idx, inst, instance_base(inst, idx), engines, settings, notes, weights))
    return out


def proxy_members(recipes: Sequence[InstanceRecipe]) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """Per disaggregated model, its connectable engines by phase: (engine object name, replicas)."""
    out: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for r in recipes:
        if r.connectable():
            for k, e in enumerate(r.engines):
                out.setdefault(r.inst.model, {"prefill": [], "decode": []})[r.inst.phase].append(
                    (r.name(k), r.inst.count * e.copies))
    return {m: v for m, v in out.items() if v["prefill"] and v["decode"]}


@dataclass(frozen=True)
class ModelFacts:
    """What the recipes need of each model: Hugging Face repository, layer count and vLLM's usable TP sizes."""

    repos: Mapping[str, str]
    layers: Mapping[str, int]
    tp_options: TpOptions


def model_facts(result: PlanResult, ctx: EngineContext) -> ModelFacts:
    """The catalog's models and the plan's own custom ones (from its scenario, when it still resolves), with
    vLLM's head rule for TP through ``ctx.perf.tp_options``."""
    models = dict(ctx.catalog.models)
    weights: dict[str, str] = {}
    if result.scenario:
        from planning.resolve import resolve_scenario
        from planning.scenario import Scenario

        with contextlib.suppress(PlanningError):  # a scenario that no longer resolves: catalog models only
            scenario = Scenario.from_dict(result.scenario)
            weights = {m.id: m.weights for m in scenario.models if m.weights}
            models |= resolve_scenario(scenario, ctx.catalog).specs

    def tp_options(model: str, gpus: int) -> list[int]:
        return ctx.perf.tp_options(models[model], gpus) if model in models else [1]

    # a catalog model's repository under its own id (a fine-tune's spec is its base's: it keeps no repository);
    # the scenario's models[].weights override it (planning.export.weights)
    repos = {m.id: m.hf_repo for m in ctx.catalog.models.values() if m.hf_repo} | weights
    return ModelFacts(repos, {m_id: m.layers for m_id, m in models.items()}, tp_options)
