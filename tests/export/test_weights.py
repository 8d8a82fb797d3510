"""Model weights in the exports: a Hugging Face repository, a mounted volume, or said to be missing (issue 38 §5)."""

from __future__ import annotations

import pytest
import yaml

from planning import api
from planning.errors import PlanningError
from planning.export import kubernetes_manifests, skypilot_tasks
from planning.export.weights import WeightsSource
from planning.scenario import Scenario
from tests.export.recipes import k8s_docs, validate_k8s
from tests.export.skypilot_schema import validate_task
from tests.export.test_export import PLAN, REPOS

LLAMA_3B = {"model_type": "llama", "num_hidden_layers": 28, "hidden_size": 3072, "intermediate_size": 8192,
            "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
            "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": True}


def _custom(weights: str | None) -> Scenario:
    model = {"id": "my-3b", "custom_config": LLAMA_3B, "slo": {"prefill_ms": 2000, "decode_ms": 100},
             "demand": {"rate_rps": 2, "input_len": 1000, "output_len": 200}}
    if weights is not None:
        model["weights"] = weights
    return Scenario.from_dict({"name": "custom-weights", "mode": "aggregated", "regions": ["aws:us-east-1"],
                               "shapes": ["1xL4", "1xL40S"], "models": [model]})


def test_weights_source_kinds() -> None:
    assert WeightsSource.of("m", "org/m").kind == "hf"
    assert WeightsSource.of("m", "/mnt/w/m").kind == "volume"
    missing = WeightsSource.of("m", None)
    assert missing.kind == "missing" and missing.ref == "/models/m" and not missing.deployable
    assert "models[].weights" in missing.note()


def test_scenario_weights_are_validated() -> None:
    assert _custom("/mnt/weights/my-3b").models[0].weights == "/mnt/weights/my-3b"
    assert _custom("my-org/my-3b").to_dict()["models"][0]["weights"] == "my-org/my-3b"
    for bad in ("my 3b", "/mnt/../etc", "org/name/extra", "/mnt/x;rm"):
        with pytest.raises(PlanningError, match=r"models\[0\]\.weights"):
            _custom(bad)


def test_a_custom_model_without_weights_says_so_before_export() -> None:
    """The recipe cannot deploy what was planned without weights: its header says NOT GIVEN, the file is manual and
    its notes (which the CLI prints) name the field to set."""
    plan = api.solve(_custom(None), with_baselines=False)
    files = api.export_plan(plan, "all")
    served = [f for f in files if f.instance is not None]
    assert served
    for f in served:
        assert "weights: NOT GIVEN" in f.text and f.deployable == "manual", f.name
        assert any("no weights source for my-3b" in n for n in f.notes)


def test_a_custom_model_from_hugging_face_deploys_in_one_command() -> None:
    plan = api.solve(_custom("my-org/my-3b"), with_baselines=False)
    files = api.export_plan(plan, "all")
    for f in (f for f in files if f.instance is not None):
        assert "vllm serve my-org/my-3b" in f.text and "/models/my-3b" not in f.text
        assert f.deployable == "one-command" and not any("weights" in n for n in f.notes)


def test_a_mounted_volume_is_mounted_in_every_pod_and_named_in_skypilot() -> None:
    repos = {**REPOS, "qwen3-32b": "/mnt/models/qwen3-32b"}
    docs = k8s_docs(kubernetes_manifests(PLAN, repos))
    qwen = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")
            and d["spec"]["template"]["metadata"]["labels"].get("planning/model") == "qwen3-32b"]
    assert qwen
    for d in qwen:
        validate_k8s(d)
        spec = d["spec"]["template"]["spec"]
        claim = next(v for v in spec["volumes"] if v["name"] == "weights")
        assert claim["persistentVolumeClaim"] == {"claimName": "qwen3-32b-weights", "readOnly": True}
        mounts = spec["containers"][0]["volumeMounts"]
        assert {"name": "weights", "mountPath": "/mnt/models/qwen3-32b", "readOnly": True} in mounts
        assert "vllm serve /mnt/models/qwen3-32b" in spec["containers"][0]["command"][-1]
    files = [f for f in skypilot_tasks(PLAN, repos) if "qwen3-32b" in f.name]
    assert files
    for f in files:
        validate_task(yaml.safe_load(f.text))
        assert "weights: mounted volume /mnt/models/qwen3-32b" in f.text and "file_mounts" in f.text
        assert f.deployable == "manual"
