"""A settle whose repaired plan is within ``linked.NEAR_GAP`` of its bound, in an exact solve, gives way to the
merged ILP at once (``linked.near``, with ``settle_stall``; issue 41: coral-extended's demand ×3.5 spent a round of
part ILPs per settle on a bound that never moved, 10⁻⁶ under the plan). The answer stays the joint optimum."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from planning.allocate import linked, solve_allocation

from ..baselines.test_settle_stall import _rounds
from .test_settle_off import _scarce


def test_near_means_a_plan_within_the_limit_that_the_solve_does_not_accept() -> None:
    assert linked.near(10.0, 10.00005, 0.0)  # 5·10⁻⁶ apart, an exact solve
    assert not linked.near(10.0, 10.001, 0.0)  # 10⁻⁴ apart: rounds may still help
    assert not linked.near(10.0, 10.00005, 1e-3)  # the solve accepts that gap: the settle closes on its own
    assert not linked.near(10.0, math.inf, 0.0)  # no plan in hand


def test_a_settle_stopped_near_its_bound_keeps_the_joint_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the limit lifted (every plan is "near"), each open settle stops at its first plan and the merged ILP
    answers: the joint optimum on every seed, in fewer rounds on some."""
    log = _rounds(monkeypatch)
    fewer = 0
    for seed in range(40, 64):
        p = _scarce(seed)
        log.clear()
        before = solve_allocation(p, diagnose=False)
        n_before = sum(r for _closed, r in log)
        with monkeypatch.context() as m:
            m.setattr(linked, "NEAR_GAP", 1.0)
            log.clear()
            cut = solve_allocation(p, diagnose=False)
        n_cut = sum(r for _closed, r in log)
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        assert cut.status == before.status == joint.status == "optimal", seed
        assert cut.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-7), seed
        assert n_cut <= n_before, seed
        fewer += n_cut < n_before
    assert fewer >= 2, fewer
