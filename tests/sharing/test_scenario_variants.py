"""Variants (``base``), burstiness and the sharing options: validation, round trip, resolution, schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from planning.catalog import load_catalog
from planning.errors import PlanningError, UnknownIdError
from planning.resolve import resolve_models
from planning.scenario import Scenario, parse_scenario_text
from planning.scenario_schema import scenario_json_schema


def test_variant_round_trips_and_resolves_to_its_base(small: dict[str, Any]) -> None:
    s = Scenario.from_dict(small)
    assert Scenario.from_dict(s.to_dict()) == s
    jsonschema.validate(s.to_dict(), scenario_json_schema())
    assert s.model("ft-0").base == "llama-3-8b" and s.model("ft-0").demand.burstiness == 3
    assert s.options.sharing == "kvpr" and s.options.sharing_threshold_rps == 1.0
    specs = resolve_models(s, load_catalog())
    assert specs["ft-2"] == specs["llama-3-8b"]  # same architecture (own weights are counted per model)
    assert specs["code-0"].id == "gpt-oss-20b"


def test_variant_of_a_custom_architecture(small: dict[str, Any]) -> None:
    small["models"].append({"id": "tiny-base", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                            "demand": {"rate_rps": 0.1, "input_len": 100, "output_len": 10},
                            "custom_config": {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512,
                                              "num_attention_heads": 8, "num_key_value_heads": 8,
                                              "intermediate_size": 1024, "vocab_size": 1000,
                                              "torch_dtype": "bfloat16"}})
    small["models"].append({"id": "tiny-ft", "base": "tiny-base", "slo": {"prefill_ms": 1000, "decode_ms": 50},
                            "demand": {"rate_rps": 0.1, "input_len": 100, "output_len": 10}})
    specs = resolve_models(Scenario.from_dict(small), load_catalog())
    assert specs["tiny-ft"] == specs["tiny-base"] and specs["tiny-ft"].layers == 4


def test_bad_variants_name_the_field(small: dict[str, Any]) -> None:
    small["models"][1]["base"] = "llama-3-8c"
    with pytest.raises(UnknownIdError, match=r"models\[1\].base"):
        resolve_models(Scenario.from_dict(small), load_catalog())
    small["models"][1]["base"] = "ft-0"
    small["models"][1]["id"] = "ft-0"
    with pytest.raises(PlanningError, match=r"twice|itself"):
        Scenario.from_dict(small)


@pytest.mark.parametrize(("patch", "field"), [
    ({"burstiness": 0.5}, r"models\[1\].demand.burstiness"),
    ({"custom_config": {"model_type": "llama"}}, r"models\[1\].base"),
])
def test_bad_model_fields(small: dict[str, Any], patch: dict[str, Any], field: str) -> None:
    m = small["models"][1]
    if "burstiness" in patch:
        m["demand"].update(patch)
    else:
        m.update(patch)
    with pytest.raises(PlanningError, match=field):
        Scenario.from_dict(small)


def test_sharing_option_yaml_off_and_bad_value() -> None:
    text = """
name: x
regions: [aws:us-east-1]
models: [{id: llama-3-8b, slo: {prefill_ms: 1000, decode_ms: 50}, demand: {rate_rps: 1, input_len: 10, output_len: 10}}]
options: {sharing: off, sharing_threshold_rps: null}
"""
    s = parse_scenario_text(text)
    assert s.options.sharing == "off" and s.options.sharing_threshold_rps is None
    with pytest.raises(PlanningError, match=r"options\.sharing"):
        parse_scenario_text(text.replace("sharing: off", "sharing: greedy"))


def test_a_long_tail_of_models_fits_and_the_cap_names_the_field(small: dict[str, Any]) -> None:
    """Scenarios hold long tails (the Prism study hosts 58 models; the sharing benchmark 104): up to MAX_MODELS
    validate; one more is refused with the field and the fix, not a traceback."""
    from planning.scenario import MAX_MODELS

    base = small["models"][0]
    many = {**small, "models": [{**base, "id": f"ft-{k:03d}", "base": "llama-3-8b"} for k in range(MAX_MODELS)]}
    assert len(Scenario.from_dict(many).models) == MAX_MODELS
    many["models"].append({**base, "id": "one-too-many", "base": "llama-3-8b"})
    with pytest.raises(PlanningError, match=rf"models.*more than the {MAX_MODELS}"):
        Scenario.from_dict(many)
