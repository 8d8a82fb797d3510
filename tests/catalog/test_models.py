"""Model catalog: every id present, parameter counts from the architecture match published counts."""

from __future__ import annotations

import pytest

from planning.catalog.load import load_catalog
from tests.ids import GPU_IDS, MODEL_IDS


def test_every_gpu_and_model_id_present() -> None:
    catalog = load_catalog()
    assert set(GPU_IDS) <= set(catalog.gpus)
    assert set(MODEL_IDS) <= set(catalog.models)
    for gpu in catalog.gpus.values():
        assert gpu.source and gpu.as_of


@pytest.mark.parametrize(
    ("model_id", "total", "active"),
    [
        ("llama-3-8b", 8.03e9, None),
        ("llama-2-7b", 6.74e9, None),
        ("llama-3-70b", 70.6e9, None),
        ("qwen3-32b", 32.8e9, None),
        ("phi-4", 14.7e9, None),
        ("qwen3-235b-a22b", 235e9, 22e9),
        ("gpt-oss-120b", 117e9, 5.1e9),
        ("gpt-oss-20b", 21e9, 3.6e9),
        ("mixtral-8x7b", 46.7e9, 12.9e9),
    ],
)
def test_param_counts_within_3_percent_of_published(
    model_id: str, total: float, active: float | None
) -> None:
    model = load_catalog().models[model_id]
    assert model.params_total == pytest.approx(total, rel=0.03)
    if active is not None:
        assert model.params_active == pytest.approx(active, rel=0.03)
    assert model.params_active <= model.params_total


def test_gpt_oss_layers_alternate_sliding_and_full() -> None:
    model = load_catalog().models["gpt-oss-120b"]
    assert model.layers == 36 and model.sliding_window == 128
    assert model.layer_types[:4] == ("sliding", "full", "sliding", "full")
    assert model.layer_types.count("sliding") == 18
    assert model.dtype == "mxfp4"
    # mixed precision: MXFP4 experts + BF16 rest lies between all-MXFP4 and all-BF16
    assert 0.53 * model.params_total < model.weight_bytes() < 0.6 * model.params_total


def test_mixtral_has_no_sliding_window_and_moe_sizes() -> None:
    mixtral = load_catalog().models["mixtral-8x7b"]
    assert mixtral.sliding_window is None and mixtral.layer_types == ()
    assert (mixtral.experts_total, mixtral.experts_active, mixtral.moe_intermediate_size) == (8, 2, 14336)
    qwen = load_catalog().models["qwen3-235b-a22b"]
    assert (qwen.layers, qwen.experts_total, qwen.experts_active, qwen.moe_intermediate_size) == (
        94,
        128,
        8,
        1536,
    )
