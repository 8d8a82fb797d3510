"""Every construction of a Scenario spec is validated (``__post_init__``), so ``replace(...)`` what-ifs are too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning.errors import PlanningError
from planning.scenario import SLO, Demand, Options, Scenario


def test_replace_is_validated_with_the_field_path(tiny: dict[str, Any]) -> None:
    s = Scenario.from_dict(tiny)
    with pytest.raises(PlanningError) as err:
        replace(s, price_scale=-1.0)
    assert err.value.field == "price_scale"
    with pytest.raises(PlanningError) as err:
        replace(s, regions=())
    assert err.value.field == "regions"
    with pytest.raises(PlanningError) as err:
        replace(s, models=(replace(s.models[0], slo=SLO(prefill_ms=1500, decode_ms=None)),))
    assert err.value.field == "models[0].slo"  # disaggregated mode needs both SLOs
    with pytest.raises(PlanningError) as err:
        replace(s, mode="sideways")
    assert err.value.field == "mode"


def test_nested_specs_validate_on_construction() -> None:
    with pytest.raises(PlanningError) as err:
        SLO(prefill_ms=-5, decode_ms=50)
    assert err.value.field == "slo.prefill_ms"
    with pytest.raises(PlanningError):
        Demand(rate_rps=1, input_len=0, output_len=10)
    with pytest.raises(PlanningError) as err:
        Options(nmax=0)
    assert err.value.field == "options.nmax"


def test_valid_replacements_still_work(tiny: dict[str, Any]) -> None:
    s = Scenario.from_dict(tiny)
    t = replace(s, price_scale=0.5, name="half price")
    assert t.price_scale == 0.5 and Scenario.from_dict(t.to_dict()) == t
    assert s.with_demand_scaled(3).models[0].demand.rate_rps == pytest.approx(6.0)
