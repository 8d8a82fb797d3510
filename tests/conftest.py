"""Suite-wide fixtures: every preset's plan, solved once per test session and shared by the tests that walk the
presets (``tests/app/test_one_bill.py``, ``tests/export/test_recipes.py``) instead of each solving them anew."""

from __future__ import annotations

import os
from typing import Any

import pytest

# a solve's baselines run in this process, one after another: tests wrap engine functions and move clocks here
# (the fan-out on the process pool is tested in tests/baselines/test_baselines_beside.py and the recorded presets)
os.environ.setdefault("PLANNING_BASELINE_WORKERS", "1")


class PresetPlans:
    """Each preset's plan (``planning.api.solve`` at the preset's own ``options``, baselines included), solved the
    first time a test asks for it and kept for the session. Solving is lazy, so it runs inside the asking test,
    under that test's private ``PLANNING_HOME``; a test that runs alone solves only the presets it asks for.
    Plans are frozen (``PlanResult``), so no test can change what another one reads."""

    def __init__(self) -> None:
        self._plans: dict[str, Any] = {}

    def __call__(self, name: str) -> Any:
        if name not in self._plans:
            from planning import api

            self._plans[name] = api.solve(api.load_preset_scenario(name))
        return self._plans[name]


@pytest.fixture(scope="session")
def preset_plans() -> PresetPlans:
    return PresetPlans()
