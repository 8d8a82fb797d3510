"""Custom models from a Hugging Face config.json: parsing, hand-counted parameters, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planning.catalog.models import MAX_CONFIG_BYTES, model_from_hf_config
from planning.errors import PlanningError

FIXTURES = Path(__file__).parent / "fixtures"


def test_qwen3_moe_fixture_counts_by_hand() -> None:
    spec = model_from_hf_config(FIXTURES / "tiny_qwen3_moe_config.json", "tiny-moe")
    assert (spec.layers, spec.experts_total, spec.experts_active, spec.moe_intermediate_size) == (
        4,
        16,
        2,
        128,
    )
    assert spec.sliding_window is None and spec.layer_types == ()  # use_sliding_window false wins
    assert spec.tie_embeddings and spec.dtype == "bf16"
    h, q, kv, hd = 256, 8 * 32, 2 * 32, 32
    attention = h * q + 2 * h * kv + q * h + 2 * hd + 2 * h  # projections, qk-norm, two layer norms
    dense = 3 * h * 1024
    expert = 3 * h * 128
    router = h * 16
    embed = 1000 * h
    total = 4 * attention + dense + 3 * (router + 16 * expert) + embed + h
    active = 4 * attention + dense + 3 * (router + 2 * expert) + embed + h  # tied: embedding is the LM head
    assert spec.params_total == total
    assert spec.params_active == active


def test_gpt_oss_fixture_layer_types_and_mixed_precision_bytes() -> None:
    spec = model_from_hf_config(FIXTURES / "tiny_gpt_oss_config.json", "tiny-oss")
    assert spec.layer_types == ("sliding", "full", "sliding", "full")
    assert spec.sliding_window == 128 and spec.dtype == "mxfp4"
    assert spec.weight_bytes_native is not None
    # MXFP4 experts + BF16 rest: more than all-MXFP4, less than all-BF16
    assert 0.53 * spec.params_total < spec.weight_bytes() < 2.0 * spec.params_total
    assert spec.weight_bytes("bf16") == pytest.approx(2.0 * spec.params_total)


def test_dict_input_defaults_kv_heads_and_head_dim() -> None:
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
           "intermediate_size": 128, "vocab_size": 100}  # fmt: skip
    spec = model_from_hf_config(cfg, "mini")
    assert spec.num_kv_heads == 4 and spec.head_dim == 16 and not spec.is_moe


@pytest.mark.parametrize("missing", ["num_hidden_layers", "hidden_size", "vocab_size", "intermediate_size"])
def test_missing_key_names_the_key(missing: str) -> None:
    cfg = json.loads((FIXTURES / "tiny_qwen3_moe_config.json").read_text())
    del cfg[missing]
    with pytest.raises(PlanningError) as err:
        model_from_hf_config(cfg, "broken")
    assert missing in err.value.field


def test_bad_kv_heads_and_layer_types_rejected() -> None:
    cfg = json.loads((FIXTURES / "tiny_gpt_oss_config.json").read_text())
    with pytest.raises(PlanningError, match="num_key_value_heads"):
        model_from_hf_config({**cfg, "num_key_value_heads": 3}, "bad")
    with pytest.raises(PlanningError, match="layer_types"):
        model_from_hf_config({**cfg, "layer_types": ["full_attention"]}, "bad")


def test_file_size_limit_and_invalid_json(tmp_path: Path) -> None:
    big = tmp_path / "config.json"
    big.write_text(" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(PlanningError, match="limit"):
        model_from_hf_config(big, "big")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanningError, match="not valid JSON"):
        model_from_hf_config(bad, "bad")
    with pytest.raises(PlanningError, match="not a file"):
        model_from_hf_config(tmp_path / "missing.json", "missing")
