"""The engine's run contract: loaded context, the one ``Cancelled``, the cancel token and the progress callback.

Every long step (library build, LP reduction, ILP, baselines, sweeps, background jobs) takes the same two
optional arguments:

- ``progress(fraction, message)`` (:data:`ProgressFn`): ``fraction`` in 0..1 of the whole call, ``message``
  naming the current step ("library build: llama-3-8b/prefill", "ILP: ...").
- ``cancel`` (:class:`CancelToken`): anything with ``is_set()`` (a ``threading.Event`` will do). Steps call
  :func:`check_cancel` between units of work, which raises :class:`Cancelled`. :class:`CancelFlag` is the
  concrete token: it can be set by hand and can carry a wall-clock deadline, after which it reports
  ``is_set()`` and its reason is ``"time limit"``.

A call with a time limit of its own (the sharing and timeline solvers) keeps a :class:`CallClock`: its start, its
limit and the caller's token, and the time left of the two. Every deadline here reads ``time.monotonic()`` of this
module, so a test moves them ahead by replacing this module's ``time`` (``tests/clock.py``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from planning.catalog.schema import Catalog
    from planning.perf import PerfModel

CancelReason = Literal["cancelled", "time limit"]
ProgressFn = Callable[[float, str], None]
"""``progress(fraction, message)``: 0..1 of the whole call done, and the name of the current step."""


class Cancelled(Exception):
    """The caller cancelled the work (``reason="cancelled"``) or its deadline passed (``"time limit"``)."""

    def __init__(self, reason: CancelReason = "cancelled", detail: str = "") -> None:
        self.reason: CancelReason = reason
        self.detail = detail  # the step that noticed, e.g. "library build: llama-3-8b/prefill"
        text = "cancelled by the user" if reason == "cancelled" else "stopped at the time limit"
        super().__init__(f"{text}: {detail}" if detail else text)


class CancelToken(Protocol):
    """What every ``cancel`` argument must offer: ``is_set()`` → stop as soon as convenient."""

    def is_set(self) -> bool: ...


class CancelFlag:
    """A settable cancel token with an optional wall-clock deadline.

    Parameters
    ----------
    deadline_s:
        Seconds from now after which the token counts as set (reason ``"time limit"``); ``None`` = no limit.
    """

    def __init__(self, deadline_s: float | None = None) -> None:
        self._event = threading.Event()
        self._deadline = None if deadline_s is None else time.monotonic() + float(deadline_s)

    def cancel(self) -> None:
        """Request cancellation."""
        self._event.set()

    set = cancel  # threading.Event compatibility

    def requested(self) -> bool:
        """True once :meth:`cancel` was called (subclasses add other sources, e.g. a job store)."""
        return self._event.is_set()

    def expired(self) -> bool:
        """True once the deadline (if any) has passed."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    def remaining_s(self) -> float | None:
        """Seconds left until the deadline (``None`` without one; never negative)."""
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def is_set(self) -> bool:
        return self.requested() or self.expired()

    @property
    def reason(self) -> CancelReason:
        """Why the token is set: an explicit request wins over the deadline."""
        return "cancelled" if self.requested() or not self.expired() else "time limit"

    def check(self) -> None:
        """Raise :class:`Cancelled` (with :attr:`reason`) if the token is set.

        Raises
        ------
        Cancelled
        """
        if self.is_set():
            raise Cancelled(self.reason)


class Deadline(CancelFlag):
    """The one deadline of a whole solve, joined with the caller's token.

    ``is_set()`` once the caller's token is set (reason: the caller's) or ``seconds`` have passed (reason
    ``"time limit"``). :meth:`timed_out` tells the two apart: only the deadline turns into a ``time_limit``
    result; a caller's cancel still raises :class:`Cancelled`.

    Parameters
    ----------
    seconds:
        The limit from now (``options.time_limit_s``).
    inner:
        The caller's token, or None.
    """

    def __init__(self, seconds: float, inner: CancelToken | None = None) -> None:
        super().__init__(deadline_s=seconds)
        self.limit_s = float(seconds)
        self.inner = inner

    def requested(self) -> bool:
        return super().requested() or (self.inner is not None and self.inner.is_set())

    @property
    def reason(self) -> CancelReason:
        if self.inner is not None and self.inner.is_set():
            return self.inner.reason if isinstance(self.inner, CancelFlag) else "cancelled"
        return "time limit" if self.expired() and not super().requested() else "cancelled"

    def remaining_s(self) -> float | None:
        own = super().remaining_s()
        other = self.inner.remaining_s() if isinstance(self.inner, CancelFlag) else None
        return own if other is None else other if own is None else min(own, other)

    def timed_out(self) -> bool:
        """True when this solve's own deadline (not the caller) stopped the work."""
        return self.expired() and not self.requested()


def timed_out(cancel: CancelToken | None) -> bool:
    """True when ``cancel`` is a :class:`Deadline` whose own time limit (not the caller) is what stopped the work."""
    return isinstance(cancel, Deadline) and cancel.timed_out()


def time_left(cancel: CancelToken | None, limit_s: float, floor_s: float = 0.05) -> float:
    """``limit_s`` capped by the time left on ``cancel``'s deadline (a :class:`CancelFlag`), at least ``floor_s``.

    The time limit to give one solver call inside a deadline-bound solve.
    """
    left = cancel.remaining_s() if isinstance(cancel, CancelFlag) else None
    return float(limit_s) if left is None else max(floor_s, min(float(limit_s), left))


@dataclass(frozen=True)
class CallClock:
    """The time of one call with a limit of its own: its start, its limit and the caller's token (whose deadline
    may come sooner).

    Parameters
    ----------
    limit_s:
        The call's own limit, seconds from :attr:`t0`.
    cancel:
        The caller's token, or None.
    floor_s:
        The least :meth:`left` answers (a solver call given 0 s would not even start).
    t0:
        When the call started (``time.monotonic()``; default: now).
    """

    limit_s: float
    cancel: CancelToken | None = None
    floor_s: float = 0.0
    t0: float = field(default_factory=lambda: time.monotonic())

    def elapsed(self) -> float:
        """Seconds since the call started."""
        return time.monotonic() - self.t0

    def left(self) -> float:
        """Seconds left: the call's own limit less the time spent, capped by the caller's deadline, at least
        ``floor_s``."""
        own = self.limit_s - self.elapsed()
        return max(self.floor_s, min(own, time_left(self.cancel, self.limit_s)))

    def expired(self) -> bool:
        """True once the call's own limit or the caller's deadline has passed: a safety net that bound (the call
        then returns its best answer so far, flagged time-limited)."""
        return self.elapsed() >= self.limit_s or (isinstance(self.cancel, CancelFlag) and self.cancel.expired())

    def check_caller(self, detail: str = "") -> None:
        """Raise :class:`Cancelled` when the caller cancelled; a passed deadline only stops the work (the call
        returns its best answer so far).

        Raises
        ------
        Cancelled
        """
        if self.cancel is not None and self.cancel.is_set() and not timed_out(self.cancel):
            check_cancel(self.cancel, detail)


def check_cancel(cancel: CancelToken | None, detail: str = "") -> None:
    """Raise :class:`Cancelled` if ``cancel`` is set (reason from a :class:`CancelFlag`, else "cancelled").

    Raises
    ------
    Cancelled
    """
    if cancel is not None and cancel.is_set():
        raise Cancelled(cancel.reason if isinstance(cancel, CancelFlag) else "cancelled", detail)


def plan_listener(progress: ProgressFn | None) -> Callable[[Any], None] | None:
    """The ``plan`` method of a progress callback that has one (the job store's ``ProgressWriter``), else None: a
    solve then hands it each better plan it finds before its proof (a ``PlanResult``, status ``feasible`` with its
    gap), so that a What-if slider can show a far position's own plan while the solver still proves it."""
    plan = getattr(progress, "plan", None)
    return plan if callable(plan) else None


def sub_progress(progress: ProgressFn | None, start: float, end: float,
                 prefix: str = "") -> ProgressFn | None:
    """``progress`` of a step that covers ``[start, end]`` of the whole call; messages get ``prefix``."""
    if progress is None:
        return None
    outer = progress

    def report(fraction: float, message: str) -> None:
        f = min(1.0, max(0.0, fraction))
        outer(start + (end - start) * f, f"{prefix}{message}" if prefix else message)

    return report


@dataclass(frozen=True)
class EngineContext:
    """Loaded, reusable singletons for solves: catalog, perf model and the template cache directory."""

    catalog: Catalog
    perf: PerfModel
    cache_dir: Path | None = None


def default_context(cache_dir: Path | None = None) -> EngineContext:
    """Catalog + perf model loaded from the shipped data (and user overrides under PLANNING_HOME)."""
    from planning.catalog import load_catalog
    from planning.catalog.prices import user_overrides
    from planning.perf import PerfModel

    catalog = load_catalog(overrides_dir=user_overrides())  # the user's price layer (`planning prices refresh`)
    # the perf model's T̂ tables and decode batch curves are mirrored on disk beside the template libraries, so a
    # new process (a CLI call, a job worker) reads what an earlier one computed
    perf = PerfModel(catalog=catalog, cache_dir=cache_dir / "perf" if cache_dir is not None else None)
    return EngineContext(catalog=catalog, perf=perf, cache_dir=cache_dir)


_CTX_LOCK = threading.Lock()
_CTX: EngineContext | None = None


def planning_home() -> Path:
    """Per-user state directory (caches, saved scenarios, job store): ``$PLANNING_HOME`` or ``~/.cache/planning``."""
    return Path(os.environ.get("PLANNING_HOME") or Path.home() / ".cache" / "planning")


def engine_context() -> EngineContext:
    """The process-wide read-only catalog + perf model + template cache (loaded once, under
    ``planning_home() / "templates"``); what a caller gets when it passes no context of its own."""
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            _CTX = default_context(cache_dir=planning_home() / "templates")
        return _CTX
