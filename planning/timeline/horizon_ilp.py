"""The compact multi-epoch MILP over a given set of (template, region) pairs (``planning.timeline.horizon``'s last
step, and the oracle its tests solve over every pair), and a complete MIP start from instance counts.

Rows, in order: availability (E·R·S), demand (E·G), per link and region the prefill and decode pairing rows
(E·L·R·2) and the shares' sum (E·L), the start-up rows (E per pair when K > 0). Columns: the shares s, then per
pair its E instance counts ν and (K > 0) its E start-up costs I.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np


def run_until(h: Any, seconds: float) -> None:
    """``h.run()`` stopped after ``seconds`` of wall time. HiGHS's own ``time_limit`` is read between its steps
    (presolve, heuristics, a node's LP) and was seen overrunning by 2-3× on a busy machine; the simplex, IPM and
    MIP interrupt callbacks come every few iterations, so the stop lands within a fraction of a second, except in
    the root's cut separation: inside a MIP HiGHS calls only its MIP interrupt callback, between its root's cut
    rounds, and one round took up to 14.5 s on the offline day's 99,888-column MILP, with or without presolve
    (round 19, ``docs/benchmarks.md``). So the large ILPs run in a child process killed at the deadline
    (:func:`pairs_ilp_within`)."""
    import time

    deadline = time.perf_counter() + max(float(seconds), 0.05)

    def stop(event: Any) -> None:
        if time.perf_counter() >= deadline:
            event.interrupt()

    h.setOptionValue("time_limit", max(float(seconds), 0.05))
    h.cbSimplexInterrupt += stop
    h.cbIpmInterrupt += stop
    h.cbMipInterrupt += stop
    try:
        h.run()
    finally:
        h.cbSimplexInterrupt -= stop
        h.cbIpmInterrupt -= stop
        h.cbMipInterrupt -= stop

if TYPE_CHECKING:
    from planning.timeline.horizon_data import HorizonData


Answer = tuple[str, float, float, list[dict]]  # (HiGHS status, value, dual bound, counts per epoch)


def pairs_ilp(d: HorizonData, pairs: Sequence[tuple[int, int, int]], time_limit_s: float | Callable[[], float], gap: float,
              start: Sequence[Mapping[tuple[int, int, int], int]] | None = None,
              on_incumbent: Callable[[Answer], None] | None = None) -> Answer:
    """The compact MILP over ``pairs``: (HiGHS status, value, dual bound, counts per epoch). ``time_limit_s``: seconds,
    or a function giving the seconds left, read when HiGHS starts (so building the model counts against it).
    ``on_incumbent`` is called with ("time_limit", value, dual bound, counts) at each plan HiGHS finds on the way
    (what a caller that may be killed keeps)."""
    import highspy

    lay = _Layout.of(d, len(pairs))
    model = _Columns()
    _share_columns(d, lay, model)
    nu_cols, pen_lower = _pair_columns(d, lay, pairs, model)
    if not pairs:  # nothing can be bought: a plan exists only without demand
        if (d.p.demand > 0).any():
            return "infeasible", math.inf, math.inf, []
        return "optimal", 0.0, 0.0, [{} for _ in range(lay.E)]
    h = _highs(d, lay, model, pen_lower, gap)
    if start is not None:  # a known schedule (another policy's, or the previous step's shifted) as a MIP start
        x0 = start_vector(d, pairs, nu_cols, start, len(model.cost))
        sol = highspy.HighsSolution()
        sol.col_value = list(x0)
        h.setSolution(sol)
    if on_incumbent is not None:
        def improving(event: Any) -> None:
            out = event.data_out
            bound = float(out.mip_dual_bound) if math.isfinite(out.mip_dual_bound) else -math.inf
            x = np.asarray(out.mip_solution)
            on_incumbent(("time_limit", float(out.objective_function_value), bound, _counts(x, pairs, nu_cols, lay.E)))
        h.cbMipImprovingSolution += improving
    left = float(time_limit_s() if callable(time_limit_s) else time_limit_s)
    run_until(h, left)
    return _answer(h, pairs, nu_cols, lay.E)


@dataclass(frozen=True)
class _Layout:
    """The row blocks' offsets (module docstring's order) and the problem's sizes."""

    E: int
    R: int
    S: int
    G: int
    links: tuple[tuple[int, int], ...]
    o_dem: int
    o_pair: int
    o_psum: int
    o_pen: int
    n_rows: int

    @property
    def L(self) -> int:
        return len(self.links)

    @classmethod
    def of(cls, d: HorizonData, n_pairs: int) -> _Layout:
        p = d.p
        E, R, S, G = p.epochs, len(p.regions), len(p.shapes), len(p.groups)
        links = tuple(p.links) if d.link_of else ()
        o_dem = E * R * S
        o_pair = o_dem + E * G
        o_psum = o_pair + E * len(links) * R * 2
        o_pen = o_psum + E * len(links)
        return cls(E, R, S, G, links, o_dem, o_pair, o_psum, o_pen, o_pen + (E * n_pairs if p.K > 0 else 0))


@dataclass
class _Columns:
    """The MILP's columns as they are added: cost, upper bound, integrality and their sparse entries."""

    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)

    def add(self, c: float, ub: float, is_int: bool, r_: Sequence[int], v_: Sequence[float]) -> int:
        j = len(self.cost)
        self.cost.append(c)
        self.upper.append(ub)
        self.integer.append(is_int)
        self.rows.append(np.asarray(r_, dtype=np.int64))
        self.cols.append(np.full(len(r_), j, dtype=np.int64))
        self.vals.append(np.asarray(v_, dtype=float))
        return j


def _share_columns(d: HorizonData, lay: _Layout, model: _Columns) -> None:
    """Per epoch, link and region the share s of the link's requests served there (pairing and sum rows)."""
    p = d.p
    E, L, R = lay.E, lay.L, lay.R
    for e in range(E):
        for li, (gp, gd) in enumerate(lay.links):
            for r in range(R):
                base = lay.o_pair + ((e * L + li) * R + r) * 2
                model.add(0.0, 1.0, False, [base, base + 1, lay.o_psum + e * L + li],
                          [-float(p.demand[e, gp]), -float(p.demand[e, gd]), 1.0])


def _pair_columns(d: HorizonData, lay: _Layout, pairs: Sequence[tuple[int, int, int]],
                  model: _Columns) -> tuple[list[int], np.ndarray]:
    """Per pair its E instance counts ν (availability, demand, pairing and start-up entries) and, with K > 0, its E
    start-up costs I; returns each pair's first ν column and the start-up rows' lower bounds (the running ones)."""
    p = d.p
    E, R, S, G, L = lay.E, lay.R, lay.S, lay.G, lay.L
    pen_lower = np.zeros(E * len(pairs)) if p.K > 0 else np.zeros(0)
    nu_cols: list[int] = []
    for q, (gi, i, r) in enumerate(pairs):
        g = p.groups[gi]
        c = float(d.cost[gi][i, r])
        nz = np.flatnonzero(g.usage[i] > 0)
        ub = float(min((p.available[:, r, k] // g.usage[i, k]).max() for k in nz)) if nz.size else 0.0
        first = len(model.cost)
        for e in range(E):
            r_ = [(e * R + r) * S + int(k) for k in nz] + [lay.o_dem + e * G + gi]
            v_ = [float(g.usage[i, k]) for k in nz] + [float(g.throughput[i])]
            if gi in d.link_of:
                li, j = d.link_of[gi]
                r_.append(lay.o_pair + ((e * L + li) * R + r) * 2 + j)
                v_.append(float(g.throughput[i]))
            if p.K > 0:
                kc = p.K * p.hours * c
                r_.append(lay.o_pen + q * E + e)
                v_.append(-kc)
                if e + 1 < E:
                    r_.append(lay.o_pen + q * E + e + 1)
                    v_.append(kc)
            model.add(p.hours * c, ub, True, r_, v_)
        nu_cols.append(first)
        if p.K > 0:
            pen_lower[q * E] = -p.K * p.hours * c * float(p.running.get((gi, i, r), 0))
            for e in range(E):
                model.add(1.0, math.inf, False, [lay.o_pen + q * E + e], [1.0])
    return nu_cols, pen_lower


def _highs(d: HorizonData, lay: _Layout, model: _Columns, pen_lower: np.ndarray, gap: float) -> Any:
    """The HiGHS instance holding the MILP (row bounds by block), quiet, at ``gap``."""
    import highspy
    import scipy.sparse as sp

    p = d.p
    n, n_rows = len(model.cost), lay.n_rows
    mat = sp.csc_matrix((np.concatenate(model.vals) if model.vals else np.zeros(0),
                         (np.concatenate(model.rows) if model.rows else np.zeros(0, dtype=np.int64),
                          np.concatenate(model.cols) if model.cols else np.zeros(0, dtype=np.int64))),
                        shape=(n_rows, n))
    inf = highspy.kHighsInf
    lower_row = np.full(n_rows, -inf)
    upper_row = np.full(n_rows, inf)
    upper_row[:lay.o_dem] = p.available.reshape(-1).astype(float)
    lower_row[lay.o_dem:lay.o_pair] = p.demand.reshape(-1)
    lower_row[lay.o_pair:lay.o_psum] = 0.0
    lower_row[lay.o_psum:lay.o_pen] = 1.0
    lower_row[lay.o_pen:] = pen_lower
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", float(gap))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, n_rows
    lp.col_cost_, lp.col_lower_ = np.array(model.cost), np.zeros(n)
    lp.col_upper_ = np.array([u if math.isfinite(u) else inf for u in model.upper])
    lp.row_lower_, lp.row_upper_ = lower_row, upper_row
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_ = mat.indptr.astype(np.int32), mat.indices.astype(np.int32)
    lp.a_matrix_.value_ = mat.data
    lp.integrality_ = [highspy.HighsVarType.kInteger if b else highspy.HighsVarType.kContinuous
                       for b in model.integer]
    h.passModel(lp)
    return h


def _answer(h: Any, pairs: Sequence[tuple[int, int, int]], nu_cols: Sequence[int],
            E: int) -> tuple[str, float, float, list[dict]]:
    """(status, value, dual bound, counts per epoch) of a HiGHS run; no counts without a primal solution."""
    import highspy

    info = h.getInfo()
    ms = h.getModelStatus()
    st = highspy.HighsModelStatus
    status = ("optimal" if ms == st.kOptimal else "infeasible" if ms in (st.kInfeasible, st.kUnboundedOrInfeasible)
              else "time_limit" if ms in (st.kTimeLimit, st.kInterrupt) else "other")
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else -math.inf
    if int(info.primal_solution_status) != 2:
        return status, math.inf, (math.inf if status == "infeasible" else bound), []
    x = np.asarray(h.getSolution().col_value)
    return status, float(info.objective_function_value), bound, _counts(x, pairs, nu_cols, E)


def _counts(x: np.ndarray, pairs: Sequence[tuple[int, int, int]], nu_cols: Sequence[int], E: int) -> list[dict]:
    """Instance counts per epoch of a column vector ``x``."""
    counts: list[dict] = [{} for _ in range(E)]
    for q, key in enumerate(pairs):
        for e in range(E):
            v = round(x[nu_cols[q] + e])
            if v > 0:
                counts[e][key] = v
    return counts


def start_vector(d: HorizonData, pairs: Sequence[tuple[int, int, int]], nu_cols: Sequence[int],
                  start: Sequence[Mapping[tuple[int, int, int], int]], n: int) -> np.ndarray:
    """A complete MIP start from instance counts: ν as given (epochs past the schedule hold its last epoch), the
    start-up I = max(0, K·h·c·(ν_e − ν_{e−1})) and each link's regional shares s = min(1, capacity / demand) of
    both phases, so HiGHS can accept it whole (a start that misses demand is rejected by HiGHS, harmlessly)."""
    p = d.p
    E, R, G = p.epochs, len(p.regions), len(p.groups)
    links = p.links if d.link_of else ()
    x0 = np.zeros(n)
    cap = np.zeros((E, G, R))
    for q, key in enumerate(pairs):
        gi, i, r = key
        nu = np.array([float(start[min(e, len(start) - 1)].get(key, 0)) if start else 0.0 for e in range(E)])
        x0[nu_cols[q]:nu_cols[q] + E] = nu
        cap[:, gi, r] += nu * float(p.groups[gi].throughput[i])
        if p.K > 0:
            kc = p.K * p.hours * float(d.cost[gi][i, r])
            before = np.concatenate([[float(p.running.get(key, 0))], nu[:-1]])
            x0[nu_cols[q] + E:nu_cols[q] + 2 * E] = np.maximum(0.0, kc * (nu - before))
    for e in range(E):
        for li, (gp, gd) in enumerate(links):
            for r in range(R):
                share = [cap[e, g, r] / p.demand[e, g] for g in (gp, gd) if p.demand[e, g] > 0]
                x0[(e * len(links) + li) * R + r] = min([1.0, *share])
    return x0


def schedule_value(d: HorizonData, schedule: Sequence[Mapping[tuple[int, int, int], int]]) -> float:
    """The MILP's objective for a schedule (counts per epoch), or inf when it breaks a row: availability, demand,
    or (several regions) a link's prefill and decode not paired in regions that together carry its requests."""
    p = d.p
    E, R, G = p.epochs, len(p.regions), len(p.groups)
    if len(schedule) != E:
        return math.inf
    used = np.zeros((E, R, len(p.shapes)))
    cap = np.zeros((E, G, R))
    total = 0.0
    prev: Mapping[tuple[int, int, int], int] = p.running
    for e, counts in enumerate(schedule):
        for (gi, i, r), nu in counts.items():
            c = float(d.cost[gi][i, r])
            if nu <= 0:
                continue
            if not math.isfinite(c):
                return math.inf
            used[e, r] += nu * p.groups[gi].usage[i]
            cap[e, gi, r] += nu * float(p.groups[gi].throughput[i])
            total += p.hours * c * nu + p.K * p.hours * c * max(0, nu - prev.get((gi, i, r), 0))
        prev = counts
    tol = 1e-9
    if (used > p.available + tol).any() or (cap.sum(axis=2) < p.demand * (1 - tol) - tol).any():
        return math.inf
    for gp, gd in (p.links if d.link_of else ()):
        for e in range(E):
            shares = [min((cap[e, g, r] / p.demand[e, g] if p.demand[e, g] > 0 else math.inf) for g in (gp, gd))
                      for r in range(R)]
            if sum(min(1.0, s) for s in shares) < 1 - 1e-9:
                return math.inf
    return total


CHILD_COLUMNS = 20_000  # an ILP with more integer columns runs in a child process that is killed at the deadline


def pairs_ilp_within(d: HorizonData, pairs: Sequence[tuple[int, int, int]], left: Callable[[], float], gap: float,
                     start: Sequence[Mapping[tuple[int, int, int], int]] | None = None) -> Answer:
    """:func:`pairs_ilp` that returns by ``left()`` seconds whatever HiGHS does. A large ILP (more than
    ``CHILD_COLUMNS`` integer columns) runs in a spawned child process, killed at the deadline: on coral-core's
    week HiGHS spent 305 s of a 45 s limit on an 85,680-column ILP without reaching an interrupt point, and the
    Timeline page's day's offline MILP (49,872 columns, "at most 20 s") ran 20-34 s, one round of its root's cut
    separation taking up to 14.5 s. The child sends each plan HiGHS finds as it finds it, so a killed child's
    answer is its best plan by the deadline (status ``time_limit``, with the bound known then), or no plan when
    it found none. Where a child cannot be started (inside a daemonic pool worker) it runs here."""
    from planning.spawning import spawn_context

    if len(pairs) * d.p.epochs <= CHILD_COLUMNS:
        return pairs_ilp(d, pairs, left, gap, start)
    ctx = spawn_context(die_with_parent=True)  # the child does not re-run the caller's script
    receive, send = ctx.Pipe(duplex=False)
    try:
        proc = ctx.Process(target=_ilp_child, args=(send, d, list(pairs), left() - CHILD_START_S, gap, start),
                           daemon=True)
        proc.start()
    except (AssertionError, OSError):  # a daemonic process may not have children
        return pairs_ilp(d, pairs, left, gap, start)
    send.close()
    try:
        return _child_answer(receive, left)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=1.0)
        receive.close()


def _child_answer(receive: Any, left: Callable[[], float]) -> Answer:
    """The child's answer, or at ``left()`` = 0 (or its death) the last plan it sent (no plan if none)."""
    best: Answer = ("time_limit", math.inf, -math.inf, [])
    while receive.poll(max(0.0, left())):
        try:
            kind, answer = receive.recv()
        except EOFError:  # the child died: its last plan, if any
            return best if best[3] else ("other", math.inf, -math.inf, [])
        if kind == "done":
            return answer
        best = answer
    return best


CHILD_START_S = 1.5  # spawning the child and importing numpy and highspy, kept back from its limit


def _ilp_child(send: Any, d: HorizonData, pairs: list[tuple[int, int, int]], seconds: float, gap: float,
               start: Sequence[Mapping[tuple[int, int, int], int]] | None) -> None:
    answer = pairs_ilp(d, pairs, max(seconds, 0.05), gap, start,
                       on_incumbent=lambda found: send.send(("incumbent", found)))
    send.send(("done", answer))
    send.close()
