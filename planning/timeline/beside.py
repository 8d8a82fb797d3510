"""The offline MILP on a thread beside the look-ahead and the epoch loop (issue 41 §4: a day's Timeline ≤ 60 s).

A new user's three-model day (``benchmarks/bench_timeline_day.py``) spent its time in three parts one after
another: the look-ahead's 24 rolling MILPs (~29 s), the epoch loop (~12 s) and the offline MILP over every epoch at
once, which runs to its limit (20 s by default) on most days. The offline MILP does not need either of the others
until its very end: its columns, LP and bound are its own, and the other schedule served only as the floor it is
compared with ("never dearer than the look-ahead"). So it now starts before the look-ahead, on a thread, and is
compared with the look-ahead's schedule when both are done (:func:`policies.no_dearer`). Two cores give the day
max(look-ahead + loop, offline) instead of their sum; one busy core loses nothing but the thread's start.

Why a thread, not a process: HiGHS releases the GIL while it runs (most of the offline's time: its LP, the
Lagrangian's cover ILPs and the final ILP are HiGHS calls), the problem's arrays are shared without pickling, and
a job's worker already runs its progress ticks on threads. The offline's HiGHS calls stop on their own wall clock,
so its answer was load-dependent before and still is; the look-ahead's and the loop's answers are unchanged (they
do not read the offline's). What changes in the offline: its final ILP no longer carries the look-ahead's pairs
as extra columns (it cannot know them yet), so it may end on a dearer incumbent of its own; the comparison at the
end still returns the look-ahead's schedule then, with the offline's proven bound and the gap to it.

A failure elsewhere (an error, the caller's cancel) sets the thread's own token: it stops at its next check and is
not waited for (its HiGHS call ends by its time limit at the latest; the thread is a daemon).

The look-ahead beside the epoch loop (round 22). When the day's detailed policy is myopic, its epoch loop (each
hour's allocation ILP and the re-planned baselines) does not read the look-ahead's schedule either, and the
look-ahead reads nothing of the loop: so the look-ahead runs on a second thread (:class:`Beside`) while the loop
runs on the caller's. The look-ahead is mostly HiGHS (its step MILPs and group covers), which releases the GIL.
What keeps the answers those planned one after another: a look-ahead step that falls back to a myopic epoch plans
it apart from the loop (its own memo, never the loop's "last epoch planned"), so the loop's epochs are the ones it
plans alone, whatever the look-ahead has done by then.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from planning.context import CancelToken, Deadline
from planning.timeline import policies


@dataclass
class Beside:
    """One schedule computed on its own daemon thread; :meth:`join` waits for it (re-raising what it raised)."""

    token: Deadline
    started: float = field(default_factory=time.monotonic)
    _schedule: policies.Schedule | None = None
    _error: BaseException | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def run(cls, work: Callable[[CancelToken], policies.Schedule], *, name: str,
            cancel: CancelToken | None) -> Beside:
        """Start ``work(token)`` now on a daemon thread; ``token`` is set by ``cancel`` or by :meth:`abandon`."""
        job = cls(Deadline(math.inf, inner=cancel))
        job._thread = threading.Thread(target=job._run, args=(work,), name=name, daemon=True)
        job._thread.start()
        return job

    def _run(self, work: Callable[[CancelToken], policies.Schedule]) -> None:
        try:
            self._schedule = work(self.token)
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            self._error = exc

    def join(self) -> policies.Schedule:
        """The schedule once the thread ends.

        Raises
        ------
        Cancelled
            The caller's cancel (or :meth:`abandon`) stopped it; any other error it raised.
        """
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._schedule is not None
        return self._schedule

    def abandon(self) -> None:
        """Stop the thread at its next check and do not wait for it (the day failed or was cancelled)."""
        self.token.cancel()


@dataclass
class OfflineBeside:
    """The offline MILP running on its own thread; :meth:`result` waits for it."""

    adapter: policies.HorizonAdapter
    thread: Beside

    @property
    def token(self) -> Deadline:
        return self.thread.token

    @classmethod
    def start(cls, adapter: policies.HorizonAdapter, *, time_limit_s: float, mip_rel_gap: float,
              cancel: CancelToken | None) -> OfflineBeside:
        """Start the offline MILP now, on a daemon thread, stopped by ``cancel`` or by :meth:`abandon`."""
        def work(token: CancelToken) -> policies.Schedule:
            return policies.offline(adapter, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap, cancel=token)

        return cls(adapter, Beside.run(work, name="timeline-offline", cancel=cancel))

    def result(self, floor: policies.Schedule | None) -> policies.Schedule:
        """The offline schedule once the thread ends, never dearer than ``floor`` (the look-ahead's).

        Raises
        ------
        Cancelled
            The caller's cancel stopped the offline MILP.
        """
        return policies.no_dearer(self.adapter, self.thread.join(), floor)

    def abandon(self) -> None:
        """Stop the thread at its next check and do not wait for it (the day failed or was cancelled)."""
        self.thread.abandon()


def lookahead_beside(adapter: policies.HorizonAdapter, horizon: int, time_limit_s: float, mip_rel_gap: float, *,
                     on_epoch: Callable[[int], None],
                     myopic: Callable[[int, policies.Counts, CancelToken], policies.Counts],
                     cancel: CancelToken | None) -> Beside:
    """The look-ahead started now on a thread beside the epoch loop; ``myopic(t, prev, token)`` plans a step's
    fallback epoch apart from the loop (``_Runs.myopic_epoch(..., apart=True)``)."""
    def work(token: CancelToken) -> policies.Schedule:
        return policies.lookahead(adapter, horizon, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap,
                                  myopic=lambda t, prev: myopic(t, prev, token), cancel=token, on_epoch=on_epoch)

    return Beside.run(work, name="timeline-lookahead", cancel=cancel)
