"""Issue 37 §6: the same input gives the same plan, bit for bit (its JSON without wall-clock figures), across
repeated solves, fresh processes with other hash seeds, and 1 or 2 workers on the process pool.
``benchmarks/check_plans.py`` runs the same comparison on every preset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from planning import api
from planning.checks import stable_dict
from planning.scenario import Scenario

CHILD = r"""
import json, sys
from planning import api
from planning.checks import stable_dict
from planning.scenario import Scenario

scenario = Scenario.from_dict(json.loads(sys.argv[1]))
print(json.dumps(stable_dict(api.solve(scenario).to_dict()), sort_keys=True, default=float))
"""


def _stable(data: dict[str, Any]) -> str:
    return json.dumps(stable_dict(data), sort_keys=True, default=float)


def _in_child(scenario: Scenario, seed: int, home: Path) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PLANNING_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(scenario.to_dict())], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return out.stdout.strip().splitlines()[-1]


def test_stable_dict_drops_only_wall_clock_figures() -> None:
    data = {"timings": {"total_seconds": 1.0}, "stats": {"anytime_plan_seconds": 0.2, "lp_bound": 3.0},
            "sharing": {"timings": {}, "notes": ["x"]}, "cost_per_hour": 1.5}
    assert stable_dict(data) == {"stats": {"lp_bound": 3.0}, "sharing": {"notes": ["x"]}, "cost_per_hour": 1.5}


def test_three_solves_of_one_input_are_the_same_plan(tiny: dict[str, Any]) -> None:
    scenario = Scenario.from_dict(tiny)
    runs = {_stable(api.solve(scenario).to_dict()) for _ in range(3)}
    assert len(runs) == 1


def test_fresh_processes_and_one_or_two_pool_workers_give_the_same_plan(tiny: dict[str, Any], tmp_path: Path) -> None:
    base = Scenario.from_dict(tiny)
    library = replace(base, options=replace(base.options, templates="library", workers=1))
    pooled = replace(library, options=replace(library.options, workers=2))
    here = _stable(api.solve(library).to_dict())
    assert _in_child(library, 1, tmp_path / "a") == here  # its own cache, another hash seed
    assert _in_child(pooled, 2, tmp_path / "b") == _stable(api.solve(pooled).to_dict())
    # the two worker counts differ only in the option itself
    assert _in_child(pooled, 3, tmp_path / "c").replace('"workers": 2', '"workers": 1') == here


def _run(digest: str, plan: str, status: str = "optimal", limited: bool = False,
         comparisons_limited: bool = False) -> dict[str, Any]:
    return {"digest": digest, "plan_digest": plan, "status": status, "limited": limited, "seconds": 12.0,
            "comparisons_limited": comparisons_limited}


def test_check_plans_says_time_limited_runs_are_not_comparable() -> None:
    """``benchmarks/check_plans``: runs that differ after a time limit stopped one are neither a pass nor a
    failure but "time-limited, not comparable", with the fix; differing finished runs fail, and so do runs whose
    plan is the same but a comparison differs with no clock to blame (the baselines stop on work); exit codes
    0/1/2."""
    from benchmarks.check_plans import FAIL, NOT_COMPARABLE, PASS, exit_code, sameness, verdict_line

    assert sameness([_run("a", "p"), _run("a", "p")]) == ("yes", PASS)
    # the plan is the same and a baseline differs: a pass only when a clock stopped a comparison in some run
    assert sameness([_run("a", "p"), _run("b", "p", comparisons_limited=True)]) == ("plan", PASS)
    assert sameness([_run("a", "p"), _run("b", "p")]) == ("NO", FAIL)
    assert sameness([_run("a", "p"), _run("b", "q")]) == ("NO", FAIL)
    limited = [_run("a", "p", "feasible"), _run("b", "q", "feasible"), _run("c", "r", "optimal", limited=True)]
    assert sameness(limited) == ("limit", NOT_COMPARABLE)
    limited[0]["stopped_at"] = "pricing: column generation round 1"  # the plan's own words for where it stopped
    line = verdict_line("platform-100", NOT_COMPARABLE, limited)
    assert line.startswith("platform-100: time-limited, not comparable (3 plans in 3 runs")
    assert "a time limit stopped a run, at: pricing: column generation round 1)" in line
    assert "Fix: rerun with --time-limit" in line and "pass" not in line
    assert exit_code([PASS, PASS]) == 0 and exit_code([PASS, NOT_COMPARABLE]) == 2
    assert exit_code([NOT_COMPARABLE, FAIL, PASS]) == 1
