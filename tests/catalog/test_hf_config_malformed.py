"""The HF config.json importer on malformed files: each case gives a PlanningError naming the key, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planning.catalog.models import model_from_hf_config
from planning.errors import PlanningError

FIXTURES = Path(__file__).parent / "fixtures"
BASE: dict[str, Any] = json.loads((FIXTURES / "tiny_gpt_oss_config.json").read_text(encoding="utf-8"))
HUGE = int("9" * 400)


def _with(**changes: Any) -> str:
    return json.dumps({**BASE, **changes}, allow_nan=True)


def _without(*keys: str) -> str:
    return json.dumps({k: v for k, v in BASE.items() if k not in keys})


# (case id, file text, text the error's field must contain)
CASES: list[tuple[str, str, str]] = [
    ("nan-layers", _with(num_hidden_layers=float("nan")), "num_hidden_layers"),
    ("inf-hidden", _with(hidden_size=float("inf")), "hidden_size"),
    ("neg-inf-heads", _with(num_attention_heads=float("-inf")), "num_attention_heads"),
    ("string-layers", _with(num_hidden_layers="32"), "num_hidden_layers"),
    ("string-vocab", _with(vocab_size="lots"), "vocab_size"),
    ("bool-hidden", _with(hidden_size=True), "hidden_size"),
    ("fraction-intermediate", _with(intermediate_size=64.5), "intermediate_size"),
    ("zero-layers", _with(num_hidden_layers=0), "num_hidden_layers"),
    ("negative-vocab", _with(vocab_size=-5), "vocab_size"),
    ("huge-layers", _with(num_hidden_layers=HUGE), "num_hidden_layers"),
    ("huge-hidden", _with(hidden_size=10**12), "hidden_size"),
    ("huge-vocab-float", _with(vocab_size=1e300), "vocab_size"),
    ("huge-experts", _with(num_local_experts=HUGE), "num_local_experts"),
    ("string-experts", _with(num_local_experts="eight"), "num_local_experts"),
    ("nan-experts-per-tok", _with(experts_per_token=float("nan")), "experts_per_token"),
    ("too-many-active", _with(experts_per_token=9), "num_experts_per_tok"),
    ("kv-heads-list", _with(num_key_value_heads=[2]), "num_key_value_heads"),
    ("kv-heads-above-heads", _with(num_key_value_heads=8), "num_key_value_heads"),
    ("head-dim-string", _with(head_dim="16"), "head_dim"),
    ("head-dim-huge", _with(head_dim=HUGE), "head_dim"),
    ("window-string", _with(sliding_window="128"), "sliding_window"),
    ("window-nan", _with(sliding_window=float("nan")), "sliding_window"),
    ("layer-types-string", _with(layer_types="sliding_attention"), "layer_types"),
    ("layer-types-dicts", _with(layer_types=[{"a": 1}] * 4), "layer_types"),
    ("layer-types-short", _with(layer_types=["full_attention"]), "layer_types"),
    ("dtype-list", _with(torch_dtype=["bfloat16"], quantization_config=None), "torch_dtype"),
    ("dtype-unknown", _with(torch_dtype="int3", quantization_config=None), "torch_dtype"),
    ("tie-string", _with(tie_word_embeddings="false"), "tie_word_embeddings"),
    ("text-config-list", json.dumps({"text_config": [1, 2]}), "text_config"),
    ("text-config-empty", json.dumps({"text_config": {}}), "num_hidden_layers"),
    ("missing-layers", _without("num_hidden_layers"), "num_hidden_layers"),
    ("missing-vocab", _without("vocab_size"), "vocab_size"),
    ("mlp-only-layers-int", _with(mlp_only_layers=3), "mlp_only_layers"),
    ("mlp-only-layers-dicts", _with(mlp_only_layers=[{}]), "mlp_only_layers"),
    ("sparse-step-zero-string", _with(decoder_sparse_step="0"), "decoder_sparse_step"),
    ("sparse-step-huge", _with(decoder_sparse_step=10**6), "decoder_sparse_step"),
    ("model-type-dict", _with(model_type={"x": 1}), "model_type"),
    ("top-level-list", json.dumps([BASE]), "config_path"),
    ("top-level-string", json.dumps("config"), "config_path"),
    ("not-json", "{num_hidden_layers: 4", "config_path"),
    ("deep-nesting", "[" * 5000 + "]" * 5000, "config_path"),
    ("huge-integer-literal", '{"num_hidden_layers": ' + "9" * 5000 + "}", "config_path"),
    ("latin-1", json.dumps({**BASE, "model_type": "llama"}).replace("llama", "llamé"), "config_path"),
    ("empty-file", "", "config_path"),
]


def _write(tmp_path: Path, case: str, text: str) -> Path:
    path = tmp_path / f"{case}.json"
    data = text.encode("latin-1") if case == "latin-1" else text.encode("utf-8")
    path.write_bytes(data)
    return path


def test_at_least_29_malformed_cases() -> None:
    assert len(CASES) >= 29
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case", "text", "field"), CASES, ids=[c[0] for c in CASES])
def test_malformed_config_is_a_clean_error(tmp_path: Path, case: str, text: str, field: str) -> None:
    path = _write(tmp_path, case, text)
    with pytest.raises(PlanningError) as err:
        model_from_hf_config(path, "custom")
    assert field in err.value.field, (case, str(err.value))
    assert err.value.fix, case
    assert len(str(err.value)) < 1200, case


def test_malformed_dict_names_the_model_id() -> None:
    with pytest.raises(PlanningError) as err:
        model_from_hf_config({**BASE, "hidden_size": float("nan")}, "my-model")
    assert err.value.field == "my-model.hidden_size"


def test_directory_and_binary_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanningError, match="directory"):
        model_from_hf_config(tmp_path, "x")
    binary = tmp_path / "weights.json"
    binary.write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(PlanningError, match="binary"):
        model_from_hf_config(binary, "x")


def test_valid_variants_still_import(tmp_path: Path) -> None:
    """Whole floats, a UTF-8 BOM and absent optional keys are fine; the bounds do not reject real configs."""
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + _with(hidden_size=64.0, num_key_value_heads=None).encode("utf-8"))
    spec = model_from_hf_config(path, "ok")
    assert spec.hidden_size == 64 and spec.num_kv_heads == 4
