"""Property-based hostile input (hypothesis): mutated presets and import files give a result or a clean
PlanningError naming a field, nothing else; plus ~60 hostile CLI invocations with exit codes 0/1/2 only.

Bounded for the default suite (about 30 s on one core); `make fuzz` runs the same mutators on >= 10,000 cases.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.catalog.models import model_from_hf_config
from planning.perf import load_profiles
from planning.scenario import Scenario, load_scenario, parse_scenario_text
from tests.fuzz.mutators import (
    HOSTILE_SCALARS,
    cli_cases,
    corpus,
    delete_at,
    dump_json,
    dump_yaml,
    get_at,
    judge,
    mutate_bytes,
    mutate_text,
    nested,
    run_cli,
    set_at,
    tree_paths,
)

PRESETS, PRESET_TEXTS, HF_CONFIGS, PROFILE_CSVS = corpus()
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

hostile_values = st.one_of(
    st.sampled_from(HOSTILE_SCALARS),
    st.integers(min_value=-(10**450), max_value=10**450),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.none(),
    st.booleans(),
    st.lists(st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers(), st.none()), st.integers(), max_size=3),
)


def _mutate(tree: Any, data: st.DataObject) -> Any:
    for _ in range(data.draw(st.integers(1, 3), label="n_ops")):
        path = data.draw(st.sampled_from(tree_paths(tree)), label="path")
        op = data.draw(st.sampled_from(["value", "value", "delete", "extra_key", "deep", "wrap"]), label="op")
        if op == "value":
            tree = set_at(tree, path, data.draw(hostile_values, label="value"))
        elif op == "delete" and path:
            tree = delete_at(tree, path)
        elif op == "extra_key" and isinstance(get_at(tree, path), dict):
            key = data.draw(st.one_of(st.text(max_size=8), st.integers(), st.none()), label="key")
            tree = set_at(tree, path, {**get_at(tree, path), key: data.draw(hostile_values, label="v")})
        elif op == "deep":  # deeper nesting is fuzzed as text (the harness itself recurses on trees)
            tree = set_at(tree, path, nested(data.draw(st.sampled_from([33, 100, 300])), get_at(tree, path)))
            break
        elif op == "wrap":
            tree = set_at(tree, path, [get_at(tree, path)])
    return tree


def _assert_clean(target: str, description: str, fn: Any) -> None:
    outcome = judge(target, description, fn)
    assert outcome.kind != "crash", f"{description}\n{outcome.detail}"


@SETTINGS
@given(name=st.sampled_from(sorted(PRESETS)), via=st.sampled_from(["dict", "yaml", "json"]), data=st.data())
def test_mutated_presets_give_a_scenario_or_a_clean_error(name: str, via: str, data: st.DataObject) -> None:
    tree = _mutate(copy.deepcopy(PRESETS[name]), data)
    if via == "dict":
        _assert_clean("scenario", name, lambda: Scenario.from_dict(tree))
        return
    text = dump_yaml(tree) if via == "yaml" else dump_json(tree)
    if text is not None:
        _assert_clean("scenario", name, lambda: parse_scenario_text(text, origin=f"{name}.{via}"))


@SETTINGS
@given(name=st.sampled_from(sorted(PRESET_TEXTS)), seed=st.integers(0, 2**32 - 1),
       insert=st.text(max_size=30), pos=st.floats(0, 1))
def test_mutated_preset_text_gives_a_scenario_or_a_clean_error(name: str, seed: int, insert: str,
                                                                pos: float) -> None:
    text, note = mutate_text(PRESET_TEXTS[name], random.Random(seed))
    at = int(pos * len(text))
    text = text[:at] + insert + text[at:]
    _assert_clean("scenario-text", f"{name}: {note} + {insert!r}@{at}", lambda: parse_scenario_text(text))


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PRESET_TEXTS)), seed=st.integers(0, 2**32 - 1))
def test_mutated_preset_bytes_give_a_scenario_or_a_clean_error(tmp_path_factory: pytest.TempPathFactory,
                                                               name: str, seed: int) -> None:
    raw, note = mutate_bytes(PRESET_TEXTS[name].encode("utf-8"), random.Random(seed))
    path = tmp_path_factory.mktemp("bytes") / f"{name}.yaml"
    path.write_bytes(raw)
    _assert_clean("scenario-file", f"{name}: {note}", lambda: load_scenario(path))


@SETTINGS
@given(name=st.sampled_from(sorted(HF_CONFIGS)), data=st.data())
def test_mutated_hf_configs_give_a_model_or_a_clean_error(name: str, data: st.DataObject) -> None:
    tree = _mutate(copy.deepcopy(HF_CONFIGS[name]), data)
    _assert_clean("hf-config", name, lambda: model_from_hf_config(tree, "fuzz-model"))


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(PROFILE_CSVS)), row=st.integers(0, 50), col=st.integers(0, 20),
       value=st.one_of(st.text(max_size=20), st.sampled_from([str(v) for v in HOSTILE_SCALARS[:40]])),
       ragged=st.booleans())
def test_mutated_profile_csvs_give_profiles_or_a_clean_error(tmp_path_factory: pytest.TempPathFactory, name: str,
                                                             row: int, col: int, value: str, ragged: bool) -> None:
    lines = PROFILE_CSVS[name].splitlines()
    i = row % len(lines)
    cells = lines[i].split(",")
    cells[col % len(cells)] = value
    if ragged:
        cells = cells[:-1]
    lines[i] = ",".join(cells)
    path = tmp_path_factory.mktemp("csv") / "profile.csv"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    _assert_clean("profile-csv", f"{name}: row {i} col {col} = {value!r}", lambda: load_profiles(path))


def test_hostile_cli_invocations_exit_0_1_or_2_without_tracebacks(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    cases = cli_cases(tmp_path / "files", random.Random(8))
    assert len(cases) >= 50
    codes = []
    for argv in cases:
        code, out, err, _ = run_cli(argv)
        codes.append(code)
        assert code in (0, 1, 2), (argv, code, err[-2000:])
        assert "Traceback" not in out + err, (argv, err[-2000:])
        if code == 2 and argv[0] != "catalog":
            assert err.startswith("error:") and "Fix:" in err, (argv, err)
    assert codes.count(2) >= 30 and 1 in codes  # hostile inputs are refused; an impossible SLO has no plan


def test_internal_error_exits_3_with_one_line_and_a_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import planning.api

    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(planning.api, "validate", boom)
    code, out, err, _ = run_cli(["validate", "--preset", "melange-arena"])
    assert out == ""
    assert code == 3
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError: simulated bug" in err
    logs = list((tmp_path / "logs").glob("planning-crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in err
    assert "Traceback" in logs[0].read_text(encoding="utf-8") and "Traceback" not in err


def test_corpus_is_the_shipped_files() -> None:
    assert {"coral-core", "melange-arena"} <= set(PRESETS) and HF_CONFIGS and PROFILE_CSVS
    assert all(isinstance(yaml.safe_load(t), dict) for t in PRESET_TEXTS.values())
    assert json.dumps(PRESETS["coral-core"])
