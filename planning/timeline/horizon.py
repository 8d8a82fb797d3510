"""The multi-epoch allocation MILP behind the look-ahead and offline policies (issue 27 §2), certified over every
template by column generation on instance lifetimes.

Formulation (epochs e = 0 … E−1 of h hours; pairs j = (template τ of group g, region r); one class per group)
--------------------------------------------------------------------------------------------------------------
Parameters: c_j = Σ_k U_{τk} p_{rk} ($/h of one instance); A_{erk} availability; D_{eg} demand; K; ν′_j the
instances running before epoch 0.
Variables: ν_{je} ∈ ℤ≥0 instances in epoch e; I_{je} ≥ 0 start-up paid in epoch e; s_{ℓre} ≥ 0 (the share of
link ℓ's requests (a model's prefill and decode) served in region r, when there are several regions).
    min  Σ_{e,j} h·c_j·ν_{je} + Σ_{e,j} I_{je}
    (P) I_{je} ≥ K·h·c_j·(ν_{je} − ν_{j,e−1})           ν_{j,−1} = ν′_j       (Coral's penalty, per epoch)
    (A) Σ_j U_{τk} ν_{je} ≤ A_{erk}                       every e, r, k
    (D) Σ_{j∈g} T_τ ν_{je} ≥ D_{eg}                       every e, g
    (R) Σ_{j∈g, r} T_τ ν_{je} ≥ D_{eg} s_{ℓre},  Σ_r s_{ℓre} ≥ 1   g in link ℓ (prefill and decode pair per region)
This is exactly what the timeline charges: epoch e costs h·(provisioning + K·p·new instances), so any sequence
of epoch plans (the myopic loop's, the look-ahead's, a static plan's) is a solution, and the optimum over all
epochs (the **offline** policy) is a lower bound on every policy's total. The **look-ahead** policy solves this
over epochs t … t+H−1 with ν′ = the plan committed for t − 1 and keeps only epoch t (a rolling horizon).

Certified over every template (as ``allocate.reduce`` for one epoch)
--------------------------------------------------------------------
An integer sequence (ν_{j·}) decomposes into instance **lifetimes** [s, f] (an instance started in epoch s and
kept through f): cost K·h·c_j + Σ_{e=s}^{f} h·c_j, and (P) charges exactly Σ max(0, ν_e − ν_{e−1})·K·h·c_j.
1. LP by column generation over pairs (compact form over the pairs in the LP, with T' = min(T, D_{eg}) in (D)
   and (R) and the cut Σ_{j∈g} ν_{je} ≥ ⌈D_{eg} / max T⌉). With the LP duals (σ ≤ 0 availability, y ≥ 0 demand,
   card and pairing), a lifetime of pair j has reduced cost K·h·c_j + Σ_{e=s}^{f} b_{je},
   b_{je} = h·c_j − Σ_k U_{τk} σ_{erk} − T'_{τe}·(y_{eg} + y^R_{eℓr}) − y^N_{eg}; its minimum over [s, f] is a
   min-sum contiguous subarray (numpy, all pairs at once). A pair with a negative lifetime enters the LP; when
   none is left the LP is optimal over all templates (the penalty rows of a pair in the LP are its own: with
   their duals π ∈ [0, 1] every lifetime of an LP pair has rc ≥ 0).
2. Fixing: for any integer plan, cost ≥ z_LP + Σ over its lifetimes of their rc ≥ 0 (Lagrangian relaxation of
   (A), (D), (R) and the cut; each pair's own problem with (P) is an interval flow, integral), so a plan of cost
   ≤ θ uses only pairs whose cheapest lifetime has rc ≤ θ − z_LP. The ILP over those pairs (and every running
   one) is solved to gap 0; a plan ≤ θ is optimal over all templates, otherwise θ rises (``allocate.certify``'s
   target loop). Tests: ``tests/timeline/test_horizon.py`` (the full MILP over every template on seeded
   instances, brute force over tiny ones, the policies' order).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planning.context import CallClock, CancelToken
from planning.errors import PlanningError
from planning.timeline.horizon_data import (
    HorizonData,
    HorizonGroup,
    HorizonPlan,
    HorizonProblem,
    min_subarray,
)
from planning.timeline.horizon_ilp import pairs_ilp_within, run_until, schedule_value

__all__ = ["HorizonData", "HorizonGroup", "HorizonPlan", "HorizonProblem", "solve_horizon"]

BIG_M = 1e4
INITIAL_PER_GROUP_REGION = 24
ADD_PER_ROUND = 300
MAX_ROUNDS = 300
TARGET_START = 0.003
MAX_ATTEMPTS = 6
CHUNK_ROWS = 20_000  # pricing works on this many templates at a time (E × R floats each)
GAP_ZERO_COLUMNS = 60_000  # an ILP with at most this many integer columns is solved to gap 0
ILP_COLUMNS_PER_S = 8_000  # a later attempt starts only with (integer columns / this) seconds left: HiGHS's
# presolve and feasibility jump took 4.6 s on 62,000 (coral-core's day) before its first interrupt point


# ---------------------------------------------------------------------------------------------- the LP master
class _Master:
    """Restricted master LP over pairs (compact form). Rows: avail (E·R·S, ≤) | demand (E·G) | card (E·G) |
    pair (E·L·R·2, ≥ 0) | pairsum (E·L, ≥ 1) | penalty rows added with their pairs."""

    def __init__(self, d: HorizonData) -> None:
        import highspy

        self.d = d
        p = d.p
        E, R, S, G, L = p.epochs, len(p.regions), len(p.shapes), len(p.groups), len(p.links) if d.link_of else 0
        self.E, self.R, self.S, self.G, self.L = E, R, S, G, L
        self.o_av = 0
        self.o_dem = E * R * S
        self.o_card = self.o_dem + E * G
        self.o_pair = self.o_card + E * G
        self.o_psum = self.o_pair + E * L * R * 2
        self.n_rows = self.o_psum + E * L
        inf = highspy.kHighsInf
        lower = np.full(self.n_rows, -inf)
        upper = np.full(self.n_rows, inf)
        upper[: self.o_dem] = p.available.reshape(-1).astype(float)
        lower[self.o_dem:self.o_card] = p.demand.reshape(-1)
        lower[self.o_card:self.o_pair] = d.card.reshape(-1)
        lower[self.o_pair:self.o_psum] = 0.0
        lower[self.o_psum:] = 1.0
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.h.addRows(self.n_rows, lower, upper, 0, np.zeros(self.n_rows, dtype=np.int32),
                       np.zeros(0, dtype=np.int32), np.zeros(0))
        self.n_cols = 0
        self.slack: list[int] = []
        big = BIG_M * d.max_cost
        for row in range(self.o_dem, self.o_card):
            self._col(big, [row], [1.0], slack=True)
        for row in range(self.o_card, self.o_pair):
            self._col(big, [row], [1.0], slack=True)
        for row in range(self.o_psum, self.n_rows):
            self._col(big, [row], [1.0], slack=True)
        for e in range(E):  # the shares s_{ℓre}
            for li, (gp, gd) in enumerate(p.links if L else ()):
                for r in range(R):
                    self._col(0.0, [self.pair_row(e, li, r, 0), self.pair_row(e, li, r, 1), self.o_psum + e * L + li],
                              [-float(p.demand[e, gp]), -float(p.demand[e, gd]), 1.0])
        self.pairs: dict[tuple[int, int, int], int] = {}  # (g, row, r) -> first ν column
        self.pen_row: dict[tuple[int, int, int], int] = {}  # (g, row, r) -> its epoch-0 penalty row (K > 0)

    def pair_row(self, e: int, li: int, r: int, j: int) -> int:
        return self.o_pair + ((e * self.L + li) * self.R + r) * 2 + j

    def _col(self, cost: float, rows: Sequence[int], vals: Sequence[float], slack: bool = False,
             lower: float = 0.0) -> int:
        self.h.addCol(float(cost), float(lower), float("inf"), len(rows), np.asarray(rows, dtype=np.int32),
                      np.asarray(vals, dtype=float))
        j = self.n_cols
        self.n_cols += 1
        if slack:
            self.slack.append(j)
        return j

    def add_pair(self, gi: int, i: int, r: int) -> bool:
        """ν_{je} for every epoch, and with K > 0 the pair's I_{je} columns and (P) rows."""
        import highspy

        key = (gi, i, r)
        if key in self.pairs:
            return False
        d, p = self.d, self.d.p
        g = p.groups[gi]
        c = float(d.cost[gi][i, r])
        nz = np.flatnonzero(g.usage[i] > 0)
        first = self.n_cols
        for e in range(self.E):
            rows = [self.o_av + (e * self.R + r) * self.S + int(k) for k in nz]
            vals = [float(g.usage[i, k]) for k in nz]
            rows += [self.o_dem + e * self.G + gi, self.o_card + e * self.G + gi]
            vals += [float(d.t_eff[gi][i, e]), 1.0]
            if gi in d.link_of:
                li, j = d.link_of[gi]
                rows.append(self.pair_row(e, li, r, j))
                vals.append(float(d.t_eff[gi][i, e]))
            self._col(p.hours * c, rows, vals)
        if p.K > 0:
            run = float(p.running.get(key, 0))
            kc = p.K * p.hours * c
            base_row = self.h.getNumRow()
            self.pen_row[key] = base_row
            lower = np.array([-kc * run] + [0.0] * (self.E - 1))
            self.h.addRows(self.E, lower, np.full(self.E, highspy.kHighsInf), 0, np.zeros(self.E, dtype=np.int32),
                           np.zeros(0, dtype=np.int32), np.zeros(0))
            for e in range(self.E):  # I_{je} − K·h·c·ν_{je} + K·h·c·ν_{j,e−1} ≥ 0 (≥ −K·h·c·ν′ for e = 0)
                self.h.changeCoeff(base_row + e, first + e, -kc)
                if e + 1 < self.E:
                    self.h.changeCoeff(base_row + e + 1, first + e, kc)
                self._col(1.0, [base_row + e], [1.0])
        self.pairs[key] = first
        return True

    def solve(self, seconds: float = math.inf) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The LP's value, row duals and column values; None when ``seconds`` passed before it was solved."""
        import highspy

        if math.isfinite(seconds):
            run_until(self.h, seconds)
        else:
            self.h.run()
        if self.h.getModelStatus() in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kInterrupt):
            return None
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise PlanningError("timeline", "the multi-epoch LP stopped with status "
                                f"{self.h.modelStatusToString(self.h.getModelStatus())}.",
                                "report this scenario: the LP with slack columns is always feasible.")
        sol = self.h.getSolution()
        return (float(self.h.getInfo().objective_function_value), np.asarray(sol.row_dual, dtype=float),
                np.asarray(sol.col_value, dtype=float))


def _lifetime_rc(d: HorizonData, m: _Master, y: np.ndarray, gi: int, rows: slice, pairing: bool = True) -> np.ndarray:
    """(n_rows, R) the cheapest lifetime's reduced cost of each pair of group gi in ``rows`` (inf: not sold);
    ``pairing`` False leaves the region-pairing duals out (the group's own problem, for the Lagrangian bound)."""
    p = d.p
    g = p.groups[gi]
    E, R, S = m.E, m.R, m.S
    sigma = np.minimum(y[m.o_av:m.o_dem].reshape(E, R, S), 0.0)
    y_d = np.maximum(y[m.o_dem:m.o_card].reshape(E, m.G)[:, gi], 0.0)
    y_n = np.maximum(y[m.o_card:m.o_pair].reshape(E, m.G)[:, gi], 0.0)
    u = g.usage[rows].astype(float)
    c = d.cost[gi][rows]  # (n, R)
    t = d.t_eff[gi][rows]  # (n, E)
    b = p.hours * c[:, :, None] - np.einsum("nk,erk->nre", u, sigma) - (t * y_d[None, :])[:, None, :] - y_n[None, None, :]
    if pairing and gi in d.link_of:
        li, j = d.link_of[gi]
        pair = np.array([[max(float(y[m.pair_row(e, li, r, j)]), 0.0) for e in range(E)] for r in range(R)])
        b = b - t[:, None, :] * pair[None, :, :]
    start = np.where(np.isfinite(c), p.K * p.hours * np.where(np.isfinite(c), c, 0.0), np.inf)
    rc = start + min_subarray(np.where(np.isfinite(b), b, 0.0))
    return rc


def _all_rc(d: HorizonData, m: _Master, y: np.ndarray, pairing: bool = True) -> list[np.ndarray]:
    out = []
    for gi, g in enumerate(d.p.groups):
        if not pairing and gi not in d.link_of:
            out.append(np.zeros(0))  # the same as with pairing: the caller reuses those
            continue
        n = len(g.keys)
        parts = [_lifetime_rc(d, m, y, gi, slice(a, min(a + CHUNK_ROWS, n)), pairing) for a in range(0, n, CHUNK_ROWS)]
        out.append(np.concatenate(parts) if parts else np.zeros((0, len(d.p.regions))))
    return out


# ---------------------------------------------------------------------------------------------- Lagrangian bound
COVER_SEED = 64  # pairs per group (smallest reduced cost) for the first cover, whose value bounds the listing
COVER_LIMIT_S = 2.0
COVER_GAP = 1e-9  # a group cover's MIP gap: its dual bound within this of its value is proven
MAX_COVER_CELLS = 400_000  # pairs × epochs of a group's full cover; above it the group keeps its LP dual value
# (coral-core's week: building covers of ~10⁴ pairs × 168 epochs took 72 s of a 24 s budget and 8 GB)
COVER_MIP_COLUMNS = 6_000  # a larger cover is bounded by its LP (HiGHS's root cut separation on bigger ones
# ignored the time limit: 40 s past 10 s on a 38,400-column cover of a 24-epoch horizon)


@dataclass
class _Lagrange:
    """z_LB = Σ_g L_g + Σ σ·A; per group L_g (its own multi-epoch cover's bound) and base_g (its LP dual value)."""

    z_lb: float
    L: np.ndarray
    base: np.ndarray


def _cover(d: HorizonData, gi: int, pairs: Sequence[tuple[int, int]], w: np.ndarray, running: Mapping[tuple[int, int], int],
           seconds: float) -> tuple[float, float]:
    """Group gi's own problem over ``pairs`` ((row, region)): min Σ w·ν + Σ I over its epochs with (D), the cut and
    (P), availability relaxed (priced into ``w`` (n, E)): (value, dual bound)."""
    import highspy

    p = d.p
    E = p.epochs
    n = len(pairs)
    if n == 0:
        return math.inf, math.inf
    dem = p.demand[:, gi]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", COVER_GAP)
    inf = highspy.kHighsInf
    tmax = np.array([d.p.groups[gi].throughput[i] for i, _r in pairs])
    t_eff = np.array([d.t_eff[gi][i] for i, _r in pairs])  # (n, E)
    ub = np.ceil(dem.max(initial=0.0) / np.maximum(np.minimum(tmax, dem.max(initial=0.0)), 1e-12))
    h.addVars(n * E, np.zeros(n * E), np.repeat(ub, E))
    h.changeColsCost(n * E, np.arange(n * E, dtype=np.int32), w.reshape(-1))
    relaxed = n * E > COVER_MIP_COLUMNS
    if not relaxed:
        h.changeColsIntegrality(n * E, np.arange(n * E, dtype=np.int32),
                                np.full(n * E, highspy.HighsVarType.kInteger))
    for e in range(E):
        if dem[e] <= 0:
            continue
        idx = (np.arange(n) * E + e).astype(np.int32)
        h.addRow(float(dem[e]), inf, n, idx, t_eff[:, e].astype(float))
        h.addRow(float(d.card[e, gi]), inf, n, idx, np.ones(n))
    if p.K > 0:
        h.addVars(n * E, np.zeros(n * E), np.full(n * E, inf))
        h.changeColsCost(n * E, np.arange(n * E, 2 * n * E, dtype=np.int32), np.ones(n * E))
        # I − K·h·c·(ν_e − ν_{e−1}) ≥ 0 (ν_{−1} = ν′), one row per (pair, epoch), all added at once
        kc = p.K * p.hours * np.array([float(d.cost[gi][i, r]) for i, r in pairs])
        pq, pe = np.divmod(np.arange(n * E), E)
        has_prev = pe > 0
        lengths = 2 + has_prev.astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        index = np.empty(int(lengths.sum()), dtype=np.int32)
        coef = np.empty(index.size)
        index[starts], coef[starts] = n * E + pq * E + pe, 1.0
        index[starts + 1], coef[starts + 1] = pq * E + pe, -kc[pq]
        index[(starts + 2)[has_prev]], coef[(starts + 2)[has_prev]] = (pq * E + pe - 1)[has_prev], kc[pq][has_prev]
        run = np.array([float(running.get(pair, 0)) for pair in pairs])
        lower = np.where(pe == 0, -kc[pq] * run[pq], 0.0)
        h.addRows(n * E, lower, np.full(n * E, inf), index.size, starts.astype(np.int32), index, coef)
    run_until(h, seconds)
    info = h.getInfo()
    status = h.getModelStatus()
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return math.inf, math.inf
    if relaxed:  # the LP's value bounds the cover; ν rounded up (I recomputed) is a cover, its value an upper one
        if status != highspy.HighsModelStatus.kOptimal:
            return math.inf, -math.inf
        nu = np.ceil(np.asarray(h.getSolution().col_value[: n * E]).reshape(n, E) - 1e-9)
        cover = float((w * nu).sum())
        if p.K > 0:
            kc = p.K * p.hours * np.array([float(d.cost[gi][i, r]) for i, r in pairs])
            before = np.concatenate([np.array([[float(running.get(pair, 0))] for pair in pairs]), nu[:, :-1]], axis=1)
            cover += float((kc[:, None] * np.maximum(0.0, nu - before)).sum())
        return cover, min(float(info.objective_function_value), cover)
    found = float(info.objective_function_value) if int(info.primal_solution_status) == 2 else math.inf
    dual = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else -math.inf
    return found, min(dual, found)


def _lagrangian(d: HorizonData, m: _Master, y: np.ndarray, rc_np: Sequence[np.ndarray], seconds: float) -> _Lagrange | None:
    """The Lagrangian bound at the LP's availability duals σ (as ``allocate.reduce.lagrangian_bound`` for one
    epoch): cost(ν) ≥ Σ_g (group g's cost at prices w = h·c − U·σ_e, penalties included) + Σ σ·A, and group g's
    part is ≥ L_g, the dual bound of its own multi-epoch cover over every pair that a cover of cost ≤ U_g can use
    (rc without the pairing duals ≤ U_g − base_g, base_g = Σ_e (y_d·D + y_n·n) − Σ_running π₀·K·h·c·ν′: the
    group's LP dual value, by weak duality every pair of such a cover has that reduced cost; U_g from the cover over
    the ``COVER_SEED`` best pairs and the running ones). None when some group has no cover. ``seconds`` bounds
    the whole step (model building included): once they are gone a group keeps its LP dual value base_g."""
    p = d.p
    E, R, S, G = m.E, m.R, m.S, m.G
    sigma = np.minimum(y[m.o_av:m.o_dem].reshape(E, R, S), 0.0)
    y_d = np.maximum(y[m.o_dem:m.o_card].reshape(E, G), 0.0)
    y_n = np.maximum(y[m.o_card:m.o_pair].reshape(E, G), 0.0)
    L = np.zeros(G)
    base = np.zeros(G)
    per = max(0.05, seconds / max(1, G))
    end = time.perf_counter() + seconds
    for gi, g in enumerate(p.groups):
        if not (p.demand[:, gi] > 0).any():
            continue
        running = {(i, r): n for (g2, i, r), n in p.running.items() if g2 == gi and n > 0}
        pen0 = sum(max(float(y[m.pen_row[(gi, i, r)]]), 0.0) * p.K * p.hours * float(d.cost[gi][i, r]) * n
                   for (i, r), n in running.items() if (gi, i, r) in m.pen_row)
        base[gi] = float((y_d[:, gi] * p.demand[:, gi]).sum() + (y_n[:, gi] * d.card[:, gi]).sum()) - pen0
        rc = rc_np[gi]
        remaining = end - time.perf_counter()
        finite = np.argwhere(np.isfinite(rc))
        if finite.size and float(rc[finite[:, 0], finite[:, 1]].min()) < -1e-7 * max(1.0, d.max_cost):
            return None  # these duals are not feasible for the group alone (a pairing dual dropped): no base_g
        order = finite[np.argsort(rc[finite[:, 0], finite[:, 1]], kind="stable")[:COVER_SEED]]
        seed = {(int(i), int(r)) for i, r in order} | set(running) | {(i, r) for (g2, i, r) in m.pairs if g2 == gi}

        def w_of(pairs: Sequence[tuple[int, int]], g: HorizonGroup = g, gi: int = gi) -> np.ndarray:
            u = g.usage[[i for i, _r in pairs]].astype(float)
            c = np.array([d.cost[gi][i, r] for i, r in pairs])
            sg = np.stack([sigma[:, r, :] for _i, r in pairs])  # (n, E, S)
            return p.hours * c[:, None] - np.einsum("nk,nek->ne", u, sg)

        if remaining <= 0.1:
            L[gi] = base[gi]  # the caller's deadline: the group's LP dual value is still a bound
            continue
        seed_l = sorted(seed)
        upper, first = _cover(d, gi, seed_l, w_of(seed_l), running, min(per, 0.5 * remaining))
        if not math.isfinite(upper):
            L[gi] = base[gi]  # no cover found in time: the group's LP dual value is still a bound
            continue
        within = np.argwhere(rc <= upper - base[gi] + 1e-9 * max(1.0, abs(upper)))
        rows = sorted({(int(i), int(r)) for i, r in within} | seed)
        if rows == seed_l and first >= upper - COVER_GAP * max(1.0, abs(upper)):
            # every pair a cheaper cover could use is in the seed, whose cover is proven (to its gap): the second
            # cover would be the same MIP with the same answer (it was, for most groups of each step of the
            # Timeline page's day: 125 of its 288 covers)
            L[gi] = max(base[gi], min(first, upper))
            continue
        remaining = end - time.perf_counter()
        if remaining <= 0.1 or (len(within) + len(seed)) * E > MAX_COVER_CELLS:
            L[gi] = base[gi]  # no time, or a cover too large to build in it: the LP dual value still bounds
            continue
        _value, bound = _cover(d, gi, rows, w_of(rows), running, min(per, 0.5 * remaining))
        # the cover's dual bound (−inf when its search had none in time); never below base_g, the value of a
        # dual-feasible point of the group's LP (every pair's cheapest lifetime has rc ≥ 0 at these duals)
        L[gi] = max(base[gi], min(bound, upper))
    z_lb = float(L.sum() + (sigma * p.available).sum())
    return _Lagrange(z_lb, L, base)


# ---------------------------------------------------------------------------------------------- driver
def solve_horizon(problem: HorizonProblem, *, time_limit_s: float = 60.0, mip_rel_gap: float = 0.0,
                  cancel: CancelToken | None = None,
                  start: Sequence[Mapping[tuple[int, int, int], int]] | None = None) -> HorizonPlan:
    """The multi-epoch optimum, certified over every template (module docstring), or the best plan with its proven
    gap when the deadline stops the proof.

    Parameters
    ----------
    problem:
        The epochs' demand and availability, the template columns, K and the running instances.
    time_limit_s:
        Seconds for the whole call (also bounded by ``cancel``'s deadline).
    mip_rel_gap:
        The gap the ILP may stop at when it is larger than ``GAP_ZERO_COLUMNS`` (smaller ones are solved to 0).
    cancel:
        A caller's cancel raises :class:`planning.context.Cancelled`; a passed deadline returns the best plan.
    start:
        A known schedule (counts per epoch) handed to the ILP as a MIP start.

    Returns
    -------
    HorizonPlan; ``lp_slack`` True (status ``infeasible``) when some epoch's demand cannot be met at all.
    """
    run = CallClock(time_limit_s, cancel)
    d = HorizonData.build(problem)
    m = _seeded_master(d, problem)
    lp = _column_generation(d, m, run)
    slack = float(lp.x[m.slack].sum()) if m.slack and lp.x.size else 0.0
    z_lp = lp.z - BIG_M * d.max_cost * slack
    rc_np = _all_rc(d, m, lp.y, pairing=False) if d.link_of and lp.converged else lp.rcs
    rc_np = [r_np if r_np.size or not r.size else r for r_np, r in zip(rc_np, lp.rcs, strict=True)]
    stats: dict[str, float] = {"lp_rounds": float(lp.rounds), "lp_bound": z_lp, "lp_pairs": float(len(m.pairs)),
                               "lp_seconds": run.elapsed()}
    if lp.converged and slack > 1e-6 * max(1.0, float(problem.demand.max(initial=1.0))):
        return HorizonPlan("infeasible", (), math.inf, math.inf, None, True, stats)
    bound = z_lp if lp.converged else -math.inf
    cover_s = COVER_LIMIT_S * len(problem.groups) * max(1.0, problem.epochs / 3)  # longer horizons: larger covers
    lag = _lagrangian(d, m, lp.y, rc_np, min(cover_s, 0.5 * run.left())) if lp.converged else None
    stats["lagrangian_seconds"] = run.elapsed() - stats["lp_seconds"]
    if lag is not None:
        bound = max(bound, lag.z_lb)
        stats["lagrangian_bound"] = lag.z_lb
    keep_always = set(m.pairs)  # (a superset of the pairs a plan ≤ target can use keeps every claim below)
    if start is not None:  # the start's own pairs, so the ILP can take it whole
        keep_always.update(k for counts in start for k, v in counts.items() if v > 0 and k[0] < len(problem.groups))
    fixing = _Fixing(lp.rcs, rc_np, z_lp, lag, lp.converged, frozenset(keep_always))
    search = _Search(bound, bound * (1 + TARGET_START) + 1e-9 if lp.converged else math.inf)
    # a whole schedule (and an earlier attempt's plan) is kept aside and compared at the end (``schedule_value``):
    # handed to HiGHS it slowed the coral-core day's ILP from 5.6 s to optimal to 16.5 s, interrupted, without
    # improving on it; a shorter one (the previous look-ahead step's, shifted) is the first attempt's MIP start
    full_start = start is not None and len(start) == problem.epochs
    _attempts(d, fixing, search, run, mip_rel_gap, None if full_start else start, stats)
    if start is not None and full_start:  # never dearer than the start, even when the ILP found nothing in time
        v_start = schedule_value(d, start)
        if v_start < search.value - 1e-9 * max(1.0, abs(v_start)):
            search.best, search.value = [dict(c) for c in start], v_start
            search.certified = False
    stats["seconds"] = run.elapsed()
    return search.plan(stats)


def _seeded_master(d: HorizonData, problem: HorizonProblem) -> _Master:
    """The restricted master's first pairs: every running instance's, and per group and region the
    ``INITIAL_PER_GROUP_REGION`` best by cost per throughput."""
    m = _Master(d)
    for key, n in problem.running.items():
        if n > 0 and np.isfinite(d.cost[key[0]][key[1], key[2]]):
            m.add_pair(*key)
    for gi, g in enumerate(problem.groups):  # seeds: per region the best cost per throughput
        c = d.cost[gi] / np.maximum(g.throughput, 1e-12)[:, None]
        for r in range(len(problem.regions)):
            ok = np.flatnonzero(np.isfinite(c[:, r]))
            for i in ok[np.argsort(c[ok, r])[:INITIAL_PER_GROUP_REGION]]:
                m.add_pair(gi, int(i), r)
    return m


@dataclass(frozen=True)
class _LP:
    """The column generation's last LP: value, duals, primal, each group's lifetime reduced costs, rounds, and
    whether it converged (no pair with a negative lifetime left: optimal over every template)."""

    z: float
    y: np.ndarray
    x: np.ndarray
    rcs: list[np.ndarray]
    rounds: int
    converged: bool


def _column_generation(d: HorizonData, m: _Master, run: CallClock) -> _LP:
    """Step 1 of the module docstring: the LP over pairs, adding the most negative lifetimes until none is left
    (or ``MAX_ROUNDS``, or the deadline: then not converged)."""
    rounds = 0
    tol = 1e-7 * d.max_cost
    z, y, x = -math.inf, np.zeros(0), np.zeros(0)
    rcs: list[np.ndarray] = [np.zeros((0, len(d.p.regions))) for _ in d.p.groups]
    added = -1  # no LP solved yet
    while True:
        rounds += 1
        run.check_caller("timeline: multi-epoch allocation")
        got = m.solve(run.left())
        if got is None:  # the deadline stopped this LP: unconverged, the ILP takes the pairs so far
            added = -1
            break
        z, y, x = got
        rcs = _all_rc(d, m, y)
        added = 0
        for gi, rc in enumerate(rcs):
            neg = np.argwhere(rc < -tol)
            if neg.size:
                order = np.argsort(rc[neg[:, 0], neg[:, 1]])[:ADD_PER_ROUND]
                added += sum(m.add_pair(gi, int(i), int(r)) for i, r in neg[order])
        if added == 0 or rounds >= MAX_ROUNDS or run.left() <= 0.05:
            break
    return _LP(z, y, x, rcs, rounds, added == 0)


@dataclass(frozen=True)
class _Fixing:
    """Step 2's inputs: which pairs a plan ≤ a target can use (plain and Lagrangian reduced-cost fixing)."""

    rcs: list[np.ndarray]
    rc_np: list[np.ndarray]
    z_lp: float
    lag: _Lagrange | None
    converged: bool
    keep_always: frozenset[tuple[int, int, int]]

    def pairs(self, target: float) -> list[tuple[int, int, int]]:
        chosen = set(self.keep_always)  # the LP stopped early: its own pairs only, and no claim on the optimum
        if self.converged:  # a plan ≤ target uses only pairs within both thresholds (plain and Lagrangian fixing)
            lag = self.lag
            for gi, rc in enumerate(self.rcs):
                within = rc <= target - self.z_lp + 1e-9
                if lag is not None:
                    within &= self.rc_np[gi] <= target - lag.z_lb + lag.L[gi] - lag.base[gi] + 1e-9 * max(
                        1.0, abs(target))
                chosen.update((gi, int(i), int(r)) for i, r in np.argwhere(within))
        return sorted(chosen)


@dataclass
class _Search:
    """The ILP attempts' state: the proven bound, the target θ, the best plan so far and whether it is certified."""

    bound: float
    target: float
    best: list[dict] | None = None
    value: float = math.inf
    certified: bool = False

    def offer(self, counts: list[dict] | None, v: float) -> None:
        if counts and v < self.value - 1e-9:
            self.best, self.value = counts, v

    def plan(self, stats: dict[str, float]) -> HorizonPlan:
        if self.best is None:
            return HorizonPlan("time_limit", (), math.inf, self.bound, None, False, stats)
        bound, value, certified = self.bound, self.value, self.certified
        gap = 0.0 if certified else ((value - bound) / value if math.isfinite(bound) and value > 0 else None)
        if gap is not None and gap <= 1e-6:
            gap, certified = 0.0, True
        return HorizonPlan("optimal" if certified else "feasible", tuple(self.best), value, bound, gap, False, stats)


def _attempts(d: HorizonData, fixing: _Fixing, search: _Search, run: CallClock, mip_rel_gap: float,
              hint: Sequence[Mapping[tuple[int, int, int], int]] | None, stats: dict[str, float]) -> None:
    """Step 2's target loop: the ILP over the pairs a plan ≤ θ can use; optimal ≤ θ certifies it, otherwise θ
    rises (at most ``MAX_ATTEMPTS``); the deadline keeps the best plan and the bound proven so far."""
    problem = d.p
    for _attempt in range(MAX_ATTEMPTS):
        run.check_caller("timeline: multi-epoch allocation")
        if run.left() <= 0.05:
            break
        pairs = fixing.pairs(search.target)
        stats["pairs_in_ilp"] = float(len(pairs))
        ilp_gap = 0.0 if len(pairs) * problem.epochs <= GAP_ZERO_COLUMNS else mip_rel_gap
        restricted = False
        if run.left() < len(pairs) * problem.epochs / ILP_COLUMNS_PER_S:  # too big for the time left: building it
            # and HiGHS's presolve and first heuristics (deaf to its interrupts) would run past the limit
            if search.best is not None or len(fixing.keep_always) >= len(pairs):
                stats["ilp_skipped"] = float(len(pairs))
                break
            pairs, restricted = sorted(fixing.keep_always), True  # a first plan over the LP's (and start's) pairs
            stats["pairs_in_ilp"] = float(len(pairs))
        status, v, ilp_bound, counts = pairs_ilp_within(d, pairs, run.left, ilp_gap,
                                                        hint if search.best is None else None)
        search.offer(counts, v)
        if restricted or not fixing.converged:  # no claim on the optimum from a restricted ILP
            break
        target = search.target
        if status == "optimal" and v <= target + 1e-9 * max(1.0, abs(target)):
            search.certified = ilp_gap == 0.0
            search.bound = max(search.bound, v if search.certified else min(v, ilp_bound))
            break
        if status in ("optimal", "infeasible"):
            search.bound = max(search.bound, min(target, ilp_bound) if math.isfinite(ilp_bound) else target)
            low = fixing.lag.z_lb if fixing.lag is not None else fixing.z_lp
            wider = low + 4 * (target - low)
            search.target = min(search.value, wider) if math.isfinite(search.value) else wider
            continue
        if math.isfinite(ilp_bound):  # the deadline stopped it: every plan ≤ target is within its columns
            search.bound = max(search.bound, min(target, ilp_bound))
        break
