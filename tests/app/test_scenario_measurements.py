"""Issue 40: the Scenario page sets options.measurements (auto | use | ignore) in its own small form, validated by
the engine, and the choice is what the saved scenario holds."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from planning.scenario import Scenario
from tests.app.conftest import app

LABEL = "Plan on your measurements (options.measurements)"


def _radio(at: AppTest) -> object:
    return next(r for r in at.radio if r.label == LABEL)


def _apply(at: AppTest, choice: str) -> None:
    _radio(at).set_value(choice)  # type: ignore[attr-defined]
    next(b for b in at.button if b.label == "Apply measurements choice").click()
    at.run()


def test_the_page_sets_options_measurements(planning_home: Path) -> None:
    at = app("views/1_Scenario.py")
    assert not at.exception
    before: Scenario = at.session_state["scenario"]
    assert before.options.measurements == "auto" and _radio(at).value == "auto"  # type: ignore[attr-defined]
    assert "Your measurements" in [s.value for s in at.subheader]
    _apply(at, "ignore")
    assert not at.exception
    after: Scenario = at.session_state["scenario"]
    assert after.options.measurements == "ignore" and _radio(at).value == "ignore"  # type: ignore[attr-defined]
    assert after.name.endswith("(edited)")  # a preset changed by the user is no longer the preset
    assert "measurements: ignore" in after.to_yaml()
    assert after.options == type(before.options)(**{**before.options.__dict__, "measurements": "ignore"})
    assert [m.id for m in after.models] == [m.id for m in before.models]  # nothing else changed
    _apply(at, "use")
    assert at.session_state["scenario"].options.measurements == "use"


def test_applying_the_same_choice_changes_nothing(planning_home: Path) -> None:
    at = app("views/1_Scenario.py")
    before = at.session_state["scenario"]
    _apply(at, "auto")
    assert not at.exception and at.session_state["scenario"] is before
    assert at.session_state["scenario_origin"].startswith("preset:")


def test_the_radio_offers_exactly_the_options_choices(planning_home: Path) -> None:
    """One source (issue 39 §4): the radio's choices are the option's own, each with its words."""
    from planning.scenario import option_specs
    from ui.scenario_measurements import CHOICES

    at = app("views/1_Scenario.py")
    choices = option_specs()["measurements"].choices
    assert list(_radio(at).options) == [CHOICES[c][0] for c in choices]  # type: ignore[attr-defined]
    assert set(CHOICES) == set(choices)
