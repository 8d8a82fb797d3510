"""The group-by-group shortcut when shared availability binds: parts that over-use an offer together are merged
and solved as one (exact), the MIP start reaches each part, and large ILPs prove their parts to gap 0."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.allocate import (
    AllocationProblem,
    Offer,
    TemplateOption,
    WorkloadClass,
    certify,
    linked,
    solve_allocation,
)
from planning.allocate.certify import exact_when_small
from planning.allocate.instance import build_instance
from planning.allocate.matrix_model import build_matrix, start_vector
from planning.allocate.synthetic import Synthetic, random_problem
from planning.errors import PlanningError


def _scarce(seed: int) -> AllocationProblem:
    return random_problem(seed, Synthetic(groups=4, templates_per_group=8, regions=2, shapes=4, max_available=6,
                                          demand_scale=0.3), K=0.05, mip_rel_gap=1e-9)


def _no_linked_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Competing parts go straight to the merge (``planning.allocate.linked`` finds nothing)."""
    monkeypatch.setattr(linked, "settle", lambda *_a, **_k: (None, 0.0))


def test_merged_parts_give_the_joint_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_linked_bound(monkeypatch)
    merged = 0
    for seed in range(40, 56):
        p = _scarce(seed)
        fast = solve_allocation(p, diagnose=False)
        joint = solve_allocation(replace(p, decompose=False), diagnose=False)
        assert fast.status == joint.status == "optimal", seed
        assert fast.total_per_hour == pytest.approx(joint.total_per_hour, rel=1e-7), seed
        merged += any("merged where availability binds" in m for m in fast.messages)
    assert merged >= 4  # availability binds on these seeds: the merge was taken, not only the plain shortcut


def test_two_groups_wanting_the_same_scarce_node_are_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_linked_bound(monkeypatch)
    # a and b each take the one cheap node alone; together one of them must buy the dear one; c is on its own
    def tpl(group: str, shape: str) -> TemplateOption:
        return TemplateOption(f"{group}-{shape}", group, {shape: 1}, {group: 10.0})

    templates = (tpl("a", "1xA"), tpl("a", "1xB"), tpl("b", "1xA"), tpl("b", "1xB"), tpl("c", "1xC"))
    offers = (Offer("r", "1xA", 1.0, 1), Offer("r", "1xB", 3.0, 5), Offer("r", "1xC", 2.0, 1))
    classes = tuple(WorkloadClass(g, g, 10.0) for g in "abc")
    res = solve_allocation(AllocationProblem(templates, offers, classes, mip_rel_gap=0.0), diagnose=False)
    assert res.status == "optimal"
    assert res.cost_per_hour == pytest.approx(6.0)
    assert any("3 parts solved as 2" in m for m in res.messages), res.messages
    # when every part conflicts with every other, the joint model answers (the same optimum)
    two = solve_allocation(AllocationProblem(templates[:4], offers[:2], classes[:2], mip_rel_gap=0.0), diagnose=False)
    assert two.status == "optimal" and two.cost_per_hour == pytest.approx(4.0)
    assert not any("parts solved as" in m for m in two.messages)


def test_a_part_gets_its_share_of_the_start() -> None:
    p = _scarce(41)
    best = solve_allocation(p, diagnose=False)
    p = replace(p, start=best.counts)
    inst = build_instance(p)
    part = inst.components()[0]
    sub, _pairs, _trip = inst.restrict(part)
    idx, val = start_vector(build_matrix(sub, False, None))
    assert len(idx)  # the other parts' instances are left out, not a reason to drop the start
    mine = {k: n for k, n in best.counts.items() if any(t.id == k[0] and t.group in {inst.groups[g] for g in part}
                                                        for t in p.templates)}
    assert sum(val[:-1]) == pytest.approx(sum(mine.values()))
    joint_idx, _ = start_vector(build_matrix(inst, False, None))
    assert len(joint_idx)


def test_large_ilps_prove_small_parts_to_gap_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _scarce(44)
    assert exact_when_small(p).mip_rel_gap == 0.0  # small: the whole ILP at gap 0
    monkeypatch.setattr(certify, "GAP_ZERO_TEMPLATES", 10)  # 32 templates, parts of 8
    big = exact_when_small(replace(p, mip_rel_gap=1e-3))
    assert big.mip_rel_gap == 1e-3 and big.part_mip_rel_gap == 0.0
    res = solve_allocation(big, diagnose=False)
    assert res.status == "optimal" and res.gap is not None and res.gap <= 1e-6
    monkeypatch.setattr(certify, "GAP_ZERO_TEMPLATES", 7)  # parts larger than the limit: nothing asked of them
    assert exact_when_small(replace(p, mip_rel_gap=1e-3)).part_mip_rel_gap is None
    served = exact_when_small(replace(p, mip_rel_gap=1e-3, objective="served"))
    assert served.part_mip_rel_gap is None  # the shortcut is for the cost objective only
    with pytest.raises(PlanningError, match="part_mip_rel_gap"):
        replace(p, part_mip_rel_gap=1.5)


def test_lean_parts_but_a_full_search_for_merged_parts_and_the_joint_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lean problem (the baselines') solves its first part ILPs without HiGHS's sub-MIP heuristics, but parts
    merged because they compete, and the joint model, keep them (``solve.full_search``: without them the merged
    ILP of coral-extended's single:L40S at demand ×2 stopped at its node limit 1.4 % dearer)."""
    import planning.allocate.matrix_model as mm

    _no_linked_bound(monkeypatch)
    seen: list[tuple[int, bool]] = []
    real = mm.stop_rules

    def recording(h: object, problem: object) -> None:
        real(h, problem)
        seen.append((int(h.getNumCol()), bool(h.getOptionValue("mip_heuristic_run_rins")[1])))  # type: ignore[attr-defined]

    monkeypatch.setattr(mm, "stop_rules", recording)

    def tpl(group: str, shape: str) -> TemplateOption:
        return TemplateOption(f"{group}-{shape}", group, {shape: 1}, {group: 10.0})

    templates = (tpl("a", "1xA"), tpl("a", "1xB"), tpl("b", "1xA"), tpl("b", "1xB"), tpl("c", "1xC"))
    offers = (Offer("r", "1xA", 1.0, 1), Offer("r", "1xB", 3.0, 5), Offer("r", "1xC", 2.0, 1))
    classes = tuple(WorkloadClass(g, g, 10.0) for g in "abc")
    p = AllocationProblem(templates, offers, classes, mip_rel_gap=0.0, lean=True)
    res = solve_allocation(p, diagnose=False)
    assert res.status == "optimal" and res.cost_per_hour == pytest.approx(6.0)
    assert any("3 parts solved as 2" in m for m in res.messages)
    first = [n for n, rins in seen if not rins]  # the parts alone (b is a's twin: its answer is a's)
    merged = [n for n, rins in seen if rins]  # a and b merged
    assert [rins for _, rins in seen] == [False] * len(first) + [True] * len(merged)
    assert first and merged and max(merged) > max(first)
    seen.clear()
    two = solve_allocation(AllocationProblem(templates[:4], offers[:2], classes[:2], mip_rel_gap=0.0, lean=True),
                           diagnose=False)  # every part conflicts with every other: the joint model answers
    assert two.status == "optimal" and two.cost_per_hour == pytest.approx(4.0)
    assert seen[-1][1]  # the joint model: the full search
