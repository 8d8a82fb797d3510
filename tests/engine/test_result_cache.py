"""The result cache (planning.resultcache): a question asked again is answered from disk, and only then.

Each dependency of a plan (the scenario's numbers and options, the perf physics, the catalog, the engine's code)
changes the key; a plan a time limit stopped is never stored; the folder stays within its byte budget (LRU).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import planning.api as api
import planning.pipeline as pipeline
import planning.resultcache as rc
from planning.result import BaselineSummary, PlanResult
from planning.scenario import Scenario


@pytest.fixture
def cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The cache on, in a PLANNING_HOME of this test's own (the engine fixture's home is shared)."""
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "on")
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))
    return tmp_path


def _numbers(result: PlanResult) -> dict[str, Any]:
    """Everything of a plan but its timings, stats and scenario echo."""
    d = result.to_dict()
    for k in ("timings", "stats", "scenario"):
        d.pop(k)
    return d


def test_same_question_is_answered_from_the_cache(cache_on: Path, tiny: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = Scenario.from_dict(tiny)
    first = api.solve(scenario)
    assert first.status == "optimal"
    assert "result_cache_hit" not in first.stats
    assert list((cache_on / "results").glob("*.json"))  # beside the job store, under PLANNING_HOME

    def no_engine(*_a: Any, **_k: Any) -> PlanResult:
        raise AssertionError("the engine ran for a question already answered")

    monkeypatch.setattr(pipeline, "_plan", no_engine)
    renamed = replace(scenario, name="someone else's copy", description="same numbers")
    again = api.solve(renamed)
    assert again.stats["result_cache_hit"] == 1.0
    assert _numbers(again) == _numbers(first)
    assert again.scenario["name"] == "someone else's copy"  # answered under the asker's scenario
    with pytest.raises(AssertionError, match="engine ran"):
        api.solve(scenario, cache=False)  # the opt-out always solves


def test_every_dependency_changes_the_key(tiny: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = api.engine_context()
    scenario = Scenario.from_dict(tiny)

    def key(s: Scenario = scenario, c: Any = ctx, **flags: bool) -> str:
        return rc.cache_key(s, c, with_baselines=flags.get("with_baselines", True), finance=True)

    base = key()
    assert key(replace(scenario, name="other")) == base
    assert key(scenario.with_demand_scaled(2.0)) != base
    assert key(replace(scenario, price_scale=0.8)) != base
    assert key(replace(scenario, options=replace(scenario.options, mip_rel_gap=0.01))) != base  # solver options
    assert key(replace(scenario, options=replace(scenario.options, time_limit_s=5))) != base
    assert key(with_baselines=False) != base
    region = next(iter(ctx.catalog.regions))
    fewer = replace(ctx.catalog, regions={k: v for k, v in ctx.catalog.regions.items() if k != region})
    assert key(c=replace(ctx, catalog=fewer)) != base  # catalog content
    import planning.perf.model as perf_model

    monkeypatch.setattr(perf_model, "PHYSICS_VERSION", perf_model.PHYSICS_VERSION + "-changed")
    assert key() != base  # perf physics
    monkeypatch.undo()
    assert key() == base
    monkeypatch.setattr(rc, "_CODE_DIGEST", "another-engine")
    assert key() != base  # the engine's code or version


def _plan(status: str = "optimal", gap: float | None = 0.0, **kw: Any) -> PlanResult:
    return PlanResult(status=status, objective="cost", cost_per_hour=10.0, provisioning_per_hour=10.0,
                      penalty_per_hour=0.0, served_fraction=1.0, mip_gap=gap, **kw)


def test_only_final_results_are_reused(tiny: dict[str, Any]) -> None:
    scenario = Scenario.from_dict(tiny)  # mip_rel_gap 1e-3 (the default)
    assert rc.is_final(_plan(), scenario)
    assert rc.is_final(_plan("infeasible", None), scenario)
    assert rc.is_final(_plan("feasible", 5e-4), scenario)  # the stated gap, reached
    assert not rc.is_final(_plan("feasible", 0.02), scenario)
    assert not rc.is_final(_plan("feasible", None), scenario)
    assert not rc.is_final(_plan("feasible", 5e-4, stopped_at="ILP: attempt 2"), scenario)  # a time limit stopped it
    assert not rc.is_final(_plan("time_limit", None), scenario)
    assert not rc.is_final(_plan(finance={"sizing": {"status": "feasible", "gap": 0.04}}), scenario)
    assert rc.is_final(_plan(finance={"sizing": {"status": "optimal", "gap": 0.0}}), scenario)
    unrun = BaselineSummary(name="Homo", cost_per_hour=0.0, served_fraction=0.0, feasible=False, ran=False)
    assert not rc.is_final(_plan(baselines=(unrun,)), scenario)


def test_a_time_limited_plan_is_not_stored(cache_on: Path, tiny: dict[str, Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = _plan("feasible", 0.05, stopped_at="pricing: round 3")
    monkeypatch.setattr(pipeline, "_plan", lambda *_a, **_k: stopped)
    scenario = Scenario.from_dict(tiny)
    assert api.solve(scenario) is stopped
    assert not list((cache_on / "results").glob("*.json"))


def test_lru_by_bytes_and_unreadable_files(tmp_path: Path) -> None:
    one = len(_plan().to_json(indent=None).encode())
    cache = rc.ResultCache(tmp_path, max_bytes=3 * one)
    for k in "abc":
        assert cache.put(k, _plan())
    for i, k in enumerate("abc"):  # a, then b, then c used; distinct times whatever the clock's resolution
        os.utime(tmp_path / f"{k}.json", (1_000_000 + i, 1_000_000 + i))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("d", _plan())
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == ["a", "c", "d"]  # b was the least recently used
    assert cache.size_bytes() <= 3 * one
    (tmp_path / "c.json").write_text(json.dumps({"status": "optimal"}))  # an older schema
    assert cache.get("c") is None
    assert not (tmp_path / "c.json").exists()


def test_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "off")
    assert rc.default_cache() is None
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "on")
    cache = rc.default_cache()
    assert cache is not None and cache.folder.name == "results"
