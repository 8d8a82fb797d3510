"""Matrix builder: the allocation model as scipy.sparse arrays passed straight to ``highspy.Highs.passModel``.

Same formulation as ``planning.allocate.formulation`` (labels (A) availability, (D) demand, (L) load,
(P) penalty, (B) budget, (R) region links, (S) spot cap), vectorised: no per-variable Python objects, so 10^5+
columns build in well under a second. Column layout: [ν_p for every pair p | x_{q,p} for every positive
throughput of a multi-class group | I_p for every pair with ν′_p > 0 (only when K > 0) | R_j commitments |
f_{ℓab} flows of linked classes (the split s_{ℓr} = f_{ℓrr}, plus priced cross-region flows) | α].
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from planning.allocate.instance import Instance
from planning.allocate.solvers import RawSolution, read_highs

INF = float("inf")


@dataclass
class Block:
    """One constraint family as COO triplets over the model's columns, with row bounds."""

    label: str
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    keys: list[Any] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.lower)


@dataclass
class Columns:
    """Column offsets and bounds."""

    n_pairs: int
    n_x: int
    n_pen: int
    pen_pairs: np.ndarray
    n_split: int = 0
    n_commit: int = 0

    @property
    def x0(self) -> int:
        return self.n_pairs

    @property
    def i0(self) -> int:
        return self.n_pairs + self.n_x

    @property
    def c0(self) -> int:
        return self.n_pairs + self.n_x + self.n_pen

    @property
    def s0(self) -> int:
        return self.n_pairs + self.n_x + self.n_pen + self.n_commit

    @property
    def alpha(self) -> int:
        return self.s0 + self.n_split

    @property
    def n(self) -> int:
        return self.alpha + 1


def columns(inst: Instance) -> Columns:
    """Lay out the columns: ν, x, I (pairs with running instances, K > 0), s (region splits), α."""
    pen = np.nonzero(inst.pair_current > 0)[0] if inst.problem.K > 0 else np.zeros(0, dtype=np.int64)
    return Columns(inst.n_pairs, len(inst.thr_pair), len(pen), pen, inst.links().n_split, inst.n_commit)


def _at_least_zero(label: str, rows: list[np.ndarray], cols: list[np.ndarray], vals: list[np.ndarray],
                   keys: list[Any]) -> Block:
    """A family of rows ``Σ vals·cols ≥ 0``, one per key, from per-row triplet arrays (row indices 0, 1, …)."""
    return Block(
        label,
        np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
        np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64),
        np.concatenate(vals) if vals else np.zeros(0),
        np.zeros(len(keys)),
        np.full(len(keys), INF),
        keys,
    )


def links(inst: Instance, col: Columns) -> Block:
    """(R) supply of class q in region r − λ_q Σ f (the link's flows out of r for its sender, into r for a
    receiver) ≥ 0 for each linked (q, r); Σ f_ℓ − α ≥ 0 per link."""
    lk = inst.links()
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    keys: list[Any] = []
    for i, (q, r, js, idx, is_x) in enumerate(zip(lk.row_class, lk.row_region, lk.row_splits, lk.row_pairs, lk.row_is_x, strict=True)):
        terms = (col.x0 + idx) if is_x else idx
        coef = np.ones(len(idx)) if is_x else inst.single_thr[idx]
        rows.append(np.full(len(idx) + len(js), i))
        cols.append(np.append(terms, col.s0 + js))
        vals.append(np.append(coef, np.full(len(js), -float(inst.class_rate[q]))))
        keys.append(("link-region", int(q), int(r)))
    r = len(lk.row_class)
    for li in lk.served_links:
        js = np.nonzero(lk.split_link == li)[0]
        rows.append(np.full(len(js) + 1, r))
        cols.append(np.append(col.s0 + js, col.alpha))
        vals.append(np.append(np.ones(len(js)), -1.0))
        keys.append(("link", li))
        r += 1
    return _at_least_zero("links", rows, cols, vals, keys)


def availability(inst: Instance, col: Columns) -> Block:
    """(A) Σ_τ U_c(τ) ν[τ, r] − Σ_j R_j ≤ A_r(c) for every offered (region, shape) some pair uses (R_j: the
    commitments that extend that offer)."""
    used = np.unique(inst.use_row)
    remap = np.full(len(inst.offer_keys), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    rows, cols, vals = [remap[inst.use_row]], [inst.use_pair], [inst.use_val]
    for j, offer_rows in enumerate(inst.commit_rows):
        mine = remap[offer_rows]
        mine = mine[mine >= 0]
        rows.append(mine)
        cols.append(np.full(len(mine), col.c0 + j))
        vals.append(np.full(len(mine), -1.0))
    return Block(
        "availability",
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
        np.full(len(used), -INF),
        inst.offer_avail[used].astype(float),
        [inst.offer_keys[int(i)] for i in used],
    )


def spot_cap(inst: Instance, col: Columns) -> Block:
    """(S) a group g with spot cap s: its capacity outside the spot regions − (1 − s) λ_g α ≥ 0 (single class:
    Σ T ν over non-spot pairs; several classes: Σ x over non-spot triplets, λ_g = Σ_q λ_q)."""
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    keys: list[Any] = []
    spot = inst.spot_pairs()
    for r, (g, share) in enumerate(inst.spot_cap_groups()):
        if inst.single_class[g]:
            rate = float(inst.class_rate[inst.group_class[g]])
            pairs = np.nonzero((inst.pair_group == g) & (inst.single_thr > 0) & ~spot)[0]
            terms, coef = pairs, inst.single_thr[pairs]
        else:
            rate = float(inst.class_rate[inst.class_group == g].sum())
            xs = np.nonzero((inst.class_group[inst.thr_class] == g) & ~spot[inst.thr_pair])[0]
            terms, coef = col.x0 + xs, np.ones(len(xs))
        rows.append(np.full(len(terms) + 1, r))
        cols.append(np.append(terms, col.alpha))
        vals.append(np.append(coef, -(1.0 - share) * rate))
        keys.append(("spot-cap", g))
    return _at_least_zero("spot_cap", rows, cols, vals, keys)


def demand(inst: Instance, col: Columns) -> Block:
    """(D) single-class group g: Σ T(τ) ν − rate_g α ≥ 0; class q of a multi-class group: Σ x_q − rate_q α ≥ 0."""
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    keys: list[Any] = []
    r = 0
    for g, _name in enumerate(inst.groups):
        if not inst.single_class[g]:
            continue
        q = inst.group_class[g]
        rate = inst.class_rate[q]
        if rate <= 0:
            continue
        pairs = np.nonzero((inst.pair_group == g) & (inst.single_thr > 0))[0]
        rows.append(np.full(len(pairs) + 1, r))
        cols.append(np.append(pairs, col.alpha))
        vals.append(np.append(inst.single_thr[pairs], -rate))
        keys.append(("group", g))
        r += 1
    for q in range(len(inst.class_ids)):
        g = inst.class_group[q]
        rate = inst.class_rate[q]
        if inst.single_class[g] or rate <= 0:
            continue
        xs = np.nonzero(inst.thr_class == q)[0]
        rows.append(np.full(len(xs) + 1, r))
        cols.append(np.append(col.x0 + xs, col.alpha))
        vals.append(np.append(np.ones(len(xs)), -rate))
        keys.append(("class", q))
        r += 1
    return _at_least_zero("demand", rows, cols, vals, keys)


def load(inst: Instance, col: Columns) -> Block:
    """(L) Σ_q x[q, τ, r] / T_q(τ) − ν[τ, r] ≤ 0 for every pair of a multi-class group."""
    pairs = np.unique(inst.thr_pair)
    remap = np.full(inst.n_pairs, -1, dtype=np.int64)
    remap[pairs] = np.arange(len(pairs))
    rows = np.concatenate([remap[inst.thr_pair], np.arange(len(pairs))])
    cols = np.concatenate([col.x0 + np.arange(col.n_x), pairs])
    vals = np.concatenate([1.0 / inst.thr_val, -np.ones(len(pairs))])
    return Block("load", rows, cols, vals, np.full(len(pairs), -INF), np.zeros(len(pairs)), [int(p) for p in pairs])


def penalty(inst: Instance, col: Columns) -> Block:
    """(P) I_p − K p_p ν_p ≥ −K p_p ν′_p for pairs with running instances (others: folded into the cost)."""
    k = inst.problem.K
    pen = col.pen_pairs
    n = len(pen)
    kp = k * inst.pair_price[pen]
    rows = np.concatenate([np.arange(n), np.arange(n)])
    cols = np.concatenate([col.i0 + np.arange(n), pen])
    vals = np.concatenate([np.ones(n), -kp])
    return Block("penalty", rows, cols, vals, -kp * inst.pair_current[pen], np.full(n, INF), [int(p) for p in pen])


def cost_vector(inst: Instance, col: Columns) -> np.ndarray:
    """Objective (a): Σ p ν + I + Σ c f, with I = K p ν folded into ν's cost where ν′ = 0 (lossless, I is
    tight) and c the $/h of a cross-region KV flow at its link's full rate (0 on the diagonal)."""
    c = np.zeros(col.n)
    k = inst.problem.K
    c[: col.n_pairs] = inst.pair_price * np.where(inst.pair_current > 0, 1.0, 1.0 + k)
    c[col.i0 : col.i0 + col.n_pen] = 1.0
    c[col.c0 : col.c0 + col.n_commit] = inst.commit_cost
    if col.n_split:
        c[col.s0 : col.s0 + col.n_split] = inst.links().split_cost
    return c


def budget(inst: Instance, col: Columns, limit: float) -> Block:
    """(B) provisioning + penalty + KV transfer ≤ budget."""
    c = cost_vector(inst, col)
    nz = np.nonzero(c)[0]
    return Block("budget", np.zeros(len(nz), dtype=np.int64), nz, c[nz], np.array([-INF]), np.array([limit]), ["budget"])


@dataclass
class MatrixModel:
    """The assembled model: CSC matrix, bounds, blocks (for row lookup) and a reusable HiGHS object."""

    inst: Instance
    col: Columns
    blocks: list[Block]
    offsets: dict[str, int]
    matrix: sp.csc_matrix
    col_lower: np.ndarray
    col_upper: np.ndarray
    integrality: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    build_seconds: float
    highs: Any = None

    @property
    def n_rows(self) -> int:
        return len(self.row_lower)

    def block(self, label: str) -> Block | None:
        return next((b for b in self.blocks if b.label == label), None)


def build_matrix(inst: Instance, served: bool, budget_limit: float | None) -> MatrixModel:
    """Assemble all constraint families into one CSC matrix.

    Parameters
    ----------
    inst:
        The pruned, indexed instance.
    served:
        True for the max-served objective (α free in [0, 1]); False fixes α = 1 (cost objective).
    budget_limit:
        USD/h bound on provisioning + penalty, or None.

    Returns
    -------
    ``MatrixModel`` ready for ``solve_matrix``.
    """
    t0 = time.perf_counter()
    col = columns(inst)
    blocks = [availability(inst, col), demand(inst, col)]
    if col.n_x:
        blocks.append(load(inst, col))
    if col.n_pen:
        blocks.append(penalty(inst, col))
    if inst.link_class:
        blocks.append(links(inst, col))
    if inst.spot_cap_groups():
        blocks.append(spot_cap(inst, col))
    if budget_limit is not None:
        blocks.append(budget(inst, col, budget_limit))
    offsets: dict[str, int] = {}
    rows, cols, vals, lo, up = [], [], [], [], []
    r0 = 0
    for b in blocks:
        offsets[b.label] = r0
        rows.append(b.rows + r0)
        cols.append(b.cols)
        vals.append(b.vals)
        lo.append(b.lower)
        up.append(b.upper)
        r0 += b.n
    n_rows = r0
    a = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, col.n)
    )
    a.sum_duplicates()
    col_lower = np.zeros(col.n)
    col_upper = np.full(col.n, INF)
    col_upper[: col.n_pairs] = inst.pair_ub
    col_upper[col.c0 : col.c0 + col.n_commit] = inst.commit_ub
    col_lower[col.alpha] = 0.0 if served else 1.0
    col_upper[col.alpha] = 1.0
    integrality = np.zeros(col.n, dtype=np.int32)
    integrality[: col.n_pairs] = 1
    integrality[col.c0 : col.c0 + col.n_commit] = 1
    return MatrixModel(
        inst, col, blocks, offsets, a, col_lower, col_upper, integrality,
        np.concatenate(lo), np.concatenate(up), time.perf_counter() - t0,
    )


def _new_highs(model: MatrixModel, cost: np.ndarray, relax: bool) -> Any:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    a = model.matrix
    integrality = np.zeros_like(model.integrality) if relax else model.integrality
    status = h.passModel(
        int(a.shape[1]), int(a.shape[0]), int(a.nnz), 1, 1, 0.0,
        cost.astype(np.float64), model.col_lower, model.col_upper, model.row_lower, model.row_upper,
        a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data.astype(np.float64),
        integrality.astype(np.int32),
    )
    if status != highspy.HighsStatus.kOk and status != highspy.HighsStatus.kWarning:
        raise RuntimeError(f"HiGHS rejected the model: {status}")
    return h


LEAN = {"mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False}
"""HiGHS's options for ``AllocationProblem.lean`` (the baselines' part ILPs and their settles' part ILPs; merged
parts and the joint model keep HiGHS's full search, ``solve.full_search``): no sub-MIP heuristics (RINS, RENS). The
baselines' part ILPs are small (9-50 rows over 80-1,135 template columns in coral-extended) and their root node spent
most of its time in sub-MIPs (one single:A100-80G part: 2.8 s of HiGHS, 1.6 s of it in 90 sub-MIPs). Without them
the baseline ILPs of a cold coral-extended, replayed alone, take 5.7 CPU-s instead of 9.5 (catalog-wide 8.9 instead
of 9.8), every baseline with its recorded answer (``benchmarks/bench_baseline_work.py``). Restarts off as well cut
coral-extended's to 4.0 CPU-s but moved single:L40S to another plan within its 0.1 % gap: not taken
(docs/benchmarks.md, round 23)."""


def stop_rules(h: Any, problem: Any) -> None:
    """Give HiGHS ``problem``'s search options (:data:`LEAN` when ``problem.lean``) and stops besides its time
    limit: ``improving_limit`` (``mip_max_improving_sols``) and ``node_limit`` (``mip_max_nodes``), both counted in
    work, so the same on every machine; and ``stop``, a token
    HiGHS's MIP interrupt callback checks (a wall-clock safety net on planning.context's clock: when it is set,
    HiGHS returns its incumbent with model status "Interrupted by user")."""
    if problem.lean:
        for name, value in LEAN.items():
            h.setOptionValue(name, value)
    if problem.improving_limit is not None:
        h.setOptionValue("mip_max_improving_sols", int(problem.improving_limit))
    if problem.node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(problem.node_limit))
    if problem.stop is not None:
        import highspy

        token = problem.stop

        def interrupt(_kind: Any, _message: str, _out: Any, data_in: Any, _user: Any) -> None:
            if token.is_set():
                data_in.user_interrupt = True

        h.setCallback(interrupt, None)
        h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)


@dataclass(frozen=True)
class PartialStart:
    """A known plan's ν (per pair of the model) as a partial MIP start: HiGHS completes the other columns. A
    plan near the optimum makes HiGHS's plan-searching heuristics (:data:`ROOT_HEURISTICS`) wasted work, so they
    are switched off."""

    nu: np.ndarray


ROOT_HEURISTICS = ("mip_heuristic_run_root_reduced_cost", "mip_heuristic_run_rins", "mip_heuristic_run_rens")
"""HiGHS's heuristics that search for a plan (those on by default), off when a :class:`PartialStart` is given
or ``problem.start_only`` is set. With a plan at the optimum as its start, the baselines' merged ILPs of
catalog-wide take 0.45 s instead of 1.6 s (single:A100-40G) and 0.50 s instead of 1.2 s (single:L40S); with them
on, the start makes HiGHS slower (docs/benchmarks.md, round 16). Not a rule for every start: the on-demand
engine's fixing ILPs start from the best plan so far, often far from their optimum, and catalog-wide's demand ×2
took 27 s instead of 18 s with them off there."""


def solve_matrix(
    model: MatrixModel,
    phase: str,
    time_limit_s: float,
    gap: float,
    alpha_lower: float | None = None,
    start: np.ndarray | PartialStart | None = None,
    relax: bool = False,
    dump_path: str | None = None,
) -> RawSolution:
    """Solve one phase with HiGHS: ``phase`` "cost" minimises cost, "served" maximises α.

    Parameters
    ----------
    model:
        The assembled model.
    phase:
        ``"cost"`` (minimise provisioning + penalty) or ``"served"`` (maximise α).
    time_limit_s, gap:
        HiGHS ``time_limit`` and ``mip_rel_gap``.
    alpha_lower:
        Lower bound for α in this solve (phase 2 of the served objective).
    start:
        A feasible column vector to start from (MIP start).
    relax:
        Solve the LP relaxation (for dual values in diagnostics).
    dump_path:
        Write the model here before solving (``.lp`` or ``.mps``).

    Returns
    -------
    ``RawSolution`` with the solver's own status, bound and gap.
    """
    col = model.col
    if phase == "served":
        cost = np.zeros(col.n)
        cost[col.alpha] = -1.0
        sense = -1.0
    else:
        cost = cost_vector(model.inst, col)
        sense = 1.0
    h = _new_highs(model, cost, relax)
    if alpha_lower is not None:
        h.changeColBounds(col.alpha, float(alpha_lower), 1.0)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", float(gap))
    if not relax:
        stop_rules(h, model.inst.problem)
        _set_start(h, model, start)
    if dump_path:
        h.writeModel(dump_path)
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    raw = read_highs(h, phase + (" (LP)" if relax else ""), seconds, gap, sense)
    model.highs = h
    return raw


def _set_start(h: Any, model: MatrixModel, start: np.ndarray | PartialStart | None) -> None:
    """HiGHS's MIP start: ``start`` (a whole column vector, or a :class:`PartialStart`), else ``problem.start``."""
    if isinstance(start, PartialStart):
        h.setSolution(model.inst.n_pairs + 1, *_nu_start(model, start.nu))
        _no_root_heuristics(h)
    elif start is not None:
        h.setSolution(_solution(start))
    elif model.inst.problem.start:
        idx, val = start_vector(model)
        if len(idx):  # a partial MIP start: HiGHS completes the continuous columns itself
            h.setSolution(len(idx), idx, val)
            if model.inst.problem.start_only:
                _no_root_heuristics(h)


def _no_root_heuristics(h: Any) -> None:
    """Switch off :data:`ROOT_HEURISTICS` (a start near the optimum is given)."""
    for name in ROOT_HEURISTICS:
        h.setOptionValue(name, False)


def start_vector(model: MatrixModel) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and values of ``problem.start`` (ν of every pair, α = 1); ([], []) when it does not map. On a
    part of the group-by-group shortcut (``Instance.restrict``) the start's instances of other groups are left out."""
    inst = model.inst
    key_to_pair = {inst.pair_key(p): p for p in range(inst.n_pairs)}
    mine = {inst.groups[int(g)] for g in np.unique(inst.pair_group)}
    group_of = {t.id: t.group for t in inst.problem.templates}
    nu = np.zeros(inst.n_pairs)
    for key, n in inst.problem.start.items():
        p = key_to_pair.get(key)
        if p is None and group_of.get(key[0]) not in mine:
            continue  # another part's instances
        if p is None or n > inst.pair_ub[p]:
            return np.zeros(0, dtype=np.int32), np.zeros(0)
        nu[p] = n
    return _nu_start(model, nu)


def _nu_start(model: MatrixModel, nu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A partial MIP start's column indices and values: ν of every pair and α = 1."""
    return np.append(np.arange(model.inst.n_pairs), model.col.alpha).astype(np.int32), np.append(nu, 1.0)


def _solution(values: np.ndarray) -> Any:
    import highspy

    sol = highspy.HighsSolution()
    sol.col_value = list(map(float, values))
    sol.value_valid = True
    return sol
