"""Moore–Hodgson admission minimises late requests: checked by brute force over all orders."""

from __future__ import annotations

import itertools
import random

import pytest

from planning.errors import PlanningError
from planning.sharing.admission import QueuedRequest, fcfs, moore_hodgson


def _queue(seed: int) -> list[QueuedRequest]:
    rng = random.Random(seed)
    n = rng.randint(3, 7)
    out = []
    for j in range(n):
        arrival = -rng.uniform(0.0, 2.0)  # already waiting at now = 0
        prompt = rng.choice([128, 512, 1024, 2048, 4096])
        speed = rng.choice([4000.0, 8000.0, 16000.0])  # chunked-prefill tokens/s of the model serving it
        out.append(QueuedRequest.from_prompt(j, arrival, rng.choice([0.2, 0.5, 1.0, 2.0]), prompt, speed))
    return out


def _max_on_time(reqs: list[QueuedRequest]) -> int:
    best = 0
    for order in itertools.permutations(reqs):
        t, ok = 0.0, 0
        for r in order:
            t += r.prefill_s
            ok += t <= r.deadline_s + 1e-12
        best = max(best, ok)
    return best


def test_moore_hodgson_is_optimal_on_60_seeded_queues() -> None:
    beats_fcfs = 0
    for seed in range(60):
        reqs = _queue(seed)
        adm = moore_hodgson(reqs, now=0.0)
        by_id = {r.id: r for r in reqs}
        # every admitted request, run in the returned order from now, meets its deadline
        t = 0.0
        for rid, fin in zip(adm.admitted, adm.finish_s, strict=True):
            t += by_id[rid].prefill_s
            assert fin == pytest.approx(t) and t <= by_id[rid].deadline_s + 1e-12
        assert len(adm.admitted) + len(adm.late) == len(reqs)
        assert len(adm.admitted) == _max_on_time(reqs), seed
        assert len(adm.admitted) >= len(fcfs(reqs).admitted)
        beats_fcfs += len(adm.admitted) > len(fcfs(reqs).admitted)
    assert beats_fcfs > 0  # the seeded queues include cases where the order matters


def test_longest_request_is_dropped() -> None:
    reqs = [QueuedRequest("long", 0.0, 1.0, 0.9), QueuedRequest("a", 0.0, 1.0, 0.3), QueuedRequest("b", 0.0, 1.1, 0.3)]
    adm = moore_hodgson(reqs)
    assert adm.admitted == ("a", "b") and adm.late == ("long",)


def test_bad_request_names_the_field() -> None:
    with pytest.raises(PlanningError, match=r"requests\[0\].prefill_s"):
        moore_hodgson([QueuedRequest(0, 0.0, 1.0, -1.0)])
