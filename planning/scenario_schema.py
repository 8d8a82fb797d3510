"""JSON Schema (draft 2020-12) of the scenario file format, published as docs/scenario.schema.json."""

from __future__ import annotations

import json
from typing import Any

from planning.scenario_options import option_schema

_POS = {"type": "number", "exclusiveMinimum": 0}
_NONNEG = {"type": "number", "minimum": 0}
_NONNEG_INT = {"type": "integer", "minimum": 0}
_BURST = {"type": "number", "minimum": 1}


def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def scenario_json_schema() -> dict[str, Any]:
    """The scenario schema as a dict (the validators in ``planning.scenario`` are the authority)."""
    bucket = _obj({"input_len": {"type": "number", "minimum": 1}, "output_len": {"type": "number", "minimum": 1},
                   "rate_rps": _NONNEG}, ("input_len", "output_len", "rate_rps"))
    demand = {
        "oneOf": [
            _obj({"rate_rps": _NONNEG, "input_len": {"type": "number", "minimum": 1},
                  "output_len": {"type": "number", "minimum": 1}, "burstiness": _BURST},
                 ("rate_rps", "input_len", "output_len")),
            _obj({"histogram": {"type": "array", "items": bucket, "minItems": 1}, "burstiness": _BURST},
                 ("histogram",)),
        ]
    }
    slo = {**_obj({"prefill_ms": {"type": ["number", "null"], "exclusiveMinimum": 0},
                   "decode_ms": {"type": ["number", "null"], "exclusiveMinimum": 0}}),
           "minProperties": 1}
    model = _obj({"id": {"type": "string", "minLength": 1}, "slo": slo, "demand": demand,
                  "custom_config": {"type": ["object", "null"]},
                  "base": {"type": ["string", "null"], "minLength": 1}, "weights": {"type": "string"}},
                 ("id", "slo", "demand"))
    offer = _obj({"region": {"type": "string"}, "shape": {"type": "string", "pattern": r"^[0-9]+x.+$"},
                  "price_per_hour": _NONNEG, "available": _NONNEG_INT, "source": {"type": "string"}},
                 ("region", "shape", "price_per_hour", "available"))
    override = _obj({"region": {"type": "string"}, "shape": {"type": "string"}, "nodes": _NONNEG_INT},
                    ("region", "shape", "nodes"))
    template = _obj({"id": {"type": "string"}, "model": {"type": "string"},
                     "phase": {"enum": ["prefill", "decode", "aggregated"]},
                     "usage": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
                     "throughput": {"type": "object", "additionalProperties": _NONNEG}}, ("usage", "throughput"))
    current = _obj({"template_id": {"type": "string"}, "region": {"type": "string"}, "count": _NONNEG_INT},
                   ("template_id", "region", "count"))
    options = _obj(option_schema())
    objective = _obj({"kind": {"enum": ["cost", "served"]},
                      "budget_per_hour": {"type": ["number", "null"], "exclusiveMinimum": 0}})
    owned = _obj({"location": {"type": "string", "pattern": "^owned:[^/]+$"},
                  "shape": {"type": "string", "pattern": r"^[0-9]+x.+$"}, "count": {"type": "integer", "minimum": 1},
                  "capex_usd": _NONNEG, "amortisation_years": {"type": ["number", "null"], "exclusiveMinimum": 0},
                  "power_usd_per_hour": _NONNEG, "ops_usd_per_hour": _NONNEG, "name": {"type": "string"},
                  "source": {"type": "string"}}, ("location", "shape", "count"))
    reservation = _obj({"region": {"type": "string"}, "shape": {"type": "string", "pattern": r"^[0-9]+x.+$"},
                        "term_years": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
                        "status": {"enum": ["held", "decide"]}, "count": {"type": ["integer", "null"], "minimum": 0},
                        "payment": {"enum": ["no_upfront", "partial_upfront", "all_upfront"]},
                        "upfront_usd": {"type": ["number", "null"], "minimum": 0},
                        "hourly_usd": {"type": ["number", "null"], "minimum": 0}, "source": {"type": "string"}},
                       ("region", "shape"))
    spot_rate = _obj({"region": {"type": "string"}, "gpu": {"type": "string"},
                      "per_month": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                      "source": {"type": "string"}}, ("region", "per_month"))
    spot = _obj({"enabled": {"type": "boolean"}, "max_share": {"type": "number", "minimum": 0, "maximum": 1},
                 "recovery": {"enum": ["lost", "on_demand"]}, "recovery_hours": _POS,
                 "interruptions": {"type": "array", "items": spot_rate}, "interruption_scale": _NONNEG})
    factors = {"type": "array", "items": _NONNEG, "minItems": 1}
    profile = _obj({"factors": factors, "epoch_hours": _POS,
                    "models": {"type": "object", "additionalProperties": factors}, "source": {"type": "string"}},
                   ("factors",))
    finance = _obj({"horizon_years": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
                    "demand_growth_per_year": {"type": "number", "exclusiveMinimum": -1},
                    "periods": {"type": "integer", "minimum": 1, "maximum": 120},
                    "profile": {"oneOf": [profile, {"type": "null"}]}})
    schema = _obj({
        "name": {"type": "string"}, "description": {"type": "string"}, "source": {"type": "string"},
        "mode": {"enum": ["disaggregated", "aggregated"]}, "pricing": {"enum": ["on_demand", "spot"]},
        "models": {"type": "array", "items": model, "minItems": 1},
        "regions": {"type": "array", "items": {"type": "string"}},
        "shapes": {"type": "array", "items": {"type": "string"}},
        "availability_scale": _NONNEG, "price_scale": _POS,
        "exclude_gpus": {"type": "array", "items": {"type": "string"}},
        "availability_overrides": {"type": "array", "items": override},
        "offers": {"type": "array", "items": offer},
        "explicit_templates": {"type": "array", "items": template},
        "generate_templates": {"type": "boolean"},
        "current": {"type": "array", "items": current},
        "options": options, "objective": objective,
        "owned": {"type": "array", "items": owned}, "reservations": {"type": "array", "items": reservation},
        "spot": spot, "finance": finance,
    }, ("models",))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "planning scenario"
    schema["description"] = ("A serving-planning scenario: models with SLOs and demand, regions/shapes or explicit "
                             "offers, availability, objective and solver options. See docs/scenario.md.")
    return schema


def schema_text() -> str:
    return json.dumps(scenario_json_schema(), indent=2) + "\n"
