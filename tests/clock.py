"""An injected clock for deadline tests: ``planning.context``'s deadlines (``CancelFlag``, ``Deadline``) read the
time through this clock, which a test moves ahead on demand, so "a step that outlasts the limit" is made by
moving the clock past the deadline, not by sleeping, and no assert depends on how fast the machine is."""

from __future__ import annotations

import time
from typing import Any

import pytest

import planning.context as context


class SkipClock:
    """Stands in for the ``time`` module inside ``planning.context``: ``monotonic()`` is the real clock plus the
    seconds skipped so far; everything else is ``time``'s own."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def skip(self, seconds: float) -> None:
        self.skipped += seconds

    def skip_past(self, cancel: Any) -> None:
        """Move the clock just past ``cancel``'s deadline (the time left on it, plus 20 ms)."""
        left = cancel.remaining_s() if isinstance(cancel, context.CancelFlag) else None
        assert left is not None, "every step must get the solve's deadline token"
        self.skip(left + 0.02)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def skip_clock(monkeypatch: pytest.MonkeyPatch) -> SkipClock:
    """Install a :class:`SkipClock` as ``planning.context``'s clock for one test."""
    clock = SkipClock()
    monkeypatch.setattr(context, "time", clock)
    return clock
