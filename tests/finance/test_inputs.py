"""Bad finance input gets the field and the fix; good input round-trips; the enterprise preset resolves."""

from __future__ import annotations

from typing import Any

import pytest

from planning.errors import PlanningError
from planning.scenario import Scenario


def _with(small: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**small, **changes}


@pytest.mark.parametrize(("change", "field", "fix"), [
    ({"reservations": [{"region": "aws:us-east-2", "shape": "1xL4", "term_years": -1}]},
     "reservations[0].term_years", "use a value > 0"),
    ({"reservations": [{"region": "aws:us-east-2", "shape": "1xL4", "upfront_usd": 100}]},
     "reservations[0].hourly_usd", "give hourly_usd too"),
    ({"reservations": [{"region": "aws:us-east-2", "shape": "1xL4", "payment": "all_upfront", "upfront_usd": 9,
                        "hourly_usd": 0.2}]}, "reservations[0].hourly_usd", "set hourly_usd: 0"),
    ({"reservations": [{"region": "aws:us-east-2", "shape": "1xL4", "payment": "no_upfront", "upfront_usd": 9,
                        "hourly_usd": 0.2}]}, "reservations[0].upfront_usd", "set upfront_usd: 0"),
    ({"reservations": [{"region": "aws:us-east-2", "shape": "1xL4", "status": "held"}]},
     "reservations[0].count", "give count"),
    ({"reservations": [{"region": "aws:us-east-2", "shape": "1xL4", "hourly_usd": -1, "upfront_usd": 0}]},
     "reservations[0].hourly_usd", "≥ 0"),
    ({"reservations": [{"region": "aws:us-east-2/reserved", "shape": "1xL4"}]},
     "reservations[0].region", "cloud region key"),
    ({"owned": [{"location": "dc1", "shape": "8xH100", "count": 2}]}, "owned[0].location", "owned:<site>"),
    ({"owned": [{"location": "owned:x", "shape": "8xH100", "count": 2, "capex_usd": 9}]},
     "owned[0].amortisation_years", "amortisation_years"),
    ({"owned": [{"location": "owned:x", "shape": "8xH100", "count": 0}]}, "owned[0].count", "≥ 1"),
    ({"spot": {"max_share": 1.5}}, "spot.max_share", "0..1"),
    ({"spot": {"enabled": True}, "pricing": "spot"}, "spot.enabled", "pricing: on_demand"),
    ({"finance": {"profile": {"factors": [0, 0]}}}, "finance.profile.factors", "one factor per epoch"),
    ({"finance": {"profile": {"factors": [1, 1], "models": {"phi-4": [1, 1]}}}}, "finance.profile.models.phi-4",
     "use one of"),
    ({"finance": {"profile": {"factors": [1, 1], "models": {"llama-3-8b": [1]}}}},
     "finance.profile.models.llama-3-8b", "same number"),
    ({"finance": {"demand_growth_per_year": -1}}, "finance.demand_growth_per_year", "above −1"),
])
def test_bad_scenario_input_names_the_field_and_the_fix(small: dict[str, Any], change: dict[str, Any], field: str,
                                                       fix: str) -> None:
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(_with(small, **change))
    assert err.value.field == field
    assert fix in err.value.fix


@pytest.mark.parametrize(("reservation", "field", "fix"), [
    ({"region": "aws:us-east-2", "shape": "3xL40S"}, "reservations[0].shape", "reserve a shape sold there"),
    ({"region": "aws:us-east-2", "shape": "1xB200"}, "reservations[0].shape", ""),
    ({"region": "aws:us-west-2", "shape": "1xL4"}, "reservations[0].region", "add it to regions"),
    ({"region": "aws:us-east-2", "shape": "1xL4", "term_years": 2}, "reservations[0]", "give upfront_usd"),
    ({"region": "aws:us-east-2", "shape": "4xL4"}, "reservations[0].shape", "add 4xL4 to shapes"),
])
def test_reservations_the_catalog_cannot_price_are_refused(small: dict[str, Any], reservation: dict[str, Any],
                                                          field: str, fix: str) -> None:
    from planning.api import validate

    every_shape = reservation["shape"] != "4xL4"  # 4xL4 is sold there but not among the scenario's shapes
    scenario = Scenario.from_dict(_with(small, reservations=[reservation],
                                        shapes=[] if every_shape else small["shapes"]))
    with pytest.raises(PlanningError) as err:
        validate(scenario)
    assert err.value.field == field
    assert fix in err.value.fix


def test_finance_fields_round_trip_and_old_files_stay_identical(small: dict[str, Any]) -> None:
    s = Scenario.from_dict(_with(small, owned=[{"location": "owned:us-dc", "shape": "8xH100", "count": 1,
                                                "capex_usd": 1000, "amortisation_years": 2}],
                                 spot={"enabled": True, "max_share": 0.4, "interruptions": [
                                     {"region": "aws:us-east-2", "per_month": 0.3, "source": "test"}]}))
    assert Scenario.from_dict(s.to_dict()) == s
    plain = Scenario.from_dict({k: v for k, v in small.items() if k not in ("reservations", "finance")})
    assert not plain.has_finance
    assert not {"owned", "reservations", "spot", "finance"} & set(plain.to_dict())


def test_enterprise_preset_resolves_its_pools() -> None:
    from planning.api import engine_context, load_preset_scenario
    from planning.finance.commitments import candidates_of
    from planning.resolve import resolve_scenario

    s = load_preset_scenario("enterprise")
    resolved = resolve_scenario(s, engine_context().catalog)
    kinds = {o.kind for o in resolved.offers}
    assert kinds == {"on_demand", "spot", "owned"}
    owned = [o for o in resolved.offers if o.kind == "owned"]
    assert [(o.shape, o.available) for o in owned] == [("8xH100", 2)]  # 16 H100
    cands = candidates_of(s, engine_context().catalog)
    assert {c.region.split(":")[0] for c in cands} == {"aws", "gcp"}  # 1-year reservations on two clouds
    assert all(c.terms.term_years == 1 and 0 < c.break_even < 1 for c in cands)
    spot = [o for o in resolved.offers if o.kind == "spot"]
    assert spot and all(o.interruption_per_hour > 0 for o in spot)
