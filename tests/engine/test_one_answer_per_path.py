"""One preset, one question, one answer on every public path (review finding: enterprise printed $13.64/h by a
script and $6.55/h by ``planning solve --preset enterprise``).

Both figures were ``cost_per_hour`` (the design hour's marginal cost, reserved nodes at $0, plus the start-up
allowance K) of the same scenario; they differ because the commitment sizing is anytime under a wall-clock share
of ``options.time_limit_s``: on a loaded machine it stopped before any reservation beat "all on-demand" (no
commitment: $13.64/h marginal, bill $31.16/h), on a quiet one it signed 1-year reservations ($6.55/h marginal,
bill $29.71/h). The paths do not differ: the CLI's ``--preset`` and FILE, ``api.load_preset_scenario``, the app's
solve job and a saved scenario all ask the same question (the result cache's key, which holds everything a plan
depends on but the clock), and a scenario whose sizing finishes gets the same answer through each."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from planning import api
from planning.checks import stable_dict
from planning.cli.commands import scenario_from_args
from planning.jobs import JobToken
from planning.resultcache import cache_key
from planning.scenario import Scenario, load_scenario, save_scenario
from tests.finance.conftest import SMALL
from ui.jobs import solve_job, solve_request

PRESETS_DIR = Path(__file__).resolve().parents[2] / "data" / "presets"


def _cli(preset: str | None = None, path: Path | None = None) -> Scenario:
    return scenario_from_args(argparse.Namespace(preset=preset, scenario=path, variant=[], backend=None))


def _key(scenario: Scenario) -> str:
    return cache_key(scenario, api.engine_context(), with_baselines=True, finance=True)


@pytest.mark.parametrize("preset", [r["name"] for r in api.preset_summaries()])
def test_every_public_path_asks_the_same_question(preset: str, tmp_path: Path) -> None:
    """The CLI (``--preset`` and the preset's file), the API, the app's solve job and a saved-then-opened copy
    build one scenario; its result-cache key (scenario, perf model, catalog, code) is the same on each."""
    shipped = api.load_preset_scenario(preset)
    saved = tmp_path / f"{preset}.yaml"
    save_scenario(shipped, saved)
    paths = {"cli --preset": _cli(preset=preset), "cli FILE": _cli(path=PRESETS_DIR / f"{preset}.yaml"),
             "app job": Scenario.from_dict(json.loads(json.dumps(solve_request(shipped)))["scenario"]),
             "saved": load_scenario(saved)}
    for name, scenario in paths.items():
        assert scenario == shipped, name
        assert _key(scenario) == _key(shipped), name


@pytest.mark.slow
def test_a_finance_scenario_gets_one_answer_on_every_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario with a horizon and reservations to size (its sizing finishes: status optimal), solved through
    ``planning solve FILE --json``, ``api.solve`` and the app's solve job: the same plan and commitments."""
    from planning.cli import main

    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL), encoding="utf-8")
    out = tmp_path / "plan.json"
    assert main(["solve", str(path), "--json", "--out", str(out)]) == 0
    capsys.readouterr()
    cli = json.loads(out.read_text(encoding="utf-8"))
    scenario = Scenario.from_dict(SMALL)
    direct = api.solve(scenario, cache=False).to_dict()
    job = solve_job(solve_request(scenario), lambda _f, _m: None, JobToken())  # a local token nobody cancels
    assert cli["finance"]["sizing"]["status"] == "optimal"  # finished: its answer is not the clock's
    answers = [json.loads(json.dumps(stable_dict(d), sort_keys=True, default=float)) for d in (cli, direct, job)]
    assert answers[0] == answers[1] == answers[2]
    assert cli["cost_per_hour"] == direct["cost_per_hour"] == job["cost_per_hour"]

