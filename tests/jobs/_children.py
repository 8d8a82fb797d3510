"""Child-process targets for the job tests; imports only planning.jobs so spawned processes start fast."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from planning.jobs import JobRunner, JobStore, JobToken, ProgressFn
from planning.jobs.runner import Cadence


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


LOOP_HANG_S = 600.0
"""How long :func:`looping_job` runs when no cancel arrives: a bound on a hang, not on speed."""


def looping_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """Report progress and check the token until cancelled: only a cancel ends it (or, when the cancel never
    arrives, ``LOOP_HANG_S``, after which it finishes "done", which a cancel test reports as a failure). Before,
    it ran 2,000 steps of 5 ms, so a parent slower than ~10 s to send its cancel saw "done"."""
    t_end = time.monotonic() + LOOP_HANG_S
    i = 0
    while time.monotonic() < t_end:
        progress(min(i / 2000, 0.99), f"step {i}")
        token.check()
        time.sleep(0.005)
        i += 1
    return {"finished": True}


def serve_one_job(path: str, job_ids: Any) -> None:
    """Child process: a runner (as in another Streamlit server) runs one long job to its end."""
    runner = JobRunner(JobStore(path), max_workers=1,
                       cadence=Cadence(progress_interval=0.02, cancel_poll_interval=0.02))
    job_id = runner.submit("loop", {"child": True}, looping_job, owner="tab-1")
    job_ids.put(job_id)
    runner.wait(job_id, timeout=LOOP_HANG_S)  # the parent cancels it; the bound is on a hang
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
    job's token sees the cancel the parent wrote to the store (at most 300 s, a bound on a hang). The engine then has to stop at its own next cancel check:
    holding only makes the cancel land inside the engine however fast or slow the machine is."""
    from ui.jobs import solve_job

    held = False

    def hold(fraction: float, message: str) -> None:
        nonlocal held
        progress(fraction, message)
        if not held and message.startswith("pricing: column generation round"):
            held = True
            until = time.monotonic() + 300
            while not token.is_set() and time.monotonic() < until:
                time.sleep(0.02)

    return solve_job(request, hold, token)


# --- fault suite (issue 28) ---------------------------------------------------------------------------------------
def held_solve_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """``ui.jobs.solve_job`` — a real solve — held at its first progress report until the file named by
    ``request["release"]`` exists (or the job is cancelled; at most 300 s), so a test can act mid-solve however
    fast or slow the machine is. The hold is reported as progress ("held: …") for the test to wait on."""
    from pathlib import Path

    from ui.jobs import solve_job

    release = Path(request["release"])
    held = False

    def hold(fraction: float, message: str) -> None:
        nonlocal held
        if not held:
            held = True
            progress(fraction, f"held: {message}")
            until = time.monotonic() + 300
            while not release.exists() and not token.is_set() and time.monotonic() < until:
                time.sleep(0.02)
        progress(fraction, message)

    return solve_job(request, hold, token)


def self_killing_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """Its worker process is killed with SIGKILL on every attempt (what the kernel's OOM killer does)."""
    import os
    import signal

    progress(0.1, "about to die")
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
    return {}


def quiet_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """Reports progress once, then works ``request["seconds"]`` (or until ``request["release"]`` exists) without
    reporting any: alive (its heartbeat goes on) but making no visible progress."""
    from pathlib import Path

    progress(0.1, "thinking")
    release = Path(request["release"]) if request.get("release") else None
    until = time.monotonic() + float(request.get("seconds", 300))
    while time.monotonic() < until and not (release is not None and release.exists()):
        token.check()
        time.sleep(0.02)
    return {"slept": True}


def big_result_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """A result of ``request["mb"]`` megabytes (to fill a small disk)."""
    return {"blob": "x" * int(float(request["mb"]) * 1_000_000)}


def serve_held_solve(path: str, request_json: str) -> None:
    """A "server" process: a process runner (as the workbench's) solving one held job, kept alive until killed."""
    import json

    runner = JobRunner(JobStore(path), max_workers=1, processes=True,
                       cadence=Cadence(heartbeat_interval=0.5, progress_interval=0.05,
                                       cancel_poll_interval=0.05))
    job_id = runner.submit("solve", json.loads(request_json), held_solve_job)
    print(job_id, flush=True)
    time.sleep(3600)


def hung_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """Reports progress once, then hangs in native code holding the GIL (a catastrophic regular expression, ~2**40
    steps): no thread of its process runs any more, so its heartbeat stops, as in a solver stuck in C."""
    import re

    progress(0.1, "thinking")
    time.sleep(0.5)  # let the progress row and a heartbeat land first
    re.match(r"(a+)+$", "a" * 40 + "b")
    return {}


def share_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """The processes the job may use (``spawning.job_share``) and, with ``request["baselines"]``, the seeded
    problem's baselines as ``workers_for`` runs them in this worker, with the pools this process holds after."""
    from planning.spawning import _POOLS, job_share

    out: dict[str, Any] = {"share": job_share()}
    if request.get("baselines"):  # as on a server: the suite's PLANNING_BASELINE_WORKERS=1 is not set there
        import os

        os.environ.pop("PLANNING_BASELINE_WORKERS", None)  # (this worker belongs to the asking test's runner)
        from planning.allocate.synthetic import Synthetic, random_problem
        from planning.baselines import run_all_baselines
        from planning.baselines.beside import workers_for

        spec = Synthetic(groups=3, templates_per_group=8, regions=2, shapes=4, max_available=6, demand_scale=0.6)
        workers = workers_for(0)
        found = run_all_baselines(random_problem(int(request["seed"]), spec), workers=workers)
        out.update(workers=workers, pools=sorted(_POOLS),
                   answers=[[b.name, b.cost_per_hour, b.feasible, b.note] for b in found])
    return out


def children_job(request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
    """Report the process that ran the job and how many processes it had started (its baselines' pool)."""
    import multiprocessing
    import os

    return {"pid": os.getpid(), "children": len(multiprocessing.active_children())}
