"""Child-process targets for the job tests; imports only planning.jobs so spawned processes start fast."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from planning.jobs import JobRunner, JobStore, JobToken, ProgressFn


def hammer(path: str, worker: int, writes: int, errors: Any, go: Any) -> None:
    """Child process: create jobs and write progress as fast as possible, counting lock errors."""
    store = JobStore(path, recover=False)
    go.wait()  # start together so the writes really overlap
    failures = 0
    for i in range(writes // 2):
        try:
            job_id, _ = store.create_or_reuse(f"w{worker}-{i}", "hammer", {"w": worker, "i": i}, None)
            store.mark_running(job_id)
            store.set_progress(job_id, 0.5, "half")
            store.finish_done(job_id, {"i": i})
        except sqlite3.OperationalError:
            failures += 1
    errors.put(failures)
    store.close()


def looping_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    for i in range(2000):
        progress(i / 2000, f"step {i}")
        token.check()
        time.sleep(0.005)
    return {"finished": True}


def serve_one_job(path: str, job_ids: Any) -> None:
    """Child process: a runner (as in another Streamlit server) runs one long job to its end."""
    runner = JobRunner(JobStore(path), max_workers=1, progress_interval=0.02, cancel_poll_interval=0.02)
    job_id = runner.submit("loop", {"child": True}, looping_job, owner="tab-1")
    job_ids.put(job_id)
    runner.wait(job_id, timeout=20)
    runner.shutdown()


def pid_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """Report the process that ran the job."""
    import os

    progress(0.5, "half way")
    return {"pid": os.getpid()}


def failing_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    from planning.errors import PlanningError

    if request.get("how") == "planning":
        raise PlanningError("models[0].slo", "is impossible.", "relax it.")
    if request.get("how") == "die":
        import os

        os._exit(7)  # the worker process dies mid-job (as when the kernel kills it for memory)
    raise ZeroDivisionError("a bug")


def on_demand_solve_held_in_pricing(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """``ui.jobs.solve_job`` — a real solve — whose progress callback holds the engine at its first
    column-generation round (``pricing: column generation round …``, reported by the on-demand engine) until the
    job's token sees the cancel the parent wrote to the store (at most 60 s). The engine then has to stop at its own next cancel check:
    holding only makes the cancel land inside the engine however fast or slow the machine is."""
    from ui.jobs import solve_job

    held = False

    def hold(fraction: float, message: str) -> None:
        nonlocal held
        progress(fraction, message)
        if not held and message.startswith("pricing: column generation round"):
            held = True
            until = time.monotonic() + 60
            while not token.is_set() and time.monotonic() < until:
                time.sleep(0.02)

    return solve_job(request, hold, token)
