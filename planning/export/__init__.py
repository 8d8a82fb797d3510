"""Deployable exports of a plan (SkyPilot tasks, Kubernetes manifests) that run on the pinned vLLM; see
:mod:`planning.export.deploy` and docs/deploy.md."""

from planning.export.deploy import VLLM_IMAGE, VLLM_VERSION, ExportFile, ModelFacts, model_facts
from planning.export.engine import EngineLayout, engine_layouts
from planning.export.kubernetes import kubernetes_manifests
from planning.export.skypilot import skypilot_tasks

__all__ = ["VLLM_IMAGE", "VLLM_VERSION", "EngineLayout", "ExportFile", "ModelFacts", "engine_layouts",
           "kubernetes_manifests", "model_facts", "skypilot_tasks"]
