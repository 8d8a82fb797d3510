"""The allocation model (Coral Sec. 4.3 with Mélange/Demystifying workload classes), readable pulp builder.

Sets
    G groups (model, phase); Q classes, each q in one group g(q); Q_g the classes of g;
    T templates τ, each in one group; R regions; C shapes (node configurations);
    P = {(τ, r) : every shape c with U_c(τ) > 0 is offered in r with A_r(c) ≥ U_c(τ)} (pairs).
    A group is *single-class* when |Q_g| = 1 (Coral's case).
Parameters
    U_c(τ) nodes of shape c in τ;  T_q(τ) ≥ 0 throughput of one instance of τ serving only class q;
    λ_q demanded rate of class q;  A_r(c) nodes of shape c that may be held in r;  p_r(c) price per node-hour;
    p_r(τ) = Σ_c p_r(c) U_c(τ);  ν′_{τr} running instances;  K initialisation-penalty factor;  B budget.
Variables
    ν_{τr} ∈ Z, 0 ≤ ν ≤ ub_{τr} = min_c ⌊A_r(c) / U_c(τ)⌋     instances of τ in r, (τ, r) ∈ P
    x_{qτr} ≥ 0   rate of class q served by the instances of (τ, r) — only for multi-class groups, T_q(τ) > 0
    I_{τr} ≥ 0    initialisation penalty — only where ν′ > 0 (elsewhere I = K p ν exactly, folded into cost)
    α ∈ [0, 1]    uniform served fraction (fixed to 1 under the cost objective)
Constraints
    (A) availability   Σ_{τ:(τ,r)∈P} U_c(τ) ν_{τr} ≤ A_r(c)                          ∀ r, c
    (D) demand         single-class g:  Σ_{(τ,r)∈P, τ∈g} T(τ) ν_{τr} ≥ α λ_g          ∀ g
                       multi-class g:   Σ_{(τ,r)} x_{qτr} ≥ α λ_q                        ∀ q ∈ Q_g
    (L) load           Σ_{q∈Q_g} x_{qτr} / T_q(τ) ≤ ν_{τr}                              ∀ (τ, r), τ ∈ multi-class g
    (P) penalty        I_{τr} ≥ (ν_{τr} − ν′_{τr}) p_r(τ) K                              ∀ (τ, r) with ν′ > 0
    (B) budget         Σ p_r(τ) ν_{τr} + penalty + transfer ≤ B                          (optional)
    (R) region links   for a link ℓ (classes served in the same regions in the same proportions, e.g. a
                       model's prefill and decode: the KV cache must reach its decode node), flows f_{ℓab} ≥ 0
                       from the sender's (first class, prefill) region a to the receivers' (decode) region b:
                       the diagonal f_{ℓrr} = s_{ℓr} always, a ≠ b only where ``transfers`` lists it:
                       supply_q(r) ≥ λ_q Σ_b f_{ℓrb}  (q the sender),  supply_q(r) ≥ λ_q Σ_a f_{ℓar}  (q a
                       receiver)  ∀ r;   Σ_{a,b} f_{ℓab} ≥ α                                  (optional)
                       supply_q(r) = Σ_{τ∈g} T(τ) ν_{τr} (single-class g) or Σ_τ x_{qτr} (multi-class)
    (S) spot cap       a group g with a cap s_g < 1 on the share of its demand that may depend on spot nodes:
                       Σ_{(τ,r)∈P, r ∉ spot} T(τ) ν_{τr} ≥ (1 − s_g) α λ_g  (multi-class: Σ x over non-spot
                       pairs ≥ (1 − s_g) α Σ_q λ_q): losing every spot node leaves ≥ 1 − s_g of it served
    Commitments        R_j ∈ {0, …, max_j} (planning.finance's first stage) at cost c_j extend (A) of the
                       offers they cover: Σ_τ U_c(τ) ν_{τr} − Σ_{j ∋ (r, c)} R_j ≤ A_r(c)
Objectives
    (a) cost    min Σ_{(τ,r)} [p_r(τ) ν_{τr} + I_{τr}] + Σ_{ℓ,a≠b} c_{ℓab} f_{ℓab} + Σ_j c_j R_j  with α = 1 (all demand
                met); c_{ℓab} $/h of moving link ℓ's full rate of KV caches from a to b. (B) bounds the same sum.
    (b) served  phase 1: max α (subject to (B) if given); phase 2: min cost with α ≥ α* − ε.
    With one class per group (D) is Coral's Σ T(τ) ν ≥ T_m directly: no x, no (L). With several classes (D)+(L)
    are Mélange's load (slices assigned fractionally) and Demystifying's x_{c,w}. Maximising the uniform
    fraction α of rates λ_q = f_q (requests of a batch) is Demystifying's minimum makespan: a plan finishes
    the batch in time T iff it serves rates f_q / T, i.e. T* = 1 / α* (when α* < 1; see ``makespan``).
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from planning.allocate.instance import Instance
from planning.allocate.problem import PhaseResult
from planning.allocate.solvers import RawSolution, classify, parse_cbc_log, read_highs


@dataclass
class PulpModel:
    """Variables of the readable model, keyed like the math."""

    inst: Instance
    prob: Any
    nu: list[Any]
    x: dict[tuple[int, int], Any]
    pen: dict[int, Any]
    alpha: Any
    build_seconds: float
    nonzeros: int = 0
    split: list[Any] | None = None
    commit: list[Any] | None = None


def new_var(prob: Any, name: str, low: float, up: float | None = None, cat: str = "Continuous") -> Any:
    """A pulp variable of ``prob`` (``add_variable`` on pulp ≥ 3.3, where the constructor is deprecated)."""
    import pulp

    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, low, up, cat=cat)
    return pulp.LpVariable(name, lowBound=low, upBound=up, cat=cat)  # pragma: no cover


def variables(prob: Any, inst: Instance, served: bool) -> tuple[list[Any], dict[tuple[int, int], Any], dict[int, Any], Any]:
    """ν (integer, bounded), x (multi-class groups), I (pairs with ν′ > 0), α."""
    import pulp

    def var(name: str, low: float, up: float | None = None, cat: str = pulp.LpContinuous) -> Any:
        return new_var(prob, name, low, up, cat)

    nu = [var(f"nu_{p}", 0, int(inst.pair_ub[p]), pulp.LpInteger) for p in range(inst.n_pairs)]
    x = {(int(q), int(p)): var(f"x_{q}_{p}", 0) for q, p in zip(inst.thr_class, inst.thr_pair, strict=True)}
    pen = {}
    if inst.problem.K > 0:
        pen = {int(p): var(f"I_{p}", 0) for p in np.nonzero(inst.pair_current > 0)[0]}
    alpha = var("alpha", 0.0 if served else 1.0, 1.0)
    return nu, x, pen, alpha


def commitment_variables(m: PulpModel) -> None:
    """R_j ∈ {0, …, max_j}: the committed nodes of each commitment (planning.finance's first stage)."""
    import pulp

    m.commit = [new_var(m.prob, f"R_{j}", 0, int(ub), pulp.LpInteger) for j, ub in enumerate(m.inst.commit_ub)]


def availability(m: PulpModel) -> None:
    """(A) Σ_τ U_c(τ) ν[τ, r] − Σ_j R_j ≤ A_r(c) (R_j: commitments extending the offer)."""
    import pulp

    inst = m.inst
    terms: dict[int, list[tuple[Any, float]]] = {}
    for row, p, u in zip(inst.use_row, inst.use_pair, inst.use_val, strict=True):
        terms.setdefault(int(row), []).append((m.nu[int(p)], float(u)))
    for j, rows in enumerate(inst.commit_rows):
        for row in rows:
            if int(row) in terms:
                terms[int(row)].append(((m.commit or [])[j], -1.0))
    for row, t in terms.items():
        m.prob += pulp.LpAffineExpression(t) <= int(inst.offer_avail[row]), f"A_{row}"


def demand(m: PulpModel) -> None:
    """(D) Σ T ν ≥ α λ_g (single-class groups); Σ x_q ≥ α λ_q (classes of multi-class groups)."""
    import pulp

    inst = m.inst
    for g in range(len(inst.groups)):
        if not inst.single_class[g]:
            continue
        rate = float(inst.class_rate[inst.group_class[g]])
        if rate <= 0:
            continue
        pairs = np.nonzero(inst.pair_group == g)[0]
        supply = pulp.lpSum(float(inst.single_thr[p]) * m.nu[int(p)] for p in pairs)
        m.prob += supply - rate * m.alpha >= 0, f"D_g{g}"
    for q in range(len(inst.class_ids)):
        rate = float(inst.class_rate[q])
        if inst.single_class[inst.class_group[q]] or rate <= 0:
            continue
        served = pulp.lpSum(v for (qq, _p), v in m.x.items() if qq == q)
        m.prob += served - rate * m.alpha >= 0, f"D_q{q}"


def load(m: PulpModel) -> None:
    """(L) Σ_q x[q, τ, r] / T_q(τ) ≤ ν[τ, r]."""
    import pulp

    inst = m.inst
    terms: dict[int, list[tuple[Any, float]]] = {}
    for q, p, t in zip(inst.thr_class, inst.thr_pair, inst.thr_val, strict=True):
        terms.setdefault(int(p), []).append((m.x[(int(q), int(p))], 1.0 / float(t)))
    for p, t in terms.items():
        m.prob += pulp.LpAffineExpression(t) - m.nu[p] <= 0, f"L_{p}"


def penalty(m: PulpModel) -> None:
    """(P) I ≥ (ν − ν′) p K where ν′ > 0."""
    inst = m.inst
    k = inst.problem.K
    for p, var in m.pen.items():
        kp = k * float(inst.pair_price[p])
        m.prob += var >= kp * (m.nu[p] - int(inst.pair_current[p])), f"P_{p}"


def flow_variables(m: PulpModel) -> None:
    """f_{ℓab} ≥ 0 per flow column of the links (s_{ℓr} on the diagonal); before the objective, which prices them."""
    lk = m.inst.links()
    m.split = [new_var(m.prob, f"s_{int(li)}_{int(a)}" if a == b else f"f_{int(li)}_{int(a)}_{int(b)}", 0)
               for li, a, b in zip(lk.split_link, lk.split_src, lk.split_dst, strict=True)]


def links(m: PulpModel) -> None:
    """(R) supply_q(r) ≥ λ_q Σ_b f_{ℓrb} (sender q) or λ_q Σ_a f_{ℓar} (receiver q); Σ f_ℓ ≥ α per link."""
    import pulp

    inst = m.inst
    lk = inst.links()
    if m.split is None:
        flow_variables(m)
    assert m.split is not None
    for i, (q, js, idx, is_x) in enumerate(zip(lk.row_class, lk.row_splits, lk.row_pairs, lk.row_is_x, strict=True)):
        if is_x:
            supply = pulp.lpSum(m.x[(int(inst.thr_class[t]), int(inst.thr_pair[t]))] for t in idx)
        else:
            supply = pulp.lpSum(float(inst.single_thr[p]) * m.nu[int(p)] for p in idx)
        flow = pulp.lpSum(m.split[int(j)] for j in js)
        m.prob += supply - float(inst.class_rate[q]) * flow >= 0, f"R_{i}"
    for li in lk.served_links:
        js = np.nonzero(lk.split_link == li)[0]
        m.prob += pulp.lpSum(m.split[int(j)] for j in js) - m.alpha >= 0, f"S_{li}"


def spot_cap(m: PulpModel) -> None:
    """(S) capacity outside the spot regions ≥ (1 − s_g) α λ_g for every group with a spot cap."""
    import pulp

    inst = m.inst
    spot = inst.spot_pairs()
    for g, share in inst.spot_cap_groups():
        if inst.single_class[g]:
            rate = float(inst.class_rate[inst.group_class[g]])
            supply = pulp.lpSum(float(inst.single_thr[p]) * m.nu[int(p)]
                                for p in np.nonzero((inst.pair_group == g) & ~spot)[0])
        else:
            rate = float(inst.class_rate[inst.class_group == g].sum())
            supply = pulp.lpSum(v for (q, p), v in m.x.items() if inst.class_group[q] == g and not spot[p])
        m.prob += supply - (1.0 - share) * rate * m.alpha >= 0, f"S_g{g}"


def cost_expression(m: PulpModel) -> Any:
    """Σ p ν + I + Σ c f; where ν′ = 0, I = K p ν is folded into ν's coefficient; c prices cross-region flows."""
    import pulp

    inst = m.inst
    k = inst.problem.K
    terms = []
    for p in range(inst.n_pairs):
        factor = 1.0 if p in m.pen else 1.0 + k
        terms.append((m.nu[p], float(inst.pair_price[p]) * factor))
    terms.extend((v, 1.0) for v in m.pen.values())
    terms.extend((v, float(c)) for v, c in zip(m.commit or [], inst.commit_cost, strict=True))
    if m.split:
        terms.extend((v, float(c)) for v, c in zip(m.split, inst.links().split_cost, strict=True) if c > 0)
    return pulp.LpAffineExpression(terms)


def budget(m: PulpModel, limit: float) -> None:
    """(B) provisioning + penalty + KV transfer ≤ B."""
    m.prob += cost_expression(m) <= limit, "B"


def build_pulp(inst: Instance, served: bool, budget_limit: float | None, phase: str) -> PulpModel:
    """Build the readable model for one phase (``"cost"`` minimises cost, ``"served"`` maximises α).

    Parameters
    ----------
    inst:
        The pruned, indexed instance.
    served:
        True for the max-served objective (α free); False fixes α = 1.
    budget_limit:
        USD/h bound on provisioning + penalty, or None.
    phase:
        Which objective to set.

    Returns
    -------
    ``PulpModel``.
    """
    import pulp

    t0 = time.perf_counter()
    sense = pulp.LpMaximize if phase == "served" else pulp.LpMinimize
    prob = pulp.LpProblem("allocation", sense)
    nu, x, pen, alpha = variables(prob, inst, served)
    m = PulpModel(inst, prob, nu, x, pen, alpha, 0.0)
    commitment_variables(m)
    flow_variables(m)
    prob += (alpha if phase == "served" else cost_expression(m)), "objective"
    availability(m)
    demand(m)
    load(m)
    penalty(m)
    links(m)
    spot_cap(m)
    if budget_limit is not None:
        budget(m, budget_limit)
    m.build_seconds = time.perf_counter() - t0
    with warnings.catch_warnings():  # pulp 3.x warns about the dict view of constraints
        warnings.simplefilter("ignore", DeprecationWarning)
        m.nonzeros = sum(len(c) for c in prob.constraints.values())
    return m


def solve_pulp(
    m: PulpModel,
    solver: str,
    phase: str,
    time_limit_s: float,
    gap: float,
    alpha_lower: float | None = None,
    dump_path: str | None = None,
) -> RawSolution:
    """Solve the pulp model with HiGHS (reading highspy's own status) or CBC (reading its log).

    Parameters
    ----------
    m:
        The built model.
    solver:
        ``"highs"`` or ``"cbc"``.
    phase:
        ``"cost"`` or ``"served"`` (label and sign of the objective).
    time_limit_s, gap:
        Time limit and relative MIP gap.
    alpha_lower:
        Lower bound for α (phase 2 of the served objective).
    dump_path:
        Write the model (``.lp`` or ``.mps``) before solving.

    Returns
    -------
    ``RawSolution`` with values in the matrix builder's column order (ν, x, I, R, f, α).
    """
    import pulp

    if alpha_lower is not None:
        m.alpha.lowBound = float(alpha_lower)
    if dump_path:
        if dump_path.endswith(".mps"):
            m.prob.writeMPS(dump_path)
        else:
            m.prob.writeLP(dump_path)
    t0 = time.perf_counter()
    if solver == "highs":
        cls = getattr(pulp, "HiGHS", None)
        if cls is None or not cls().available():  # pragma: no cover - depends on the pulp build
            raise RuntimeError("pulp.HiGHS is not available; use builder='matrix' (highspy directly)")
        nodes = {} if m.inst.problem.node_limit is None else {"mip_max_nodes": int(m.inst.problem.node_limit)}
        m.prob.solve(cls(msg=False, timeLimit=time_limit_s, gapRel=gap, **nodes))
        # pulp hands HiGHS the negated objective when maximising
        sense = -1.0 if phase == "served" else 1.0
        raw = read_highs(m.prob.solverModel, phase, time.perf_counter() - t0, gap, sense)
        has = raw.values is not None
    else:
        fd, log = tempfile.mkstemp(suffix=".log")
        os.close(fd)
        try:
            with warnings.catch_warnings():  # pulp 3.x deprecates the bundled CBC; it is the one installed
                warnings.simplefilter("ignore", DeprecationWarning)
                m.prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=gap, logPath=log,
                                               maxNodes=m.inst.problem.node_limit))
            with open(log, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        finally:
            os.unlink(log)
        result, _obj, bound, cbc_gap = parse_cbc_log(text)
        seconds = time.perf_counter() - t0
        lower = result.lower()
        if "infeasible" in lower or m.prob.status == pulp.LpStatusInfeasible:
            stopped = "infeasible"
        elif "optimal" in lower:
            stopped = "optimal"
        elif "time" in lower:
            stopped = "time_limit"
        elif result:
            stopped = "other"
        else:
            stopped = "error"
        has = m.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and stopped != "infeasible"
        objective = float(pulp.value(m.prob.objective)) if has else None
        if stopped == "optimal":
            cbc_gap, bound = 0.0 if cbc_gap is None else cbc_gap, objective if bound is None else bound
        status = classify(has, stopped, cbc_gap, gap, objective, bound)
        raw = RawSolution(None, PhaseResult(phase, status, objective, bound, cbc_gap, seconds, result or "no result line"))
    if has:
        raw.values = _values(m)
    else:
        raw.values = None
    return raw


def _values(m: PulpModel) -> np.ndarray:
    inst = m.inst
    pen_pairs = sorted(m.pen)
    out = [v.value() or 0.0 for v in m.nu]
    out += [m.x[(int(q), int(p))].value() or 0.0 for q, p in zip(inst.thr_class, inst.thr_pair, strict=True)]
    out += [m.pen[p].value() or 0.0 for p in pen_pairs]
    out += [v.value() or 0.0 for v in (m.commit or [])]
    out += [v.value() or 0.0 for v in (m.split or [])]
    out.append(m.alpha.value() or 0.0)
    return np.asarray(out, dtype=float)
