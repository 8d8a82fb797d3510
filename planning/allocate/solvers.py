"""Solver adapters: run HiGHS or CBC and read the solver's own status, bound and gap (never pulp's label)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from planning.allocate.problem import PhaseResult, Status

_ABS_TOL = 1e-9


@dataclass
class RawSolution:
    """Column values (None without a solution) and the phase record."""

    values: np.ndarray | None
    phase: PhaseResult
    row_duals: np.ndarray | None = None


ZERO_GAP = 1e-6
"""The only gap the word ``optimal`` allows: a proven relative gap ≤ 10⁻⁶, or a primal–bound difference ≤ 10⁻⁶
absolute (HiGHS's default ``mip_abs_gap``, where a solve asked for gap 0 stops). A solve that stopped at a larger
requested ``mip_rel_gap`` is ``feasible`` with that gap, never ``optimal`` (issue 27: words that match proofs)."""


def proven_zero(gap: float | None, primal: float | None = None, bound: float | None = None) -> bool:
    """Whether a proven gap is 0 within numerical tolerance (:data:`ZERO_GAP`): the bound within it of the
    solution's value, on either side. Either side, because a maximisation (the max-served model, whose value and
    bound come back with their sign turned, ``RawSolution``'s ``sense``) has its bound *above* its value: read as
    a minimisation's "bound ≥ value", every stopped max-served MIP was called optimal (single:A100-80G at demand
    ×2: "best uniform fraction 84.2 %", stopped at its node limit with 85.8 % still possible)."""
    if primal is not None and bound is not None and math.isfinite(primal) and math.isfinite(bound) \
            and abs(bound - primal) <= ZERO_GAP:
        return True
    return gap is not None and gap <= ZERO_GAP


def reached_gap(gap: float | None, gap_tol: float) -> bool:
    """Whether a solve reached the relative gap it was asked for (stopped by its gap criterion, not a limit)."""
    return gap is not None and gap <= gap_tol * (1 + 1e-9) + _ABS_TOL


def classify(has_solution: bool, stopped: str, gap: float | None, gap_tol: float,
             primal: float | None = None, bound: float | None = None) -> Status:
    """Map a solver outcome to our status.

    Parameters
    ----------
    has_solution:
        Whether a primal (integer-feasible) solution exists.
    stopped:
        ``"optimal" | "infeasible" | "time_limit" | "other" | "error"`` as the solver reports it.
    gap:
        Relative MIP gap if known.
    gap_tol:
        The requested relative gap (kept for the callers' records; it no longer decides ``optimal``).
    primal, bound:
        The solution's value and the proven bound, when known (an absolute difference ≤ 10⁻⁶ is a zero gap).

    Returns
    -------
    ``optimal`` (a solution whose proven gap is 0 within :data:`ZERO_GAP`), ``feasible`` (a solution with a larger
    or unknown gap, the requested ``mip_rel_gap`` included), ``time_limit`` (stopped by the time limit with a
    gap above zero or no solution), ``infeasible`` or ``error``.
    """
    if stopped == "infeasible":
        return "infeasible"
    if stopped == "error":
        return "error"
    if has_solution and proven_zero(gap, primal, bound):
        return "optimal"
    if stopped == "time_limit":
        return "time_limit"
    return "feasible" if has_solution else "error"


def rel_gap(primal: float | None, bound: float | None) -> float | None:
    """HiGHS's definition: |primal − bound| / max(|primal|, tiny); 0 when both are 0."""
    if primal is None or bound is None or not (math.isfinite(primal) and math.isfinite(bound)):
        return None
    diff = abs(primal - bound)
    if diff <= _ABS_TOL:
        return 0.0
    return diff / max(abs(primal), 1e-12)


def read_highs(h: Any, phase: str, seconds: float, gap_tol: float, sense: float = 1.0) -> RawSolution:
    """Read status, objective, bound, gap and column values from a solved ``highspy.Highs``.

    Parameters
    ----------
    h:
        The solved ``highspy.Highs`` object.
    phase:
        Label stored in the ``PhaseResult``.
    seconds:
        Wall time of the run.
    gap_tol:
        The requested relative gap.
    sense:
        Multiplier applied to objective and bound (−1 turns a minimised −α back into α).

    Returns
    -------
    ``RawSolution`` with values (None without a primal solution) and the phase record.
    """
    import highspy

    ms = h.getModelStatus()
    info = h.getInfo()
    has_solution = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
    s = highspy.HighsModelStatus
    if ms == s.kOptimal:
        stopped = "optimal"
    elif ms in (s.kInfeasible, s.kUnboundedOrInfeasible):
        stopped = "infeasible"
    elif ms in (s.kTimeLimit, s.kInterrupt):  # the engine interrupts HiGHS only on a wall clock (a safety net)
        stopped = "time_limit"
    elif ms in (s.kIterationLimit, s.kSolutionLimit, s.kObjectiveBound, s.kObjectiveTarget, s.kMemoryLimit):
        stopped = "other"
    else:
        stopped = "error"
    objective = float(info.objective_function_value) * sense if has_solution else None
    bound = float(info.mip_dual_bound) * sense if math.isfinite(info.mip_dual_bound) else None
    gap = float(info.mip_gap) if has_solution and math.isfinite(info.mip_gap) else None
    if has_solution and stopped == "optimal" and gap is None:  # a pure LP: no MIP gap is reported
        gap, bound = 0.0, objective
    status = classify(has_solution, stopped, gap, gap_tol, objective, bound)
    values = np.asarray(h.getSolution().col_value, dtype=float) if has_solution else None
    duals = None
    if has_solution and info.dual_solution_status == 2:
        duals = np.asarray(h.getSolution().row_dual, dtype=float)
    return RawSolution(
        values=values,
        phase=PhaseResult(phase, status, objective, bound, gap, seconds, h.modelStatusToString(ms)),
        row_duals=duals,
    )


_CBC_RESULT = re.compile(r"^Result - (.+)$", re.M)
_CBC_OBJ = re.compile(r"^Objective value:\s+(\S+)", re.M)
_CBC_BOUND = re.compile(r"^Lower bound:\s+(\S+)", re.M)
_CBC_GAP = re.compile(r"^Gap:\s+(\S+)", re.M)


def parse_cbc_log(text: str) -> tuple[str, float | None, float | None, float | None]:
    """Read CBC's summary block: (result line, objective, lower bound, gap).

    Parameters
    ----------
    text:
        CBC log text.

    Returns
    -------
    The ``Result - …`` phrase (empty if missing) and the numbers CBC printed (None when absent).
    """

    def num(rx: re.Pattern[str]) -> float | None:
        m = rx.search(text)
        if not m:
            return None
        try:
            return float(m.group(1))
        except ValueError:
            return None

    res = _CBC_RESULT.search(text)
    return (res.group(1).strip() if res else ""), num(_CBC_OBJ), num(_CBC_BOUND), num(_CBC_GAP)


class Timer:
    """Context manager measuring wall seconds."""

    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
