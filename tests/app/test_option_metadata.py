"""One description per option: the JSON schema, the validator and the Scenario page's widgets all read the
``OptionSpec`` on the ``Options`` field, so for every option their bounds and choices agree, and a new field with
its metadata is validated, published and shown with no other edit."""

from __future__ import annotations

import math
from dataclasses import make_dataclass
from typing import Any

import jsonschema
import pytest

from planning.errors import PlanningError
from planning.scenario import Options, OptionSpec, option_specs
from planning.scenario_options import option, option_schema
from planning.scenario_schema import scenario_json_schema
from tests.app.conftest import app
from ui.options_form import PAGE_OPTIONS, WIDGET_RESOLUTION, widget_kwargs


def _accepts(cls: Any, name: str, value: Any) -> bool:
    try:
        cls.from_dict({name: value}, "options")
    except PlanningError as exc:
        assert exc.field == f"options.{name}" and exc.fix, exc  # names the field and the fix
        return False
    return True


def _validator_bounds(cls: Any, name: str) -> tuple[float | None, bool, float | None]:
    """(least bound, whether it is strict, largest) found by probing ``from_dict`` alone."""
    spec = option_specs(cls)[name]
    probe = spec.minimum if spec.minimum is not None else 0.0
    assert not _accepts(cls, name, probe - 1), f"{name} accepts below its minimum"
    strict = not _accepts(cls, name, probe)
    assert _accepts(cls, name, probe + 1)
    top = spec.maximum
    assert top is not None, f"{name} has no maximum"
    assert _accepts(cls, name, top) and not _accepts(cls, name, top + 1 if spec.integer else top * (1 + 1e-9))
    return probe, strict, top


def _schema_bounds(prop: dict[str, Any]) -> tuple[float | None, bool, float | None]:
    strict = "exclusiveMinimum" in prop
    return prop.get("exclusiveMinimum" if strict else "minimum"), strict, prop.get("maximum")


@pytest.mark.parametrize("name", list(option_specs()))
def test_schema_validator_and_widget_agree(name: str) -> None:
    spec = option_specs()[name]
    prop = scenario_json_schema()["properties"]["options"]["properties"][name]
    default = getattr(Options(), name)
    widget = widget_kwargs(name, spec.choices[0] if spec.choices else default)
    if spec.choices:
        assert prop == {"enum": list(spec.choices)}
        assert widget["options"] == list(spec.choices)
        for choice in spec.choices:
            assert _accepts(Options, name, choice)
        assert not _accepts(Options, name, "no-such-choice")
        return
    lo, strict, hi = _validator_bounds(Options, name)
    assert _schema_bounds(prop) == (lo, strict, hi)
    assert widget["max_value"] == hi
    assert _accepts(Options, name, widget["min_value"])
    assert lo is not None
    if strict:
        assert widget["min_value"] == pytest.approx(lo + (1 if spec.integer else WIDGET_RESOLUTION))
    else:
        assert widget["min_value"] == lo
    assert isinstance(widget["min_value"], int) == spec.integer  # st.number_input needs one type


def test_the_page_sets_options_with_specs() -> None:
    for name in PAGE_OPTIONS:
        assert option_specs()[name].label and option_specs()[name].help, name


def test_a_new_field_with_metadata_needs_no_other_edit() -> None:
    spec = OptionSpec("Retries", "How often to retry.", "times", minimum=0, integer=True, bound="max_stages")
    wider: Any = make_dataclass("WiderOptions", [("retries", int, option(2, spec))], bases=(Options,), frozen=True)
    assert wider.from_dict({}, "options").retries == 2
    assert wider.from_dict({"retries": "7"}, "options").retries == 7
    with pytest.raises(PlanningError) as err:
        wider.from_dict({"retries": 99}, "options")
    assert err.value.field == "options.retries" and "≤ 32" in err.value.problem
    with pytest.raises(PlanningError, match=r"options\.retries"):
        wider(retries=-1)  # __post_init__ revalidates with the same spec
    schema: dict[str, Any] = {"type": "object", "properties": option_schema(wider), "additionalProperties": False}
    assert schema["properties"]["retries"] == {"type": "integer", "minimum": 0, "maximum": 32}
    jsonschema.validate({"retries": 3}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"retries": 33}, schema)
    widget = widget_kwargs("retries", 2, wider)
    assert (widget["label"], widget["min_value"], widget["max_value"], widget["value"]) == ("Retries", 0, 32, 2)


def test_yaml_false_still_means_sharing_off() -> None:
    assert Options.from_dict({"sharing": False}, "options").sharing == "off"
    assert not _accepts(Options, "sharing", True)


def test_choice_labels_reach_the_widget() -> None:
    widget = widget_kwargs("kv_transfer", "cross-region")
    assert widget["index"] == 1
    assert widget["format_func"]("cross-region").startswith("cross-region allowed")
    assert widget_kwargs("solver", "cbc")["format_func"]("cbc") == "cbc"
    assert math.isfinite(widget_kwargs("K", 0.1)["max_value"])


def test_the_scenario_page_shows_the_specs_bounds() -> None:
    at = app("views/1_Scenario.py")
    assert not at.exception
    shown = {n.label: n for n in at.number_input}
    for name in PAGE_OPTIONS:
        spec = option_specs()[name]
        if spec.choices:
            box = next(s for s in at.selectbox if s.label == spec.label)
            assert list(box.options) == [dict(spec.choice_labels).get(c, c) for c in spec.choices], name
            continue
        widget = widget_kwargs(name, getattr(Options(), name))
        assert (shown[spec.label].min, shown[spec.label].max) == (widget["min_value"], widget["max_value"]), name
