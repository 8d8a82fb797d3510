"""An impossible SLO answered at once by the CLI (issue 37 §4): ``planning solve`` imports only the module of the
command asked, and answers a scenario the precheck refuses before importing ``planning.api`` — no pandas, polars,
solver or template machinery is loaded, so the answer's start-up is Python, numpy and the catalog (the seconds are
measured by ``benchmarks/bench_precheck.py``, not here). The answer is the one ``api.solve`` gives, and every
command is still registered and listed by ``planning --help``."""

from __future__ import annotations

import argparse
import importlib
import json
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
    """``planning --help`` builds the whole parser: every command is listed, exit 0."""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
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


def test_a_scenario_that_passed_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's check and the pipeline's (``api.solve``) compute the bound once for a scenario that passes; a
    refused one is computed each time (its answer is the result itself)."""
    import planning.precheck as precheck_module

    calls: list[int] = []
    real = precheck_module.refusals

    def counted(ctx: Any, resolved: Any) -> Any:
        calls.append(1)
        return real(ctx, resolved)

    monkeypatch.setattr(precheck_module, "refusals", counted)
    ok = json.loads(json.dumps(IMPOSSIBLE))
    ok["models"][0]["slo"]["decode_ms"] = 200
    ok["models"][0]["demand"]["rate_rps"] = 2.125  # a scenario no other test checked in this process
    scenario = Scenario.from_dict(ok)
    assert refused_at_once(scenario) is None
    assert precheck_module.precheck(scenario, api.engine_context()) is None
    assert len(calls) == 1
    for _ in range(2):
        assert refused_at_once(Scenario.from_dict(IMPOSSIBLE)) is not None
    assert len(calls) == 3
