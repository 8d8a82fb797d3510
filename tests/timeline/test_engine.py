"""The timeline's reduced solve equals planning.solve.solve_reduced (cost and served, with running instances)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning import api
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


def test_epoch_solve_matches_the_engine_on_a_reducible_preset(core: dict[str, Any]) -> None:
    """Cost objective with running instances and K > 0 (a served comparison on a scarce coral-core hit the
    60 s MIP time limit on the shared test machine, so it is not part of the default suite)."""
    prep, scn = core["prep"], core["scn"]
    assert scn.options.K > 0 and scn.current
    assert sum(len(ts) for ts in prep.sets) >= 1500  # the LP reduction applies
    groups = epoch_groups(prep.groups, core["series"], 1)
    offers = tl.offers_for(prep, scn)
    mine, _, _ = tl.solve_reduced(scn, groups, prep.sets, offers, None, {}, {})
    theirs, _, _ = engine_solve_reduced(scn, groups, list(prep.sets), offers, None, {}, {})
    assert mine.has_plan and theirs.has_plan
    assert mine.total_per_hour == pytest.approx(theirs.total_per_hour, rel=2e-3)
