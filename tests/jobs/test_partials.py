"""A running job's best answer so far (planning.jobs.partials): kept only while the job runs, read back as written,
best effort when the store refuses it (issue 41 §5, round 21)."""

from __future__ import annotations

from pathlib import Path

from planning.jobs import JobStore
from planning.jobs.partials import partial_written, read_partial, write_partial
from planning.jobs.reporting import ProgressWriter


def _running(store: JobStore, name: str) -> str:
    job_id, _ = store.create_or_reuse(name, "solve", {"n": name}, None)
    store.mark_running(job_id)
    return job_id


def test_a_running_jobs_partial_answer_is_read_back_and_dropped_once_the_job_ends(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    assert read_partial(store, "nobody") is None  # a store without the table answers None
    a, b = _running(store, "a"), _running(store, "b")
    assert write_partial(store, a, {"cost": 3.0})
    first = read_partial(store, a)
    assert first is not None and first[1] == '{"cost":3.0}'
    assert write_partial(store, a, {"cost": 2.5})  # a better one replaces it
    again = read_partial(store, a)
    assert again is not None and again[1] == '{"cost":2.5}' and again[0] >= first[0]
    assert partial_written(store, a) == again[0]  # the stamp a page polls, without the plan
    store.finish_done(a, {"cost": 2.0})
    assert read_partial(store, a) is None and partial_written(store, a) is None  # ended: its result supersedes it
    assert not write_partial(store, a, {"cost": 1.0})  # never kept for a job that is not running
    assert write_partial(store, b, {"cost": 9.0})  # this write drops a's row too
    with store._sql("counting") as conn:
        assert [r[0] for r in conn.execute("SELECT job_id FROM partials")] == [b]
    store.close()


def test_the_progress_writer_keeps_plans_until_the_job_ends_and_never_fails_it(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    job = _running(store, "c")
    writer = ProgressWriter(store, job, 0.0)

    class Plan:
        def to_dict(self) -> dict[str, float]:
            return {"cost": 4.0}

    writer.plan(Plan())
    found = read_partial(store, job)
    assert found is not None and found[1] == '{"cost":4.0}'
    writer.plan({"cost": float("nan")})  # does not serialise: dropped, no error
    writer.flush()
    writer.plan({"cost": 1.0})  # the job is ending: ignored
    found = read_partial(store, job)
    assert found is not None and found[1] == '{"cost":4.0}'
    store.close()
    writer.plan({"cost": 0.5})  # a closed store: dropped, no error
