"""The baseline memo (``planning.baselines.memo``, issue 41) answers a baseline only with what a fresh run of it
answers: a second run of the same problem is served from it without a solve; changing any input a baseline reads
(a template's throughput, its own offers' prices or availability, the demand, a strategy option, the engine's salt)
makes it solve anew, and a budget or objective, which no baseline reads, does not; the offers of another GPU type are not read by a ``single:<gpu>`` baseline (the dropped-GPU
what-if reuses the others); results a clock stopped are never stored; the disk part survives a new process."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import planning.baselines.base as base
from planning.allocate.problem import AllocationProblem
from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines import baseline_names, run_all_baselines
from planning.baselines.base import BaselineResult
from planning.baselines.memo import BaselineMemo, cacheable, from_json, to_json

SPEC = Synthetic(groups=3, templates_per_group=8, regions=2, shapes=4, max_available=6, demand_scale=0.6,
                 homogeneous_share=0.6)


def _answer(b: BaselineResult) -> tuple:
    """A baseline's answer without its wall time."""
    return (b.name, b.cost_per_hour, dict(b.served_fraction), dict(b.gpus_used), dict(b.nodes_used),
            dict(b.counts), b.feasible, b.note, b.penalty_per_hour, dict(b.details))


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the baselines actually run (not served by a memo), in order."""
    ran: list[str] = []
    real = base.run_baseline

    def spy(name: str, problem: AllocationProblem, **options: object) -> BaselineResult:
        ran.append(name)
        return real(name, problem, **options)

    monkeypatch.setattr(base, "run_baseline", spy)
    return ran


def test_the_same_problem_is_answered_from_the_memo_without_a_solve(solved: list[str]) -> None:
    for seed in range(3):
        p = random_problem(seed, SPEC)
        memo = BaselineMemo("salt")
        first = run_all_baselines(p, memo=memo)
        assert solved == baseline_names(p)
        solved.clear()
        again = run_all_baselines(p, memo=memo)
        assert solved == []
        assert memo.hits == len(baseline_names(p))
        assert [_answer(b) for b in again] == [_answer(b) for b in first]


def _reprice(p: AllocationProblem, gpu: str, factor: float, field: str = "price_per_hour") -> AllocationProblem:
    """``p`` with ``field`` of every offer of GPU type ``gpu``'s shapes × ``factor``."""
    offers = tuple(replace(o, **{field: type(getattr(o, field))(getattr(o, field) * factor)})
                   if o.shape.endswith(f"x{gpu}") else o for o in p.offers)
    return replace(p, offers=offers)


def test_an_input_a_baseline_reads_makes_it_solve_anew(solved: list[str]) -> None:
    p = random_problem(3, SPEC)
    memo = BaselineMemo("salt")
    run_all_baselines(p, memo=memo)
    changes = {
        "g1 prices": (_reprice(p, "g1", 1.3), {"homo", "homo-ilp", "single:g1", "memp"}),
        "g1 availability": (_reprice(p, "g1", 2, "available"), {"homo", "homo-ilp", "single:g1", "memp"}),
        "demand": (replace(p, classes=tuple(replace(q, rate=q.rate * 1.5) for q in p.classes)),
                   set(baseline_names(p))),
        "a g2 template's throughput": (replace(p, templates=tuple(
            replace(t, throughput={q: v * 1.1 for q, v in t.throughput.items()}) if t.gpu_types == ("g2",) else t
            for t in p.templates)), {"homo", "homo-ilp", "single:g2", "memp"}),
    }
    for what, (changed, expected) in changes.items():
        solved.clear()
        out = run_all_baselines(changed, memo=memo)
        assert set(solved) == expected, what
        fresh = run_all_baselines(changed)  # what every answer must be, memo or not
        assert [_answer(b) for b in out] == [_answer(b) for b in fresh], what
    solved.clear()
    budget = replace(p, objective="served", budget_per_hour=10.0)  # every baseline solves for cost, no budget
    out = run_all_baselines(budget, memo=memo)
    assert solved == []
    assert [_answer(b) for b in out] == [_answer(b) for b in run_all_baselines(budget)]
    solved.clear()
    run_all_baselines(p, memo=memo, model_size={q.group: 1e9 for q in p.classes})  # memP's option only
    assert solved == ["memp"]
    solved.clear()
    run_all_baselines(p, memo=BaselineMemo("another engine"))
    assert solved == baseline_names(p)


def test_a_dropped_gpu_type_leaves_the_other_single_type_baselines_answered(solved: list[str]) -> None:
    p = random_problem(5, SPEC)
    memo = BaselineMemo("salt")
    run_all_baselines(p, memo=memo)
    dropped = replace(p, templates=tuple(t for t in p.templates if "g3" not in t.gpu_types),
                      offers=tuple(o for o in p.offers if not o.shape.endswith("xg3")))
    solved.clear()
    out = run_all_baselines(dropped, memo=memo)
    assert set(solved) == {"homo", "homo-ilp", "memp"}
    assert [_answer(b) for b in out] == [_answer(b) for b in run_all_baselines(dropped)]


def test_a_result_a_clock_stopped_is_never_stored(tmp_path: Path) -> None:
    memo = BaselineMemo("salt", tmp_path)
    plain = BaselineResult("single:g0", 1.0, {"m0/prefill": 1.0}, {"g0": 1}, {("r", "1xg0"): 1},
                           {("m0/prefill@0", "r"): 1}, True, "ok", details={"stopped_by": "work"})
    assert cacheable(plain) and memo.put("a", plain)
    for details in ({"time_limited": True, "stopped_by": "clock"}, {"skipped": True}):
        stopped = replace(plain, details=details)
        assert not cacheable(stopped) and not memo.put("b", stopped)
        assert memo.get("b") is None
    assert from_json(to_json(plain)) == plain
    assert BaselineMemo("salt", tmp_path).get("a") == plain  # another process, the same folder
    (tmp_path / "c.json").write_text("{truncated")
    assert BaselineMemo("salt", tmp_path).get("c") is None and not (tmp_path / "c.json").exists()


def test_the_memo_is_bounded(tmp_path: Path) -> None:
    memo = BaselineMemo("salt", tmp_path, max_entries=2, max_bytes=1)
    r = BaselineResult("homo", 1.0, {"g": 1.0}, {}, {}, {}, True, "ok")
    for key in ("a", "b", "c"):
        memo.put(key, r)
    assert len(list(tmp_path.glob("*.json"))) <= 1
    assert memo.get("a") is None and memo.get("c") == r
