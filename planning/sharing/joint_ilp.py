"""The joint sharing model's master ILP over a set of columns (patterns and template counts), to gap 0, with a
MIP start: the restricted master of ``planning.sharing.joint`` step 1 and the certificate ILP of its step 3 (the
formulation is that module's docstring: cover, demand, pairing and availability rows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planning.sharing.joint_model import JointArrays, JointPlan
from planning.sharing.packing import Node


# ---------------------------------------------------------------------------------------------- the ILP
@dataclass(frozen=True)
class _Rows:
    """The master ILP's row layout: cover rows (one per shareable model), then demand, pairing, pairing-sum and
    availability rows, each family at its offset."""

    o_dem: int
    o_pair: int
    o_psum: int
    o_av: int
    n_rows: int
    pair_rows: dict[tuple[str, int, int], int]
    psum: dict[str, int]

    @classmethod
    def of(cls, a: JointArrays) -> _Rows:
        R = a.inst.prices.shape[0]
        nS, nG = len(a.inst.shareable), len(a.inst.groups)
        pair_rows = {key: i for i, key in enumerate((m, r, j) for m in a.linked for r in range(R) for j in (0, 1))}
        o_pair = nS + nG
        o_psum = o_pair + len(pair_rows)
        psum = {m: i for i, m in enumerate(a.linked)}
        o_av = o_psum + len(psum)
        return cls(nS, o_pair, o_psum, o_av, o_av + R * a.inst.prices.shape[1], pair_rows, psum)


@dataclass
class _Cols:
    """The master ILP's columns as they are added: cost, upper bound, integrality and the matrix entries."""

    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)

    def col(self, c: float, ub: float, is_int: bool, entries: Sequence[tuple[int, float]]) -> int:
        j = len(self.cost)
        self.cost.append(c)
        self.upper.append(ub)
        self.integer.append(is_int)
        for r_, v in entries:
            self.rows.append(r_)
            self.cols.append(j)
            self.vals.append(v)
        return j


@dataclass(frozen=True)
class _IlpColumns:
    """Which ILP column is which: d per shareable model, z per pattern, ν per template column."""

    patterns: Sequence[tuple[int, tuple[int, ...]]]
    templates: Sequence[tuple[int, int, int]]
    d_col: dict[str, int]
    z_cols: list[int]
    nu_cols: list[int]


def columns_ilp(a: JointArrays, patterns: Sequence[tuple[int, tuple[int, ...]]], templates: Sequence[tuple[int, int, int]],
         time_limit_s: float, start: JointPlan | None = None) -> tuple[str, float, float, JointPlan | None]:
    """The master ILP over the given columns, to gap 0: (HiGHS status, value, dual bound, plan)."""
    import highspy

    rows = _Rows.of(a)
    cols = _Cols()
    index = _IlpColumns(patterns, templates, _split_columns(a, rows, cols), _pattern_columns(a, rows, cols, patterns),
                        _template_columns(a, rows, cols, templates))
    h = _highs_model(a, rows, cols, index, time_limit_s)
    if start is not None and start.has_plan:
        h.setSolution(_mip_start(a, start, index, len(cols.cost)))
    h.run()
    info = h.getInfo()
    ms_ = h.getModelStatus()
    S = highspy.HighsModelStatus
    status = ("optimal" if ms_ == S.kOptimal else "infeasible" if ms_ in (S.kInfeasible, S.kUnboundedOrInfeasible)
              else "time_limit" if ms_ == S.kTimeLimit else "other")
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else -math.inf
    if int(info.primal_solution_status) != 2:
        return status, math.inf, (math.inf if status == "infeasible" else bound), None
    plan = _read_plan(a, index, np.asarray(h.getSolution().col_value))
    return status, plan.cost_per_hour, bound, plan


def _split_columns(a: JointArrays, rows: _Rows, cols: _Cols) -> dict[str, int]:
    """The d columns (model dedicated) and, for paired models, the share of requests per region; d's by model."""
    inst = a.inst
    d_col = {}
    for m, i in a.shareable_index.items():
        ent = [(i, 1.0)]
        ent += [(rows.o_dem + gi, -g.demand) for gi, g in enumerate(inst.groups) if g.model == m]
        if m in rows.psum:
            ent.append((rows.o_psum + rows.psum[m], -1.0))
        d_col[m] = cols.col(0.0, 0.0 if m in inst.fixed_shared else 1.0, True, ent)
    for m in a.linked:
        for r in range(inst.prices.shape[0]):
            gp, gd = a.linked[m]
            cols.col(0.0, 1.0, False, [(rows.o_pair + rows.pair_rows[(m, r, 0)], -inst.groups[gp].demand),
                                       (rows.o_pair + rows.pair_rows[(m, r, 1)], -inst.groups[gd].demand),
                                       (rows.o_psum + rows.psum[m], 1.0)])
    return d_col


def _pattern_columns(a: JointArrays, rows: _Rows, cols: _Cols, patterns: Sequence[tuple[int, tuple[int, ...]]]
                     ) -> list[int]:
    """One binary z column per pattern: its node's price, its models' cover rows, its offer's availability row."""
    Ks = a.inst.prices.shape[1]
    z_cols = []
    for t, ms in patterns:
        r, k = a.type_rk[t]
        z_cols.append(cols.col(a.inst.types[t].price_per_hour, 1.0, True,
                               [(i, 1.0) for i in ms] + [(rows.o_av + r * Ks + k, 1.0)]))
    return z_cols


def _template_columns(a: JointArrays, rows: _Rows, cols: _Cols, templates: Sequence[tuple[int, int, int]]
                      ) -> list[int]:
    """One integer ν column per (group, template, region): demand, pairing and availability entries."""
    inst = a.inst
    Ks = inst.prices.shape[1]
    nu_cols = []
    for gi, i, r in templates:
        g = inst.groups[gi]
        nz = np.flatnonzero(g.usage[i] > 0)
        ent = [(rows.o_dem + gi, float(g.throughput[i]))] + [(rows.o_av + r * Ks + int(k), float(g.usage[i, k]))
                                                              for k in nz]
        if g.model in a.linked:
            j = 0 if a.linked[g.model][0] == gi else 1
            ent.append((rows.o_pair + rows.pair_rows[(g.model, r, j)], float(g.throughput[i])))
        ub = min(float(inst.available[r, k]) // float(g.usage[i, k]) for k in nz) if nz.size else 0.0
        nu_cols.append(cols.col(float(a.cost[gi][i, r]), ub, True, ent))
    return nu_cols


def _highs_model(a: JointArrays, rows: _Rows, cols: _Cols, index: _IlpColumns, time_limit_s: float) -> Any:
    """The HiGHS model of the ILP: row bounds (cover = 1, demand of must-dedicate groups, availability), the
    fixed-dedicated d at 1, gap 0 and the time limit."""
    import highspy
    import scipy.sparse as sp

    inst = a.inst
    shareable = set(a.shareable_index)
    nS, n = len(inst.shareable), len(cols.cost)
    lower_row = np.full(rows.n_rows, -highspy.kHighsInf)
    upper_row = np.full(rows.n_rows, highspy.kHighsInf)
    lower_row[:nS] = upper_row[:nS] = 1.0
    for gi, g in enumerate(inst.groups):
        lower_row[rows.o_dem + gi] = g.demand if g.model not in shareable else 0.0
    lower_row[rows.o_pair:rows.o_psum] = 0.0
    for m, i in rows.psum.items():
        lower_row[rows.o_psum + i] = 0.0 if m in shareable else 1.0
    upper_row[rows.o_av:] = inst.available.reshape(-1).astype(float)
    mat = sp.csc_matrix((np.array(cols.vals, dtype=float), (np.array(cols.rows, dtype=np.int64),
                                                            np.array(cols.cols, dtype=np.int64))),
                        shape=(rows.n_rows, n))
    col_lower = np.zeros(n)
    for m in inst.fixed_dedicated:
        if m in index.d_col:
            col_lower[index.d_col[m]] = 1.0
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("time_limit", max(float(time_limit_s), 0.05))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, rows.n_rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.array(cols.cost), col_lower, np.array(cols.upper)
    lp.row_lower_, lp.row_upper_ = lower_row, upper_row
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = (mat.indptr.astype(np.int32),
                                                                     mat.indices.astype(np.int32), mat.data)
    lp.integrality_ = [highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous for b in cols.integer]
    h.passModel(lp)
    return h


def _mip_start(a: JointArrays, start: JointPlan, index: _IlpColumns, n: int) -> Any:
    """The start plan as a HiGHS solution over the ILP's ``n`` columns (its nodes matched to listed patterns)."""
    import highspy

    inst = a.inst
    x0 = np.zeros(n)
    for m in start.dedicated:
        if m in index.d_col:
            x0[index.d_col[m]] = 1.0
    want = {(n_.type, tuple(sorted(a.shareable_index[x] for x in n_.models))) for n_ in start.nodes}
    taken: dict[tuple[str, tuple[int, ...]], int] = {}
    for (t, ms), j in zip(index.patterns, index.z_cols, strict=True):
        key = (inst.types[t].key, ms)
        if key in want and taken.get(key, 0) < sum(1 for n_ in start.nodes if (n_.type, tuple(sorted(
                a.shareable_index[x] for x in n_.models))) == key):
            x0[j] = 1.0
            taken[key] = taken.get(key, 0) + 1
    for (gi, i, r), j in zip(index.templates, index.nu_cols, strict=True):
        x0[j] = start.counts.get((inst.groups[gi].ids[i], inst.regions[r]), 0)
    sol = highspy.HighsSolution()
    sol.col_value = list(x0)
    return sol


def _read_plan(a: JointArrays, index: _IlpColumns, x: np.ndarray) -> JointPlan:
    """The plan of an ILP solution ``x``: its nodes, template counts and the two parts' costs."""
    inst = a.inst
    patterns, templates, z_cols, nu_cols = index.patterns, index.templates, index.z_cols, index.nu_cols
    nodes = tuple(Node(inst.types[t].key, tuple(inst.shareable[i].id for i in ms))
                  for (t, ms), j in zip(patterns, z_cols, strict=True) if x[j] > 0.5)
    counts = {(inst.groups[gi].ids[i], inst.regions[r]): round(x[j])
              for (gi, i, r), j in zip(templates, nu_cols, strict=True) if x[j] > 0.5}
    shared_cost = sum(inst.types[t].price_per_hour for (t, _ms), j in zip(patterns, z_cols, strict=True) if x[j] > 0.5)
    ded_cost = sum(float(a.cost[gi][i, r]) * round(x[j]) for (gi, i, r), j in zip(templates, nu_cols, strict=True)
                   if x[j] > 0.5)
    shared = tuple(m for n_ in nodes for m in n_.models)
    dedicated = tuple(m for m in inst.models if m not in shared)
    return JointPlan("feasible", shared_cost + ded_cost, shared_cost, ded_cost, nodes, counts, shared, dedicated,
                     -math.inf, None)
