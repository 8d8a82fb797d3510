"""JSON round trip of allocation problems and the `planning allocate` command (CLI ≡ API)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from planning.allocate import solve_allocation
from planning.allocate.io import problem_from_dict, problem_to_dict, result_to_dict
from planning.allocate.synthetic import Synthetic, random_problem
from planning.cli.allocate import register


def test_problem_round_trip() -> None:
    p = random_problem(4, Synthetic(groups=2, classes_per_group=2), K=0.1, objective="served",
                       budget_per_hour=12.0)
    again = problem_from_dict(json.loads(json.dumps(problem_to_dict(p))))
    assert again == p


def test_cli_matches_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = random_problem(2, Synthetic(groups=2, max_available=6))
    f = tmp_path / "p.json"
    f.write_text(json.dumps(problem_to_dict(p)))
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["allocate", str(f), "--json", "--baselines"])
    code = args.func(args)
    out = json.loads(capsys.readouterr().out)
    api = result_to_dict(solve_allocation(p))
    assert code == (0 if api["cost_per_hour"] is not None else 1)
    assert out["status"] == api["status"]
    assert out["counts"] == api["counts"]
    assert [b["name"] for b in out["baselines"]][:2] == ["homo", "homo-ilp"]
