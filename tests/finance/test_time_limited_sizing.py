"""A commitment sizing whose proof its time limit stopped says so (issue 37 §6): ``finance.sizing`` carries
``time_limited`` and names the figures of that moment (bound, gap, cut and step counts, the stop message) in
``time_limited_figures``; ``checks.stable_dict`` — the determinism digest of ``benchmarks/check_plans`` — leaves
those out and still compares the plan (commitments, horizon total, epochs), so enterprise's two runs whose proofs
stopped at 1.6 % and 2.0 % digest alike while a changed plan still shows. The diagnostics' note quotes no gap of
such a proof (it would differ run to run); the terminal summary does, beside the flag."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from planning import api
from planning.checks import stable_dict
from planning.finance.commitments import Sizing
from planning.finance.plan import PROOF_FIGURES, finance_view, sizing_note, time_limited
from planning.resolve import resolve_scenario
from planning.result import PlanResult
from planning.scenario import Scenario
from tests.finance.conftest import SMALL


@pytest.fixture(scope="module")
def solved() -> PlanResult:
    """SMALL planned once (its sizing proven optimal: nothing flagged)."""
    return api.solve(Scenario.from_dict(SMALL), cache=False)


@pytest.fixture(scope="module")
def sizing() -> Sizing:
    """SMALL's own sizing (a real plan: commitments, epoch plans, bound)."""
    from planning.finance.sizing import size
    from tests.finance.conftest import small_sizing_inputs

    resolved, sets, epochs, candidates = small_sizing_inputs()
    out = size(resolved, sets, epochs, candidates)
    assert out.status == "optimal" and out.has_plan
    return out


def _stopped(sizing: Sizing, gap: float, cuts: float) -> Sizing:
    """``sizing`` as its proof would return it had the time limit stopped it at ``gap`` after ``cuts`` cuts."""
    return replace(sizing, status="feasible", bound=sizing.value * (1 - gap), message="time limit reached in sizing",
                   stopped_by="clock", stats={**sizing.stats, "benders_cuts": cuts, "master_steps": cuts / 90})


def _digest(result: PlanResult, sizing: Sizing) -> str:
    """check_plans' digest of ``result`` with ``sizing`` as its commitment sizing."""
    scenario = Scenario.from_dict(SMALL)
    resolved = resolve_scenario(scenario, api.engine_context().catalog)
    view = finance_view(scenario, resolved, result, sizing.candidates, sizing, {}, [])
    data = {**result.to_dict(), "finance": view}
    return hashlib.sha256(json.dumps(stable_dict(data), sort_keys=True, default=float).encode()).hexdigest()


def test_a_stopped_proof_is_flagged_with_its_figures(solved: PlanResult, sizing: Sizing) -> None:
    """Proven to its gap: no flag; stopped above it: the flag and the figures of that moment, and the real
    result's sizing (proven) carries ``time_limited: false``."""
    assert not time_limited(sizing) and solved.finance["sizing"]["time_limited"] is False
    assert "time_limited_figures" not in solved.finance["sizing"]
    stopped = _stopped(sizing, 0.02, 180)
    assert time_limited(stopped)
    scenario = Scenario.from_dict(SMALL)
    view = finance_view(scenario, resolve_scenario(scenario, api.engine_context().catalog), solved,
                        stopped.candidates, stopped, {}, [])
    assert view["sizing"]["time_limited"] is True
    assert view["sizing"]["time_limited_figures"] == list(PROOF_FIGURES)
    assert set(PROOF_FIGURES) <= set(view["sizing"])  # every named figure is one the sizing has


def test_the_digest_ignores_a_stopped_proofs_figures(solved: PlanResult, sizing: Sizing) -> None:
    """Two runs whose proofs stopped at 2.0 % (180 cuts) and 1.6 % (186 cuts) with the same plan digest alike."""
    assert _digest(solved, _stopped(sizing, 0.020, 180)) == _digest(solved, _stopped(sizing, 0.016, 186))


def test_the_digest_still_catches_a_changed_plan(solved: PlanResult, sizing: Sizing) -> None:
    """A stopped proof with other commitments (or another horizon total) differs; so does a proven sizing whose
    bound differs (unflagged figures are compared)."""
    base = _stopped(sizing, 0.02, 180)
    some = next(iter(base.counts))
    other = replace(base, counts={**base.counts, some: base.counts[some] + 1})
    assert _digest(solved, base) != _digest(solved, other)
    assert _digest(solved, base) != _digest(solved, replace(base, value=base.value * 1.01))
    assert _digest(solved, sizing) != _digest(solved, replace(sizing, bound=sizing.bound * 0.999))


def test_the_note_quotes_no_gap_of_a_stopped_proof(sizing: Sizing) -> None:
    """The note of a proven sizing quotes its gap; of a stopped one it says the proof stopped, the same words for
    1.6 % and 2.0 %, and where the gap is."""
    candidates, n = sizing.candidates, len(sizing.epochs)
    assert "proven within 0.0% of the optimum" in sizing_note(sizing, candidates, n, 1e-3)
    a = sizing_note(_stopped(sizing, 0.020, 180), candidates, n, 1e-3)
    assert a == sizing_note(_stopped(sizing, 0.016, 186), candidates, n, 1e-3)
    assert "time-limited: the wall clock stopped the proof above the requested 0.1% gap" in a
    assert "2.0%" not in a and "1.6%" not in a


def test_the_terminal_summary_shows_the_gap_and_the_flag(solved: PlanResult, sizing: Sizing) -> None:
    """The CLI's summary quotes the sizing's proven gap (and, when stopped, that its limit stopped the proof)."""
    from planning.report import terminal_summary

    assert "commitment sizing: optimal, proven within 0.00% of the optimum\n" in terminal_summary(solved)
    finance = {**solved.finance, "sizing": {**solved.finance["sizing"], "status": "feasible", "gap": 0.016,
                                            "time_limited": True}}
    text = terminal_summary(replace(solved, finance=finance))
    assert "commitment sizing: feasible, proven within 1.60% of the optimum when its time limit stopped the proof" in text
