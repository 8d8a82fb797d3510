"""Fair share: round-robin across owners, per-user and server caps, queue places, cancel isolation."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from planning.errors import PlanningError
from planning.jobs import JobRunner, JobStore, JobToken, ProgressFn
from planning.jobs.fairshare import (
    FairQueue,
    Place,
    Waiting,
    max_jobs_per_user,
    ordinal,
    pick_next,
)
from planning.jobs.runner import Cadence

WAIT_S = 120  # how long a test waits for an event before calling it hung: never a claim on speed


# -- the pure queue ---------------------------------------------------------------------------------
def started_in_order(queue: FairQueue, finish: bool) -> list[str]:
    """Start jobs until none can start; with ``finish`` each started job ends at once (one slot cycling)."""
    order = []
    while (job_id := queue.start_next()) is not None:
        order.append(job_id)
        if finish:
            queue.remove(job_id)
    return order


def test_round_robin_across_owners_one_heavy_queue_never_blocks_a_first_job() -> None:
    queue = FairQueue(slots=1, per_user=2)
    for i in range(20):
        queue.push(f"heavy{i}", "heavy")
    queue.push("a0", "alice")
    queue.push("b0", "bob")
    queue.push("a1", "alice")
    order = started_in_order(queue, finish=True)
    assert order[:6] == ["heavy0", "a0", "b0", "heavy1", "a1", "heavy2"]
    assert order[6:] == [f"heavy{i}" for i in range(3, 20)]


def test_per_user_cap_and_server_slots() -> None:
    queue = FairQueue(slots=3, per_user=2)
    for i in range(5):
        queue.push(f"h{i}", "heavy")
    assert started_in_order(queue, finish=False) == ["h0", "h1"]  # heavy's cap, though a slot is free
    assert queue.running_by_owner() == Counter({"heavy": 2})
    queue.push("a0", "alice")
    queue.push("a1", "alice")
    assert started_in_order(queue, finish=False) == ["a0"]  # the third slot; then the server is full
    queue.remove("h0")
    assert started_in_order(queue, finish=False) == ["h2"]  # both run one: heavy was served longer ago
    queue.remove("h1")
    assert started_in_order(queue, finish=False) == ["a1"]  # now alice's turn
    queue.remove("a0")
    assert started_in_order(queue, finish=False) == ["h3"]  # alice has nothing queued


def test_places_count_your_queue_and_everyone_ahead() -> None:
    queue = FairQueue(slots=1, per_user=1)
    for i in range(5):
        queue.push(f"h{i}", "heavy")
    assert queue.start_next() == "h0"
    queue.push("a0", "alice")
    queue.push("a1", "alice")
    # start order from here: a0 (alice runs none), h1, a1, h2, h3, h4
    assert [j.job_id for j in queue.queued()] == ["a0", "h1", "a1", "h2", "h3", "h4"]
    assert queue.place("a0") == Place(mine=1, ahead=0)
    assert queue.place("a1") == Place(mine=2, ahead=2)
    assert queue.place("h3") == Place(mine=3, ahead=4)
    assert queue.place("h0") is None  # running, not queued
    assert Place(mine=2, ahead=5).text() == "2nd in your queue, 5 ahead overall"
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_pick_next_prefers_fewest_running_then_longest_unserved() -> None:
    waiting = [Waiting("x", "a", 1), Waiting("y", "b", 2), Waiting("z", "c", 3)]
    assert pick_next(waiting, Counter({"a": 1}), 2, {}) == waiting[1]  # b and c run none; b waited longer
    assert pick_next(waiting, Counter(), 2, {"a": 0, "b": 1}) == waiting[2]  # c never served
    assert pick_next(waiting, Counter({"a": 2, "b": 2, "c": 2}), 2, {}) is None



def test_max_jobs_per_user_from_env_with_a_clear_error() -> None:
    assert max_jobs_per_user({}) == 2
    assert max_jobs_per_user({"PLANNING_MAX_JOBS_PER_USER": " 4 "}) == 4
    for bad in ("0", "two", "-1", "1.5"):
        with pytest.raises(PlanningError) as err:
            max_jobs_per_user({"PLANNING_MAX_JOBS_PER_USER": bad})
        assert err.value.field == "PLANNING_MAX_JOBS_PER_USER"


# -- the runner, with jobs that wait for the test's events (no clock) -----------------------------
class Gates:
    """Job functions that report they started and then wait until the test opens their gate."""

    def __init__(self) -> None:
        self.started: dict[str, threading.Event] = {}
        self.release: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def events(self, name: str) -> tuple[threading.Event, threading.Event]:
        with self.lock:
            return (self.started.setdefault(name, threading.Event()),
                    self.release.setdefault(name, threading.Event()))

    def job(self, request: dict[str, Any], progress: ProgressFn, token: JobToken) -> dict[str, Any]:
        started, release = self.events(request["name"])
        started.set()
        while not release.wait(0.01):
            token.check()
        return {"name": request["name"]}


def submit(runner: JobRunner, gates: Gates, name: str, owner: str) -> str:
    return runner.submit("gate", {"name": name}, gates.job, owner=owner)


def test_runner_starts_another_users_first_job_before_the_heavy_queue(runner: JobRunner, gates: Gates) -> None:
    heavy = [submit(runner, gates, f"h{i}", "heavy") for i in range(5)]
    assert gates.events("h0")[0].wait(WAIT_S) and gates.events("h1")[0].wait(WAIT_S)
    first = submit(runner, gates, "a0", "alice")
    assert runner.get(first).status == "queued"
    place = runner.place(first)
    assert place is not None and place.text() == "1st in your queue, 0 ahead overall"
    assert runner.place(heavy[2]) == Place(mine=1, ahead=1)
    gates.events("h0")[1].set()  # one heavy job ends: alice's job takes the slot, not heavy's third
    assert gates.events("a0")[0].wait(WAIT_S)
    assert runner.get(heavy[2]).status == "queued"
    queued, running = runner.queue()
    assert [w.job_id for w in queued] == heavy[2:]
    assert sorted(str(owner) for owner in running.values()) == ["alice", "heavy"]
    for name in ("h1", "a0", "h2", "h3", "h4"):
        gates.events(name)[1].set()
    assert all(runner.wait(j, timeout=WAIT_S).status == "done" for j in [*heavy, first])


def test_per_user_cap_leaves_a_slot_for_others(tmp_path: Path, gates: Gates) -> None:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, per_user=1,
                  cadence=Cadence(cancel_poll_interval=0.01))
    try:
        heavy = [submit(r, gates, f"h{i}", "heavy") for i in range(3)]
        assert gates.events("h0")[0].wait(WAIT_S)
        assert r.get(heavy[1]).status == "queued"  # a slot is free, but heavy is at their cap
        alice = submit(r, gates, "a0", "alice")
        assert gates.events("a0")[0].wait(WAIT_S)  # alice starts at once in the free slot
        assert r.place(heavy[1]) == Place(mine=1, ahead=0)
    finally:
        for event in list(gates.release.values()) + [gates.events(n)[1] for n in ("h0", "h1", "h2", "a0")]:
            event.set()
        r.shutdown(wait=True)
        assert r.get(alice).status == "done" and all(r.get(j).status == "done" for j in heavy)
        r.store.close()


def test_identical_requests_share_a_job_and_cancel_touches_only_ones_own(runner: JobRunner, gates: Gates) -> None:
    shared = submit(runner, gates, "s", "alice")
    assert submit(runner, gates, "s", "bob") == shared  # the store's reuse across users
    assert gates.events("s")[0].wait(WAIT_S)
    assert runner.cancel(shared, by="carol") is False  # not hers: refused, untouched
    assert runner.cancel(shared, by="alice") is True  # alice withdraws; bob still waits for it
    record = runner.get(shared)
    assert record.status == "running" and not record.cancel_requested
    assert runner.cancel(shared, by="bob") is True  # the last interested user: it stops
    assert runner.wait(shared, timeout=WAIT_S).status == "cancelled"


def test_whose_cancel_counts_survives_a_server_restart(tmp_path: Path, gates: Gates) -> None:
    """The store, not the runner's memory, holds who wants a job: after a restart (a new runner on the same
    store), one user's cancel still only withdraws their interest while the other's holds."""
    path = tmp_path / "jobs.sqlite"
    first = JobRunner(JobStore(path), max_workers=1, cadence=Cadence(cancel_poll_interval=0.01))
    try:
        shared = first.submit("gate", {"name": "s"}, gates.job, owner="alice")
        assert first.submit("gate", {"name": "s"}, gates.job, owner="bob") == shared
        assert gates.events("s")[0].wait(WAIT_S)
        second = JobRunner(JobStore(path), max_workers=1, cadence=Cadence(cancel_poll_interval=0.01))
        try:
            assert second.cancel(shared, by="carol") is False  # no interest: untouched
            assert second.cancel(shared, by="alice") is True  # withdrawn: bob's interest still holds
            record = second.get(shared)
            assert record.status == "running" and not record.cancel_requested
            assert second.store.can_see(shared, "bob") and not second.store.can_see(shared, "alice")
            assert second.cancel(shared, by="bob") is True  # the last holder: the store flags it, the first stops
            assert first.wait(shared, timeout=WAIT_S).status == "cancelled"
        finally:
            second.shutdown(wait=True)
            second.store.close()
    finally:
        gates.events("s")[1].set()
        first.shutdown(wait=True, cancel=True)
        first.store.close()


def test_cancel_of_a_queued_job_drops_it_from_the_fair_queue(runner: JobRunner, gates: Gates) -> None:
    jobs = [submit(runner, gates, f"h{i}", "heavy") for i in range(3)]
    assert gates.events("h1")[0].wait(WAIT_S)
    assert runner.cancel(jobs[2], by="alice") is False  # another user's queued job
    assert runner.place(jobs[2]) is not None
    assert runner.cancel(jobs[2], by="heavy") is True
    assert runner.get(jobs[2]).status == "cancelled" and runner.place(jobs[2]) is None
    assert jobs[2] not in runner.active_jobs()


def test_without_sign_in_each_session_is_its_own_user_of_one_workspace(tmp_path: Path, gates: Gates) -> None:
    """Without sign-in every session's jobs belong to the one local workspace (listed together, kept after a
    reload), yet each browser session is its own user of the fair share (``fair_key``)."""
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, per_user=1,
                  cadence=Cadence(cancel_poll_interval=0.01))

    def session(name: str, key: str) -> str:
        return r.submit("gate", {"name": name}, gates.job, owner="local", fair_key=key)

    try:
        heavy = [session(f"h{i}", "local:one") for i in range(3)]
        assert gates.events("h0")[0].wait(WAIT_S)
        assert r.get(heavy[1]).status == "queued"  # session one is at its cap of 1 though a worker is free
        other = session("o0", "local:two")
        assert gates.events("o0")[0].wait(WAIT_S)  # session two is another user: it starts at once
        assert {j.owner for j in r.list_jobs(owner="local")} == {"local"}  # one workspace lists them all
        assert r.cancel(heavy[2], by="local:two") is False  # not that session's job
        assert r.cancel(heavy[2], by="local:one") is True
    finally:
        for name in ("h0", "h1", "h2", "o0"):
            gates.events(name)[1].set()
        r.shutdown(wait=True)
        assert r.get(other).status == "done" and r.get(heavy[2]).status == "cancelled"
        r.store.close()


# -- the background lane (the What-if page's prefetch) -----------------------------------------------------------
def test_background_jobs_start_only_in_slots_no_users_job_wants() -> None:
    queue = FairQueue(slots=2, per_user=2)
    queue.push("p0", "alice", background=True)
    queue.push("p1", "alice", background=True)
    queue.push("u0", "bob")
    assert queue.queued()[0].job_id == "u0"  # a user's job is ahead of every background job
    assert started_in_order(queue, finish=False) == ["u0", "p0"]  # p1 waits: the lane keeps one slot short
    assert queue.running_by_owner() == Counter({"bob": 1, "alice": 1})
    queue.push("a0", "alice")
    assert queue.start_next() is None  # both slots are taken ...
    assert queue.preempt() == "p0"  # ... so the background job is named to stop, once
    assert queue.preempt() is None
    queue.remove("p0")
    assert queue.start_next() == "a0"  # alice's own job: her background job never counted towards her cap
    assert queue.start_next() is None


def test_background_jobs_run_only_on_cores_no_users_job_takes() -> None:
    """On two cores a background job runs while no user's job does, and is named to stop when one starts (a
    slider's far move ran at half speed beside a neighbour planned ahead); on eight cores the slots bind."""
    queue = FairQueue(slots=2, per_user=2, cores=2)
    queue.push("p0", "alice", background=True)
    queue.push("p1", "alice", background=True)
    assert queue.start_next() == "p0" and queue.start_next() is None  # one core kept free
    assert queue.preempt() is None  # nobody wants its core
    queue.push("u0", "bob")
    assert queue.start_next() == "u0"
    assert queue.background_slots == 0
    assert queue.preempt() == "p0"  # bob's job took the spare core: p0 gives its core up, named once
    assert queue.preempt() is None
    queue.remove("p0")
    assert queue.start_next() is None  # p1 waits while bob's job runs, though a slot is free
    queue.remove("u0")
    assert queue.start_next() == "p1"

    wide = FairQueue(slots=3, per_user=2, cores=8)
    for name, owner in (("p0", "alice"), ("p1", "carol"), ("p2", "dave")):
        wide.push(name, owner, background=True)
    assert started_in_order(wide, finish=False) == ["p0", "p1"]  # slots − 1
    wide.push("u0", "bob")
    assert wide.start_next() == "u0" and wide.preempt() is None  # a free core each: nothing to stop


def test_a_single_core_runs_one_background_job_while_nobody_waits() -> None:
    queue = FairQueue(slots=2, per_user=2, cores=1)
    queue.push("p0", "alice", background=True)
    assert queue.start_next() == "p0"
    queue.push("u0", "bob")
    assert queue.start_next() == "u0" and queue.background_slots == 0 and queue.preempt() == "p0"


def test_a_users_job_on_two_cores_stops_the_background_job_beside_it(tmp_path: Path, gates: Gates) -> None:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, per_user=2,
                  cadence=Cadence(cancel_poll_interval=0.01))
    r.cores = 2
    try:
        ahead = r.submit("gate", {"name": "p0"}, gates.job, owner="alice", background=True)
        assert gates.events("p0")[0].wait(WAIT_S)
        first = submit(r, gates, "u0", "bob")  # a slot is free: it starts, and p0 gives up its core
        assert gates.events("u0")[0].wait(WAIT_S)
        assert r.wait(ahead, timeout=WAIT_S).status == "cancelled"
        again = r.submit("gate", {"name": "p0b"}, gates.job, owner="alice", background=True)  # asked again
        time.sleep(0.2)
        assert r.get(again).status == "queued"  # not while bob's job runs
        gates.events("u0")[1].set()
        assert r.wait(first, timeout=WAIT_S).status == "done"
        assert gates.events("p0b")[0].wait(WAIT_S)  # then it runs
    finally:
        for name in ("p0", "p0b", "u0"):
            gates.events(name)[1].set()
        r.shutdown(wait=True)
        r.store.close()


def test_a_promoted_background_job_is_a_users_job() -> None:
    queue = FairQueue(slots=2, per_user=2)
    queue.push("p0", "alice", background=True)
    queue.push("p1", "alice", background=True)
    assert queue.start_next() == "p0"
    queue.promote("p1")  # alice's slider reached that position: she waits for it now
    assert not queue.is_background("p1") and queue.is_background("p0")
    assert queue.start_next() == "p1"
    queue.promote("p0")
    queue.push("u0", "bob")
    assert queue.preempt() is None  # nothing left to stop: both are users' jobs


def test_a_users_job_stops_a_running_background_job_and_takes_its_slot(tmp_path: Path, gates: Gates) -> None:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, per_user=2,
                  cadence=Cadence(cancel_poll_interval=0.01))
    r.cores = 8  # the slots bind here, not the cores (a two-core server: the test below)
    try:
        warm = [r.submit("gate", {"name": f"p{i}"}, gates.job, owner="alice", background=True) for i in range(2)]
        assert gates.events("p0")[0].wait(WAIT_S)
        assert r.get(warm[1]).status == "queued"  # one slot stays free for a user's job
        first = submit(r, gates, "u0", "bob")
        assert gates.events("u0")[0].wait(WAIT_S)  # it starts at once, in the free slot
        second = submit(r, gates, "u1", "carol")
        assert r.wait(warm[0], timeout=WAIT_S).status == "cancelled"  # the prefetch gave its slot up
        assert gates.events("u1")[0].wait(WAIT_S)
        assert r.get(warm[1]).status == "queued"
        joined = r.submit("gate", {"name": "p1"}, gates.job, owner="alice")  # alice now waits for p1
        assert joined == warm[1]
        gates.events("u0")[1].set()
        assert gates.events("p1")[0].wait(WAIT_S)
        assert r.get(joined).status == "running" and r.get(second).status == "running"
    finally:
        for name in ("p0", "p1", "u0", "u1"):
            gates.events(name)[1].set()
        r.shutdown(wait=True)
        assert r.get(first).status == "done" and r.get(second).status == "done" and r.get(warm[1]).status == "done"
        r.store.close()
