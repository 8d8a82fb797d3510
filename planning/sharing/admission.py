"""GPU-local request admission by Moore–Hodgson (Prism Sec. 6.3, Alg. 2): fewest TTFT deadline misses.

Problem (1 || Σ U_j): one GPU queue; requests j with arrival a_j, TTFT SLO s_j (deadline d_j = a_j + s_j)
and prefill time e_j = p_j / c_j (prompt tokens over the model's chunked-prefill speed), all waiting at time
``now``; run them one after another. Choose the admitted subset S and its order to maximise |S| with every
admitted request finishing by its deadline (the rest are late: rejected or served after the others).

Alg. 2: sort by deadline; append each request and advance the clock by e_j; when the request just added
misses its deadline, drop the admitted request of longest e (and rewind the clock by its e). Moore (1968)
and Cheriyan–Ravi–Skutella (2021) prove this admits a maximum on-time set; the admitted requests run in
deadline order. This module is standalone so a request-level simulator can call it for each GPU queue.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from planning.errors import PlanningError


@dataclass(frozen=True)
class QueuedRequest:
    """A request waiting in a GPU queue: arrival (s), TTFT SLO (s) and prefill time (s) on this GPU."""

    id: int | str
    arrival_s: float
    ttft_slo_s: float
    prefill_s: float

    @property
    def deadline_s(self) -> float:
        return self.arrival_s + self.ttft_slo_s

    @classmethod
    def from_prompt(cls, id: int | str, arrival_s: float, ttft_slo_s: float, prompt_tokens: float,
                    prefill_tokens_per_s: float) -> QueuedRequest:
        """A request whose prefill time is ``prompt_tokens / prefill_tokens_per_s`` (Alg. 2's e = p / c)."""
        if prefill_tokens_per_s <= 0:
            raise PlanningError("prefill_tokens_per_s", f"is {prefill_tokens_per_s}.", "give a positive speed.")
        return cls(id, arrival_s, ttft_slo_s, prompt_tokens / prefill_tokens_per_s)


@dataclass(frozen=True)
class Admission:
    """Admitted request ids in dispatch order (each meets its deadline) and the late ones (input order)."""

    admitted: tuple[int | str, ...]
    late: tuple[int | str, ...]
    finish_s: tuple[float, ...]  # finish time of each admitted request


def _check(requests: Sequence[QueuedRequest]) -> None:
    for i, r in enumerate(requests):
        for name in ("arrival_s", "ttft_slo_s", "prefill_s"):
            v = getattr(r, name)
            if not math.isfinite(v) or (name != "arrival_s" and v < 0):
                raise PlanningError(f"requests[{i}].{name}", f"is {v}.", "give a finite number (≥ 0 for times).")


def moore_hodgson(requests: Sequence[QueuedRequest], now: float = 0.0) -> Admission:
    """Alg. 2: the largest set of requests that can all meet their TTFT deadlines, in dispatch order.

    Parameters
    ----------
    requests:
        Waiting requests (ids should be unique).
    now:
        Current time (s); the GPU starts the first admitted prefill at ``now``.

    Returns
    -------
    Admission: admitted ids in earliest-deadline order, late ids, finish time of each admitted request.

    Raises
    ------
    PlanningError
        A non-finite time or a negative SLO/prefill time.
    """
    _check(requests)
    order = sorted(range(len(requests)), key=lambda j: (requests[j].deadline_s, j))
    clock = float(now)
    admitted: set[int] = set()
    heap: list[tuple[float, int]] = []  # (−prefill, index): the longest admitted request on top
    for j in order:
        r = requests[j]
        admitted.add(j)
        heapq.heappush(heap, (-r.prefill_s, -j))
        clock += r.prefill_s
        if clock > r.deadline_s + 1e-12:
            neg_e, neg_k = heapq.heappop(heap)
            admitted.discard(-neg_k)
            clock += neg_e
    kept = [j for j in order if j in admitted]
    finish, t = [], float(now)
    for j in kept:
        t += requests[j].prefill_s
        finish.append(t)
    late = tuple(requests[j].id for j in range(len(requests)) if j not in admitted)
    return Admission(tuple(requests[j].id for j in kept), late, tuple(finish))


def fcfs(requests: Sequence[QueuedRequest], now: float = 0.0) -> Admission:
    """First come, first served: every request in arrival order; the late ones are those past their deadline."""
    _check(requests)
    order = sorted(range(len(requests)), key=lambda j: (requests[j].arrival_s, j))
    t, on_time, late, finish = float(now), [], [], []
    for j in order:
        t += requests[j].prefill_s
        if t <= requests[j].deadline_s + 1e-12:
            on_time.append(requests[j].id)
            finish.append(t)
        else:
            late.append(requests[j].id)
    return Admission(tuple(on_time), tuple(late), tuple(finish))
