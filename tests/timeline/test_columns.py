"""The timeline on templates priced on demand (``planning.timeline.columns``) against the library route: the same
epoch costs on a small instance solved to gap 0, with the penalty chaining the epochs (myopic and look-ahead) and
without it; the warm start gives the cold start's answer; ``auto`` keeps small libraries; the CLI flag."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from planning import api
from planning.allocate.ondemand import solve_on_demand
from planning.cli import main as cli_main
from planning.resolve import resolve_scenario
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, diurnal, run_timeline
from planning.timeline.columns import padded_rows
from planning.timeline.plan import template_route

SHAPE = [1.0, 0.4, 0.7, 1.0, 0.55, 0.25, 0.9, 0.6]  # returns to the peak: the penalty makes epochs chain


def _demand(scenario: Scenario, shape: list[float] = SHAPE) -> list:
    return [diurnal(m.id, shape, m.demand.rate_rps, m.demand.input_len, m.demand.output_len,
                    epoch_hours=24 / len(shape))
            for m in scenario.models]


def _run(scenario: Scenario, templates: str, **kw: object) -> object:
    opts = TimelineOptions(templates=templates, **kw)  # type: ignore[arg-type]
    return run_timeline(scenario, _demand(scenario), options=opts, context=api.engine_context())


@pytest.mark.parametrize("policies", [("myopic",), ("lookahead", "myopic")])
def test_on_demand_epochs_cost_what_the_library_epochs_cost(small: Scenario, policies: tuple[str, ...]) -> None:
    lib = _run(small, "library", policies=policies)
    ond = _run(small, "on-demand", policies=policies)
    assert lib.timings["templates_on_demand"] == 0.0 and ond.timings["templates_on_demand"] == 1.0  # type: ignore[attr-defined]
    # every distinct problem (the epochs' and the static peak's, its availability given explicitly) certified
    assert ond.timings["pool_problems"] == len(set(SHAPE)) + 1 == ond.timings["pool_certified"]  # type: ignore[attr-defined]
    for a, b in zip(lib.epochs, ond.epochs, strict=True):  # type: ignore[attr-defined]
        assert b.cost_per_hour == pytest.approx(a.cost_per_hour, rel=1e-9, abs=1e-9)
        assert b.penalty_per_hour == pytest.approx(a.penalty_per_hour, rel=1e-9, abs=1e-9)
        # Homo-ILP, the static peak plan, the other policies; not Coral's greedy Homo: it ranks templates by
        # throughput per dollar, and n×(one shape) templates tie up to float noise (the two engines' placements
        # agree to ~1e-7), so it may take a 3-node instance in one route and a 1-node one in the other
        assert {k: m.cost_per_hour for k, m in b.methods.items() if k != "Homo (re-planned)"} == pytest.approx(
            {k: m.cost_per_hour for k, m in a.methods.items() if k != "Homo (re-planned)"}, rel=1e-9)
    assert sum(ep.penalty_per_hour for ep in ond.epochs) > 0  # type: ignore[attr-defined]  # the epochs did chain
    for name, t in lib.policy_totals().items():  # type: ignore[attr-defined]
        o = ond.policy_totals()[name]  # type: ignore[attr-defined]
        assert o["total_cost"] == pytest.approx(t["total_cost"], rel=1e-9)
        assert o["churn"] == t["churn"]


def test_independent_epochs_are_each_certified_over_all_templates(small: Scenario) -> None:
    """K = 0: each epoch's plan is its own optimum; on the pool it is what api.solve (on demand) finds alone."""
    ond = _run(small, "on-demand", K=0.0, baselines=(), static_peak=False)
    for level, ep in zip(SHAPE, ond.epochs, strict=True):  # type: ignore[attr-defined]
        models = tuple(replace(m, demand=replace(m.demand, rate_rps=m.demand.rate_rps * level)) for m in small.models)
        alone = api.solve(replace(small, models=models, options=replace(small.options, K=0.0)), with_baselines=False)
        assert ep.cost_per_hour == pytest.approx(alone.cost_per_hour, rel=1e-9)


def test_a_warm_start_gives_the_cold_start_answer(small: Scenario) -> None:
    ctx = api.engine_context()
    resolved = resolve_scenario(small, ctx.catalog)
    cold = solve_on_demand(ctx, resolved)
    assert cold is not None and cold.sets is not None
    warm = {}
    for ts in cold.sets:
        rows = [ts.row_of[str(k)] for (k, _r) in cold.result.counts if str(k) in ts.row_of]
        warm[ts.group.id] = padded_rows(ts, rows, small.options.nmax)
        assert len(rows) and np.all(padded_rows(ts, rows, small.options.nmax) < len(ts.shapes) + 1)
    scaled = replace(resolved, groups=tuple(replace(g, classes=tuple(replace(c, rate=c.rate * 0.7)
                                                                     for c in g.classes)) for g in resolved.groups))
    a, b = solve_on_demand(ctx, scaled), solve_on_demand(ctx, scaled, warm=warm)
    assert a is not None and b is not None
    assert b.result.total_per_hour == pytest.approx(a.result.total_per_hour, rel=1e-9)
    assert b.stats["reduction_certified"] == 1.0
    assert b.stats["pricing_rounds"] <= a.stats["pricing_rounds"]


def test_auto_keeps_small_libraries_and_the_offline_bound_on_the_library() -> None:
    ctx = api.engine_context()
    core, ext = api.load_preset_scenario("coral-core"), api.load_preset_scenario("coral-extended")
    assert template_route(TimelineOptions(), core, ctx) == "library"  # 18,564 multisets: built in about a second
    assert template_route(TimelineOptions(), ext, ctx) == "on-demand"
    assert template_route(TimelineOptions(policies=("myopic", "offline")), ext, ctx) == "library"
    assert template_route(TimelineOptions(templates="on-demand"), core, ctx) == "on-demand"
    with pytest.raises(Exception, match="templates"):
        TimelineOptions(templates="some")


def test_cli_templates_on_demand_matches_library(small: Scenario, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(small.to_dict()))
    demand = tmp_path / "d.csv"
    demand.write_text("epoch_start,rate_rps,input_len,output_len\n"
                      + "".join(f"{h},{4 * v},1155,211\n" for h, v in enumerate(SHAPE)), encoding="utf-8")
    totals = {}
    for route in ("library", "on-demand"):
        assert cli_main(["timeline", str(path), "--demand", f"llama-3-8b={demand}", "--epoch", "1h",
                         "--no-baselines", "--templates", route, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        totals[route] = [e["cost_per_hour"] for e in out["epochs"]]
        assert out["timings"]["templates_on_demand"] == (route == "on-demand")
    assert totals["on-demand"] == pytest.approx(totals["library"], rel=1e-9)
