"""Job store under faults (issue 28): jobs recovered from damaged files, the cost of the write-ahead-log check on
open, and how soon a stopped worker is flagged.

Run: ``python3 benchmarks/bench_job_store.py [--jobs 200] [--runs 5]``. Prints, per damage pattern, the jobs the
page salvage recovers next to what a row-by-row SQL copy (skipping ranges SQLite cannot read) gets; the median time
to open a store whose log holds ~4 MB, with and without the log check; and, for a worker process stopped with
SIGSTOP (heartbeat every 0.5 s), the median time from its last heartbeat to the "no heartbeat" flag.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.jobs import JobRunner, JobStore
from planning.jobs.dbfile import connect
from planning.jobs.runner import Cadence
from planning.jobs.salvage import salvage_rows

PAGE = 4096


def build(path: Path, n: int) -> None:
    with JobStore(path) as store:
        for i in range(n):
            job_id, _ = store.create_or_reuse(f"job{i:04d}", "solve", {"i": i, "pad": "x" * 300}, "o")
            store.mark_running(job_id)
            store.finish_done(job_id, {"cost": i * 1.5, "blob": "r" * (20_000 if i % 10 == 0 else 100)})


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    rnd = random.Random(28)
    if how == "stripes (64 B every 997 B)":
        for offset in range(PAGE, len(data), 997):
            data[offset:offset + 64] = b"\xff" * 64
    elif how == "truncated to half":
        del data[len(data) // 2:]
    elif how == "10 % of pages random":
        for page in rnd.sample(range(1, pages), max(1, pages // 10)):
            data[page * PAGE:(page + 1) * PAGE] = rnd.randbytes(PAGE)
    elif how == "page 1 garbage":
        data[:PAGE] = b"\x07" * PAGE
    elif how == "page 2 (table root) garbage":
        data[PAGE:2 * PAGE] = b"\x07" * PAGE
    path.write_bytes(bytes(data))


def sql_copy(path: Path) -> int:
    """Rows a row-by-row SQL copy reads, jumping over (exponentially growing) rowid ranges that raise."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    except sqlite3.DatabaseError:
        return 0
    if not columns:
        return 0
    got, last, step = 0, 0, 1
    while last < 1 << 40:
        try:
            row = conn.execute(f"SELECT rowid, {', '.join(columns)} FROM jobs WHERE rowid > ? ORDER BY rowid LIMIT 1",
                               (last,)).fetchone()
        except sqlite3.DatabaseError:
            last, step = last + step, step * 2
            continue
        if row is None:
            break
        got, last, step = got + 1, row[0], 1
    conn.close()
    return got


def recovery(n: int, tmp: Path) -> None:
    print(f"jobs recovered of {n} (page salvage | row-by-row SQL copy):")
    for how in ("stripes (64 B every 997 B)", "truncated to half", "10 % of pages random", "page 1 garbage",
                "page 2 (table root) garbage"):
        path = tmp / "damaged.sqlite"
        for side in ("", "-wal", "-shm"):
            Path(f"{path}{side}").unlink(missing_ok=True)
        build(path, n)
        damage(path, how)
        print(f"  {how:<30} {len(salvage_rows(path)):>5} | {sql_copy(path):>5}")


def open_cost(runs: int, tmp: Path) -> None:
    live = tmp / "live" / "jobs.sqlite"
    live.parent.mkdir()
    store = JobStore(live)
    holder = sqlite3.connect(live)
    holder.execute("SELECT count(*) FROM jobs").fetchone()  # keeps the log from being checkpointed
    i = 0
    while Path(f"{live}-wal").stat().st_size < 4_000_000 and i < 900:
        store.create_or_reuse(f"w{i}", "solve", {"i": i, "pad": "y" * 3000}, None)
        i += 1
    wal_mb = Path(f"{live}-wal").stat().st_size / 1e6
    with_check, without = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        JobStore(live, recover=False).close()
        with_check.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        connect(live, 10_000)[0].close()
        without.append(time.perf_counter() - t0)
    holder.close()
    store.close()
    print(f"open with a {wal_mb:.1f} MB write-ahead log: {1e3 * statistics.median(with_check):.1f} ms with the log "
          f"check, {1e3 * statistics.median(without):.1f} ms without (medians of {runs})")


def stall_flag(runs: int, tmp: Path) -> None:
    from tests.jobs._children import quiet_job

    beat = 0.5
    runner = JobRunner(JobStore(tmp / "stall.sqlite"), max_workers=1, processes=True, warm_modules=("planning.jobs",),
                       cadence=Cadence(heartbeat_interval=beat))
    after_beat, after_stop = [], []
    try:
        for k in range(runs):
            job = runner.submit("quiet", {"seconds": 120, "k": k}, quiet_job)
            while not ((r := runner.get(job)).worker_pid and r.message == "thinking"):
                time.sleep(0.01)
            worker = r.worker_pid or 0
            time.sleep(beat * 1.5)
            os.kill(worker, signal.SIGSTOP)
            stopped = time.time()
            while not (r := runner.get(job)).attention() or "heartbeat for" not in (r.attention() or ""):
                time.sleep(0.01)
            flagged = time.time()
            after_beat.append(flagged - (r.heartbeat or 0.0))
            after_stop.append(flagged - stopped)
            os.kill(worker, signal.SIGCONT)
            runner.cancel(job)
            runner.wait(job, timeout=60)
    finally:
        runner.shutdown(wait=True, cancel=True)
    print(f"stopped worker, heartbeat every {beat} s: flagged {statistics.median(after_beat):.2f} s after its last "
          f"heartbeat (target <= {2 * beat:.1f} s + one poll), {statistics.median(after_stop):.2f} s after SIGSTOP "
          f"(medians of {runs})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    try:
        recovery(args.jobs, tmp)
        open_cost(args.runs, tmp)
        stall_flag(args.runs, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
