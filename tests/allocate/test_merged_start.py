"""The merged ILP after a settle that did not close starts from the settle's best plan (``solve._settle`` →
``matrix_model.PartialStart``), with HiGHS's root heuristics off: the same optimum as the joint model, from the
plan the settle found (issue 41, round 16)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planning.allocate import linked, matrix_model, solve_allocation
from planning.allocate.matrix_model import ROOT_HEURISTICS, PartialStart
from tests.allocate.test_decompose_merge import _scarce
from tests.allocate.test_linked_bound import _designed


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, PartialStart | None, dict[str, bool]]]:
    """Every ``solve_matrix`` call: its model, its partial start and the HiGHS root heuristics' options after it."""
    calls: list[tuple[Any, PartialStart | None, dict[str, bool]]] = []
    real = matrix_model.solve_matrix

    def spy(model: Any, phase: str, *a: Any, **k: Any) -> Any:
        raw = real(model, phase, *a, **k)
        start = k.get("start")
        options = {name: bool(model.highs.getOptionValue(name)[1]) for name in ROOT_HEURISTICS}
        calls.append((model, start if isinstance(start, PartialStart) else None, options))
        return raw

    monkeypatch.setattr(matrix_model, "solve_matrix", spy)
    return calls


def test_the_settles_plan_starts_the_merged_ilp(monkeypatch: pytest.MonkeyPatch) -> None:
    # no multiplier round: the repaired plan (6) is not proven against the parts' bounds (4), so a and b merge
    p = _designed()
    monkeypatch.setattr(linked, "LAGRANGE_ROUNDS", 0)
    calls = _spy(monkeypatch)
    res = solve_allocation(p, diagnose=False)
    assert res.status == "optimal" and res.cost_per_hour == pytest.approx(6.0)
    started = [(m, s, o) for m, s, o in calls if s is not None]
    assert len(started) == 1  # the merged part, and only it
    model, start, options = started[0]
    inst = model.inst
    assert len(start.nu) == inst.n_pairs
    # the start is a plan of the merged part: each of a, b one node, together on the cheap and the dear one
    assert start.nu.sum() == 2 and float(inst.pair_price @ start.nu) == pytest.approx(4.0)
    assert not any(options.values())  # root heuristics off where the start is given
    assert all(all(o.values()) for _m, s, o in calls if s is None)  # and on everywhere else


def test_started_merges_give_the_joint_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the seeded scarce problems without multiplier rounds, the settles that do not close hand their plan to
    the merged ILP; every answer is the joint model's optimum, at gap 0."""
    monkeypatch.setattr(linked, "LAGRANGE_ROUNDS", 0)
    calls = _spy(monkeypatch)
    started = 0
    for seed in range(40, 64):
        p = _scarce(seed)
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        calls.clear()
        fast = solve_allocation(p, diagnose=False)
        assert fast.status == joint.status == "optimal", seed
        assert fast.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-7), seed
        for model, start, _o in calls:
            if start is None:
                continue
            started += 1
            inst = model.inst
            used = np.zeros(len(inst.offer_keys))
            np.add.at(used, inst.use_row, start.nu[inst.use_pair] * inst.use_val)
            assert np.all(used <= inst.offer_avail + 1e-9), seed  # the start fits the merged part's offers
            assert np.all(start.nu == np.rint(start.nu)) and np.all(start.nu <= inst.pair_ub), seed
    assert started >= 6, started  # not a no-op on these seeds
