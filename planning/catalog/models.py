"""Model architectures from Hugging Face ``config.json`` data: parsing, parameter counts, ``ModelSpec``."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planning.catalog.schema import ModelSpec
from planning.errors import PlanningError, quote
from planning.safeio import Limits, load_json, read_text

MAX_CONFIG_BYTES = 1_000_000
"""Largest ``config.json`` accepted (real ones are a few kB)."""

MXFP4_BYTES_PER_PARAM = 4.25 / 8
"""MXFP4: 4-bit elements plus one 8-bit shared scale per block of 32 elements."""

_DTYPE_NAMES = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
}
_DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp32": 4.0, "mxfp4": MXFP4_BYTES_PER_PARAM}
_LAYER_TYPE_NAMES = {
    "full_attention": "full",
    "full": "full",
    "sliding_attention": "sliding",
    "sliding": "sliding",
}


@dataclass(frozen=True)
class Architecture:
    """The architecture keys of a config.json, normalised across model families."""

    model_type: str
    layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    experts_total: int
    experts_active: int
    moe_intermediate_size: int
    moe_layers: tuple[bool, ...]
    sliding_window: int | None
    layer_types: tuple[str, ...]
    dtype: str
    tie_embeddings: bool
    attention_bias: bool
    qk_norm: bool
    attention_sinks: bool
    moe_biases: bool


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts of one architecture (numbers of parameters, not bytes)."""

    total: float
    active: float
    expert: float
    """Parameters inside MoE experts (all experts, all layers)."""


# Upper bounds on config.json integers (ten times the largest published models): above them a value is a typo
# or hostile, and the parameter count would be meaningless.
_MAX = {
    "layers": 1024,
    "hidden_size": 262_144,
    "heads": 16_384,
    "head_dim": 8_192,
    "intermediate_size": 1_048_576,
    "vocab_size": 10_000_000,
    "experts": 65_536,
    "window": 100_000_000,
}


def _require(cfg: Mapping[str, Any], keys: tuple[str, ...], where: str) -> Any:
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    raise PlanningError(
        f"{where}.{keys[0]}",
        f"the config has none of the keys {', '.join(keys)}.",
        f"add `{keys[0]}` to the config.json (see the model's Hugging Face page).",
    )


def _int_value(value: Any, field: str, *, minimum: int, maximum: int) -> int:
    """An integer in ``[minimum, maximum]`` (a whole float such as 4096.0 is accepted); never overflows."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanningError(field, f"must be an integer, got {type(value).__name__} {quote(value, 80)}.",
                            "write a plain integer in the config.json.")
    if isinstance(value, float) and (not math.isfinite(value) or value != math.floor(value)):
        raise PlanningError(field, f"must be a whole number, got {quote(value)}.", "write a plain integer.")
    if not minimum <= value <= maximum:
        raise PlanningError(field, f"must be between {minimum} and {maximum:,}, got {quote(value, 80)}.",
                            "correct the config value (no published model is near this bound).")
    return int(value)


def _positive_int(value: Any, field: str, maximum: int = 10_000_000) -> int:
    return _int_value(value, field, minimum=1, maximum=maximum)


def _optional_int(cfg: Mapping[str, Any], keys: tuple[str, ...], field: str, *, minimum: int, maximum: int,
                  default: int) -> int:
    """The first present, non-null, non-zero key among ``keys`` (HF uses 0/null for "absent")."""
    for key in keys:
        value = cfg.get(key)
        if value is not None and value is not False and value != 0:
            return _int_value(value, f"{field.rsplit('.', 1)[0]}.{key}", minimum=minimum, maximum=maximum)
    return default


def _flag(cfg: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise PlanningError(f"{where}.{key}", f"must be true or false, got {quote(value, 80)}.", "write true or false.")


def _dtype_of(cfg: Mapping[str, Any], where: str) -> str:
    quant = cfg.get("quantization_config")
    if isinstance(quant, Mapping):
        method = str(quant.get("quant_method", "")).lower() if isinstance(quant.get("quant_method", ""), str) else ""
        if method == "mxfp4":
            return "mxfp4"
        if method in {"fp8", "fbgemm_fp8", "compressed-tensors-fp8"}:
            return "fp8"
    raw = cfg.get("torch_dtype", cfg.get("dtype", "bfloat16"))
    name = _DTYPE_NAMES.get(raw.lower()) if isinstance(raw, str) else None
    if name is None:
        raise PlanningError(
            f"{where}.torch_dtype",
            f"unsupported dtype {quote(raw, 80)}.",
            f"use one of {', '.join(sorted(_DTYPE_NAMES))}.",
        )
    return name


def parse_architecture(cfg: Mapping[str, Any], where: str = "config") -> Architecture:
    """Normalise the keys of a Hugging Face ``config.json`` (llama, mistral, mixtral, qwen2/3, qwen3_moe, phi3,
    gpt_oss styles).

    Parameters
    ----------
    cfg:
        The parsed JSON object.
    where:
        Prefix for error field names (file name or model id).

    Returns
    -------
    Architecture
        Normalised architecture.

    Raises
    ------
    PlanningError
        A required key is missing or a value is invalid.
    """
    cfg, where, model_type = _language_model(cfg, where)
    layers, hidden, heads, kv_heads, head_dim = _attention_shape(cfg, where)
    intermediate = _positive_int(
        _require(cfg, ("intermediate_size", "ffn_hidden_size", "n_inner"), where),
        f"{where}.intermediate_size", _MAX["intermediate_size"],
    )
    vocab = _positive_int(_require(cfg, ("vocab_size",), where), f"{where}.vocab_size", _MAX["vocab_size"])

    experts, active, moe_inter, moe_layers = _experts(cfg, where, layers, intermediate)
    window, layer_types = _sliding_layers(cfg, where, layers, model_type)

    return Architecture(
        model_type=model_type,
        layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        experts_total=experts,
        experts_active=active,
        moe_intermediate_size=moe_inter,
        moe_layers=moe_layers,
        sliding_window=window,
        layer_types=layer_types,
        dtype=_dtype_of(cfg, where),
        tie_embeddings=_flag(cfg, "tie_word_embeddings", where, False),
        attention_bias=_flag(cfg, "attention_bias", where, False),
        qk_norm=model_type in {"qwen3", "qwen3_moe"},
        attention_sinks=model_type == "gpt_oss",
        moe_biases=model_type == "gpt_oss",
    )


def _language_model(cfg: Any, where: str) -> tuple[Mapping[str, Any], str, str]:
    """(the language model's keys, their error prefix, its ``model_type``): multimodal wrappers keep them under
    ``text_config``."""
    if not isinstance(cfg, Mapping):
        raise PlanningError(where, "a config must be a JSON object.", "pass the model's config.json.")
    if "text_config" in cfg and "num_hidden_layers" not in cfg:
        inner = cfg["text_config"]  # multimodal wrappers keep the LM under text_config
        if not isinstance(inner, Mapping):
            raise PlanningError(f"{where}.text_config", f"must be an object, got {type(inner).__name__}.",
                                "give the language model's keys inside text_config {...}.")
        cfg, where = inner, f"{where}.text_config"
    raw_type = cfg.get("model_type", "unknown")
    if not isinstance(raw_type, str) or len(raw_type) > 100:
        raise PlanningError(f"{where}.model_type", f"must be short text, got {quote(raw_type, 80)}.",
                            'write the family name, e.g. "llama".')
    model_type = raw_type
    return cfg, where, model_type


def _attention_shape(cfg: Mapping[str, Any], where: str) -> tuple[int, int, int, int, int]:
    """(layers, hidden size, attention heads, KV heads, head dim), each checked."""
    layers = _positive_int(
        _require(cfg, ("num_hidden_layers", "n_layer", "num_layers"), where), f"{where}.num_hidden_layers",
        _MAX["layers"],
    )
    hidden = _positive_int(_require(cfg, ("hidden_size", "n_embd", "d_model"), where), f"{where}.hidden_size",
                           _MAX["hidden_size"])
    heads = _positive_int(
        _require(cfg, ("num_attention_heads", "n_head"), where), f"{where}.num_attention_heads", _MAX["heads"]
    )
    kv_heads = _optional_int(cfg, ("num_key_value_heads",), f"{where}.num_key_value_heads", minimum=1,
                             maximum=heads, default=heads)
    if heads % kv_heads:
        raise PlanningError(
            f"{where}.num_key_value_heads",
            f"{kv_heads} does not divide num_attention_heads {heads}.",
            "use a divisor of the number of attention heads.",
        )
    head_dim = _optional_int(cfg, ("head_dim",), f"{where}.head_dim", minimum=1, maximum=_MAX["head_dim"],
                             default=max(1, hidden // heads))
    return layers, hidden, heads, kv_heads, head_dim


def _experts(cfg: Mapping[str, Any], where: str, layers: int,
             intermediate: int) -> tuple[int, int, int, tuple[bool, ...]]:
    """(experts, active experts per token, expert FFN width, which layers are MoE); zeros for a dense model."""
    experts = _optional_int(cfg, ("num_local_experts", "num_experts", "n_routed_experts"), f"{where}.num_experts",
                            minimum=1, maximum=_MAX["experts"], default=0)
    active = _optional_int(cfg, ("num_experts_per_tok", "experts_per_token"), f"{where}.num_experts_per_tok",
                           minimum=0, maximum=_MAX["experts"], default=0) if experts else 0
    if experts and not 0 < active <= experts:
        raise PlanningError(
            f"{where}.num_experts_per_tok",
            f"{active} active experts out of {experts}.",
            "set num_experts_per_tok between 1 and the number of experts.",
        )
    moe_inter = _optional_int(cfg, ("moe_intermediate_size",), f"{where}.moe_intermediate_size", minimum=1,
                              maximum=_MAX["intermediate_size"], default=intermediate if experts else 0)
    step = _optional_int(cfg, ("decoder_sparse_step",), f"{where}.decoder_sparse_step", minimum=1,
                         maximum=layers, default=1)
    raw_dense = cfg.get("mlp_only_layers") or []
    if not isinstance(raw_dense, list) or len(raw_dense) > layers:
        raise PlanningError(f"{where}.mlp_only_layers", f"must be a list of at most {layers} layer indices, "
                            f"got {quote(raw_dense, 80)}.", "list layer indices, e.g. [0, 1].")
    dense_only = {_int_value(v, f"{where}.mlp_only_layers[{i}]", minimum=0, maximum=layers - 1)
                  for i, v in enumerate(raw_dense)}
    moe_layers = tuple(bool(experts) and i not in dense_only and (i + 1) % step == 0 for i in range(layers))
    return experts, active, moe_inter, moe_layers


def _sliding_layers(cfg: Mapping[str, Any], where: str, layers: int,
                    model_type: str) -> tuple[int | None, tuple[str, ...]]:
    """(sliding window, per-layer ``"sliding"``/``"full"``): ``(None, ())`` when no layer slides."""
    window_raw = cfg.get("sliding_window")
    use_window = _flag(cfg, "use_sliding_window", where, True)
    window = (_int_value(window_raw, f"{where}.sliding_window", minimum=1, maximum=_MAX["window"])
              if window_raw not in (None, False, 0) and use_window else None)
    raw_types = cfg.get("layer_types")
    if raw_types:
        if not isinstance(raw_types, list):
            raise PlanningError(f"{where}.layer_types", f"must be a list, got {type(raw_types).__name__}.",
                                "give one entry per layer, e.g. [\"sliding_attention\", \"full_attention\", ...].")
        if len(raw_types) != layers:
            raise PlanningError(
                f"{where}.layer_types",
                f"has {len(raw_types)} entries for {layers} layers.",
                "give one entry per layer.",
            )
        unknown = sorted({quote(t, 40, bare=True) for t in raw_types
                          if not isinstance(t, str) or t not in _LAYER_TYPE_NAMES})
        if unknown:
            raise PlanningError(
                f"{where}.layer_types",
                f"unknown layer types {unknown[:5]}.",
                "use sliding_attention or full_attention.",
            )
        layer_types = tuple(_LAYER_TYPE_NAMES[str(t)] for t in raw_types)
        if "sliding" in layer_types and window is None:
            raise PlanningError(
                f"{where}.sliding_window", "sliding layers but no window.", "set sliding_window."
            )
    elif window is not None:
        first_swa = (_optional_int(cfg, ("max_window_layers",), f"{where}.max_window_layers", minimum=0,
                                   maximum=_MAX["layers"], default=0) if model_type.startswith("qwen") else 0)
        layer_types = tuple("sliding" if i >= first_swa else "full" for i in range(layers))
    else:
        layer_types = ()
    if layer_types and "sliding" not in layer_types:
        window, layer_types = None, ()
    return window, layer_types


def count_params(arch: Architecture) -> ParamCount:
    """Count parameters from the architecture.

    Per layer: Q/K/V/O projections (+ biases, qk-norm, sinks), two RMSNorms, and either a gated MLP
    (3·h·i) or a router plus ``experts_total`` gated experts. Plus the embedding table, the LM head (unless
    tied) and the final norm. Active = total − input-embedding table (a lookup; kept when tied to the LM
    head) − inactive experts, the convention of OpenAI's gpt-oss model card.

    Parameters
    ----------
    arch:
        A normalised architecture.

    Returns
    -------
    ParamCount
        Total, active and expert parameter counts.
    """
    h, q, kv = arch.hidden_size, arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    attention = h * q + 2 * h * kv + q * h
    if arch.attention_bias:
        attention += q + 2 * kv + h
    if arch.qk_norm:
        attention += 2 * arch.head_dim
    if arch.attention_sinks:
        attention += arch.num_heads
    norms = 2 * h
    dense_mlp = 3 * h * arch.intermediate_size
    expert = 3 * h * arch.moe_intermediate_size + (
        2 * arch.moe_intermediate_size + h if arch.moe_biases else 0
    )
    router = h * arch.experts_total + (arch.experts_total if arch.moe_biases else 0)

    total = active = 0.0
    expert_total = 0.0
    for is_moe in arch.moe_layers:
        base = attention + norms
        if is_moe:
            total += base + router + arch.experts_total * expert
            active += base + router + arch.experts_active * expert
            expert_total += arch.experts_total * expert
        else:
            total += base + dense_mlp
            active += base + dense_mlp
    embed = arch.vocab_size * h
    head = 0 if arch.tie_embeddings else arch.vocab_size * h
    total += embed + head + h
    active += head + h + (embed if arch.tie_embeddings else 0)
    return ParamCount(total=float(total), active=float(active), expert=float(expert_total))


def native_weight_bytes(arch: Architecture, params: ParamCount) -> float | None:
    """Checkpoint bytes when precisions are mixed (MXFP4 experts, BF16 rest); ``None`` otherwise."""
    if arch.dtype != "mxfp4":
        return None
    return params.expert * MXFP4_BYTES_PER_PARAM + (params.total - params.expert) * _DTYPE_BYTES["bf16"]


CONFIG_LIMITS = Limits(max_bytes=MAX_CONFIG_BYTES, max_depth=16, max_nodes=100_000, max_aliases=0)


def _read_config(path: Path) -> dict[str, Any]:
    text = read_text(path, field="config_path", max_bytes=MAX_CONFIG_BYTES, what="config.json")
    data = load_json(text, field="config_path", origin=path.name, limits=CONFIG_LIMITS)
    if not isinstance(data, dict):
        raise PlanningError(
            "config_path", f"{path.name} is not a JSON object.", "pass the model's config.json."
        )
    return data


def model_from_hf_config(
    path_or_dict: str | Path | Mapping[str, Any],
    model_id: str,
    *,
    display_name: str | None = None,
    hf_repo: str = "",
    source: str | None = None,
    as_of: str = "",
    notes: str = "",
) -> ModelSpec:
    """Build a ``ModelSpec`` from a Hugging Face ``config.json`` (offline).

    Parameters
    ----------
    path_or_dict:
        Path of a local ``config.json`` (at most 1 MB) or its parsed content.
    model_id:
        Id to give the model.
    display_name, hf_repo, source, as_of, notes:
        Descriptive fields copied into the spec (``source`` defaults to the file path).

    Returns
    -------
    ModelSpec
        Architecture with computed ``params_total`` and ``params_active``.

    Raises
    ------
    PlanningError
        The file is missing, too large or not JSON; a required key is missing or invalid.
    """
    if not model_id or not str(model_id).strip():
        raise PlanningError("model_id", "is empty.", "give the model an id such as 'my-model-7b'.")
    if isinstance(path_or_dict, Mapping):
        cfg: Mapping[str, Any] = path_or_dict
        where = model_id
        default_source = "config.json (dict)"
    elif isinstance(path_or_dict, str | os.PathLike):
        path = Path(path_or_dict)
        cfg = _read_config(path)
        where = path.name
        default_source = str(path)
    else:
        raise PlanningError(str(model_id)[:200], f"a config must be a JSON object or a file path, got "
                            f"{type(path_or_dict).__name__}.", "pass the parsed config.json (a dict) or its path.")
    arch = parse_architecture(cfg, where)
    params = count_params(arch)
    return ModelSpec(
        id=model_id,
        display_name=display_name or model_id,
        hf_repo=hf_repo,
        layers=arch.layers,
        hidden_size=arch.hidden_size,
        num_heads=arch.num_heads,
        num_kv_heads=arch.num_kv_heads,
        head_dim=arch.head_dim,
        intermediate_size=arch.intermediate_size,
        vocab_size=arch.vocab_size,
        experts_total=arch.experts_total,
        experts_active=arch.experts_active,
        moe_intermediate_size=arch.moe_intermediate_size,
        sliding_window=arch.sliding_window,
        layer_types=arch.layer_types,
        params_total=params.total,
        params_active=params.active,
        dtype=arch.dtype,
        tie_embeddings=arch.tie_embeddings,
        source=source or default_source,
        as_of=as_of,
        weight_bytes_native=native_weight_bytes(arch, params),
        notes=notes,
    )
