"""The timeline's progress as a share of its expected time, so that the job's "about N s left" is an estimate of
the work still to come (issue 41 §4).

A job's time left is read as ``spent × (1 − f) / f`` from its progress fraction f (``JobRecord.time_left``). The
timeline's steps take very different times (a look-ahead step several seconds, a myopic epoch a fraction of one,
the offline MILP up to its time limit), so counting steps gave estimates ten times off (a fraction stuck at 0.3
through a 120 s offline run). After the templates, :class:`Pace` reports f = spent / (spent + left), where left is
what is known of the rest:

- look-ahead steps still to plan × the mean time of the steps planned so far;
- the offline MILP's time limit, less what it has run (the MILP stops there at the latest; when it proves its
  optimum sooner the estimate falls at the next report); run on a thread beside the rest
  (``planning.timeline.beside``), the longer of it and the rest, not their sum;
- epochs of the detailed loop still to plan × the mean time of its epochs so far; before the loop starts, the mean
  look-ahead step ÷ H (a step's MILP plans H epochs, an epoch of the loop one), or with no step either, the mean
  of whatever was timed. An epoch with the problem of the epoch before (``repeats``: it usually keeps that plan
  and its baselines' answers) is timed apart from those with a new problem, and counts nothing until one is
  timed (the first epoch, from nothing running, is a new problem: counting the day's repeats at its time put the
  estimate 3.7x over).
- with the day's detailed policy myopic, the look-ahead runs on a thread beside the epoch loop
  (``planning.timeline.beside.lookahead_beside``): the longer of their two rests, not their sum; until its first
  step is timed, that step counts at least what it has run (the loop's short epochs are no guide to it), and the
  progress line says the look-ahead's step and, after it, the loop's hour.

Fed back through the linear reading above, f gives exactly that left. ``tick`` reports again on a timer while
the offline MILP runs (it has no progress of its own), so the estimate follows the clock there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from planning.context import ProgressFn

TEMPLATES_SHARE = 0.3  # the share reported by the end of the templates (their builders report within it)
TICK_S = 1.0  # how often the offline MILP's estimate is reported again


@dataclass
class Pace:
    """What remains of a timeline after its templates, and the progress fraction that says so."""

    progress: ProgressFn | None
    epochs: int
    lookahead_steps: int = 0
    offline_limit_s: float = 0.0
    horizon: int = 1  # the look-ahead's epochs per step
    # per epoch of the loop: whether it has the problem of the epoch before (then it usually keeps that plan and
    # its baselines' answers, a fraction of a new problem's time): timed apart from the epochs with a new problem
    repeats: tuple[bool, ...] = ()
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=float("nan"))
    step_seconds: list[float] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)
    offline_started: float | None = None
    offline_done: bool = False
    offline_beside: bool = False  # the offline MILP runs on a thread beside the rest (``planning.timeline.beside``)
    lookahead_beside: bool = False  # the look-ahead runs on a thread beside the epoch loop (``beside.Beside``)
    mark: float | None = None  # when the current look-ahead step began
    message: str = ""
    loop_message: str = ""  # with the look-ahead beside the loop: the loop's last line, said after the look-ahead's

    def __post_init__(self) -> None:
        if self.start != self.start:  # NaN: the run starts now
            self.start = self.clock()

    # ------------------------------------------------------------------ what is left
    def left_s(self) -> float:
        """Seconds the rest probably takes (see the module docstring)."""
        steps = self.step_seconds + self.epoch_seconds
        unit = sum(steps) / len(steps) if steps else 0.0
        step = sum(self.step_seconds) / len(self.step_seconds) if self.step_seconds else unit
        if not self.step_seconds and self.mark is not None and self.lookahead_steps:  # the first step runs longer
            step = max(step, self.clock() - self.mark)
        epoch = (sum(self.epoch_seconds) / len(self.epoch_seconds) if self.epoch_seconds
                 else step / self.horizon if self.step_seconds else unit)
        ahead, loop = (self.lookahead_steps - len(self.step_seconds)) * step, self._loop_left(epoch)
        rest = max(ahead, loop) if self.lookahead_beside else ahead + loop
        offline = 0.0
        if self.offline_limit_s > 0 and not self.offline_done:
            ran = 0.0 if self.offline_started is None else self.clock() - self.offline_started
            offline = max(0.0, self.offline_limit_s - ran)
        return max(rest, offline) if self.offline_beside else rest + offline

    def _loop_left(self, epoch: float) -> float:
        """Seconds the epochs of the detailed loop still to plan probably take (``epoch``: the mean of one)."""
        if not self.repeats:
            return (self.epochs - len(self.epoch_seconds)) * epoch
        done = len(self.epoch_seconds)
        new = [t for t, r in zip(self.epoch_seconds, self.repeats, strict=False) if not r]
        again = [t for t, r in zip(self.epoch_seconds, self.repeats, strict=False) if r]
        per_new = sum(new) / len(new) if new else epoch
        per_again = sum(again) / len(again) if again else 0.0 if new else epoch
        return sum(per_again if r else per_new for r in self.repeats[done:])

    def fraction(self) -> float:
        """spent / (spent + left), within (0, 1): what ``JobRecord.time_left`` turns back into ``left``."""
        spent = max(0.0, self.clock() - self.start)
        left = self.left_s()
        if not self.step_seconds and not self.epoch_seconds and (self.lookahead_steps or self.epochs):
            left = max(left, spent)  # nothing timed yet: the rest is unknown, said to take no less than the templates
        total = spent + left
        return min(0.99, max(0.01, spent / total)) if total > 0 else 0.01

    # ------------------------------------------------------------------ events
    def report(self, message: str | None = None) -> None:
        """Report the current fraction with ``message`` (or the last one)."""
        if message is not None:
            self.message = message
        if self.progress is not None:
            both = self.lookahead_beside and self.loop_message and self.message != self.loop_message
            self.progress(self.fraction(), f"{self.message}; beside it, {self.loop_message}" if both else self.message)

    def lookahead_started(self, message: str) -> None:
        """The look-ahead steps start now."""
        self.mark = self.clock()
        self.report(message)

    def step_done(self, message: str) -> None:
        """A look-ahead step ended now (it began when the one before ended, or at ``lookahead_started``)."""
        now = self.clock()
        self.step_seconds.append(now - (self.start if self.mark is None else self.mark))
        self.mark = now
        if len(self.epoch_seconds) >= self.epochs:  # the loop beside is done: its last line is said no more
            self.loop_message = ""
        self.report(message)

    def epoch_done(self, seconds: float, message: str) -> None:
        """An epoch of the detailed loop took ``seconds``."""
        self.epoch_seconds.append(seconds)
        if self.lookahead_beside and len(self.step_seconds) < self.lookahead_steps:  # said after the look-ahead's
            self.loop_message = f"myopic and baselines: {message}"
            self.report()
        else:
            self.loop_message = ""
            self.report(message)

    def offline_beside_started(self) -> None:
        """The offline MILP started now on a thread beside the look-ahead and the loop: the time left is the
        longer of the two, not their sum."""
        self.offline_started, self.offline_beside = self.clock(), True

    @contextmanager
    def offline(self, message: str, tick_s: float = TICK_S) -> Iterator[None]:
        """The offline MILP runs inside (or, started beside, is waited for inside): reported at its start and
        every ``tick_s`` seconds until it returns."""
        if self.offline_started is None or not self.offline_beside:
            self.offline_started = self.clock()
        self.report(message)
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(tick_s):
                self.report()

        thread = threading.Thread(target=tick, name="timeline-pace", daemon=True)
        if self.progress is not None:
            thread.start()
        try:
            yield
        finally:
            stop.set()
            if thread.is_alive():
                thread.join()
            self.offline_done = True
