"""A sharing solve under a caller's own engine context uses that context for every part, the dedicated plan too.

The process-wide context (``$PLANNING_HOME/templates``) must stay untouched: a timeline epoch, a job or a notebook
that passes its own catalog, perf model and cache directory gets them in the popular models' solve as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planning.context as context
from planning.context import EngineContext, default_context
from planning.scenario import Scenario
from planning.sharing import solve_shared


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.parametrize("method", ["kvpr", "exact"])
def test_sharing_solve_keeps_the_callers_context(small: dict[str, Any], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    home = tmp_path / "home"  # this test's own process-wide home, fresh: nothing in it yet
    monkeypatch.setenv("PLANNING_HOME", str(home))
    context._CTX = None
    own = tmp_path / "own-cache"
    base = default_context(cache_dir=own)
    ctx = EngineContext(catalog=base.catalog, perf=base.perf, cache_dir=own)
    process_wide = home / "templates"
    res = solve_shared(Scenario.from_dict(small), method=method, context=ctx, baselines=False)
    assert res.status in ("optimal", "feasible"), res.notes
    assert res.dedicated is not None and res.dedicated.has_plan  # the popular model was solved (not stubbed)
    assert not _files(process_wide), "the dedicated solve used the process-wide engine context"
    assert _files(own), "the caller's cache directory got none of the solve's tables"
