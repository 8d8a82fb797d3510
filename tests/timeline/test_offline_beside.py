"""The offline MILP on a thread beside the look-ahead and the epoch loop (planning.timeline.beside): the day's
answers are the ones planned one after another — the detailed epochs, the look-ahead's total and the offline's
proven bound are the same, and the offline schedule is never dearer than the look-ahead's —; a failure or a cancel
elsewhere stops the thread; the time left is the longer part's, not the sum. Clocks are injected where time is
read; nothing asserts how long anything took."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from planning.context import CancelFlag, Cancelled, engine_context
from planning.scenario import Scenario
from planning.timeline import TimelineOptions, loop, policies, run_timeline
from planning.timeline.demand import diurnal
from planning.timeline.pace import Pace

POLICIES = ("myopic", "lookahead", "offline")


def _day(small: Scenario, seed: int) -> list:
    """A seeded day of six hourly levels per model."""
    import random

    rng = random.Random(seed)
    shape = [rng.uniform(0.3, 1.0) for _ in range(6)]
    return [diurnal(m.id, shape, m.demand.rate_rps, m.demand.input_len, m.demand.output_len, 1.0)
            for m in small.models]


@pytest.mark.parametrize("seed", [1, 2])
def test_beside_gives_the_answers_planned_one_after_another(small: Scenario, seed: int) -> None:
    """Beside or after: the same detailed epochs and look-ahead total, the same proven bound, and an offline total
    never above the look-ahead's (nor below its own bound)."""
    ctx, demand = engine_context(), _day(small, seed)
    options = TimelineOptions(policies=POLICIES, baselines=(), static_peak=False, offline_time_limit_s=300.0)
    beside = run_timeline(small, demand, options=options, context=ctx).to_dict()
    after = run_timeline(small, demand, options=replace(options, offline_beside=False), context=ctx).to_dict()
    assert beside["total_cost"] == pytest.approx(after["total_cost"], rel=1e-12)
    assert beside["policies"]["lookahead"]["total_cost"] == pytest.approx(after["policies"]["lookahead"]["total_cost"],
                                                                          rel=1e-12)
    b_off, a_off = beside["policy_info"]["offline"], after["policy_info"]["offline"]
    assert b_off["bound"] == pytest.approx(a_off["bound"], rel=1e-9)
    off_total = beside["policies"]["offline"]["total_cost"]
    assert off_total <= beside["policies"]["lookahead"]["total_cost"] * (1 + 1e-9)
    assert off_total >= b_off["bound"] * (1 - 1e-9)
    if a_off["status"] == "optimal" and b_off["status"] == "optimal":  # both proven: the same optimum
        assert off_total == pytest.approx(after["policies"]["offline"]["total_cost"], rel=1e-9)


def test_an_offline_schedule_dearer_than_the_look_ahead_gives_way_with_its_bound(small: Scenario) -> None:
    """``no_dearer``: the look-ahead's counts when they cost less (or the offline found none), with the offline's
    bound and the gap to them; the offline's own when it costs no more; "optimal" when the bound meets them."""
    from planning.timeline.horizon_data import HorizonData
    from planning.timeline.horizon_ilp import schedule_value

    ctx, demand = engine_context(), _day(small, 3)
    seen: dict[str, policies.HorizonAdapter] = {}
    real = policies.HorizonAdapter.build

    def keep(*args: object, **kwargs: object) -> policies.HorizonAdapter:
        seen["adapter"] = real(*args, **kwargs)  # type: ignore[arg-type]
        return seen["adapter"]

    options = TimelineOptions(policies=("lookahead", "myopic"), baselines=(), static_peak=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policies.HorizonAdapter, "build", keep)
        run_timeline(small, demand, options=options, context=ctx)
    adapter = seen["adapter"]
    ahead = policies.lookahead(adapter, 3, time_limit_s=300.0, mip_rel_gap=0.0, myopic=lambda t, prev: {})
    d = HorizonData.build(adapter.problem(0, adapter.epochs, {}))
    v_ahead = schedule_value(d, [adapter.keys_of(c) for c in ahead.counts])
    dearer = [{k: n + 1 for k, n in c.items()} for c in ahead.counts]  # one more of everything, every epoch
    bound = 0.9 * v_ahead
    lost = policies.Schedule("offline", dearer, "feasible", bound, 0.5)
    kept = policies.no_dearer(adapter, lost, ahead)
    assert kept.counts == ahead.counts and kept.status == "feasible" and kept.bound == bound
    assert kept.gap == pytest.approx((v_ahead - bound) / v_ahead)
    assert "(the look-ahead schedule)" in kept.notes[0]
    assert policies.no_dearer(adapter, replace(lost, counts=ahead.counts), ahead).gap == 0.5  # no cheaper: its own
    none = policies.no_dearer(adapter, policies.Schedule("offline", [], "time_limit", bound, None), ahead)
    assert none.counts == ahead.counts and none.bound == bound and none.gap == kept.gap  # no plan of its own
    proven = policies.no_dearer(adapter, replace(lost, bound=v_ahead), ahead)
    assert proven.status == "optimal" and proven.gap == 0.0 and proven.notes == ()


def test_a_failure_in_the_loop_stops_the_offline_thread(small: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in the epoch loop reaches the caller, and the offline thread's token is set (it is not left
    running to its limit)."""
    from planning.timeline import beside

    started: list[beside.OfflineBeside] = []
    real = beside.OfflineBeside.start

    def spy(*args: object, **kwargs: object) -> beside.OfflineBeside:
        started.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return started[-1]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("an epoch failed")

    monkeypatch.setattr(beside.OfflineBeside, "start", spy)
    monkeypatch.setattr(loop, "run_epochs", broken)
    options = TimelineOptions(policies=POLICIES, baselines=(), static_peak=False, offline_time_limit_s=300.0)
    with pytest.raises(RuntimeError, match="an epoch failed"):
        run_timeline(small, _day(small, 1), options=options, context=engine_context())
    assert len(started) == 1 and started[0].token.is_set()


def test_a_cancel_while_the_offline_runs_beside_reaches_the_caller(small: Scenario,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's cancel, set while the offline MILP runs beside, ends the day with ``Cancelled``."""
    cancel = CancelFlag()
    release = threading.Event()
    real = policies.offline

    def held(*args: object, **kwargs: object) -> policies.Schedule:
        release.wait(60)  # the look-ahead and the loop are done and the caller cancels before the MILP starts
        return real(*args, **kwargs)  # type: ignore[arg-type]

    def cancel_after(*args: object, **kwargs: object) -> object:
        out = real_loop(*args, **kwargs)
        cancel.cancel()
        release.set()
        return out

    real_loop = loop.run_epochs
    monkeypatch.setattr(policies, "offline", held)
    monkeypatch.setattr(loop, "run_epochs", cancel_after)
    options = TimelineOptions(policies=POLICIES, baselines=(), static_peak=False, offline_time_limit_s=300.0)
    with pytest.raises(Cancelled):
        run_timeline(small, _day(small, 1), options=options, context=engine_context(), cancel=cancel)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_is_the_longer_part_when_the_offline_runs_beside() -> None:
    """Two look-ahead steps of 3 s planned, 22 to go, 24 epochs at a step ÷ H, a 40 s offline limit: after the
    offline (started at 10 s) the rest is 22 × 3 + 24 × 1 = 90 s; beside it the time left is max(90, 40 − 6), not
    their sum; once the rest is shorter than the offline's limit, the offline's."""
    clock = Clock()
    pace = Pace(None, 24, lookahead_steps=24, offline_limit_s=40.0, horizon=3, clock=clock)
    clock.now = 10.0
    pace.offline_beside_started()
    pace.lookahead_started("look-ahead")
    for _ in range(2):
        clock.now += 3.0
        pace.step_done("step")
    assert pace.left_s() == pytest.approx(22 * 3.0 + 24 * 1.0)
    pace.step_seconds = [3.0] * 24
    pace.epoch_seconds = [1.0] * 20  # 4 epochs of 1 s left, the offline has 40 − 6 = 34 s
    assert pace.left_s() == pytest.approx(34.0)
    with pace.offline("offline", tick_s=60.0):  # waited for: its start stays the thread's
        assert pace.offline_started == 10.0
    assert pace.left_s() == pytest.approx(4.0)
