"""The joint sharing model's columns: the restricted master LP, pattern and template pricing, the Farley bound,
the reduced-cost enumeration of patterns (the set-partitioning ILP is :mod:`planning.sharing.joint_ilp`;
:mod:`planning.sharing.joint` has the formulation and the proofs)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planning.errors import PlanningError
from planning.sharing.joint_groups import cheapest_cover
from planning.sharing.joint_model import JointArrays, JointPlan
from planning.sharing.packing import fits

BIG_M = 1e4  # slack cost factor (× the dearest column): a positive slack proves the instance infeasible
ADD_PER_ROUND = 300  # template columns added per group and round
EXACT_PER_ROUND = 3  # disjoint patterns per node type from the exact search, when the greedy finds none
ZERO = 1e-9


# ---------------------------------------------------------------------------------------------- the master LP
class ColumnMaster:
    """The restricted master LP (HiGHS, columns added as they are priced). Row layout:
    cover[i] (= 1, shareable model i) | demand[g] (≥; for a planned group its convexity row Σ_q w_q − d = 0, or
    = 1 when it must be dedicated) | card[g] (≥; unused for planned groups) | pair[(m, r, 0|1)] (≥ 0) |
    pairsum[m] (≥) | avail[r, k] (≤ A)."""

    def __init__(self, a: JointArrays) -> None:
        import highspy

        self.a = a
        inst = a.inst
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        inf = highspy.kHighsInf
        R, Ks = inst.prices.shape
        nS, nG = len(inst.shareable), len(inst.groups)
        self.pair_rows = {(m, r, j): idx for idx, (m, r, j) in
                          enumerate((m, r, j) for m in a.linked for r in range(R) for j in (0, 1))}
        self.pairsum_rows = {m: i for i, m in enumerate(a.linked)}
        self.o_cover = 0
        self.o_dem = nS
        self.o_card = nS + nG
        self.o_pair = nS + 2 * nG
        self.o_psum = self.o_pair + len(self.pair_rows)
        self.o_av = self.o_psum + len(self.pairsum_rows)
        self.n_rows = self.o_av + R * Ks
        lower = np.full(self.n_rows, -inf)
        upper = np.full(self.n_rows, inf)
        lower[:nS] = upper[:nS] = 1.0
        shareable = set(a.shareable_index)
        for gi, g in enumerate(inst.groups):
            fixed = g.model not in shareable  # a must-dedicate model: constant right-hand sides
            if a.planned[gi]:  # convexity: one plan when dedicated
                lower[self.o_dem + gi] = upper[self.o_dem + gi] = 1.0 if fixed else 0.0
                continue
            lower[self.o_dem + gi] = g.demand if fixed else 0.0
            lower[self.o_card + gi] = a.card[gi] if fixed else 0.0
        lower[self.o_pair:self.o_psum] = 0.0
        for m, i in self.pairsum_rows.items():
            lower[self.o_psum + i] = 0.0 if m in shareable else 1.0
        upper[self.o_av:] = inst.available.reshape(-1).astype(float)
        self.h.addRows(self.n_rows, lower, upper, 0, np.zeros(self.n_rows, dtype=np.int32),
                       np.zeros(0, dtype=np.int32), np.zeros(0))
        self.columns: list[tuple[str, object]] = []  # ("slack", row) | ("d", i) | ("s", (m, r)) | ("z", P) | ("nu", (g, i, r))
        big = BIG_M * a.max_cost
        for row in [*range(nS), *[self.o_dem + gi for gi in range(nG)],
                    *[self.o_card + gi for gi in range(nG) if not a.planned[gi]],
                    *[self.o_psum + i for i in self.pairsum_rows.values()]]:
            self._add("slack", row, big, [row], [1.0])  # keeps the LP feasible; positive at its optimum: no plan
        for m, i in a.shareable_index.items():  # d_m: dedicated instead of shared
            rows, vals = [self.o_cover + i], [1.0]
            for gi, g in enumerate(inst.groups):
                if g.model == m and a.planned[gi]:
                    rows.append(self.o_dem + gi)
                    vals.append(-1.0)
                elif g.model == m:
                    rows += [self.o_dem + gi, self.o_card + gi]
                    vals += [-g.demand, -a.card[gi]]
            if m in self.pairsum_rows:
                rows.append(self.o_psum + self.pairsum_rows[m])
                vals.append(-1.0)
            self._add("d", i, 0.0, rows, vals)
        for m, (gp, gd) in a.linked.items():
            for r in range(R):
                rows = [self.o_pair + self.pair_rows[(m, r, 0)], self.o_pair + self.pair_rows[(m, r, 1)],
                        self.o_psum + self.pairsum_rows[m]]
                vals = [-inst.groups[gp].demand, -inst.groups[gd].demand, 1.0]
                self._add("s", (m, r), 0.0, rows, vals)
        self.patterns: set[tuple[int, tuple[int, ...]]] = set()
        self.templates: set[tuple[int, int, int]] = set()  # ν columns (paired groups) and the templates of plans
        self.plans: set[tuple[int, tuple[tuple[int, int, int], ...]]] = set()  # (group, ((template, region, n), ...))

    def _add(self, kind: str, key: object, cost: float, rows: Sequence[int], vals: Sequence[float]) -> None:
        self.h.addCol(float(cost), 0.0, float("inf"), len(rows), np.asarray(rows, dtype=np.int32),
                      np.asarray(vals, dtype=float))
        self.columns.append((kind, key))

    def add_pattern(self, t: int, models: tuple[int, ...]) -> bool:
        if (t, models) in self.patterns:
            return False
        a = self.a
        r, k = a.type_rk[t]
        rows = [self.o_cover + i for i in models] + [self.o_av + r * a.inst.prices.shape[1] + k]
        self._add("z", (t, models), a.inst.types[t].price_per_hour, rows, [1.0] * len(rows))
        self.patterns.add((t, models))
        return True

    def add_plan(self, gi: int, plan: tuple[tuple[int, int, int], ...]) -> bool:
        """A whole-group plan column: ``plan`` lists (template, region, instances) covering the group's demand."""
        if not plan or (gi, plan) in self.plans:
            return False
        a = self.a
        g = a.inst.groups[gi]
        Ks = a.inst.prices.shape[1]
        use: dict[int, float] = {}
        for i, r, n in plan:
            for k in np.flatnonzero(g.usage[i] > 0):
                row = self.o_av + r * Ks + int(k)
                use[row] = use.get(row, 0.0) + n * float(g.usage[i, k])
            self.templates.add((gi, i, r))
        cost = sum(n * float(a.cost[gi][i, r]) for i, r, n in plan)
        self._add("q", (gi, plan), cost, [self.o_dem + gi, *use], [1.0, *use.values()])
        self.plans.add((gi, plan))
        return True

    def add_template(self, gi: int, i: int, r: int) -> bool:
        if (gi, i, r) in self.templates:
            return False
        a = self.a
        g = a.inst.groups[gi]
        nz = np.flatnonzero(g.usage[i] > 0)
        Ks = a.inst.prices.shape[1]
        rows = [self.o_dem + gi, self.o_card + gi, *(self.o_av + r * Ks + nz).tolist()]
        vals = [float(a.t_eff[gi][i]), 1.0, *g.usage[i, nz].astype(float).tolist()]
        m = g.model
        if m in a.linked:
            j = 0 if a.linked[m][0] == gi else 1
            rows.append(self.o_pair + self.pair_rows[(m, r, j)])
            vals.append(float(a.t_eff[gi][i]))
        self._add("nu", (gi, i, r), float(a.cost[gi][i, r]), rows, vals)
        self.templates.add((gi, i, r))
        return True

    def solve(self) -> tuple[float, np.ndarray, np.ndarray]:
        """(objective without slack, row duals, column values)."""
        self.h.run()
        import highspy

        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise PlanningError("sharing", f"the joint LP stopped with status {self.h.modelStatusToString(self.h.getModelStatus())}.",
                                "report this scenario: the LP with slack columns is always feasible.")
        sol = self.h.getSolution()
        values = np.asarray(sol.col_value, dtype=float)
        obj = float(self.h.getInfo().objective_function_value)
        return obj, np.asarray(sol.row_dual, dtype=float), values

    def slack_value(self, values: np.ndarray) -> float:
        return float(sum(values[j] for j, (kind, _k) in enumerate(self.columns) if kind == "slack"))


@dataclass
class Duals:
    pi: np.ndarray  # cover (free)
    y_dem: np.ndarray  # ≥ 0 (free for a planned group's convexity row: μ_g)
    y_card: np.ndarray  # ≥ 0
    y_pair: dict[tuple[str, int, int], float]  # ≥ 0
    sigma: np.ndarray  # (R, K) ≤ 0

    @classmethod
    def zero(cls, a: JointArrays) -> Duals:
        nS, nG = len(a.inst.shareable), len(a.inst.groups)
        return cls(np.zeros(nS), np.zeros(nG), np.zeros(nG), {}, np.zeros(a.inst.prices.shape))


def column_duals(master: ColumnMaster, y: np.ndarray) -> Duals:
    a = master.a
    R, Ks = a.inst.prices.shape
    nS, nG = len(a.inst.shareable), len(a.inst.groups)
    raw = y[master.o_dem:master.o_dem + nG]
    return Duals(pi=y[:nS].copy(), y_dem=np.where(a.planned, raw, np.maximum(raw, 0.0)),
                  y_card=np.maximum(y[master.o_card:master.o_card + nG], 0.0),
                  y_pair={key: max(float(y[master.o_pair + i]), 0.0) for key, i in master.pair_rows.items()},
                  sigma=np.minimum(y[master.o_av:master.o_av + R * Ks].reshape(R, Ks), 0.0))


def template_rc(a: JointArrays, du: Duals, gi: int) -> np.ndarray:
    """(n, R) reduced costs of group gi's template columns (inf where not sold)."""
    g = a.inst.groups[gi]
    rc = a.cost[gi] - g.usage.astype(float) @ du.sigma.T - (a.t_eff[gi] * du.y_dem[gi])[:, None] - du.y_card[gi]
    if g.model in a.linked:
        j = 0 if a.linked[g.model][0] == gi else 1
        pair = np.array([du.y_pair[(g.model, r, j)] for r in range(len(a.inst.regions))])
        rc = rc - a.t_eff[gi][:, None] * pair[None, :]
    return rc


def plan_costs(a: JointArrays, du: Duals, gi: int) -> np.ndarray:
    """(n, R) costs c' = c − Σ_k σ_rk U_τk of a planned group's (template, region) items (inf where not sold)."""
    return a.cost[gi] - a.inst.groups[gi].usage.astype(float) @ du.sigma.T


def price_plan(a: JointArrays, du: Duals, gi: int) -> tuple[float, tuple[tuple[int, int, int], ...]]:
    """The cheapest plan of planned group gi under the duals: (its reduced cost, the plan)."""
    c = plan_costs(a, du, gi)
    g = a.inst.groups[gi]
    R = c.shape[1]
    value, counts = cheapest_cover(c.reshape(-1), np.repeat(g.throughput.astype(float), R), g.demand)
    plan = tuple(sorted((j // R, j % R, n) for j, n in counts))
    return value - float(du.y_dem[gi]), plan


def start_plans(a: JointArrays, start: JointPlan) -> list[tuple[int, tuple[tuple[int, int, int], ...]]]:
    """The whole-group plans of a known plan's dedicated instances (planned groups only)."""
    inst = a.inst
    index = {(g.ids[i], r_name): (gi, i, r) for gi, g in enumerate(inst.groups) if a.planned[gi]
             for i in range(len(g.ids)) for r, r_name in enumerate(inst.regions)}
    plans: dict[int, list[tuple[int, int, int]]] = {}
    for key, n in start.counts.items():
        if key in index and n > 0:
            gi, i, r = index[key]
            plans.setdefault(gi, []).append((i, r, int(n)))
    return [(gi, tuple(sorted(p))) for gi, p in plans.items()]


def plan_rc_lower(a: JointArrays, du: Duals, gi: int) -> float:
    """A lower bound on every plan's reduced cost in group gi (the knapsack's LP bound): λ·min c'/min(T, λ) − μ."""
    c = plan_costs(a, du, gi)
    ratio = c / np.maximum(a.t_eff[gi], 1e-12)[:, None]
    best = float(ratio[np.isfinite(ratio)].min()) if np.isfinite(ratio).any() else math.inf
    return a.inst.groups[gi].demand * best - float(du.y_dem[gi])


def pattern_base(a: JointArrays, du: Duals, t: int) -> float:
    r, k = a.type_rk[t]
    return a.inst.types[t].price_per_hour - float(du.sigma[r, k])


# ---------------------------------------------------------------------------------------------- pattern pricing
def greedy_patterns(a: JointArrays, du: Duals, t: int, allowed: Sequence[int], tol: float) -> list[tuple[int, ...]]:
    """Disjoint patterns of negative reduced cost, filled greedily in four orders (models by π per share of memory,
    of compute, of TTFT room, of the tightest of them): many columns per round cheaply; the exact knapsack
    (:func:`best_pattern`) proves convergence."""
    node = a.inst.types[t]
    base = pattern_base(a, du, t)
    models = a.inst.shareable

    def shares(i: int) -> tuple[float, float, float]:
        m = models[i]
        return (m.memory_gb / node.capacity_gb, m.load[node.key],
                m.decode_load.get(node.key, 0.0) + m.prefill_share.get(node.key, 0.0))

    pos = [i for i in allowed if du.pi[i] > ZERO]
    sh = {i: shares(i) for i in pos}
    keys = [lambda i: -du.pi[i] / max(sh[i][0], 1e-9), lambda i: -du.pi[i] / max(sh[i][1], 1e-9),
            lambda i: -du.pi[i] / max(sh[i][2], 1e-9), lambda i: -du.pi[i] / max(*sh[i], 1e-9)]
    out: set[tuple[int, ...]] = set()
    for key in keys:
        left = sorted(pos, key=key)
        while left:
            chosen: list[int] = []
            for i in left:
                if fits([models[j] for j in (*chosen, i)], node):
                    chosen.append(i)
            if not chosen or base - float(du.pi[chosen].sum()) >= -tol:
                break
            out.add(tuple(sorted(chosen)))
            left = [i for i in left if i not in chosen]
    return sorted(out)


def best_pattern(a: JointArrays, du: Duals, t: int, allowed: Sequence[int], need: float = -math.inf,
                  seconds: float | None = None) -> tuple[float, tuple[int, ...]]:
    """A set of ``allowed`` models that fit together on type t with Σ π_m > ``need`` (binary knapsack, HiGHS):
    (Σ π of the set, the set), or (0, ()) when HiGHS proves none exists. With ``need`` = −inf: the maximum.
    With ``seconds``: the search stops then and the first value is its proven upper bound on the maximum."""
    import highspy

    cand = [i for i in allowed if du.pi[i] > ZERO]
    if not cand or float(du.pi[cand].sum()) <= need:
        return 0.0, ()
    node = a.inst.types[t]
    ms = [a.inst.shareable[i] for i in cand]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    if math.isfinite(need):  # a pricing question: stop at the first set above it, prune every node below it
        h.setOptionValue("objective_bound", -float(need))
        h.setOptionValue("mip_max_improving_sols", 1)
    if seconds is not None:
        h.setOptionValue("time_limit", float(seconds))
    n = len(cand)
    h.addVars(n, np.zeros(n), np.ones(n))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), -du.pi[cand])
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    idx = np.arange(n, dtype=np.int32)
    h.addRow(-highspy.kHighsInf, node.capacity_gb, n, idx, np.array([m.memory_gb for m in ms]))
    h.addRow(-highspy.kHighsInf, 1.0, n, idx, np.array([m.load[node.key] for m in ms]))
    delta = np.array([m.decode_load.get(node.key, 0.0) for m in ms])
    hs = np.array([m.prefill_share.get(node.key, 0.0) for m in ms])
    if delta.any() and hs.any():
        # (ttft) Σδx + h_m ≤ 1 for every chosen m  ⇔  Σδx + H ≤ 1 with H ≥ h_m·x_m (one sparse row per model
        # instead of a dense one: the same feasible sets, a far smaller model)
        h.addVars(1, np.zeros(1), np.ones(1))
        hcol = np.int32(n)
        h.addRow(-highspy.kHighsInf, 1.0, n + 1, np.arange(n + 1, dtype=np.int32), np.append(delta, 1.0))
        for j in np.flatnonzero(hs > 0):
            h.addRow(-highspy.kHighsInf, 0.0, 2, np.array([j, hcol], dtype=np.int32), np.array([hs[j], -1.0]))
    h.run()
    if seconds is not None:  # the bound question: −(HiGHS's dual bound) ≥ every set's Σ π
        dual = h.getInfo().mip_dual_bound
        return (-float(dual) if math.isfinite(dual) else math.inf), ()
    chosen, gain = _chosen(h, cand, n, du)
    if math.isfinite(need) and gain <= need and h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        # the first improving set HiGHS met may lie below ``need`` (it stops at its first incumbent, not at the
        # first above the cutoff): only a search run to its end proves that no set qualifies
        h.setOptionValue("mip_max_improving_sols", 2147483647)
        h.clearSolver()
        h.run()
        chosen, gain = _chosen(h, cand, n, du)
    if chosen and not fits([a.inst.shareable[i] for i in chosen], node):
        raise PlanningError("sharing", f"the pattern pricing chose models {chosen} that do not fit on "
                            f"{node.key} (a numerical slip in the knapsack).", "report this scenario.")
    return gain, chosen


def _chosen(h: object, cand: Sequence[int], n: int, du: Duals) -> tuple[tuple[int, ...], float]:
    """The knapsack's chosen models and their Σ π (((), 0) without a solution)."""
    if int(h.getInfo().primal_solution_status) != 2:  # type: ignore[attr-defined]
        return (), 0.0
    x = np.asarray(h.getSolution().col_value)[:n]  # type: ignore[attr-defined]
    chosen = tuple(sorted(cand[j] for j in range(n) if x[j] > 0.5))
    return chosen, float(sum(du.pi[i] for i in chosen))


def enumerate_patterns(a: JointArrays, du: Duals, t: int, allowed: Sequence[int], delta: float, cap: int
               ) -> list[tuple[tuple[int, ...], float]] | None:
    """Every pattern of type t over ``allowed`` models with reduced cost ≤ ``delta`` (None when more than
    ``cap``): depth-first over models by π descending; a branch is cut when even adding every remaining model of
    positive π that the memory left can hold (fractional knapsack) cannot bring rc down to ``delta``."""
    out, state = pattern_listing(a, du, t, allowed, delta, cap, math.inf)
    return out if state == "complete" else None


def pattern_listing(a: JointArrays, du: Duals, t: int, allowed: Sequence[int], delta: float, cap: int, max_nodes: float
             ) -> tuple[list[tuple[tuple[int, ...], float]], str]:
    """:func:`enumerate_patterns`'s search: (the patterns found, ``"complete"`` | ``"cap"`` (more than ``cap``) |
    ``"nodes"`` (more than ``max_nodes`` search nodes: the listing is partial))."""
    node = a.inst.types[t]
    base = pattern_base(a, du, t)
    order = sorted(allowed, key=lambda i: -du.pi[i])
    ms = [a.inst.shareable[i] for i in order]
    pis = np.array([du.pi[i] for i in order])
    mem = np.array([m.memory_gb for m in ms])
    out: list[tuple[tuple[int, ...], float]] = []
    need = base - delta  # a pattern needs Σπ ≥ need
    # fractional bound per suffix: best Σπ of models j.. within a memory budget (positive π only, by π/memory)
    ratio_order = [np.array([j for j in sorted(range(s, len(order)), key=lambda j: -pis[j] / max(mem[j], 1e-9))
                             if pis[j] > ZERO], dtype=np.int64) for s in range(len(order) + 1)]

    def bound(s: int, room: float) -> float:
        total = 0.0
        for j in ratio_order[s]:
            if mem[j] <= room:
                total += pis[j]
                room -= mem[j]
            else:
                total += pis[j] * room / max(mem[j], 1e-9)
                break
        return total

    chosen: list[int] = []
    state = ["complete"]
    nodes = [0]

    def dfs(s: int, gain: float, used_mem: float) -> bool:
        """Record the current set when it qualifies, then try each later model; False when over the cap."""
        nodes[0] += 1
        if nodes[0] > max_nodes:
            state[0] = "nodes"
            return False
        if chosen and gain >= need - 1e-9:
            out.append((tuple(sorted(order[j] for j in chosen)), base - gain))
            if len(out) > cap:
                state[0] = "cap"
                return False
        room = node.capacity_gb - used_mem
        for j in range(s, len(order)):
            if gain + bound(j, room) < need - 1e-9:
                break  # no subset of models j.. within the memory left gains enough (nor of any later suffix)
            if mem[j] > room + 1e-9 or gain + pis[j] + bound(j + 1, room - mem[j]) < need - 1e-9:
                continue  # j does not fit, or no set containing j (and later models) qualifies
            chosen.append(j)
            if fits([ms[c] for c in chosen], node) and not dfs(j + 1, gain + pis[j], used_mem + mem[j]):
                return False
            chosen.pop()
        return True

    dfs(0, 0.0, 0.0)
    return out, state[0]


def farley_bound(a: JointArrays, du: Duals, z_rmp: float, allowed: Sequence[Sequence[int]],
                  seconds: float) -> float:
    """A lower bound when column generation stopped early (Farley / Lagrangian): every column has rc ≥ the
    smallest one, and a plan buys at most κ_t nodes of type t (its availability, or one per model that fits), so
    z* ≥ z_RMP + Σ_t κ_t·min(0, rc*_t). rc*_t ≥ p_t − σ_t − U_t with U_t the knapsack's dual bound (valid when the
    search stops early too). −inf when a template column is still negative (those are priced exhaustively)."""
    import highspy

    if any((template_rc(a, du, gi) < -1e-7 * a.max_cost).any() for gi in range(len(a.inst.groups))
           if not a.planned[gi]):
        return -math.inf
    total = z_rmp  # the restricted master's LP value, slack included: a plan has no slack, so it is ≥ the full LP
    for gi in range(len(a.inst.groups)):  # a plan has one whole-group plan per planned group at most
        if a.planned[gi]:
            total += min(0.0, plan_rc_lower(a, du, gi))
    per = max(0.05, seconds / max(1, len(a.inst.types)))
    for t, node in enumerate(a.inst.types):
        cand = [i for i in allowed[t] if du.pi[i] > ZERO]
        if not cand:
            continue
        upper = _knapsack_upper(a, du, t, cand, per, highspy)
        kappa = min(node.available, len(allowed[t]))
        total += kappa * min(0.0, pattern_base(a, du, t) - upper)
    return total


def _knapsack_upper(a: JointArrays, du: Duals, t: int, cand: Sequence[int], seconds: float, highspy: object) -> float:
    """An upper bound on max Σ π x over sets of ``cand`` that fit on type t: the knapsack's dual bound within
    ``seconds`` (the sum of positive π when the search could not bound it)."""
    plain = float(du.pi[list(cand)].sum())
    gain, _ms = best_pattern(a, du, t, cand, seconds=seconds)
    return plain if not math.isfinite(gain) else gain
