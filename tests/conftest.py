"""Suite-wide fixtures: every preset's plan, solved once per test session and shared by the tests that walk the
presets (``tests/app/test_one_bill.py``, ``tests/export/test_recipes.py``, ``tests/simulate/test_headroom.py``)
and by the CLI tests that read a preset's JSON (``tests/finance/test_enterprise_cli.py``,
``tests/baselines/test_preset_baselines.py``) instead of each solving them anew. Under pytest-xdist the
processes of one session share them through a folder of the session's base temp, one file lock per preset."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# a solve's baselines run in this process, one after another: tests wrap engine functions and move clocks here
# (the fan-out on the process pool is tested in tests/baselines/test_baselines_beside.py and the recorded presets)
os.environ.setdefault("PLANNING_BASELINE_WORKERS", "1")


# The suite's longest files, longest first (docs/benchmarks.md, "Fourth: ..."). `make test` hands whole files to
# its processes in collection order (`--no-loadscope-reorder`); xdist's default hands out the files with the most
# tests first, which put the one-test browser flows (their own server and Chromium, minutes each under load) last
# of 225 files, ending alone while the other process had nothing left. Started first, they run beside the many
# quick files instead. A file missing from this list only runs later; one listed must exist (tests/test_suite_order.py).
SLOW_FILES = (
    "tests/app/test_one_bill.py",
    "tests/engine/test_on_demand.py",
    "tests/jobs/test_faults.py",
    "tests/export/test_recipes.py",
    "tests/e2e/test_workbench.py",
    "tests/e2e/test_browser.py",
    "tests/e2e/test_sliders.py",
    "tests/e2e/test_labels.py",
    "tests/timeline/test_horizon.py",
    "tests/e2e/test_measurements.py",
    "tests/e2e/test_learn_melange.py",
    "tests/jobs/test_process_jobs.py",
    "tests/e2e/test_team.py",
    "tests/simulate/test_headroom.py",
    "tests/engine/test_anytime.py",
)


def slow_files_first(nodeids: list[str], slow: tuple[str, ...] = SLOW_FILES) -> list[int]:
    """The order to run ``nodeids`` in, as indices: the tests of ``slow``'s files first, in its order, then every
    other file's; within a file, and among the other files, the collection's order (the sort is stable)."""
    rank = {path: i for i, path in enumerate(slow)}
    return sorted(range(len(nodeids)), key=lambda i: rank.get(nodeids[i].split("::", 1)[0], len(rank)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run :data:`SLOW_FILES` first (every process collects, so every process orders them alike)."""
    order = slow_files_first([item.nodeid for item in items])
    items[:] = [items[i] for i in order]


@dataclass(frozen=True)
class CliPlan:
    """What ``planning solve --preset NAME --json --out PLAN`` gave: its exit code and the JSON it wrote."""

    code: int
    text: str


def cli_solve(name: str, out: Path) -> int:
    """``planning solve --preset NAME --json --out OUT`` in this process; its exit code."""
    from planning.cli import main

    return main(["solve", "--preset", name, "--json", "--out", str(out)])


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing): one process of the session at a time. The
    kernel drops the lock if its holder dies, so a crashed process cannot leave the others waiting."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class PresetPlans:
    """Each preset's plan, solved the first time a test of the session asks for it and kept for the session:
    through the CLI (``planning solve --preset NAME --json --out PLAN``, in-process, at the preset's own
    ``options``), which is ``planning.api.solve`` with baselines and the plan's ``to_json``. :meth:`cli` is that
    run (what a CLI test reads: ``tests/finance/test_enterprise_cli.py``, ``tests/baselines/test_preset_baselines.py``);
    calling the fixture gives ``PlanResult.from_json`` of its text (what the walks read; the round trip is exact,
    ``tests/engine/test_solve.py``). Solving is lazy, so it runs inside the asking test, under that test's
    private ``PLANNING_HOME``; a test that runs alone solves only the presets it asks for. Plans are frozen
    (``PlanResult``) and texts immutable, so no test can change what another one reads.

    ``folder`` is shared by the session's processes (pytest-xdist): the first to ask for a preset solves it
    holding ``NAME.lock`` and writes its exit code to ``NAME.code`` last; one that asks meanwhile waits on the
    lock and then reads the files (the enterprise plan is ~200 s, solved once instead of once per process). A
    solve that raises writes no code, so the next asker solves it again, as a process of its own would have."""

    def __init__(self, folder: Path, solve: Callable[[str, Path], int] = cli_solve) -> None:
        self._folder = folder
        self._solve = solve
        self._runs: dict[str, CliPlan] = {}
        self._plans: dict[str, Any] = {}

    def cli(self, name: str) -> CliPlan:
        """The CLI's run on preset ``name``: its exit code and the JSON it wrote (``--out``)."""
        if name not in self._runs:
            out = self._folder / f"{name}-plan.json"
            done = self._folder / f"{name}.code"
            with locked(self._folder / f"{name}.lock"):
                if not done.is_file():
                    code = self._solve(name, out)
                    part = done.with_suffix(".part")  # renamed whole: a reader never sees half a code
                    part.write_text(str(code))
                    part.replace(done)
                self._runs[name] = CliPlan(int(done.read_text()), out.read_text())
        return self._runs[name]

    def __call__(self, name: str) -> Any:
        if name not in self._plans:
            from planning.result import PlanResult

            self._plans[name] = PlanResult.from_json(self.cli(name).text)
        return self._plans[name]


def session_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every process of this test session sees: under pytest-xdist each worker's base temp is
    ``<session base>/popen-gwN``, so their parent is the session's own (new each session, so nothing stale);
    alone, the process's base temp."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def preset_plans(tmp_path_factory: pytest.TempPathFactory) -> PresetPlans:
    return PresetPlans(session_folder(tmp_path_factory, "preset-plans"))
