"""Anytime solving: the best plan found so far (the incumbent) and the best proven bound of one solve.

Every solve path registers each integer-feasible plan it meets (``Anytime.offer``) and each valid lower bound on
the optimum it proves (``Anytime.raise_bound``), as soon as it has them:

- on demand: the restricted master ILP over the seed columns (before the first pricing round), over the columns
  of the later rounds, the LP optimum z_LP and the Lagrangian bound z_LB, then every fixing ILP;
- library path: every ILP of the certificate loop, after the LP reduction's z_LP / z_LB;
- either path: a failed certificate target t whose ILP over every column that can appear in a plan of value ≤ t
  proved no such plan exists raises the bound to min(t, that ILP's own dual bound).

When the solve's deadline passes, the caller returns the incumbent (:meth:`Anytime.allocation`: status
``feasible``, the proven gap ``(value − bound) / value`` and the step it stopped at) instead of "no plan".

Values are minimised: the cost objective's value is the plan's total $/h (provisioning + penalty + transfer);
the served objective's is −α (the served fraction, maximised).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from planning.allocate.problem import AllocationResult

if TYPE_CHECKING:
    from planning.allocate.certify import Allocation
    from planning.templates.sets import TemplateSet


def plan_value(alloc: AllocationResult, served: bool) -> float:
    """The minimised value of a plan: total $/h for the cost objective, −α for the served objective
    (+inf without a plan)."""
    if not alloc.has_plan:
        return math.inf
    if served:
        return -float(alloc.alpha or 0.0)
    total = alloc.total_per_hour
    return float(total) if total is not None else math.inf


def proven_gap(value: float, bound: float) -> float | None:
    """HiGHS's relative gap |value − bound| / |value| (0 when bound ≥ value; None without a finite bound)."""
    if not (math.isfinite(value) and math.isfinite(bound)):
        return None
    if bound >= value - 1e-12 * max(1.0, abs(value)):
        return 0.0
    return (value - bound) / max(abs(value), 1e-12)


@dataclass(frozen=True)
class Incumbent:
    """One plan: the allocation, the template sets (and row masks) it refers to, its value and where it came from."""

    alloc: AllocationResult
    sets: tuple[TemplateSet, ...]
    masks: tuple[np.ndarray, ...] | None
    value: float
    source: str
    found_s: float  # seconds after the solve started


class Anytime:
    """The incumbent and the best bound of one solve, reported through ``progress`` as they move.

    Parameters
    ----------
    served:
        Values are −α (the served objective) instead of $/h.
    budget:
        Plans whose total $/h exceeds it are not kept (the on-demand engine's ILP has no budget row).
    on_change:
        Called (no arguments) whenever the incumbent or the bound moves; the pipeline then re-reports its step
        with :meth:`summary` appended.

    ``shown`` (set by the caller) maps a plan to the $/h its bill shows (provisioning + KV transfer + committed,
    :func:`planning.billing.bill_of`'s design hour), so the progress line names the figure the plan's box and KPIs
    show, not the objective (which adds the initialisation penalty, a device of the optimisation, not a cost).
    Without it the summary shows the objective's value, named as such.
    """

    def __init__(self, served: bool = False, budget: float | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self.served = served
        self.budget = budget
        self.t0 = time.perf_counter()
        self.best: Incumbent | None = None
        self.bound = -math.inf
        self.bound_source = ""
        self.first_plan_s: float | None = None
        self.history: list[tuple[float, float, float]] = []  # (seconds, incumbent value, bound)
        self.on_change = on_change
        self.shown: Callable[[AllocationResult], float] | None = None

    # ------------------------------------------------------------------------------------------ updates
    def offer(self, alloc: AllocationResult, sets: Sequence[TemplateSet], masks: Sequence[np.ndarray] | None,
              source: str) -> bool:
        """Keep ``alloc`` if it is a plan better than the incumbent; True when it was kept."""
        value = plan_value(alloc, self.served)
        total = alloc.total_per_hour
        if self.budget is not None and total is not None and total > self.budget * (1 + 1e-9) + 1e-9:
            return False
        if not math.isfinite(value) or not self._better(value, alloc):
            return False
        now = time.perf_counter() - self.t0
        self.best = Incumbent(alloc, tuple(sets), None if masks is None else tuple(masks), value, source, now)
        if self.first_plan_s is None:
            self.first_plan_s = now
        self._moved()
        return True

    def _better(self, value: float, alloc: AllocationResult) -> bool:
        """Lower value; for the served objective, the same α (within 10⁻⁷) at a lower cost also counts."""
        if self.best is None:
            return True
        tol = 1e-9 * max(1.0, abs(value))
        if value < self.best.value - (1e-7 if self.served else tol):
            return True
        if self.served and value <= self.best.value + 1e-7:
            return float(alloc.total_per_hour or math.inf) < float(self.best.alloc.total_per_hour or math.inf) - 1e-9
        return False

    def raise_bound(self, bound: float, source: str) -> None:
        """Record a proven lower bound on the optimal value (kept only when it is higher than the one held)."""
        if not math.isfinite(bound) or bound <= self.bound + 1e-12 * max(1.0, abs(bound)):
            return
        if not self.served and bound <= 0:  # costs are ≥ 0: a bound ≤ 0 proves nothing (an early Farley bound)
            return
        self.bound = float(bound)
        self.bound_source = source
        self._moved()

    def _moved(self) -> None:
        value = self.best.value if self.best is not None else math.inf
        self.history.append((time.perf_counter() - self.t0, value, self.bound))
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------------------------------ reading
    @property
    def value(self) -> float:
        return self.best.value if self.best is not None else math.inf

    def gap(self) -> float | None:
        """The incumbent's proven relative gap to the best bound (None without a plan or a bound)."""
        return proven_gap(self.value, self.bound) if self.best is not None else None

    def summary(self) -> str:
        """"best plan $81.79/h, gap 2.9 %" (or "α 97.1 %"), "no plan yet"; the $/h is :attr:`shown`'s figure,
        the bill's, or "objective $X/h" without it."""
        if self.best is None:
            return "no plan yet"
        if self.served:
            what = f"α {-self.best.value:.1%}"
        elif self.shown is not None:
            what = f"${self.shown(self.best.alloc):,.2f}/h"
        else:
            what = f"objective ${self.best.value:,.2f}/h"
        gap = self.gap()
        return f"best plan {what}, " + (f"gap {gap:.1%}" if gap is not None else "gap not yet bounded")

    def allocation(self, step: str, stats: dict[str, float] | None = None,
                   timings: dict[str, float] | None = None) -> Allocation:
        """The incumbent as the solve's answer when its deadline passed at ``step``: status ``feasible`` (or
        ``optimal`` when the bound already proves it), the proven gap and a message naming the step.

        Raises
        ------
        ValueError
            Without an incumbent (the caller checks :attr:`best`).
        """
        from planning.allocate.certify import Allocation

        if self.best is None:
            raise ValueError("no incumbent")
        inc = self.best
        gap = self.gap()
        proven = gap is not None and gap <= 1e-9 and not self.served  # served: α bounded, its cost not proven
        note = (f"time limit reached at step {step!r}: best plan found so far ({inc.source}), "
                + (f"within {gap:.2%} of the best bound ({self.bound_source})" if gap is not None and not proven
                   else "proven optimal by the bound" if proven else "no bound proven yet"))
        alloc = replace(inc.alloc, status="optimal" if proven else "feasible", gap=gap,
                        messages=(*inc.alloc.messages, note))
        out_stats = dict(stats or {})
        out_stats.pop("reduction_certified", None)  # a time-limited answer never claims the certificate
        out_stats["anytime_first_plan_seconds"] = float(self.first_plan_s or 0.0)
        out_stats["anytime_plan_seconds"] = inc.found_s
        if math.isfinite(self.bound):
            out_stats["anytime_bound"] = self.bound
        return Allocation(result=alloc, problem=None, masks=None if inc.masks is None else list(inc.masks),
                          stats=out_stats, timings=dict(timings or {}), sets=list(inc.sets))
