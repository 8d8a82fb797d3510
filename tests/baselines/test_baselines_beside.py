"""The baselines beside each other (``planning.baselines.beside``, issue 41 §3) answer exactly what they answer one
after another: the same results in the same order on seeded problems, the solve's deadline turning each one it
stops into a ``skipped`` placeholder, the caller's cancel still raising."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.allocate.synthetic import Synthetic, random_problem
from planning.baselines import baseline_names, run_all_baselines
from planning.baselines.base import BaselineResult
from planning.baselines.beside import workers_for
from planning.context import CancelFlag, Cancelled, Deadline

SPEC = Synthetic(groups=3, templates_per_group=8, regions=2, shapes=4, max_available=6, demand_scale=0.6)


def _answer(b: BaselineResult) -> tuple:
    """A baseline's answer without its wall time."""
    return (b.name, b.cost_per_hour, dict(b.served_fraction), dict(b.gpus_used), dict(b.nodes_used),
            dict(b.counts), b.feasible, b.note, b.penalty_per_hour,
            {k: v for k, v in b.details.items() if k != "seconds"})


def test_beside_each_other_they_answer_what_they_answer_in_turn() -> None:
    problems = [random_problem(seed, SPEC) for seed in range(4)]
    problems.append(replace(random_problem(9, SPEC), offers=tuple(replace(o, available=1)
                                                                  for o in random_problem(9, SPEC).offers)))
    for p in problems:
        serial = run_all_baselines(p)
        beside = run_all_baselines(p, workers=2)
        assert [b.name for b in beside] == baseline_names(p)
        assert [_answer(b) for b in beside] == [_answer(b) for b in serial]
    assert any(not b.feasible for p in problems for b in run_all_baselines(p))  # a scarce one among them


def test_the_solves_deadline_skips_what_it_stops_and_the_callers_cancel_raises() -> None:
    p = random_problem(1, SPEC)
    gone = Deadline(0.0)  # expired before the first baseline: each one is skipped (none raises), unless it
    out = run_all_baselines(p, cancel=gone, workers=2)  # answers without a solver (no template of its GPU type)
    free = run_all_baselines(p)
    assert [b.name for b in out] == baseline_names(p)
    assert all(b.details.get("skipped") or _answer(b) == _answer(f) for b, f in zip(out, free, strict=True))
    assert sum(bool(b.details.get("skipped")) for b in out) >= len(out) - 1
    cancelled = CancelFlag()
    cancelled.cancel()
    with pytest.raises(Cancelled):
        run_all_baselines(p, cancel=Deadline(60.0, cancelled), workers=2)


def test_a_child_process_fans_out_only_as_far_as_its_jobs_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """The main process takes ``PLANNING_BASELINE_WORKERS`` or the option; a child process (a job or pool
    worker) at most its job's share of the cores (``spawning.job_share``), which is 1 unless a job runner set
    it for the job running there."""
    import multiprocessing

    from planning import spawning

    monkeypatch.delenv("PLANNING_BASELINE_WORKERS", raising=False)
    assert workers_for(3) == 3
    assert workers_for(0) >= 1
    monkeypatch.setenv("PLANNING_BASELINE_WORKERS", "1")
    assert workers_for(3) == 1
    monkeypatch.setenv("PLANNING_BASELINE_WORKERS", "2")
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    assert workers_for(3) == 1  # a pool worker, or a job worker whose job shares its cores
    try:
        spawning.set_job_share(3)
        assert workers_for(5) == 2  # the environment's 2 within the share of 3
        monkeypatch.delenv("PLANNING_BASELINE_WORKERS")
        assert workers_for(5) == 3  # the option's 5 cut to the share
        assert workers_for(2) == 2
    finally:
        spawning.set_job_share(1)
    assert workers_for(5) == 1


def test_a_single_type_task_carries_its_own_templates_and_the_largest_starts_first() -> None:
    from planning.baselines.beside import longest_first, tasks_for

    p = random_problem(2, SPEC)
    names = baseline_names(p)
    tasks = tasks_for(names, p, {}, None)
    for task in tasks:
        if task.name.startswith("single:"):
            gpu = task.name.split(":", 1)[1]
            assert task.problem.templates == tuple(t for t in p.templates if t.gpu_types == (gpu,))
        else:
            assert task.problem is p
    order = longest_first(tasks)
    sizes = [len(tasks[i].problem.templates) for i in order if tasks[i].name.startswith("single:")]
    singles = sum(n.startswith("single:") for n in names)
    assert sorted(order) == list(range(len(tasks))) and sizes == sorted(sizes, reverse=True)
    assert all(tasks[i].name.startswith("single:") for i in order[:singles])


def test_started_early_they_answer_what_they_answer_after_the_allocation() -> None:
    """Every baseline but memP, started on the single-GPU-type part of a problem (as the pipeline does before the
    allocation), is taken as it is when the problem arrives (its answer being the one it would give then), and the answers are the serial run's on the whole
    problem; with a single-GPU-type template the early run lacked, none is taken and all are run again."""
    from planning.baselines.beside import EarlyStart, single_type_part

    for seed in range(3):
        p = random_problem(seed, SPEC)
        part = single_type_part(p)
        assert 0 < len(part.templates) < len(p.templates)  # the mixed templates are what it leaves out
        serial = [_answer(b) for b in run_all_baselines(p)]
        early = EarlyStart(2)
        early.start(part)
        # a GPU type of mixed templates only has a single-type baseline that starts after: with memP, the rest
        assert sorted(early.usable(p)) == sorted(n for n in baseline_names(part) if n != "memp") != []
        assert [_answer(b) for b in run_all_baselines(p, workers=2, early=early)] == serial
        short = replace(part, templates=part.templates[1:])
        stale = EarlyStart(2)
        stale.start(short)
        assert stale.futures and stale.usable(p) == [] and not stale.futures
        assert [_answer(b) for b in run_all_baselines(p, workers=2, early=stale)] == serial


def test_a_single_type_baseline_the_memo_answers_is_not_started_early() -> None:
    """With a memo that answered the same problem before (a what-if that leaves it as it was), no
    ``single:<gpu>`` baseline is sent to the pool early (its key on the early part is its key on the whole
    problem), the others still are, and the answers are the serial run's."""
    from planning.baselines.beside import EarlyStart, single_type_part
    from planning.baselines.memo import BaselineMemo

    for seed in range(3):
        p = random_problem(seed, SPEC)
        serial = [_answer(b) for b in run_all_baselines(p)]
        memo = BaselineMemo("salt")
        run_all_baselines(p, memo=memo)
        early = EarlyStart(2, memo=memo)
        before = (memo.hits, memo.misses)
        early.start(single_type_part(p))
        assert (memo.hits, memo.misses) == before  # asking whether to start is not an answer from the memo
        singles = [n for n in baseline_names(p) if n.startswith("single:")]
        assert singles and not any(n in early.futures for n in singles)
        assert early.futures  # homo, homo-ilp, cauchy: their keys read the whole problem, so they start
        hits = memo.hits
        assert [_answer(b) for b in run_all_baselines(p, workers=2, early=early, memo=memo)] == serial
        assert memo.hits - hits == len(baseline_names(p))  # a memo answer wins over an early one
        early.close()


def test_nothing_starts_early_on_one_process_and_the_callers_cancel_still_raises() -> None:
    from planning.baselines.beside import EarlyStart, single_type_part

    p = random_problem(1, SPEC)
    alone = EarlyStart(1)
    alone.start(single_type_part(p))
    assert alone.futures == {} and alone.usable(p) == []
    cancelled = CancelFlag()
    early = EarlyStart(2, cancelled)
    early.start(single_type_part(p))
    cancelled.cancel()
    with pytest.raises(Cancelled):
        run_all_baselines(p, cancel=Deadline(60.0, cancelled), workers=2, early=early)
    assert early.futures == {}


def test_a_task_counts_its_wait_in_the_queue_against_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task sent with 10 s left that waits 4 s for a worker has 6 s left when it starts, never less than 0."""
    import time

    from planning.baselines.beside import BaselineTask

    p = random_problem(0, SPEC)
    monkeypatch.setattr(time, "time", lambda: 104.0)
    assert BaselineTask("homo", p, {}, 10.0, 100.0).seconds_left() == pytest.approx(6.0)
    assert BaselineTask("homo", p, {}, 3.0, 100.0).seconds_left() == 0.0
    assert BaselineTask("homo", p, {}, None, 100.0).seconds_left() is None
