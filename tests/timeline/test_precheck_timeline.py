"""The timeline calls the SLO precheck (issue 37 §4): a scenario whose SLO no offered GPU reaches is refused before
any template library or epoch is built, with the message ``planning solve`` gives for the same scenario."""

from __future__ import annotations

import json

import pytest

from planning import api
from planning.errors import PlanningError
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, diurnal, run_timeline
from planning.timeline import columns as tl_columns
from planning.timeline import engine as tl_engine
from planning.timeline import shared as tl_shared
from tests.engine.test_precheck import IMPOSSIBLE


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way the timeline reaches templates or epochs fails the test."""
    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("a refused timeline must not build templates or plan epochs")

    monkeypatch.setattr(tl_engine, "build_template_sets", boom)
    monkeypatch.setattr(tl_engine, "solve_epoch", boom)
    monkeypatch.setattr(tl_columns, "build_pool", boom)
    monkeypatch.setattr(tl_shared, "run", boom)


def _demand(scenario: Scenario) -> list:
    return [diurnal(m.id, [1.0, 0.5], m.demand.rate_rps, m.demand.input_len, m.demand.output_len, epoch_hours=12)
            for m in scenario.models]


@pytest.mark.parametrize("sharing", ["off", "exact"])
def test_an_impossible_slo_is_refused_before_any_library_with_the_solves_message(
        monkeypatch: pytest.MonkeyPatch, sharing: str) -> None:
    """TPOT 1 ms on llama-3-70b: ``run_timeline`` raises a PlanningError naming ``models[0].slo.decode_ms`` whose
    text holds the solve's ``infeasible`` message word for word; no library, pool, epoch or shared plan is built
    (each of those raises here). With sharing asked for, the same (the shared route is after the check)."""
    d = json.loads(json.dumps(IMPOSSIBLE))
    d["options"]["sharing"] = sharing
    scenario = Scenario.from_dict(d)
    solved = api.solve(scenario)
    assert solved.status == "infeasible"
    _no_build(monkeypatch)
    with pytest.raises(PlanningError) as err:
        run_timeline(scenario, _demand(scenario), options=TimelineOptions(K=0.0), context=api.engine_context())
    assert err.value.field == "models[0].slo.decode_ms"
    assert solved.message in str(err.value)
    assert str(err.value).count("infeasible: TPOT 1 ms < the ") == 1


def test_a_meetable_slo_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same scenario at a TPOT the precheck's own fix names passes the check: the timeline goes on to build
    its templates (the stubbed build is reached)."""
    scenario = Scenario.from_dict(IMPOSSIBLE)
    fix = api.solve(scenario).message.split("decode_ms to ≥ ", 1)[1].split(" ms", 1)[0]
    d = json.loads(json.dumps(IMPOSSIBLE))
    d["models"][0]["slo"]["decode_ms"] = float(fix)
    meetable = Scenario.from_dict(d)
    _no_build(monkeypatch)
    with pytest.raises(AssertionError, match="must not build templates"):
        run_timeline(meetable, _demand(meetable), options=TimelineOptions(K=0.0, templates="library"),
                     context=api.engine_context())
