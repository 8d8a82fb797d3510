"""An impossible SLO answered at once by the CLI (issue 37 §4): ``planning solve`` imports only the module of the
command asked, and answers a scenario the precheck refuses before importing ``planning.api`` — no pandas, polars,
solver or template machinery is loaded, so the answer's start-up is Python, numpy and the catalog (the seconds are
measured by ``benchmarks/bench_precheck.py``, not here). The answer is the one ``api.solve`` gives, and every
command is still registered and listed by ``planning --help``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planning import api
from planning.cli import _COMMAND_MODULES, COMMANDS, build_parser, main
from planning.cli.commands import refused_at_once
from planning.scenario import Scenario
from tests.engine.test_precheck import IMPOSSIBLE

HEAVY = ("pandas", "polars", "pulp", "highspy", "scipy", "pyarrow", "plotly", "planning.api", "planning.templates",
         "planning.allocate", "planning.pipeline")


def _registered(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(module).register(sub)
    return set(sub.choices)


@pytest.mark.parametrize("module", _COMMAND_MODULES)
def test_the_command_table_names_what_each_module_registers(module: str) -> None:
    """COMMANDS (what ``main`` imports for a command) is exactly each module's own commands."""
    assert _registered(module) == {c for c, m in COMMANDS.items() if m == module}


def test_help_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """``planning --help`` builds the whole parser: every command is listed, in :data:`COMMANDS`' order (the one
    table; the modules it imports are derived from it), exit 0."""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert re.findall(r"^ {4}(\S+)", out, re.M) == list(COMMANDS)  # each listed, in the table's order
    only = build_parser("solve")  # what main builds for `planning solve …`: the commands module's commands only
    assert only.parse_args(["solve", "x.yaml"]).func.__module__ == "planning.cli.commands"
    with pytest.raises(SystemExit):
        only.parse_args(["simulate"])


def test_a_refused_scenario_is_answered_without_the_solvers_imports(tmp_path: Path) -> None:
    """In a fresh process, ``planning solve FILE --json`` exits 1 with the infeasible answer, and none of the heavy
    modules was imported on the way."""
    path = tmp_path / "impossible.json"
    path.write_text(json.dumps(IMPOSSIBLE), encoding="utf-8")
    code = ("import sys, json\nfrom planning.cli import main\nrc = main(['solve', sys.argv[1], '--json', '--out', "
            "sys.argv[2]])\nprint(json.dumps({'rc': rc, 'heavy': sorted(m for m in sys.modules if m.startswith("
            f"{HEAVY!r}))}}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "out.json")], capture_output=True,
                         text=True, check=True, timeout=600)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"rc": 1, "heavy": []}
    answer = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    same = api.solve(Scenario.from_dict(IMPOSSIBLE), cache=False)
    assert answer["status"] == same.status == "infeasible"
    assert answer["message"] == same.message and answer["diagnostics"] == list(same.diagnostics)


LAZY = ("pandas", "pyarrow", "streamlit", "plotly", "altair", "planning.api")


def test_a_cli_solve_loads_no_frames_nor_interfaces(tmp_path: Path) -> None:
    """In a fresh process, ``planning solve FILE --json`` plans a scenario the precheck passes (exit 0, a plan)
    without importing pandas, pyarrow, streamlit, plotly, altair or ``planning.api``: the solve goes through
    ``api_measurements.solve_scenario``; its answer is the one ``api.solve`` gives."""
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(_meetable()), encoding="utf-8")
    code = ("import sys, json\nfrom planning.cli import main\nrc = main(['solve', sys.argv[1], '--json', '--out', "
            "sys.argv[2]])\nprint(json.dumps({'rc': rc, 'loaded': sorted(m for m in sys.modules if m in "
            f"{LAZY!r} or m.split('.')[0] in {LAZY!r})}}))\n")
    env = {**os.environ, "PLANNING_HOME": str(tmp_path / "home"), "PLANNING_RESULT_CACHE": "off"}
    out = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "out.json")], capture_output=True,
                         text=True, check=True, timeout=600, env=env)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"rc": 0, "loaded": []}
    answer = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    same = api.solve(Scenario.from_dict(_meetable()), cache=False)
    assert answer["status"] == same.status and same.has_plan
    assert answer["cost_per_hour"] == pytest.approx(same.cost_per_hour, abs=1e-9)


def test_a_scenario_the_precheck_passes_goes_to_the_solve() -> None:
    """A meetable SLO is not refused at once (the full solve answers it)."""
    ok = json.loads(json.dumps(IMPOSSIBLE))
    ok["models"][0]["slo"]["decode_ms"] = 200
    assert refused_at_once(Scenario.from_dict(ok)) is None


def test_measured_fits_leave_the_precheck_to_the_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the user's measurement fits correct the model's perf (``api.solve`` plans on them), the CLI does not
    precheck on the shipped model; with ``options.measurements: ignore`` it does."""
    import planning.measurements.apply as apply

    monkeypatch.setattr(apply, "load_settings", lambda home=None: [SimpleNamespace(model="llama-3-70b")])
    assert refused_at_once(Scenario.from_dict(IMPOSSIBLE)) is None
    ignore = json.loads(json.dumps(IMPOSSIBLE))
    ignore["options"]["measurements"] = "ignore"
    refused = refused_at_once(Scenario.from_dict(ignore))
    assert refused is not None and refused.status == "infeasible"


def _counted_refusals(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import planning.precheck as precheck_module

    calls: list[int] = []
    real = precheck_module.refusals

    def counted(ctx: Any, resolved: Any) -> Any:
        calls.append(1)
        return real(ctx, resolved)

    monkeypatch.setattr(precheck_module, "refusals", counted)
    return calls


def _meetable() -> dict[str, Any]:
    ok = json.loads(json.dumps(IMPOSSIBLE))
    ok["models"][0]["slo"]["decode_ms"] = 200
    return ok


def test_the_precheck_keeps_no_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same scenario checked twice is computed twice: the precheck holds no process-wide cache (a caller that
    checked says so to the solve instead)."""
    import planning.precheck as precheck_module

    calls = _counted_refusals(monkeypatch)
    scenario = Scenario.from_dict(_meetable())
    for _ in range(2):
        assert precheck_module.precheck(scenario, api.engine_context()) is None
    assert len(calls) == 2
    assert not [name for name, value in vars(precheck_module).items() if isinstance(value, dict)
                and not name.startswith("__") and name != "SLO_NAME"]  # no module-level table but the names


def test_a_prechecked_solve_does_not_check_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """``api.solve(prechecked=True)`` goes straight to the plan (here a stand-in): even a scenario the precheck
    would refuse is not checked; without the flag the precheck answers it."""
    import planning.pipeline as pipeline

    planned: Any = object()  # what _plan returned, passed through untouched
    monkeypatch.setattr(pipeline, "_plan", lambda scenario, ctx, run: planned)
    calls = _counted_refusals(monkeypatch)
    scenario = Scenario.from_dict(IMPOSSIBLE)
    assert api.solve(scenario, cache=False, prechecked=True) is planned
    assert calls == []
    assert api.solve(scenario, cache=False).status == "infeasible"
    assert len(calls) == 1


def test_the_cli_checks_once_and_tells_the_solve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``planning solve`` prechecks a scenario that passes once, and passes ``prechecked=True`` to the solve
    (``api_measurements.solve_scenario``, what ``api.solve`` delegates to); with a kept fit of its model (the solve
    plans on the corrected model) it checks nothing and says so."""
    import planning.api_measurements as face
    import planning.measurements.apply as apply

    calls = _counted_refusals(monkeypatch)
    asked: list[bool] = []
    canned = refused_at_once(Scenario.from_dict(IMPOSSIBLE))
    assert canned is not None and len(calls) == 1

    def solve(scenario: Scenario, **kwargs: Any) -> Any:
        asked.append(kwargs["prechecked"])
        return canned

    monkeypatch.setattr(face, "solve_scenario", solve)
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(_meetable()), encoding="utf-8")
    assert main(["solve", str(path), "--json"]) == 1  # the canned infeasible answer
    assert asked == [True] and len(calls) == 2
    monkeypatch.setattr(apply, "load_settings", lambda home=None: [SimpleNamespace(model="llama-3-70b")])
    assert main(["solve", str(path), "--json"]) == 1
    assert asked == [True, False] and len(calls) == 2
    capsys.readouterr()


def test_one_rule_picks_the_perf_model_for_the_cli_and_the_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    """``api_measurements.plan_context`` (what ``api.solve`` plans on) and the CLI's precheck ask the same
    function (``measurements.apply.planned_settings``) whether kept fits correct the scenario's models."""
    import planning.measurements.apply as apply
    from planning.api_measurements import plan_context

    asked: list[str] = []

    def planned(scenario: Scenario, home: Any = None) -> list[Any]:
        asked.append(scenario.name)
        return []

    monkeypatch.setattr(apply, "planned_settings", planned)
    scenario = Scenario.from_dict(IMPOSSIBLE)
    base = api.engine_context()
    assert plan_context(scenario, base) == (base, "")
    assert refused_at_once(scenario) is not None
    assert asked == [scenario.name, scenario.name]


@pytest.mark.parametrize("target", ["install", "install-dev"])
def test_the_installs_leave_bytecode_for_a_fresh_process(target: str) -> None:
    """``make install`` and ``make install-dev`` (dry run) compile every installed module (uv's
    ``--compile-bytecode``) and the package's own sources (``compileall`` of planning, ui, views, app.py): where
    PYTHONDONTWRITEBYTECODE is set, a fresh ``planning solve`` and each pool worker otherwise compile their ~800
    modules anew, 2.0-2.5 CPU-s each."""
    root = Path(__file__).resolve().parents[2]
    plan = subprocess.run(["make", "-n", "-B", target], cwd=root, capture_output=True, text=True, check=True,
                          timeout=60).stdout.splitlines()
    sync = [line for line in plan if " sync --locked" in line]
    assert sync and all("--compile-bytecode" in line for line in sync)
    own = [line.split() for line in plan if "-m compileall" in line]
    assert own and {"planning", "ui", "views", "app.py"} <= set(own[-1])
