"""Baselines under a deadline: memP takes huge availabilities in closed form, every strategy checks cancel, and
``run_all_baselines`` returns the finished ones plus skipped placeholders when the solve's deadline passes."""

from __future__ import annotations

import random
import time

import pytest

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass
from planning.baselines import run_all_baselines, run_baseline
from planning.baselines.memp import _nodes_to_take
from planning.context import CancelFlag, Cancelled, Deadline


def _take_one_by_one(left: int, got: float, node: float, target: float) -> int:
    """The loop memP used to run (one node per turn)."""
    take = 0
    while left > 0 and got + node / 2 <= target:
        left -= 1
        got += node
        take += 1
    return take


def test_closed_form_take_matches_the_loop_on_random_cases() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        node = rng.choice([24.0, 48.0, 80.0, 160.0, 640.0, rng.uniform(0.5, 700.0)])
        target = rng.uniform(0, 5000)
        got = rng.uniform(0, target) if rng.random() < 0.7 else rng.uniform(0, 6000)
        left = rng.randint(0, 60)
        assert _nodes_to_take(left, got, node, target) == _take_one_by_one(left, got, node, target)


def _two_models(available: int) -> AllocationProblem:
    t = (TemplateOption("a:H100", "a/decode", {"1xH100": 1}, {"a": 10.0}),
         TemplateOption("b:L4", "b/decode", {"1xL4": 1}, {"b": 3.0}))
    offers = (Offer("r", "1xH100", 4.0, available), Offer("r", "1xL4", 1.0, available))
    return AllocationProblem(t, offers, (WorkloadClass("a", "a/decode", 50.0), WorkloadClass("b", "b/decode", 9.0)))


def test_memp_with_huge_availability_returns_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    """10^12 nodes per offer: memP sizes each model's share in closed form, one ``_nodes_to_take`` per (model,
    offer it can use), here 2 (the old one-node-per-turn loop would take 10^12 turns), and the answer is exact."""
    from planning.baselines import memp

    calls: list[tuple[float, float, float, float]] = []
    real = memp._nodes_to_take

    def counted(left: float, got: float, node: float, target: float) -> int:
        calls.append((left, got, node, target))
        return real(left, got, node, target)

    monkeypatch.setattr(memp, "_nodes_to_take", counted)
    r = run_baseline("memp", _two_models(10**12), model_size={"a/decode": 70, "b/decode": 8},
                     gpu_memory_gb={"H100": 80, "L4": 24})
    assert len(calls) == 2 and all(c[0] == 10**12 for c in calls)
    assert r.feasible and r.cost_per_hour == pytest.approx(5 * 4.0 + 3 * 1.0)
    share = r.details["share_nodes"]
    assert sum(share["a/decode"].values()) > 10**9  # the share itself is in the billions of nodes


@pytest.mark.parametrize("name", ["homo", "homo-ilp", "single:H100", "memp"])
def test_every_strategy_raises_cancelled_when_the_token_is_set(name: str) -> None:
    flag = CancelFlag()
    flag.cancel()
    with pytest.raises(Cancelled):
        run_baseline(name, _two_models(8), cancel=flag)


def test_run_all_baselines_skips_the_rest_at_the_deadline() -> None:
    deadline = Deadline(0.0)
    time.sleep(0.01)
    results = run_all_baselines(_two_models(8), cancel=deadline)
    assert [r.name for r in results] == ["homo", "homo-ilp", "single:H100", "single:L4", "memp"]
    assert all(r.details.get("skipped") and not r.feasible and "time limit" in r.note for r in results)


def test_run_all_baselines_reraises_a_user_cancel() -> None:
    user = CancelFlag()
    user.cancel()
    with pytest.raises(Cancelled):
        run_all_baselines(_two_models(8), cancel=Deadline(60.0, user))
