"""The group-by-group shortcut solves a part's model once: a later part with the same model (two models with the
same specs, demand and offers) gets the earlier answer, and the plan is the one HiGHS gives solving both."""

from __future__ import annotations

from dataclasses import replace

import pytest

import planning.allocate.matrix_model as matrix_model
import planning.allocate.solve as solve_mod
from planning.allocate import AllocationProblem, TemplateOption, WorkloadClass, solve_allocation
from planning.allocate.synthetic import Synthetic, random_problem


def _twins(seed: int) -> AllocationProblem:
    """A random problem whose every group has a twin: the same templates and demand under another name."""
    p = random_problem(seed, Synthetic(groups=2, templates_per_group=7, regions=2, shapes=4, max_available=12,
                                       demand_scale=0.3))
    twin = tuple(TemplateOption(f"twin-{t.id}", f"twin-{t.group}", dict(t.usage),
                                {f"twin-{q}": v for q, v in t.throughput.items()}) for t in p.templates)
    classes = tuple(WorkloadClass(f"twin-{q.id}", f"twin-{q.group}", q.rate) for q in p.classes)
    return replace(p, templates=p.templates + twin, classes=p.classes + classes)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = matrix_model.solve_matrix

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(matrix_model, "solve_matrix", counted)
    return calls


def test_a_twin_part_is_solved_once_and_the_plan_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    shortcut = 0
    for seed in range(5):
        p = _twins(seed)
        calls = _counting(monkeypatch)
        fast = solve_allocation(p, diagnose=False)
        n_fast = len(calls)
        with monkeypatch.context() as m:
            m.setattr(solve_mod, "_model_key", lambda model, gap: None)  # every part solved by HiGHS
            calls.clear()
            slow = solve_allocation(p, diagnose=False)
        assert (fast.status, fast.counts, fast.served, fast.cost_per_hour, fast.nodes_used) == \
            (slow.status, slow.counts, slow.served, slow.cost_per_hour, slow.nodes_used)
        if any(ph.phase == "cost (by group)" for ph in slow.phases):  # the shortcut ran: twins were reused
            shortcut += 1
            assert n_fast < len(calls)
            twins = {t for (t, _r) in fast.counts if t.startswith("twin-")}
            assert len(twins) == len({t for (t, _r) in fast.counts}) - len(twins)  # the same plan per twin
    assert shortcut >= 3  # most seeds' parts fit their shared offers (else the joint model runs: no parts)


def test_an_earlier_answer_that_took_longer_than_the_time_left_is_solved_again() -> None:
    from planning.allocate.instance import build_instance
    from planning.allocate.solvers import RawSolution

    p = _twins(0)
    inst = build_instance(p)
    runner = solve_mod._Runner(inst, p, "matrix", False)
    solved: dict[bytes, RawSolution] = {}
    first, _ = solve_mod._solve_part(inst, inst.components()[0], runner, 60.0, 0.0)
    part, _ = solve_mod._solve_part(inst, inst.components()[0], runner, 60.0, 0.0, solved)
    assert part is not None and first is not None and len(solved) == 1
    key = next(iter(solved))
    slow = solved[key]
    solved[key] = replace(slow, phase=replace(slow.phase, seconds=1e9))  # "took longer than any limit"
    again, _ = solve_mod._solve_part(inst, inst.components()[0], runner, 60.0, 0.0, solved)
    assert again is not None and solved[key].phase.seconds < 1e9  # solved anew, and the new answer kept
