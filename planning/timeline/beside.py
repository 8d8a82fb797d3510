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
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from planning.context import CancelToken, Deadline
from planning.timeline import policies


@dataclass
class OfflineBeside:
    """One offline MILP running on its own thread; :meth:`result` waits for it (re-raising what it raised)."""

    adapter: policies.HorizonAdapter
    time_limit_s: float
    mip_rel_gap: float
    token: Deadline
    started: float = field(default_factory=time.monotonic)
    _schedule: policies.Schedule | None = None
    _error: BaseException | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def start(cls, adapter: policies.HorizonAdapter, *, time_limit_s: float, mip_rel_gap: float,
              cancel: CancelToken | None) -> OfflineBeside:
        """Start the offline MILP now, on a daemon thread, stopped by ``cancel`` or by :meth:`abandon`."""
        job = cls(adapter, time_limit_s, mip_rel_gap, Deadline(math.inf, inner=cancel))
        job._thread = threading.Thread(target=job._run, name="timeline-offline", daemon=True)
        job._thread.start()
        return job

    def _run(self) -> None:
        try:
            self._schedule = policies.offline(self.adapter, time_limit_s=self.time_limit_s,
                                              mip_rel_gap=self.mip_rel_gap, cancel=self.token)
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            self._error = exc

    def result(self, floor: policies.Schedule | None) -> policies.Schedule:
        """The offline schedule once the thread ends, never dearer than ``floor`` (the look-ahead's).

        Raises
        ------
        Cancelled
            The caller's cancel stopped the offline MILP.
        """
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._schedule is not None
        return policies.no_dearer(self.adapter, self._schedule, floor)

    def abandon(self) -> None:
        """Stop the thread at its next check and do not wait for it (the day failed or was cancelled)."""
        self.token.cancel()
