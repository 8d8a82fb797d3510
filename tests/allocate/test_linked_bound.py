"""The linked Lagrangian bound of the group-by-group shortcut (``planning.allocate.linked``, issue 41): competing
parts settled without the merged ILP give the joint model's optimum, the bound never exceeds the joint optimum,
and "optimal" is said only at gap 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pytest

from planning.allocate import (
    AllocationProblem,
    Offer,
    TemplateOption,
    WorkloadClass,
    linked,
    solve_allocation,
)
from planning.allocate.instance import Instance, build_instance
from planning.allocate.solvers import ZERO_GAP
from tests.allocate.test_decompose_merge import _scarce  # the same seeded scarce problems


def _fits(p: AllocationProblem, nodes: Mapping[tuple[str, str], int]) -> bool:
    avail = {(o.region, o.shape): o.available for o in p.offers}
    return all(n <= avail[k] for k, n in nodes.items())


def _alone(p: AllocationProblem) -> tuple[Instance, list[linked._Part]]:
    """The instance and its parts solved alone on the full availability (the shortcut's first step)."""
    inst = build_instance(p)
    clock = linked._Clock(60.0)
    parts = []
    for groups in inst.components():
        if not np.any(np.isin(inst.class_group, groups) & (inst.class_rate > 0)):
            continue
        part, _bound = linked._part_solve(inst, groups, inst.offer_avail.astype(float), None, clock, 0.0)
        assert part is not None
        parts.append(part)
    return inst, parts


def test_settled_parts_give_the_joint_optimum() -> None:
    settled = 0
    for seed in range(40, 64):
        p = _scarce(seed)
        fast = solve_allocation(p, diagnose=False)
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        assert fast.status == joint.status == "optimal", seed
        assert fast.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-7), seed
        assert fast.gap is not None and fast.gap <= ZERO_GAP, seed  # "optimal" only at gap 0
        assert _fits(p, fast.nodes_used), seed  # the repaired plans fit the shared availability together
        settled += any("linked lagrangian bound" in m for m in fast.messages)
    assert settled >= 6  # parts competed and were settled without the merged ILP on these seeds


def test_the_linked_bound_never_exceeds_the_joint_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    raised = competing = 0
    for seed in range(40, 64):
        p = _scarce(seed)
        inst, parts = _alone(p)
        used = np.sum([q.used for q in parts], axis=0)
        if not np.any(used > inst.offer_avail + 1e-9):
            continue  # the parts' plans fit: nothing competes
        competing += 1
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        assert joint.status == "optimal" and joint.total_per_hour is not None
        out, _seconds = linked.settle(inst, parts, 60.0, 0.0)
        alone = sum(q.bound for q in parts)
        if out is None:
            continue
        assert out.bound <= joint.total_per_hour * (1 + 1e-7) + 1e-7, seed  # a lower bound
        assert out.bound >= alone - 1e-9, seed  # never below the parts' own bounds
        cost = sum(q.primal for q in out.parts)
        assert cost >= joint.total_per_hour * (1 - 1e-7) - 1e-7, seed  # a plan of the joint problem
        fitted = np.sum([q.used for q in out.parts], axis=0)
        assert np.all(fitted <= inst.offer_avail + 1e-9), seed
        if out.closed:
            assert cost == pytest.approx(joint.total_per_hour, rel=1e-7), seed
        raised += out.bound > alone + 1e-6
    assert competing >= 8
    assert raised >= 1  # the multipliers did more than λ = 0 (the parts' own bounds) on some seed


def _designed() -> AllocationProblem:
    # a and b each take the one cheap node alone; together one of them must buy the dear one; c is on its own
    def tpl(group: str, shape: str) -> TemplateOption:
        return TemplateOption(f"{group}-{shape}", group, {shape: 1}, {group: 10.0})

    templates = (tpl("a", "1xA"), tpl("a", "1xB"), tpl("b", "1xA"), tpl("b", "1xB"), tpl("c", "1xC"))
    offers = (Offer("r", "1xA", 1.0, 1), Offer("r", "1xB", 3.0, 5), Offer("r", "1xC", 2.0, 1))
    classes = tuple(WorkloadClass(g, g, 10.0) for g in "abc")
    return AllocationProblem(templates, offers, classes, mip_rel_gap=0.0)


def test_the_multiplier_closes_what_the_parts_bounds_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    # parts alone: 1 + 1 + 2 = 4; a repaired plan costs 6; λ = 2 on the cheap node prices it like the dear one,
    # so L(2) = 2 + 3 + 3 − 2·1 = 6 and the plan is proven without the merged ILP
    p = _designed()
    inst, parts = _alone(p)
    out, _ = linked.settle(inst, parts, 60.0, 0.0)
    assert out is not None and out.closed and out.rounds >= 1
    assert out.bound == pytest.approx(6.0)
    res = solve_allocation(p, diagnose=False)
    assert res.status == "optimal" and res.cost_per_hour == pytest.approx(6.0)
    assert any("linked lagrangian bound" in m for m in res.messages), res.messages
    # without multiplier rounds the repaired plan (6) is not proven against the parts' bounds (4): merged instead
    monkeypatch.setattr(linked, "LAGRANGE_ROUNDS", 0)
    out0, _ = linked.settle(inst, parts, 60.0, 0.0)
    assert out0 is not None and not out0.closed and out0.bound == pytest.approx(4.0)
    res0 = solve_allocation(p, diagnose=False)
    assert res0.status == "optimal" and res0.cost_per_hour == pytest.approx(6.0)
    assert any("3 parts solved as 2" in m for m in res0.messages), res0.messages


def test_an_unproven_plan_is_not_called_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    # the time is gone before any multiplier round: the repaired plan is not proven, and the shortcut does not
    # claim it — the merged part (here the joint model) answers
    p = _designed()
    inst, parts = _alone(p)
    out, _ = linked.settle(inst, parts, 0.0, 0.0)
    assert out is None or not out.closed


def test_twin_parts_share_highs_answers_but_keep_their_own_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two models with the same templates, demand and offers give byte-identical part ILPs; the settle solves such a
    model once (``_Clock.answers``) but each part keeps its own groups' plan: the joint optimum, every group served
    (a memo that handed back the twin's plan made catalog-wide's baselines 15-20 % "cheaper" by serving one twin
    twice; caught by ``bench_baseline_work``)."""
    def tpl(group: str, shape: str) -> TemplateOption:
        return TemplateOption(f"{group}-{shape}", group, {shape: 1}, {group: 10.0})

    templates = tuple(tpl(g, s) for g in ("a", "b", "c") for s in ("1xA", "1xB"))
    offers = (Offer("r", "1xA", 1.0, 2), Offer("r", "1xB", 3.0, 9))
    classes = tuple(WorkloadClass(g, g, 15.0) for g in "abc")  # each wants 2 nodes: 1xA for two of them at most
    calls = {"part": 0, "highs": 0}
    part_solve, highs_part = linked._part_solve, linked._highs_part

    def counting_part(*a: object, **k: object) -> object:
        calls["part"] += 1
        return part_solve(*a, **k)  # type: ignore[arg-type]

    def counting_highs(*a: object, **k: object) -> object:
        calls["highs"] += 1
        return highs_part(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(linked, "_part_solve", counting_part)
    monkeypatch.setattr(linked, "_highs_part", counting_highs)
    p = AllocationProblem(templates, offers, classes, mip_rel_gap=0.0)
    fast = solve_allocation(p, diagnose=False)
    joint = solve_allocation(replace(p, decompose=False), diagnose=False)
    assert fast.status == joint.status == "optimal"
    assert fast.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-9)
    assert all(fast.served[g] >= 1 - 1e-9 for g in "abc")  # every twin served, none twice
    assert _fits(p, fast.nodes_used)
    assert calls["part"] > calls["highs"] > 0  # some twin's ILP came from the memo
