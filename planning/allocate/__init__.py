"""Allocation: which serving templates to instantiate where (Coral Sec. 4.3 with workload classes)."""

from planning.allocate.makespan import makespan_from_alpha, makespan_seconds
from planning.allocate.problem import (
    AllocationProblem,
    AllocationResult,
    Commitment,
    GroupDiagnostic,
    Offer,
    PhaseResult,
    SolveStats,
    TemplateOption,
    WorkloadClass,
)
from planning.allocate.solve import solve_allocation

__all__ = [
    "AllocationProblem",
    "AllocationResult",
    "Commitment",
    "GroupDiagnostic",
    "Offer",
    "PhaseResult",
    "SolveStats",
    "TemplateOption",
    "WorkloadClass",
    "makespan_from_alpha",
    "makespan_seconds",
    "solve_allocation",
]
