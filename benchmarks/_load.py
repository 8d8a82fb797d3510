"""A machine busy with exactly N processes, for the under-load benchmarks (issue 23).

`Busy(n)` starts n CPU-burning processes and stops them on exit. `isolate()` moves this process (and so every
process it starts afterwards) into a CPU cgroup with a very large weight, so that the benchmark, its solves and its
burners share the cores as if nothing else ran: on a shared machine other users' work otherwise takes an unknown
part of the cores and the figures mean nothing (with the kernel's autogroup scheduling, a session with nine busy
processes gets the same share as another session with one). It needs root and a cgroup v1 ``cpu`` or cgroup v2
hierarchy; without them it says so and the run goes on unisolated. `cpu_share()` measures the part of one core a
busy Python loop gets right now: the figure to read every timing against (2 / (N + 1) on a 2-core machine with N
burners and nothing else).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

CGROUP_NAME = "planning-bench"


def _burn() -> None:  # pragma: no cover - a busy process
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


class Busy:
    """``with Busy(n):`` n burning processes for the block's duration."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._procs: list[mp.Process] = []

    def __enter__(self) -> Busy:
        self._procs = [mp.Process(target=_burn, daemon=True) for _ in range(self.n)]
        for p in self._procs:
            p.start()
        if self.n:
            time.sleep(1.0)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for p in self._procs:
            p.terminate()
        for p in self._procs:
            p.join()


def isolate() -> str:
    """Move this process into a heavily weighted CPU cgroup; returns a line saying what was done."""
    v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
    # (hierarchy, the file that says it is there, the weight file, a weight far above the default, the default)
    kinds = [(v1, "cpu.shares", "cpu.shares", 262144, 1024, "v1"), (v2, "cgroup.controllers", "cpu.weight", 10000, 100, "v2")]
    try:
        for root, probe, weight_file, weight, default, version in kinds:
            if (root / probe).exists():
                group = root / CGROUP_NAME
                group.mkdir(exist_ok=True)
                (group / weight_file).write_text(str(weight))
                (group / "cgroup.procs").write_text(str(os.getpid()))
                return f"isolated: cgroup {version} {group} with {weight_file} {weight} (default {default})"
    except OSError as exc:
        return f"not isolated ({exc.strerror or exc}): other work on this machine shares the cores"
    return "not isolated (no cpu cgroup hierarchy): other work on this machine shares the cores"


def cpu_share(seconds: float = 2.0) -> float:
    """The part of one core a busy Python loop gets over `seconds` of wall time."""
    c0, w0 = time.process_time(), time.perf_counter()
    x = 0
    while time.perf_counter() - w0 < seconds:
        x += 1
    return (time.process_time() - c0) / (time.perf_counter() - w0)


def load_line(busy: int) -> str:
    """One line: the busy processes, the measured CPU share, the ideal share and the load average."""
    cores = os.cpu_count() or 1
    ideal = min(1.0, cores / (busy + 1))
    return (f"load: {busy} busy processes on {cores} cores; a busy loop gets {cpu_share():.2f} of a core "
            f"(ideal alone {ideal:.2f}); load average {os.getloadavg()[0]:.1f}")


def parse_with_isolate(parser: argparse.ArgumentParser, runs: int | None = None) -> argparse.Namespace:
    """``parser`` with ``--isolate`` added, parsed; isolates when asked and prints the machine line (each solve
    in a fresh process, medians of ``args.runs`` or ``runs``)."""
    parser.add_argument("--isolate", action="store_true",
                        help="run in a heavily weighted CPU cgroup (root): the cores as if nothing else ran")
    args = parser.parse_args()
    if args.isolate:
        print(isolate())
    n = runs if runs is not None else getattr(args, "runs", 1)
    print(f"machine: {os.cpu_count()} cores; each solve in a fresh process; medians of {n} run(s)")
    return args


def run_child(module: str, func: str, args: tuple[Any, ...], label: str, home: str | None = None) -> dict[str, Any]:
    """``module.func(*args)`` in a fresh Python process (PLANNING_JOB_PROCESSES=0, ``PLANNING_HOME`` = ``home``
    or a new empty folder); the dict it returns (JSON), or RuntimeError naming ``label`` with the child's output."""
    code = f"import json; from {module} import {func}; print('RESULT', json.dumps({func}(*{args!r})))"
    with tempfile.TemporaryDirectory(prefix="planning-home-") as fresh:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                             env={**os.environ, "PLANNING_JOB_PROCESSES": "0", "PLANNING_HOME": home or fresh})
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            figures: dict[str, Any] = json.loads(line[len("RESULT "):])
            return figures
    raise RuntimeError(f"{label}: no result\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
