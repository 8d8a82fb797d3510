"""Suite-wide fixtures: every preset's plan, solved once per test session and shared by the tests that walk the
presets (``tests/app/test_one_bill.py``, ``tests/export/test_recipes.py``, ``tests/simulate/test_headroom.py``)
and by the CLI tests that read a preset's JSON (``tests/finance/test_enterprise_cli.py``,
``tests/baselines/test_preset_baselines.py``) instead of each solving them anew."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# a solve's baselines run in this process, one after another: tests wrap engine functions and move clocks here
# (the fan-out on the process pool is tested in tests/baselines/test_baselines_beside.py and the recorded presets)
os.environ.setdefault("PLANNING_BASELINE_WORKERS", "1")


@dataclass(frozen=True)
class CliPlan:
    """What ``planning solve --preset NAME --json --out PLAN`` gave: its exit code and the JSON it wrote."""

    code: int
    text: str


class PresetPlans:
    """Each preset's plan, solved the first time a test asks for it and kept for the session: through the CLI
    (``planning solve --preset NAME --json --out PLAN``, in-process, at the preset's own ``options``), which is
    ``planning.api.solve`` with baselines and the plan's ``to_json``. :meth:`cli` is that run (what a CLI test
    reads: ``tests/finance/test_enterprise_cli.py``, ``tests/baselines/test_preset_baselines.py``); calling the
    fixture gives ``PlanResult.from_json`` of its text (what the walks read; the round trip is exact,
    ``tests/engine/test_solve.py``). Solving is lazy, so it runs inside the asking test, under that test's
    private ``PLANNING_HOME``; a test that runs alone solves only the presets it asks for. Plans are frozen
    (``PlanResult``) and texts immutable, so no test can change what another one reads."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._runs: dict[str, CliPlan] = {}
        self._plans: dict[str, Any] = {}

    def cli(self, name: str) -> CliPlan:
        """The CLI's run on preset ``name``: its exit code and the JSON it wrote (``--out``)."""
        if name not in self._runs:
            from planning.cli import main

            out = self._folder / f"{name}-plan.json"
            code = main(["solve", "--preset", name, "--json", "--out", str(out)])
            self._runs[name] = CliPlan(code, out.read_text())
        return self._runs[name]

    def __call__(self, name: str) -> Any:
        if name not in self._plans:
            from planning.result import PlanResult

            self._plans[name] = PlanResult.from_json(self.cli(name).text)
        return self._plans[name]


@pytest.fixture(scope="session")
def preset_plans(tmp_path_factory: pytest.TempPathFactory) -> PresetPlans:
    return PresetPlans(tmp_path_factory.mktemp("preset-plans"))
