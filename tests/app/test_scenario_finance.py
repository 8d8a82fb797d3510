"""Issue 38 §2: owned GPUs, reservations, spot caps and interruption rates and the horizon are entered on the
Scenario page, validated by the engine (errors name the field and the fix) and saved to the same YAML a file
would hold."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from planning.errors import PlanningError
from planning.scenario import Scenario, load_scenario, parse_scenario_text
from tests.app.conftest import app, save_tiny, texts
from ui import scenario_finance as sf


def _load(at: AppTest, choice: str) -> None:
    next(s for s in at.selectbox if s.label == "Preset or saved scenario").set_value(choice)
    next(b for b in at.button if b.label == "Load").click()
    at.run()


def _apply(at: AppTest) -> None:
    next(b for b in at.button if b.label == "Apply finance inputs").click()
    at.run()


def _tables(scenario: Scenario) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    d = scenario.to_dict()
    return (sf._frame(d.get("owned", []), sf.OWNED_COLUMNS), sf._frame(d.get("reservations", []),
                                                                        sf.RESERVATION_COLUMNS),
            sf._frame((d.get("spot") or {}).get("interruptions", []), sf.RATE_COLUMNS))


def _settings(scenario: Scenario, **changes: object) -> dict[str, object]:
    spot, fin = scenario.spot, scenario.finance
    out: dict[str, object] = {
        "spot_enabled": spot.enabled, "max_share": spot.max_share, "recovery": spot.recovery,
        "recovery_hours": spot.recovery_hours, "interruption_scale": spot.interruption_scale,
        "horizon_years": fin.horizon_years, "demand_growth_per_year": fin.demand_growth_per_year,
        "periods": fin.periods, "factors": ", ".join(format(f, ".12g") for f in fin.profile.factors)
        if fin.profile else "", "epoch_hours": fin.profile.epoch_hours if fin.profile else 1.0,
        "profile_source": fin.profile.source if fin.profile else ""}
    return {**out, **changes}


def test_the_page_shows_the_enterprise_finance_inputs(planning_home: Path) -> None:
    at = app("views/1_Scenario.py")
    _load(at, "preset:enterprise")
    assert not at.exception
    assert "Owned, reserved and spot capacity, the horizon" in [s.value for s in at.subheader]
    frames = [df.value for df in at.dataframe]  # the editors show the preset's pools and reservations
    owned = next(f for f in frames if "amortisation_years" in f)
    assert list(owned["location"]) == ["owned:us-east-dc1"] and list(owned["count"]) == [2]
    reserved = next(f for f in frames if "payment" in f)
    assert len(reserved) == 6 and set(reserved["status"]) == {"decide"}
    assert next(c for c in at.checkbox if c.label == "Spot nodes beside on-demand").value is True
    assert next(n for n in at.number_input if n.label.startswith("Spot cap")).value == pytest.approx(0.5)
    # applied unchanged: nothing changes, and the scenario saves to the same YAML
    before = at.session_state["scenario"].to_yaml()
    _apply(at)
    assert not at.exception and "Nothing changed." in texts(at)
    assert at.session_state["scenario"].to_yaml() == before


def test_horizon_spot_and_profile_are_entered_and_round_trip(planning_home: Path) -> None:
    save_tiny(planning_home)
    at = app("views/1_Scenario.py")
    _load(at, "saved:tiny")
    next(c for c in at.checkbox if c.label == "Spot nodes beside on-demand").check()
    next(n for n in at.number_input if n.label.startswith("Spot cap")).set_value(0.25)
    next(n for n in at.number_input if n.label == "Horizon (years)").set_value(2.0)
    next(n for n in at.number_input if n.label == "Growth periods").set_value(4)
    next(n for n in at.number_input if n.label == "Demand growth per year").set_value(0.2)
    next(t for t in at.text_input if t.label.startswith("Demand profile")).set_value("0.5, 1, 0.75")
    next(n for n in at.number_input if n.label == "Epoch hours").set_value(8.0)
    _apply(at)
    assert not at.exception, at.exception
    s = at.session_state["scenario"]
    assert s.spot.enabled and s.spot.max_share == 0.25
    assert (s.finance.horizon_years, s.finance.periods, s.finance.demand_growth_per_year) == (2.0, 4, 0.2)
    assert s.finance.profile is not None and s.finance.profile.factors == (0.5, 1.0, 0.75)
    assert s.name == "tiny (edited)" and "Scenario updated." in texts(at)
    # saved, the file holds the same fields and loads back to the same scenario
    next(t for t in at.text_input if t.label == "Save as").set_value("tiny fin")
    next(b for b in at.button if b.label == "Save to my scenarios").click()
    at.run()
    saved = load_scenario(planning_home / "scenarios" / "tiny-fin.yaml")
    assert saved.to_dict() == {**s.to_dict(), "name": "tiny fin"}
    text = (planning_home / "scenarios" / "tiny-fin.yaml").read_text()
    assert "horizon_years: 2" in text and "max_share: 0.25" in text


def test_a_bad_profile_names_the_field_and_the_fix(planning_home: Path) -> None:
    save_tiny(planning_home)
    at = app("views/1_Scenario.py")
    _load(at, "saved:tiny")
    next(t for t in at.text_input if t.label.startswith("Demand profile")).set_value("0.5, lots")
    _apply(at)
    assert not at.exception
    errors = "\n".join(str(e.value) for e in at.error)
    assert "finance.profile.factors" in errors and "Fix:" in errors
    assert at.session_state["scenario"].finance.profile is None  # the bad edit was not kept
    next(t for t in at.text_input if t.label.startswith("Demand profile")).set_value("0, 0")
    _apply(at)
    assert "needs at least one positive factor" in "\n".join(str(e.value) for e in at.error)


def test_table_rows_go_through_the_engines_validation() -> None:
    """The rows the three editors return become the scenario's entries (empty cells = defaults) and every bad
    value is refused by ``Scenario.from_dict`` with the field's path, as in a file."""
    base = Scenario.from_dict({"name": "t", "regions": ["aws:us-east-2"], "models": [
        {"id": "llama-3-8b", "slo": {"prefill_ms": 1000, "decode_ms": 50},
         "demand": {"rate_rps": 2, "input_len": 500, "output_len": 100}}]})
    owned, reservations, rates = _tables(base)
    owned = pd.DataFrame([{"name": "dc", "location": "owned:us-east-dc", "shape": "1xL40S", "count": 2.0,
                           "capex_usd": 20000.0, "amortisation_years": 3.0, "power_usd_per_hour": 0.2,
                           "ops_usd_per_hour": float("nan"), "source": None}], columns=sf.OWNED_COLUMNS)
    reservations = pd.DataFrame([{"region": "aws:us-east-2", "shape": "1xL4", "term_years": 1.0, "status": "held",
                                  "count": 3.0, "payment": "no_upfront", "upfront_usd": 0.0, "hourly_usd": 0.5,
                                  "source": "our quote"}], columns=sf.RESERVATION_COLUMNS)
    rates = pd.DataFrame([{"region": "aws:us-east-2", "gpu": "L4", "per_month": 0.1, "source": "history"}],
                         columns=sf.RATE_COLUMNS)
    new = Scenario.from_dict(sf.finance_data(base, owned, reservations, rates, _settings(base, spot_enabled=True)))
    assert new.owned[0].count == 2 and new.owned[0].ops_usd_per_hour == 0.0 and new.owned[0].source == "scenario"
    assert new.reservations[0].status == "held" and new.reservations[0].hourly_usd == 0.5
    assert new.spot.interruptions[0].per_month == 0.1
    assert parse_scenario_text(new.to_yaml()) == new  # what the page enters round-trips through YAML
    bad = [(owned.assign(location="dc1"), reservations, "owned[0].location"),
           (owned.assign(amortisation_years=float("nan")), reservations, "owned[0].amortisation_years"),
           (owned, reservations.assign(count=float("nan")), "reservations[0].count"),
           (owned, reservations.assign(term_years=-1.0), "reservations[0].term_years"),
           (owned, reservations.assign(upfront_usd=float("nan")), "reservations[0].upfront_usd")]
    for o, r, field in bad:
        with pytest.raises(PlanningError) as err:
            Scenario.from_dict(sf.finance_data(base, o, r, rates, _settings(base)))
        assert err.value.field == field and err.value.fix
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(sf.finance_data(base, owned, reservations, rates, _settings(base, max_share=1.5)))
    assert err.value.field == "spot.max_share"


def test_an_unedited_enterprise_round_trips_through_the_tables() -> None:
    from planning.api import load_preset_scenario

    s = load_preset_scenario("enterprise")
    new = Scenario.from_dict(sf.finance_data(s, *_tables(s), _settings(s)))
    assert new.to_yaml() == s.to_yaml()
