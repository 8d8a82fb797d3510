"""Anytime solving (issue 23): a time limit returns the best plan found so far with a proven gap, never "no plan"
while a plan exists; every bound on the way is a valid lower bound and every incumbent a real plan."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

import planning.allocate.ondemand as ondemand
import planning.pipeline as pipeline
from planning import api
from planning.allocate.incumbent import Anytime, proven_gap
from planning.allocate.pricers import LocalPricers
from planning.allocate.pricing import RoundState
from planning.context import check_cancel
from planning.scenario import Scenario
from tests.clock import SkipClock, skip_clock
from tests.engine.conftest import UNREACHED_S, unbound_inner_limits

# The contract is limit + 2 s, measured by benchmarks/bench_under_load.py; these tests assert what the solve does
# at its limit (status, step, gap), with the deadlines' clock moved past the limit (tests/clock.py), never its wall.
# The limit itself is one no run reaches (DAY_S, the most options.time_limit_s allows) wherever a step moves the
# clock past it: a 3 s wall-clock limit can run out before the injected step at load ~25 (the first test here
# failed beside four busy loops and passed alone), and then the step the test names is not where the solve stopped.
DAY_S = 86_400.0


def _limited(preset: str, limit: float) -> Scenario:
    base = api.load_preset_scenario(preset)
    return replace(base, options=replace(base.options, time_limit_s=limit))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SkipClock:
    """The deadlines' clock; a step "slower than the whole limit" moves it past the deadline."""
    return skip_clock(monkeypatch)


def _record_offers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources of every plan offered to an ``Anytime`` from now on, in order."""
    sources: list[str] = []
    real = Anytime.offer

    def record(self: Anytime, alloc: Any, sets: Any, masks: Any, source: str) -> bool:
        sources.append(source)
        return real(self, alloc, sets, masks, source)

    monkeypatch.setattr(Anytime, "offer", record)
    return sources


@pytest.fixture(scope="module")
def coral_core_plan() -> Any:
    result = api.solve(api.load_preset_scenario("coral-core"), with_baselines=False)
    assert result.status == "optimal"
    return result


@pytest.fixture(scope="module")
def coral_core_optimum(coral_core_plan: Any) -> float:
    return float(coral_core_plan.cost_per_hour)


def test_limit_in_pricing_round_one_returns_the_seed_plan_with_a_finite_gap(
        monkeypatch: pytest.MonkeyPatch, coral_core_optimum: float, clock: SkipClock) -> None:
    """The injected slow step: the first pricing round outlasts the limit. Before it, the restricted master ILP
    over the seed columns found a plan; that plan comes back as feasible with its proven gap, not "no plan", the
    step it stopped at is pricing and the baselines are listed as not run (with the limit ignored: optimal, nothing
    stopped, every baseline run)."""
    real = LocalPricers.price_all

    def slow(self: LocalPricers, calls: Any, cancel: Any = None) -> Any:
        clock.skip_past(cancel)
        return real(self, calls, cancel)

    monkeypatch.setattr(LocalPricers, "price_all", slow)
    result = api.solve(_limited("coral-core", DAY_S))
    assert result.status == "feasible" and result.has_plan and result.instances
    assert result.mip_gap is not None and 0 < result.mip_gap < 1  # the additive bound, proven before any LP
    assert result.cost_per_hour >= coral_core_optimum - 1e-6  # a real plan: never below the optimum
    # the gap bounds the distance to the optimum: optimum ≥ cost · (1 − gap)
    assert coral_core_optimum >= result.cost_per_hour * (1 - result.mip_gap) - 1e-6
    assert result.stopped_at.startswith("pricing") and "best plan found" in result.message
    assert result.served_fraction == pytest.approx(1.0)
    assert all(not b.ran and b.note == "not run: time limit" for b in result.baselines)  # listed, not dropped
    payload = api.result_json(result)
    assert '"status": "feasible"' in payload and '"mip_gap": ' in payload and '"stopped_at": "pricing' in payload


def test_limit_after_the_lp_bounds_the_gap_by_the_lp(monkeypatch: pytest.MonkeyPatch, coral_core_plan: Any,
                                                      coral_core_optimum: float, clock: SkipClock) -> None:
    """Stopped in the Lagrangian group bounds: the LP over all templates is proven, so the gap is at most
    (cost − z_LP) / cost and the optimum lies within it.

    The LP bound is 0.88 of the optimum since perf v5 (26.52 of 30.15 $/h; 0.923 before, 26.39 of 28.60), and the
    physics moves it through an integer cliff, not a looser LP: the dense models' part is as before (coral-core
    without gpt-oss-20b: 23.24 of 25.45, 0.913), and gpt-oss-20b's measured MXFP4 experts take its one-node
    templates just below its demand. Its prefill demand is ~20,480 prompt tok/s; one 1xL40S served 24,425 under
    the roofline experts and serves 20,420 under the kernel measured on the L40S, so the plan adds a whole 1xL4
    (+0.80 $/h) for the last 0.3 %, where the LP buys 0.3 % more of an L40S; its decode moves from one A10G (1.01
    $/h) to a 2xL4 (1.61 $/h) likewise. gpt-oss-20b's share: +1.41 $/h to the optimum, +0.12 to the LP bound."""
    real = ondemand.group_bounds

    def slow(*args: Any, **kwargs: Any) -> Any:
        cancel = args[4] if len(args) > 4 else kwargs.get("cancel")
        clock.skip_past(cancel)
        check_cancel(cancel, "on-demand allocation: group bounds")
        return real(*args, **kwargs)

    monkeypatch.setattr(ondemand, "group_bounds", slow)
    result = api.solve(_limited("coral-core", DAY_S), with_baselines=False)
    assert result.status == "feasible" and result.instances
    lp = result.stats["anytime_bound"]
    assert lp <= coral_core_optimum + 1e-6
    assert result.mip_gap == pytest.approx((result.cost_per_hour - lp) / result.cost_per_hour, rel=1e-9)
    assert lp >= 0.87 * coral_core_optimum  # far tighter than the additive one; why not 0.9: the docstring
    # the cliff the docstring names: gpt-oss-20b's prefill needs a second node for its last fraction of demand
    prefill = [i for i in coral_core_plan.instances if (i.model, i.phase) == ("gpt-oss-20b", "prefill")]
    biggest = max(prefill, key=lambda i: i.throughput * i.count)
    demand = sum(i.throughput * i.count * i.load for i in prefill)
    assert len(prefill) >= 2 and 0.95 * demand < biggest.throughput * biggest.count < demand


def test_library_path_has_a_plan_before_the_library(monkeypatch: pytest.MonkeyPatch, clock: SkipClock) -> None:
    """The library path plans first over the single-shape templates; a limit inside the full library build
    returns that plan (feasible, bounded by the additive throughput bound)."""
    real = pipeline.build_template_sets

    def slow(ctx: Any, resolved: Any, progress: Any, cancel: Any) -> Any:
        clock.skip_past(cancel)
        check_cancel(cancel, "library build: llama-2-7b/aggregated")
        return real(ctx, resolved, progress, cancel)

    monkeypatch.setattr(pipeline, "build_template_sets", slow)
    scenario = _limited("melange-arena", DAY_S)
    optimum = api.solve(api.load_preset_scenario("melange-arena"), with_baselines=False).cost_per_hour
    result = api.solve(scenario, with_baselines=False)
    assert result.status in ("feasible", "optimal") and result.instances
    assert all(i.single_shape for i in result.instances)
    assert result.cost_per_hour >= optimum - 1e-9
    assert result.mip_gap is not None and optimum >= result.cost_per_hour * (1 - result.mip_gap) - 1e-9
    assert result.stopped_at.startswith("library build")


def test_no_plan_only_when_nothing_was_found(monkeypatch: pytest.MonkeyPatch, clock: SkipClock) -> None:
    """A limit before any plan exists (here: the T̂ tables outlast it) is the one case of "no plan"."""
    real = ondemand.build_space

    def slow(*args: Any, **kwargs: Any) -> Any:
        clock.skip(1.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(ondemand, "build_space", slow)
    result = api.solve(_limited("coral-core", 1.0))
    assert result.status == "time_limit" and not result.has_plan and not result.instances
    assert "no plan" in result.message and "Fix: raise options.time_limit_s" in result.message
    summary = api.result_summary(result)
    assert summary.startswith("status: no plan (time_limit)") and "$0" not in summary
    assert "$0" not in result.to_markdown() and "no plan" in result.to_markdown()
    with pytest.raises(api.PlanningError, match="no plan to export"):
        api.export_plan(result, "all")
    frame = result.baselines_frame()
    assert math.isnan(float(frame.iloc[0]["cost_per_hour"])) and frame.iloc[0]["note"].startswith("no plan")


@pytest.mark.parametrize("near", [False, True], ids=["plain", "near-deadline"])
@pytest.mark.parametrize("seed", range(8))
def test_every_bound_and_incumbent_is_valid_on_seeded_instances(seed: int, near: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """On small seeded instances (the on-demand tests' synthetic family), every bound Anytime records is ≤ the
    optimum of the ILP over all templates (the library's, the brute-force-checked reference) and every
    incumbent ≥ it; the certified answer equals it. ``near``: under a deadline that is near from the first
    instant (``near_deadline``: the LP support's ILP first, half the time left per incumbent ILP), the same.

    The engine's own wall-clock caps on its inner HiGHS calls (incumbent ILPs, cover ILPs of the bounds) are
    lifted (:func:`unbound_inner_limits`) and the near deadline is one no run reaches. Seeds 2 and 7 failed in
    directory runs at load 25-30 only: with those caps binding (simulated by setting them to 0.1 ms) an incumbent
    ILP stops before its first plan, no round has an incumbent to gate a finite Farley bound, and seed 5 fails
    the same way. What is asserted here does not depend on the machine's speed."""
    from planning.context import Deadline
    from tests.engine.test_on_demand import _instance, _resolved, library_optimum

    unbound_inner_limits(monkeypatch)
    if near:
        monkeypatch.setattr(ondemand, "NEAR_DEADLINE_RATIO", 1e12)
    priced, offers = _instance(seed)
    resolved = _resolved(priced, offers)
    full = library_optimum(seed)  # the joint ILP over all templates, solved once a session per seed
    sources = _record_offers(monkeypatch)
    farley: list[float] = []
    plain_farley = RoundState.farley_bound

    def recorded(self: RoundState, upper: float) -> float:
        farley.append(plain_farley(self, upper))
        return farley[-1]

    monkeypatch.setattr(RoundState, "farley_bound", recorded)
    anytime = Anytime()
    plan = ondemand.allocate_on_demand(priced, resolved, anytime=anytime,
                                       cancel=Deadline(UNREACHED_S) if near else None)
    if full.status == "infeasible":
        assert plan is None or anytime.best is None
        return
    optimum = float(full.total_per_hour or 0.0)
    assert plan is not None and plan.certified
    assert float(plan.alloc.total_per_hour or 0.0) == pytest.approx(optimum, rel=1e-6, abs=1e-6)
    assert anytime.history, "no incumbent or bound recorded"
    for _t, value, bound in anytime.history:
        assert bound <= optimum * (1 + 1e-6) + 1e-6
        assert value >= optimum * (1 - 1e-6) - 1e-6
    assert anytime.first_plan_s is not None and anytime.best is not None
    assert anytime.gap() == pytest.approx(proven_gap(anytime.value, anytime.bound))
    # the certifying ILP's own bound is the run's last word: the progress line's gap is the answer's, not z_LB's
    assert (anytime.gap() or 0.0) <= max(resolved.scenario.options.mip_rel_gap, 1e-6) + 1e-9, anytime.bound_source
    assert any(s.startswith("restricted master ILP over the seed columns") for s in sources)
    # the per-group Farley ratio bound of every priced round: a proof (≤ the optimum), and one is finite
    assert any(math.isfinite(b) for b in farley)
    assert all(b <= optimum * (1 + 1e-6) + 1e-6 for b in farley)


def test_near_the_deadline_the_first_plan_comes_from_the_lp_support(monkeypatch: pytest.MonkeyPatch,
                                                                    coral_core_optimum: float,
                                                                    clock: SkipClock) -> None:
    """A busy machine: the limit is near at the first master LP and round 1's pricing outlasts it. The plan
    returned is a real plan (≥ the optimum) with a finite proven gap, found by the support's ILP first."""
    monkeypatch.setattr(ondemand, "NEAR_DEADLINE_RATIO", 1e12)
    real = LocalPricers.price_all

    def slow(self: LocalPricers, batch: Any, cancel: Any = None) -> Any:
        clock.skip_past(cancel)
        return real(self, batch, cancel)

    monkeypatch.setattr(LocalPricers, "price_all", slow)
    sources = _record_offers(monkeypatch)
    result = api.solve(_limited("coral-core", DAY_S), with_baselines=False)
    assert result.status == "feasible" and result.instances
    assert result.cost_per_hour >= coral_core_optimum - 1e-6
    assert result.mip_gap is not None and 0 < result.mip_gap < 1
    assert coral_core_optimum >= result.cost_per_hour * (1 - result.mip_gap) - 1e-6
    sizes = [int(s.split("(")[1].split(" of")[0].replace(",", "")) for s in sources]
    assert len(sizes) >= 2 and sizes[0] < sizes[1], "the LP support's ILP did not come before the short list"


def test_anytime_keeps_only_better_plans_within_the_budget() -> None:
    from planning.allocate.problem import AllocationResult, SolveStats

    def plan(cost: float) -> AllocationResult:
        return AllocationResult("optimal", "cost", cost, cost, 0.0, 1.0, {}, {}, {}, {}, 0.0, (), {}, SolveStats(),
                                "matrix", "highs")

    seen: list[str] = []
    a = Anytime(budget=10.0)
    a.on_change = lambda: seen.append(a.summary())
    assert a.summary() == "no plan yet" and a.gap() is None
    assert not a.offer(plan(12.0), [], None, "over the budget")
    assert a.offer(plan(9.0), [], None, "first") and not a.offer(plan(9.5), [], None, "worse")
    assert a.summary() == "best plan objective $9.00/h, gap not yet bounded"  # named: it is not the bill
    a.shown = lambda alloc: float(alloc.cost_per_hour or 0.0) - 1.0  # the caller's bill figure
    assert a.summary() == "best plan $8.00/h, gap not yet bounded"
    a.raise_bound(-3.0, "a cost bound ≤ 0 proves nothing")
    a.raise_bound(8.1, "bound")
    a.raise_bound(7.0, "weaker: ignored")
    assert a.bound == 8.1 and a.gap() == pytest.approx(0.1)
    assert seen == ["best plan objective $9.00/h, gap not yet bounded", "best plan $8.00/h, gap 10.0%"]
    answer = a.allocation("ILP: 3 templates")
    assert answer.result.status == "feasible" and answer.result.gap == pytest.approx(0.1)
    assert "time limit reached at step 'ILP: 3 templates'" in answer.result.messages[-1]


def test_side_by_side_rows_never_show_zero_for_a_missing_plan() -> None:
    """What-if rows and the baselines table: a result without a plan and a baseline that did not run have no
    cost (NaN) and a status that says why; the chart gets no bar for them."""
    from planning.result import BaselineSummary, PlanResult
    from planning.whatif import chart_frame, comparison_frame

    done = BaselineSummary("homo", 12.0, 1.0, True, note="ok")
    skipped = BaselineSummary("memp", 0.0, 0.0, False, note="not run: time limit", ran=False)
    none = PlanResult(status="time_limit", objective="cost", cost_per_hour=0.0, provisioning_per_hour=0.0,
                      penalty_per_hour=0.0, served_fraction=0.0, mip_gap=None, baselines=(done, skipped),
                      message="time limit 1 s reached; no plan. Fix: raise options.time_limit_s.")
    frame = comparison_frame({"base": none}).set_index("method")
    assert math.isnan(frame.loc["Plan (mixed)", "cost_per_hour"])
    assert frame.loc["Plan (mixed)", "status"] == "no plan (time_limit)"
    assert math.isnan(frame.loc["memp", "cost_per_hour"]) and frame.loc["memp", "status"] == "not run: time limit"
    assert frame.loc["homo", "cost_per_hour"] == 12.0
    chart = chart_frame(comparison_frame({"base": none})).set_index("method")
    assert chart["cost_per_hour"].isna().tolist() == [True, False, True]
    table = none.baselines_frame().set_index("name")
    assert math.isnan(table.loc["memp", "cost_per_hour"]) and table.loc["memp", "note"] == "not run: time limit"


def test_timeline_epochs_without_a_plan_are_not_counted_as_zero() -> None:
    from planning.timeline.result import EpochResult, TimelineResult

    def epoch(i: int, cost: float, has_plan: bool) -> EpochResult:
        return EpochResult(index=i, start=float(i), label=f"{i}h", status="optimal" if has_plan else "time_limit",
                           objective="cost", alpha=1.0, cost_per_hour=cost, provisioning_per_hour=cost,
                           penalty_per_hour=0.0, cost_by_model={"m": cost}, served_fraction={"m": 1.0 if has_plan else 0.0},
                           goodput_tok_s={}, demand_rps={"m": 1.0}, gpus={}, gpus_available={}, nodes_started=0,
                           nodes_stopped=0, instances=1 if has_plan else 0, has_plan=has_plan)

    full = TimelineResult("s", 1.0, 0.1, ("m",), (epoch(0, 10.0, True), epoch(1, 12.0, True)), 0.0, False)
    assert full.total_cost == pytest.approx(22.0)
    gap = TimelineResult("s", 1.0, 0.1, ("m",), (epoch(0, 10.0, True), epoch(1, 0.0, False)), 0.0, False)
    assert math.isnan(gap.total_cost) and gap.to_dict()["total_cost"] is None
    assert math.isnan(gap.methods_frame().iloc[1]["cost_per_hour"])
    assert math.isnan(float(gap.summary_frame().iloc[0]["total_cost"]))
    text = gap.summary_text()
    assert "adaptive total not stated: 1 epochs have no plan" in text and "no plan" in text.splitlines()[-1]


def test_a_limit_inside_placements_leaves_no_uncorrected_value_in_the_cache() -> None:
    """``MultisetSpace.throughput`` checks the deadline between blocks of placements. Stopped there, the values
    it placed but had not yet corrected (the common-batch correction runs after the blocks) leave the cache, so a
    later call never reads a too-high throughput; the next call gives exactly a fresh space's values."""
    import numpy as np

    from planning.context import Cancelled
    from tests.engine.test_on_demand import MODELS, SHAPES, _space

    class AfterFirst:
        """Set from the second check on."""

        def __init__(self) -> None:
            self.checks = 0

        def is_set(self) -> bool:
            self.checks += 1
            return self.checks > 1

    space = _space(MODELS[1], "decode", SHAPES, 4)
    space.correct = lambda stages: np.full(len(stages), 1.0)  # a correction that binds: 1 req/s per template
    P = np.concatenate([space.all_multisets(np.ones(space.K, dtype=bool))])
    with pytest.raises(Cancelled):
        space.throughput(P, AfterFirst())  # type: ignore[arg-type]
    assert not space.cache, "placed but uncorrected values stayed in the cache"
    fresh = _space(MODELS[1], "decode", SHAPES, 4)
    fresh.correct = space.correct
    assert np.array_equal(space.throughput(P), fresh.throughput(P))
