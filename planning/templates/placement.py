"""Throughput-optimal placement of one model on one node set (Coral Sec. 4.2): types, validation, dispatch.

Problem (Coral's semantics). Nodes k = 0..n-1, L layers, a table thr[S-1][k][j-1] = throughput of node k
holding j consecutive layers when the template has S pipeline stages (per-stage latency budget ℓ/S; 0 = cannot
hold or cannot meet the budget). Choose S ∈ [1, min(n, L, depth)], a partition of the nodes into S non-empty
stages and layer counts j_1..j_S ≥ 1 with Σ j_s = L. Nodes in one stage are data-parallel replicas, so the stage
throughput is Σ_{k∈stage} thr[S-1][k][j_s-1]; the template throughput is the minimum over stages, maximized
over S, the partition and the layer counts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from planning.errors import PlanningError

Method = Literal["exact", "ilp", "brute"]
METHODS: tuple[str, ...] = ("exact", "ilp", "brute")


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: ``layers`` consecutive layers held by every node in ``nodes`` (data-parallel)."""

    layers: int
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    """A placement and its throughput; ``stages`` are in pipeline order (empty when nothing is feasible).

    ``status`` is ``"optimal"`` for exact and brute force, and the solver's own status for the ILP
    (``"optimal"``, ``"time_limit"`` when a time limit stopped it with a feasible point, ``"infeasible"``).
    """

    throughput: float
    stages: tuple[Stage, ...]
    method: str
    seconds: float
    status: str = "optimal"

    @property
    def n_stages(self) -> int:
        return len(self.stages)

    def layer_ranges(self) -> tuple[tuple[int, int], ...]:
        """Half-open 0-based layer ranges ``(start, end)`` of the stages in pipeline order."""
        ranges = []
        start = 0
        for st in self.stages:
            ranges.append((start, start + st.layers))
            start += st.layers
        return tuple(ranges)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``throughput``, ``stages`` (``layers``, ``nodes``), ``method``, ``seconds``, ``status``."""
        return {
            "throughput": self.throughput,
            "stages": [{"layers": s.layers, "nodes": list(s.nodes)} for s in self.stages],
            "method": self.method,
            "seconds": self.seconds,
            "status": self.status,
        }


@dataclass(frozen=True)
class Solution:
    """Solver-internal result: throughput, stages as (layers, node indices), status."""

    throughput: float
    stages: tuple[Stage, ...] = field(default_factory=tuple)
    status: str = "optimal"


def validate_instance(layers: Any, thr: Any, field_prefix: str = "") -> tuple[int, np.ndarray]:
    """Check an instance and return ``(L, thr)`` with ``thr`` a float array of shape ``(Smax, n, L)``.

    Parameters
    ----------
    layers:
        Number of model layers L (integer ≥ 1).
    thr:
        Nested lists or array, ``thr[S-1][k][j-1]``.
    field_prefix:
        Prefix for error field names (``"instances[3]."``).

    Returns
    -------
    tuple
        The layer count and the table as ``np.ndarray`` of float64.

    Raises
    ------
    PlanningError
        When L is not a positive integer, the table is ragged, has the wrong depth in j, contains negative
        or non-finite values, or has no nodes.
    """
    lf = f"{field_prefix}layers"
    tf = f"{field_prefix}thr"
    if isinstance(layers, bool) or not isinstance(layers, int | np.integer):
        if isinstance(layers, float) and layers.is_integer():
            layers = int(layers)
        else:
            raise PlanningError(
                lf, f"must be a positive integer, got {layers!r}.", "give the model's layer count, e.g. 64."
            )
    layers = int(layers)
    if layers < 1:
        raise PlanningError(lf, f"must be ≥ 1, got {layers}.", "give the model's layer count, e.g. 64.")
    try:
        arr = np.asarray(thr, dtype=float)
    except (ValueError, TypeError) as exc:
        raise PlanningError(
            tf,
            f"is not a rectangular numeric table ({exc}).",
            "give thr[S-1][k][j-1] as equal-length nested lists.",
        ) from None
    if arr.ndim != 3:
        raise PlanningError(
            tf,
            f"must have 3 levels [stages][nodes][layers], got {arr.ndim}.",
            "nest as thr[S-1][k][j-1]: one table per stage count S, one row per node, one entry per layer count j.",
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise PlanningError(
            tf, "has no stage tables or no nodes.", "give at least one stage table with one node row."
        )
    if arr.shape[2] != layers:
        raise PlanningError(
            tf,
            f"rows have {arr.shape[2]} entries but layers = {layers}.",
            f"give one entry per layer count j = 1..{layers} in every row.",
        )
    if not np.all(np.isfinite(arr)):
        raise PlanningError(tf, "contains NaN or infinite values.", "use 0 for 'cannot hold'.")
    if np.any(arr < 0):
        s, k, j = (int(x) for x in np.argwhere(arr < 0)[0])
        raise PlanningError(
            f"{tf}[{s}][{k}][{j}]",
            f"is negative ({arr[s, k, j]}).",
            "throughputs must be ≥ 0 (0 = cannot hold).",
        )
    return layers, arr


def place(layers: int, thr: npt.ArrayLike, method: str = "exact", time_limit: float = 60.0) -> Placement:
    """Throughput-optimal placement of L layers on the nodes of ``thr``.

    Parameters
    ----------
    layers:
        Number of model layers L ≥ 1.
    thr:
        ``thr[S-1][k][j-1]``: throughput of node k holding j layers when the template has S stages.
    method:
        ``"exact"`` (default, fast exact algorithm), ``"ilp"`` (Coral's ILP via pulp + HiGHS) or ``"brute"``
        (plain enumeration, tiny instances only).
    time_limit:
        Seconds per ILP solve (``method="ilp"`` only).

    Returns
    -------
    Placement
        Throughput 0 with no stages when no placement is feasible. ``seconds`` is the in-process solve time.

    Raises
    ------
    PlanningError
        On invalid input, an unknown method, or an instance too large for brute force.
    """
    if method not in METHODS:
        raise PlanningError("method", f"unknown method {method!r}.", f"use one of {', '.join(METHODS)}.")
    L, arr = validate_instance(layers, thr)
    t0 = time.perf_counter()
    if method == "exact":
        from planning.templates.exact import solve_exact

        sol = solve_exact(L, arr)
    elif method == "ilp":
        from planning.templates.ilp import solve_ilp

        sol = solve_ilp(L, arr, time_limit=time_limit)
    else:
        from planning.templates.brute import solve_brute

        sol = solve_brute(L, arr)
    seconds = time.perf_counter() - t0
    return Placement(
        throughput=float(sol.throughput), stages=sol.stages, method=method, seconds=seconds, status=sol.status
    )


def evaluate(layers: int, thr: np.ndarray, stages: tuple[Stage, ...]) -> float:
    """Throughput of a given placement under Coral's semantics (min over stages of summed node throughput).

    Raises
    ------
    PlanningError
        If the stages do not cover every node exactly once or the layer counts do not sum to L.
    """
    arr = np.asarray(thr, dtype=float)
    n = arr.shape[1]
    S = len(stages)
    nodes = sorted(k for st in stages for k in st.nodes)
    if nodes != list(range(n)):
        raise PlanningError(
            "stages", "must assign every node to exactly one stage.", "list each node index once."
        )
    if sum(st.layers for st in stages) != layers or any(st.layers < 1 for st in stages):
        raise PlanningError(
            "stages", f"layer counts must be ≥ 1 and sum to {layers}.", "fix the layer counts."
        )
    if not 1 <= S <= arr.shape[0]:
        raise PlanningError(
            "stages", f"{S} stages but the table covers 1..{arr.shape[0]}.", "use fewer stages."
        )
    return pipeline_throughput([st.layers for st in stages], [st.nodes for st in stages], arr.transpose(1, 0, 2))


def pipeline_throughput(layers: Sequence[int], members: Sequence[Sequence[int]], tables: np.ndarray) -> float:
    """The one evaluator of a fixed placement: min over stages s of Σ_{k ∈ members[s]} tables[k, S-1, layers[s]-1].

    ``tables`` is ``(rows, S_max, L)`` (rows = nodes or shapes); 0 when there are no stages or more than S_max.
    """
    S = len(layers)
    if S == 0 or tables.shape[1] < S:
        return 0.0
    return float(min(sum(float(tables[k, S - 1, j - 1]) for k in ks) for j, ks in zip(layers, members, strict=True)))
