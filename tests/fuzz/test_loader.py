"""The bounded loader and the scenario validator on the hostile inputs issue 8 lists."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from planning.catalog.presets import load_preset
from planning.errors import PlanningError, UnknownIdError, quote
from planning.safeio import Limits, load_data, load_json, load_yaml, read_text
from planning.scenario import Scenario, load_scenario, parse_scenario_text
from planning.scenario_fields import BOUNDS
from tests.fuzz.mutators import ALIAS_BOMB

BASE: dict[str, Any] = load_preset("coral-core")
HUGE = int("9" * 400)


def _rejects(text: str) -> PlanningError:
    with pytest.raises(PlanningError) as err:
        parse_scenario_text(text)
    return err.value


HANG_S = 60.0  # expanding the bomb, or a quadratic walk of the nesting, would take hours: a bound on a hang only


def test_alias_bomb_is_refused_without_expanding() -> None:
    """A ~400-byte alias bomb (9⁹ values expanded) is refused by the alias count, naming the limit; it returns
    (the expansion would not, for hours: ``HANG_S`` is not a claim on speed)."""
    assert len(ALIAS_BOMB) < 600
    t0 = time.perf_counter()
    err = _rejects(ALIAS_BOMB + yaml.safe_dump(BASE))
    assert time.perf_counter() - t0 < HANG_S
    assert "aliases" in err.problem and "100,000" in err.problem


def test_aliases_can_be_refused_entirely_and_recursive_ones_always() -> None:
    with pytest.raises(PlanningError, match="aliases"):
        load_yaml("a: &x 1\nb: *x\n", limits=Limits(max_aliases=0))
    assert load_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(PlanningError, match="recursive"):
        load_yaml("a: &x [*x]\n")


@pytest.mark.parametrize("text", [
    "[" * 1000 + "]" * 1000,
    "a: " + "{b: " * 600 + "1" + "}" * 600,
    '{"a":' * 2000 + "1" + "}" * 2000,
    "x:\n" + "".join(" " * i + "- \n" for i in range(1, 200)),
    "a: " + "[" * 100_000,
])
def test_deep_nesting_is_a_clean_error_quickly(text: str) -> None:
    """Deep nesting is a PlanningError naming the depth (or invalid text), never a RecursionError or a hang."""
    t0 = time.perf_counter()
    err = _rejects(text)
    assert time.perf_counter() - t0 < HANG_S
    assert "deeper than" in err.problem or "not valid" in err.problem


def test_brackets_inside_quotes_and_comments_do_not_count() -> None:
    text = 'a: "' + "[" * 100 + '"\nb: 1  # ' + "{" * 100 + "\nc: '" + "[" * 50 + "'\n"
    assert load_yaml(text) == {"a": "[" * 100, "b": 1, "c": "[" * 50}


@pytest.mark.parametrize(("text", "where"), [
    ("name: x\n1: 2\n", "scenario"),
    ("name: x\nmodels:\n  - {id: a, null: 3}\n", "models[0]"),
    ("a: {b: {true: 1}}\n", "a.b"),
    ("a: [{2.5: x}]\n", "a[0]"),
])
def test_non_text_keys_are_refused_with_the_path(text: str, where: str) -> None:
    with pytest.raises(PlanningError) as err:
        load_yaml(text, field="scenario")
    assert err.value.field == where and "keys must be text" in err.value.problem


def test_duplicate_keys_are_refused() -> None:
    with pytest.raises(PlanningError, match="twice"):
        load_yaml("shapes: [1xL4]\nname: x\nshapes: [2xL4]\n")
    with pytest.raises(PlanningError, match="twice"):
        load_json('{"a": 1, "a": 2}')
    assert load_yaml("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n") == {"base": {"x": 1}, "c": {"x": 1, "y": 2}}


def test_non_utf8_is_named_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes("name: x\ndescription: Mélange\n".encode("latin-1"))
    with pytest.raises(PlanningError, match=r"not UTF-8: byte 0xe9 at line 2, column 15"):
        load_scenario(path)
    path.write_bytes("name: x\n".encode("utf-16"))
    with pytest.raises(PlanningError, match="UTF-16"):
        load_scenario(path)
    path.write_bytes(b"name: x\x00\n")
    with pytest.raises(PlanningError, match="binary"):
        load_scenario(path)


def test_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(BASE).encode("utf-8"))
    assert load_scenario(path).name == "coral-core"


def test_read_text_bounds(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * 101)
    with pytest.raises(PlanningError, match="100-byte limit"):
        read_text(big, field="f", max_bytes=100)
    with pytest.raises(PlanningError, match="directory"):
        read_text(tmp_path, field="f", max_bytes=100)
    with pytest.raises(PlanningError, match="regular file"):
        read_text("/dev/null", field="f", max_bytes=100)


def test_numbers_too_long_to_read_are_refused_before_conversion() -> None:
    for loader in (load_yaml, load_json):
        with pytest.raises(PlanningError, match="5,000"):
            loader('{"a": ' + "9" * 5000 + "}")
    assert load_json('{"a": ' + "9" * 400 + "}")["a"] == HUGE  # the validator names the field


def test_yaml_values_python_cannot_build_are_clean_errors() -> None:
    with pytest.raises(PlanningError, match="line 1"):
        load_yaml("a: 2024-02-30\n")
    with pytest.raises(PlanningError, match="constructor"):
        load_yaml("!!python/object/apply:os.system ['true']\n")


def test_flow_yaml_starting_with_a_brace_is_still_yaml() -> None:
    assert load_data("{name: x, models: []}") == {"name": "x", "models": []}


# -- the validator -----------------------------------------------------------------------------------------------
NUMERIC_FIELDS = [
    ("options", "nmax"), ("options", "rho"), ("options", "K"), ("options", "max_stages"),
    ("options", "time_limit_s"), ("options", "mip_rel_gap"), ("options", "workers"),
    ("objective", "budget_per_hour"), (None, "availability_scale"), (None, "price_scale"),
]


def _set(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    node: Any = data
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    node[path[-1]] = value
    return data


def _numeric_paths() -> list[tuple[Any, ...]]:
    paths: list[tuple[Any, ...]] = [(p, f) if p else (f,) for p, f in NUMERIC_FIELDS]
    paths += [("models", 0, "slo", "prefill_ms"), ("models", 0, "slo", "decode_ms"),
              ("models", 0, "demand", "rate_rps"), ("models", 0, "demand", "input_len"),
              ("models", 0, "demand", "output_len")]
    return paths


@pytest.mark.parametrize("path", _numeric_paths(), ids=lambda p: ".".join(map(str, p)))
@pytest.mark.parametrize("value", [HUGE, -HUGE, 1e308, float("nan"), float("inf"), "1e999", "１２", "9" * 400,
                                   True, [1], {"a": 1}])
def test_every_numeric_field_refuses_hostile_numbers(path: tuple[Any, ...], value: Any) -> None:
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(_set(path, value))
    assert err.value.field.endswith(str(path[-1])), str(err.value)
    assert len(str(err.value)) < 600


@pytest.mark.parametrize(("field", "value", "bound"), [
    ("nmax", 1e20, "16"), ("max_stages", 10**9, "32"), ("workers", 10**6, "256"), ("time_limit_s", 1e9, "86400"),
    ("rho", 1e6, "1000"), ("mip_rel_gap", 2, "1"),
])
def test_option_bounds_say_what_and_why(field: str, value: float, bound: str) -> None:
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(_set(("options", field), value))
    assert err.value.field == f"options.{field}"
    assert f"≤ {bound}" in err.value.problem and "(" in err.value.problem  # the bound and its reason
    assert BOUNDS[field][1] in err.value.problem


def test_availability_scale_1e308_is_refused() -> None:
    with pytest.raises(PlanningError, match="availability_scale") as err:
        Scenario.from_dict(_set(("availability_scale",), 1e308))
    assert "unlimited" in err.value.problem


@pytest.mark.parametrize("shape", ["２xL40S", "٢xL40S", "2xL40S\u202e", "2 x L40S", "0xL4", "x", "2x"])
def test_shapes_must_be_ascii_count_x_gpu(shape: str) -> None:
    with pytest.raises(PlanningError) as err:
        Scenario.from_dict(_set(("shapes",), [shape]))
    assert err.value.field == "shapes[0]"


def test_huge_values_are_not_echoed() -> None:
    big = "x" * 22_000_000
    for path in [("name",), ("models", 0, "id"), ("options", "solver"), ("models", 0, "demand", "rate_rps"),
                 ("regions",)]:
        with pytest.raises(PlanningError) as err:
            Scenario.from_dict(_set(path, [big] if path == ("regions",) else big))
        assert len(str(err.value)) < 1000, path
    assert len(str(UnknownIdError("model", big, ["llama-3-8b"]))) < 1000


def test_quote_clips_long_values_and_big_integers() -> None:
    assert quote("abc") == "'abc'"
    assert quote("y" * 1000).endswith("(1,000 characters)") and len(quote("y" * 1000)) < 240
    assert quote(HUGE) == "an integer of 400 digits"
    assert quote(list(range(1000))) == "a list of 1,000 items"


def test_booleans_and_text_fields_are_typed() -> None:
    with pytest.raises(PlanningError, match="generate_templates"):
        Scenario.from_dict(_set(("generate_templates",), "false"))
    with pytest.raises(PlanningError, match="description"):
        Scenario.from_dict(_set(("description",), {"a": 1}))


def test_shipped_presets_still_load() -> None:
    from planning.catalog.presets import list_presets

    for name in list_presets():
        assert Scenario.from_dict(load_preset(name)).name == name


def test_lone_surrogate_is_a_clean_error() -> None:
    with pytest.raises(PlanningError, match="U\\+D800"):
        load_yaml("name: a\ud800b\n")


@pytest.mark.parametrize("fast", [True, False])
def test_both_yaml_event_sources_enforce_the_same_bounds(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    import planning.safeio as safeio

    if not fast:
        monkeypatch.setattr(safeio, "_CParser", None)  # PyYAML without libyaml: the pure-Python parser
    with pytest.raises(PlanningError, match="aliases"):
        load_yaml(ALIAS_BOMB)
    with pytest.raises(PlanningError, match="deeper"):
        load_yaml("a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)))
    with pytest.raises(PlanningError, match="keys must be text"):
        load_yaml("1: a\n")
    with pytest.raises(PlanningError, match="twice"):
        load_yaml("a: 1\na: 2\n")
    with pytest.raises(PlanningError, match="not valid YAML"):
        load_yaml("a: \x1f\n")
    assert load_yaml("a: &x {b: [1, 2.5, null, true]}\nc: *x\n") == {"a": {"b": [1, 2.5, None, True]},
                                                                      "c": {"b": [1, 2.5, None, True]}}


def test_bounds_are_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "scenario.md").read_text(encoding="utf-8")
    for name, (maximum, why) in BOUNDS.items():
        assert f"| {name} | {maximum:g} | {why} |" in docs, name


def test_exit_codes_are_in_help_and_readme(capsys: pytest.CaptureFixture[str]) -> None:
    from planning.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for line in ("0  a plan was found", "1  no plan", "2  bad input", "3  internal error"):
        assert line in text
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "**3** internal error" in readme and "**1** no plan" in readme


@pytest.mark.parametrize("shape", ["２xL4", "٢xL4", "²xL4"])
def test_the_shared_shape_parser_refuses_unicode_digits(shape: str) -> None:
    from planning.catalog.schema import parse_shape

    with pytest.raises(PlanningError, match="not a node shape"):
        parse_shape(shape)
    assert parse_shape("2xL4") == (2, "L4")


@pytest.mark.parametrize(("raw", "says"), [
    (b"[" * 100_000, "deeper than"),
    (b"\xff{}", "not UTF-8"),
    (b"[1, 2]", "not an object"),
    (b'{"num_hidden_layers": 1, "num_hidden_layers": 2}', "twice"),
    (b"{" + b'"a": 1, ' * 10 + b"}", "not valid JSON"),
    (b'{"hidden_size": 4096}', "num_hidden_layers"),
])
def test_uploaded_model_config_is_bounded_and_named(raw: bytes, says: str) -> None:
    """The Scenario page's config.json upload: every hostile file is a PlanningError naming config.json."""
    from planning import api

    with pytest.raises(PlanningError) as err:
        api.read_model_config(raw, "my-model")
    assert says in str(err.value)


def test_saved_plans_round_trip_and_hostile_ones_are_named(tmp_path: Path) -> None:
    from planning import api

    plan = api.solve(api.load_preset_scenario("melange-arena"))
    path = tmp_path / "plan.json"
    path.write_text(api.result_json(plan), encoding="utf-8")
    assert api.is_plan_json(path)
    assert api.load_plan(path).cost_per_hour == pytest.approx(plan.cost_per_hour)
    for name, text, says in [("deep.json", '{"instances": ' + "[" * 5000 + "]" * 5000 + ', "status": "x"}', "deeper"),
                             ("fake.json", '{"instances": [{"model": 1}], "status": "optimal"}', "does not parse"),
                             ("other.json", '{"name": "x"}', "not a plan")]:
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(PlanningError) as err:
            api.load_plan(tmp_path / name)
        assert name in str(err.value) and says in str(err.value)
