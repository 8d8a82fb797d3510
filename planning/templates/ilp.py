"""Coral's placement ILP (Sec. 4.2), one model per stage count S, solved with HiGHS (CBC fallback) via pulp.

Sets: stages s = 1..S, layer counts j = 1..L, nodes k = 1..n.
Parameters: T̂_j(g_k) = thr[S-1][k][j-1] (throughput of node k holding j layers under budget ℓ/S).
Variables: x_sj ∈ {0,1} (stage s holds j layers), y_sk ∈ {0,1} (node k in stage s),
           z_sjk ∈ {0,1} (linearised x_sj·y_sk), T ≥ 0 (template throughput).
Objective: maximize T.
Constraints:
  one_layer_count      Σ_j x_sj = 1                      ∀s
  one_stage_per_node   Σ_s y_sk = 1                      ∀k
  layers_sum           Σ_s Σ_j j·x_sj = L
  linearisation        z_sjk ≤ x_sj, z_sjk ≤ y_sk, z_sjk ≥ x_sj + y_sk − 1   ∀s,j,k
  stage_throughput     T ≤ Σ_j Σ_k z_sjk · T̂_j(g_k)     ∀s
  stage_nonempty       Σ_k y_sk ≥ 1                      ∀s   (added here; a stage without nodes has zero
                       throughput, so any S-stage solution with an empty stage has T = 0 — the paper's optimum
                       over S is unchanged, and the returned placement always has S real stages)
The best over S ∈ [1, min(n, L, depth)] is returned; each solve reads HiGHS' own model status, so a time limit
that stops with an incumbent reports ``time_limit`` rather than ``optimal``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planning.templates.placement import Solution, Stage

Var = Any


def _one_layer_count(prob: Any, pulp: Any, x: dict[tuple[int, int], Var], S: int, L: int) -> None:
    for s in range(S):
        prob += pulp.lpSum(x[s, j] for j in range(1, L + 1)) == 1, f"one_layer_count_{s}"


def _one_stage_per_node(prob: Any, pulp: Any, y: dict[tuple[int, int], Var], S: int, n: int) -> None:
    for k in range(n):
        prob += pulp.lpSum(y[s, k] for s in range(S)) == 1, f"one_stage_per_node_{k}"


def _layers_sum(prob: Any, pulp: Any, x: dict[tuple[int, int], Var], S: int, L: int) -> None:
    prob += pulp.lpSum(j * x[s, j] for s in range(S) for j in range(1, L + 1)) == L, "layers_sum"


def _linearisation(prob: Any, x: dict, y: dict, z: dict, S: int, L: int, n: int) -> None:
    for s in range(S):
        for j in range(1, L + 1):
            for k in range(n):
                prob += z[s, j, k] <= x[s, j], f"z_le_x_{s}_{j}_{k}"
                prob += z[s, j, k] <= y[s, k], f"z_le_y_{s}_{j}_{k}"
                prob += z[s, j, k] >= x[s, j] + y[s, k] - 1, f"z_ge_xy_{s}_{j}_{k}"


def _stage_throughput(prob: Any, pulp: Any, T: Var, z: dict, table: np.ndarray, S: int, L: int, n: int) -> None:
    for s in range(S):
        prob += (
            pulp.lpSum(float(table[k, j - 1]) * z[s, j, k] for j in range(1, L + 1) for k in range(n)) >= T,
            f"stage_throughput_{s}",
        )


def _stage_nonempty(prob: Any, pulp: Any, y: dict, S: int, n: int) -> None:
    for s in range(S):
        prob += pulp.lpSum(y[s, k] for k in range(n)) >= 1, f"stage_nonempty_{s}"


def build_model(L: int, table: np.ndarray, S: int) -> tuple[Any, Var, dict, dict]:
    """The S-stage ILP for one stage table ``table`` of shape ``(n, L)``; returns (problem, T, x, y)."""
    import pulp

    n = table.shape[0]
    prob = pulp.LpProblem(f"coral_placement_S{S}", pulp.LpMaximize)
    T = pulp.LpVariable("T", lowBound=0)
    x = {(s, j): pulp.LpVariable(f"x_{s}_{j}", cat="Binary") for s in range(S) for j in range(1, L + 1)}
    y = {(s, k): pulp.LpVariable(f"y_{s}_{k}", cat="Binary") for s in range(S) for k in range(n)}
    z = {
        (s, j, k): pulp.LpVariable(f"z_{s}_{j}_{k}", cat="Binary")
        for s in range(S)
        for j in range(1, L + 1)
        for k in range(n)
    }
    prob += T
    _one_layer_count(prob, pulp, x, S, L)
    _one_stage_per_node(prob, pulp, y, S, n)
    _layers_sum(prob, pulp, x, S, L)
    _linearisation(prob, x, y, z, S, L, n)
    _stage_throughput(prob, pulp, T, z, table, S, L, n)
    _stage_nonempty(prob, pulp, y, S, n)
    return prob, T, x, y


def _solver(time_limit: float) -> Any:
    import pulp

    if "HiGHS" in pulp.listSolvers(onlyAvailable=True):
        return pulp.HiGHS(msg=False, timeLimit=time_limit)
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit)


def _status(prob: Any) -> str:
    import pulp

    if prob.sol_status == pulp.LpSolutionOptimal:
        return "optimal"
    if prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return "time_limit"
    if prob.sol_status == pulp.LpSolutionInfeasible:
        return "infeasible"
    return "no_solution"


def solve_ilp(layers: int, thr: np.ndarray, time_limit: float = 60.0) -> Solution:
    """Best over S of Coral's placement ILP; status ``optimal`` only if every per-S solve was optimal."""
    L = layers
    depth, n, _ = thr.shape
    best = 0.0
    best_stages: tuple[Stage, ...] = ()
    statuses: list[str] = []
    for S in range(1, min(n, L, depth) + 1):
        prob, T, x, y = build_model(L, thr[S - 1], S)
        prob.solve(_solver(time_limit))
        status = _status(prob)
        statuses.append(status)
        if status not in ("optimal", "time_limit"):
            continue
        value = float(T.value() or 0.0)
        if value > best + 1e-9 * max(1.0, abs(best)):
            stages = []
            for s in range(S):
                j = next(jj for jj in range(1, L + 1) if (x[s, jj].value() or 0) > 0.5)
                nodes = tuple(k for k in range(n) if (y[s, k].value() or 0) > 0.5)
                stages.append(Stage(layers=j, nodes=nodes))
            stages.sort(key=lambda st: st.nodes[0])
            best = value
            best_stages = tuple(stages)
    overall = "optimal" if all(s in ("optimal", "infeasible") for s in statuses) else "time_limit"
    if best <= 0:
        best_stages = ()
    return Solution(best, best_stages, overall)
