"""A plain script without a ``__main__`` guard can use the engine's process pool (planning.spawning)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import multiprocessing
    import sys

    from planning import api

    sys.stderr.write(f"ran {multiprocessing.current_process().name}\\n")  # a worker re-running this would say so
    scenario = api.load_preset_scenario("melange-arena")
    frame = api.sweep(scenario, "demand", [0.5, 1.0], workers=2)
    print("rows", len(frame), "points", sorted(set(frame.x)))
""")


def test_an_unguarded_script_runs_a_pooled_sweep(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PLANNING_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "points [0.5, 1.0]" in done.stdout
    assert "bootstrapping" not in done.stderr and "BrokenProcessPool" not in done.stderr
    assert done.stderr.count("ran ") == 1, done.stderr[-3000:]  # only the parent ran the script


def test_other_spawned_processes_keep_the_standard_preparation() -> None:
    """Only the engine's own children skip the main module; other code's spawns get the standard data."""
    from planning.spawning import _LOCAL, _ORIGINAL, _preparation_data

    standard = _ORIGINAL("x")
    assert "init_main_from_path" in standard or "init_main_from_name" in standard  # pytest's own main module
    _LOCAL.starting = False
    assert _preparation_data("x") == standard
    _LOCAL.starting = True
    try:
        data = _preparation_data("x")
    finally:
        _LOCAL.starting = False
    assert "init_main_from_path" not in data and "init_main_from_name" not in data
    assert {k: v for k, v in standard.items() if k not in ("init_main_from_path", "init_main_from_name")} == data
