"""``AllocationProblem.settle`` off: the group-by-group shortcut merges competing parts at once, with no linked
settle (the on-demand engine's fixing ILPs; issue 41: over their few fixed columns the merged ILP proves the optimum
sooner than a settle's rounds of part ILPs — coral-extended's sweep point ×4, 144 → 95 s). The answer stays the
joint optimum."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning.allocate import AllocationProblem, linked, solve_allocation

from .test_decompose_merge import _scarce as decompose_scarce

SEEDS = range(40, 64)


def _scarce(seed: int) -> AllocationProblem:
    """The seeded scarce problems of ``test_decompose_merge``, solved exactly and with ``settle_stall`` (as the
    on-demand engine's ILPs)."""
    return replace(decompose_scarce(seed), mip_rel_gap=0.0, settle_stall=True)


def test_without_the_settle_the_answer_is_the_joint_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    real = linked.settle
    calls: list[bool] = []

    def spy(inst: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(inst.problem.settle)
        return real(inst, *args, **kwargs)

    monkeypatch.setattr(linked, "settle", spy)
    settled = 0
    for seed in SEEDS:
        p = _scarce(seed)
        calls.clear()
        with_settle = solve_allocation(p, diagnose=False)
        settled += bool(calls)
        calls.clear()
        without = solve_allocation(replace(p, settle=False), diagnose=False)
        assert not calls, seed  # no settle at all
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        assert without.status == with_settle.status == joint.status, seed
        if joint.status == "optimal":
            assert without.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-7), seed
            assert "settled" not in without.phases[-1].solver_status, seed
    assert settled >= 5, settled  # the seeds do reach a settle with it on: the flag is what removes it
