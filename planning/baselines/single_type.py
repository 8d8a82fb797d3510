"""Mélange's single-GPU-type baseline: its allocation ILP restricted to one GPU type for everything."""

from __future__ import annotations

from dataclasses import replace

from planning.allocate.problem import AllocationProblem
from planning.baselines.base import BaselineResult, from_allocation
from planning.context import CancelToken


def single_type(problem: AllocationProblem, gpu: str, cancel: CancelToken | None = None) -> BaselineResult:
    """Cheapest plan using only templates whose GPUs are all of type ``gpu`` (Mélange Sec. 6.1 baselines).

    Parameters
    ----------
    problem:
        The allocation problem.
    gpu:
        GPU id, e.g. ``"L4"``.
    cancel:
        Checked before the ILP, which gets the time left on its deadline.

    Returns
    -------
    ``BaselineResult`` named ``single:<gpu>``; infeasible groups are reported with the best uniform fraction.
    """
    templates = tuple(t for t in problem.templates if t.gpu_types == (gpu,))
    ids = {t.id for t in templates}
    current = {k: v for k, v in problem.current.items() if k[0] in ids}
    restricted = replace(problem, templates=templates, current=current, budget_per_hour=None, dump_model=None)
    if not templates:
        return BaselineResult(
            f"single:{gpu}", 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False,
            f"no template uses only {gpu}; cannot serve any demand",
        )
    return from_allocation(f"single:{gpu}", restricted, f"{len(templates)} templates on {gpu} only; all demand met", cancel)
