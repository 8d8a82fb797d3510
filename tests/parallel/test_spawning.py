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


ORPHAN = textwrap.dedent("""
    import threading, time

    from planning.templates.pool import shared_pool

    def start() -> None:  # from a short-lived thread, as a Streamlit script run would
        pool = shared_pool(1)
        pool.submit(time.sleep, 120)
        time.sleep(0.5)
        print("worker", *pool._processes, flush=True)

    t = threading.Thread(target=start)
    t.start()
    t.join()
    time.sleep(120)
""")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] == "Z"  # exited, not reaped
    except (FileNotFoundError, IndexError):
        return True


def test_a_pool_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A driver killed by a signal left its pool's workers computing the tasks queued to them; now they exit
    within about a second. The pool is started from a thread that ends first: the workers stay alive while the
    parent does (unlike the kernel's parent-death signal, which follows the starting thread). Asserted: the worker
    lives while its parent does and is gone after the parent's kill, before its 120 s task could end it (the
    60 s wait bounds a hang; "about a second" is what a quiet machine shows, not what is asserted)."""
    import signal
    import time

    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PLANNING_HOME": str(tmp_path / "home")})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("worker "), line
        worker = int(line.split()[1])
        time.sleep(2.0)
        assert not _gone(worker)  # the starting thread has ended, the parent lives: the worker stays
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 60  # a bound on a hang (its task sleeps 120 s), not on speed
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(worker), f"worker {worker} outlived its killed parent"
    finally:
        proc.kill()
