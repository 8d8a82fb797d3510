"""Scenario spec: validation names the field and the fix; YAML/JSON round trip; schema agrees."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from planning.errors import PlanningError
from planning.scenario import Scenario, load_scenario, parse_scenario_text, save_scenario
from planning.scenario_schema import scenario_json_schema, schema_text

ROOT = Path(__file__).resolve().parents[2]

BASE = {
    "name": "t",
    "regions": ["aws:us-east-2"],
    "shapes": ["1xL4", "2xL40S"],
    "models": [
        {"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
         "demand": {"rate_rps": 2, "input_len": 512, "output_len": 128}},
    ],
}


def test_round_trip_yaml_and_json(tmp_path: Path) -> None:
    s = Scenario.from_dict(BASE)
    for name in ("s.yaml", "s.json"):
        path = save_scenario(s, tmp_path / name)
        assert load_scenario(path) == s
    assert Scenario.from_dict(json.loads(s.to_json())) == s


def test_histogram_demand_derives_means() -> None:
    data = json.loads(json.dumps(BASE))
    data["models"][0]["demand"] = {"histogram": [
        {"input_len": 100, "output_len": 10, "rate_rps": 1},
        {"input_len": 300, "output_len": 30, "rate_rps": 3},
    ]}
    s = Scenario.from_dict(data)
    d = s.models[0].demand
    assert d.rate_rps == 4
    assert d.input_len == pytest.approx(250)
    assert d.output_len == pytest.approx(25)
    assert Scenario.from_dict(s.to_dict()) == s


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["models"][0]["slo"].update(decode_ms=-5), "models[0].slo.decode_ms"),
        (lambda d: d["models"][0]["demand"].pop("rate_rps"), "models[0].demand.rate_rps"),
        (lambda d: d.update(mode="hybrid"), "mode"),
        (lambda d: d.update(options={"solver": "gurobi"}), "options.solver"),
        (lambda d: d.update(options={"nmax": 2.5}), "options.nmax"),
        (lambda d: d.update(bogus=1), "bogus"),
        (lambda d: d.update(models=[]), "models"),
        (lambda d: d["models"][0]["slo"].pop("prefill_ms"), "models[0].slo"),
        (lambda d: d.update(regions=[]), "regions"),
        (lambda d: d.update(objective={"kind": "served", "budget_per_hour": 0}), "objective.budget_per_hour"),
    ],
)
def test_bad_input_names_field_and_fix(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(json.dumps(BASE))
    mutate(data)
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(data)
    assert err.value.field == field
    assert "Fix:" in str(err.value)


def test_untrusted_text_is_parsed_safely() -> None:
    with pytest.raises(PlanningError, match="line"):
        parse_scenario_text("name: [unclosed")
    with pytest.raises(PlanningError):
        parse_scenario_text("!!python/object/apply:os.system ['echo hi']")
    with pytest.raises(PlanningError, match="larger"):
        parse_scenario_text("#" * 3_000_000)


def test_what_if_helpers_return_new_specs() -> None:
    s = Scenario.from_dict(BASE)
    doubled = s.with_demand_scaled(2.0)
    assert doubled.models[0].demand.rate_rps == 4
    assert s.models[0].demand.rate_rps == 2
    tighter = s.with_slo_scaled(0.5)
    assert tighter.models[0].slo.decode_ms == 25
    assert replace(s, price_scale=1.1).price_scale == 1.1


def test_schema_accepts_round_trips_and_rejects_bad() -> None:
    schema = scenario_json_schema()
    jsonschema.validate(Scenario.from_dict(BASE).to_dict(), schema)
    bad = json.loads(json.dumps(BASE))
    bad["mode"] = "hybrid"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_published_schema_is_current() -> None:
    assert (ROOT / "docs" / "scenario.schema.json").read_text() == schema_text()
