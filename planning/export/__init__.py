"""Deployable exports of a plan (SkyPilot tasks, Kubernetes manifests); see :mod:`planning.export.deploy`."""

from planning.export.deploy import ExportFile, kubernetes_manifests, skypilot_tasks

__all__ = ["ExportFile", "kubernetes_manifests", "skypilot_tasks"]
