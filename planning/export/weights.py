"""Where a deployed engine reads a model's weights: a Hugging Face repository, a mounted volume, or nowhere given.

A catalog model has its Hugging Face repository; a scenario's ``models[i].weights`` overrides it with another
repository id or the absolute path of a volume. A custom model (``custom_config``) or a fine-tune (``base``)
without ``weights`` has no source: its recipe still serves ``/models/<id>``, and the file's header, its notes and
the CLI say that the weights must be put there (docs/deploy.md, "Model weights").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WEIGHTS_MOUNT = "weights"  # the Kubernetes volume's name in every engine pod of a model read from a volume


@dataclass(frozen=True)
class WeightsSource:
    """One model's weights for ``vllm serve``: ``kind`` ``hf`` (repository id, downloaded at start), ``volume``
    (absolute path of a volume mounted on every node) or ``missing`` (``ref`` is the ``/models/<id>`` path the
    recipe serves, where nothing is mounted)."""

    model: str
    kind: str
    ref: str

    @classmethod
    def of(cls, model: str, ref: str | None) -> WeightsSource:
        """The source behind a ``vllm serve`` reference (None: no source known for ``model``)."""
        if not ref:
            return cls(model, "missing", f"/models/{model}")
        return cls(model, "volume" if ref.startswith("/") else "hf", ref)

    @property
    def deployable(self) -> bool:
        """True when one command starts the engine (weights downloaded from Hugging Face)."""
        return self.kind == "hf"

    def claim(self, slug_of: Any) -> str:
        """The PersistentVolumeClaim a Kubernetes pod mounts the volume from: ``<model>-weights``."""
        return f"{slug_of(self.model)}-weights"

    def header(self, fmt: str, slug_of: Any) -> list[str]:
        """The lines every file of an instance of this model says about its weights (``fmt``: skypilot or
        kubernetes)."""
        if self.kind == "hf":
            return [f"weights: Hugging Face repository {self.ref}, downloaded at start (gated models need HF_TOKEN)"]
        if self.kind == "volume":
            where = (f"a ReadOnlyMany PersistentVolumeClaim {self.claim(slug_of)} (create it first) mounted at "
                     f"{self.ref} in every pod" if fmt == "kubernetes" else
                     f"every node must see {self.ref}: add it to the task's file_mounts (e.g. {self.ref}: "
                     "s3://your-bucket/path) or attach a SkyPilot volume there before launch")
            return [f"weights: mounted volume {self.ref} (scenario models[].weights): {where}",
                    "deployable: manual — the weights volume must exist first"]
        return [f"weights: NOT GIVEN — {self.model} is a custom model or fine-tune without a weights source; the "
                f"serve command reads {self.ref}, which nothing provides. Set models[].weights in the scenario to a "
                "Hugging Face repository id or a mounted volume's path, and export again",
                "deployable: manual — no weights source"]

    def note(self) -> str:
        """What an export without a weights source cannot do, for the file's notes and the CLI (empty if given)."""
        if self.kind != "missing":
            return ""
        return (f"no weights source for {self.model}: vllm serve reads {self.ref}, which nothing mounts; set "
                "models[].weights (a Hugging Face repository id or a mounted volume's path)")


def mount_weights(pod: dict[str, Any], source: WeightsSource, slug_of: Any) -> dict[str, Any]:
    """``pod`` (a pod template) with the model's weights volume mounted read-only at its path (volume sources)."""
    if source.kind != "volume":
        return pod
    spec = pod["spec"]
    spec["volumes"].append({"name": WEIGHTS_MOUNT, "persistentVolumeClaim": {"claimName": source.claim(slug_of),
                                                                            "readOnly": True}})
    for container in spec["containers"]:
        container["volumeMounts"].append({"name": WEIGHTS_MOUNT, "mountPath": source.ref, "readOnly": True})
    return pod
