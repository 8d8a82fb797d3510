"""A warmed job worker has imported what a solve needs: after ``planning.api.SOLVE_MODULES`` a solve of each path
(on demand, library, baselines, diagnostics) imports no further planning module nor HiGHS/SciPy, so the first
click's time goes to solving (a fresh interpreter, as a spawned worker is)."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import importlib, json, sys
import planning.api as api
for name in ("ui.jobs", *api.SOLVE_MODULES):
    importlib.import_module(name)
api.engine_context()
before = set(sys.modules)
from dataclasses import replace
for preset in ("coral-core", "melange-arena"):
    sc = api.load_preset_scenario(preset)
    api.solve(replace(sc, options=replace(sc.options, time_limit_s=60)))
new = sorted(m for m in set(sys.modules) - before
             if m.startswith(("planning", "highspy", "scipy", "pulp")))
print("NEW", json.dumps(new))
"""


def test_a_warmed_worker_imports_nothing_more_to_solve() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True, timeout=600)
    line = next(x for x in out.stdout.splitlines() if x.startswith("NEW "))
    new = json.loads(line[4:])
    assert new == [], f"imported on first solve, add to planning.api.SOLVE_MODULES: {new}"
