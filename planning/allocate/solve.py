"""``solve_allocation``: prune, build (pulp or matrix), solve the cost or two-phase served objective, report."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planning.allocate.instance import Instance, build_instance
from planning.allocate.problem import AllocationProblem, AllocationResult, PhaseResult, SolveStats, Status
from planning.allocate.solvers import RawSolution, classify, reached_gap, rel_gap

# Phase 2 of the served objective keeps α ≥ α* (1 − ALPHA_REL_TOL) − ALPHA_ABS_TOL.
ALPHA_REL_TOL = 1e-7
ALPHA_ABS_TOL = 1e-9
_SEVERITY = {"optimal": 0, "feasible": 1, "time_limit": 2, "infeasible": 3, "error": 4}


def resolve_builder(problem: AllocationProblem) -> str:
    """``auto`` -> ``matrix`` for HiGHS (fast at any size), ``pulp`` for CBC."""
    if problem.builder != "auto":
        return problem.builder
    return "matrix" if problem.solver == "highs" else "pulp"


class _Runner:
    """Builds and solves phases with the chosen builder; records build and solve times."""

    def __init__(self, inst: Instance, problem: AllocationProblem, builder: str, served: bool) -> None:
        self.inst = inst
        self.problem = problem
        self.builder = builder
        self.served = served
        self.build_seconds = 0.0
        self.solve_seconds = 0.0
        self.stats: dict[str, int] = {}
        self._matrix: Any = None
        self._deadline = time.monotonic() + problem.time_limit_s  # one limit for all phases of this solve

    def left(self) -> float:
        """Seconds left of the problem's time limit for the next phase (at least 0.05 s)."""
        return max(0.05, self._deadline - time.monotonic())

    def spent(self, margin_s: float = 0.1) -> bool:
        """Whether less than ``margin_s`` of the time limit is left (too little for HiGHS to start a model)."""
        return self._deadline - time.monotonic() < margin_s

    def describe(self) -> None:
        """Fill the model-size stats with the joint matrix model (built, not solved)."""
        from planning.allocate.matrix_model import build_matrix

        m = build_matrix(self.inst, self.served, self.problem.budget_per_hour)
        self.stats = {"variables": m.col.n, "integer_variables": m.col.n_pairs + m.col.n_commit, "constraints": m.n_rows,
                      "nonzeros": int(m.matrix.nnz)}

    def run(self, phase: str, alpha_lower: float | None = None, start: np.ndarray | None = None, dump: bool = False) -> RawSolution:
        p = self.problem
        dump_path = p.dump_model if dump else None
        if self.builder == "matrix":
            from planning.allocate.matrix_model import build_matrix, solve_matrix

            if self._matrix is None:  # the joint model: HiGHS's full search even for a lean problem
                self._matrix = build_matrix(full_search(self.inst), self.served, p.budget_per_hour)
                self.build_seconds += self._matrix.build_seconds
                m = self._matrix
                self.stats = {
                    "variables": m.col.n,
                    "integer_variables": m.col.n_pairs + m.col.n_commit,
                    "constraints": m.n_rows,
                    "nonzeros": int(m.matrix.nnz),
                }
            raw = solve_matrix(self._matrix, phase, self.left(), p.mip_rel_gap, alpha_lower, start, dump_path=dump_path)
        else:
            from planning.allocate.formulation import build_pulp, solve_pulp

            m = build_pulp(self.inst, self.served, p.budget_per_hour, phase)
            self.build_seconds += m.build_seconds
            self.stats = {
                "variables": m.prob.numVariables(),
                "integer_variables": len(m.nu),
                "constraints": m.prob.numConstraints(),
                "nonzeros": m.nonzeros,
            }
            raw = solve_pulp(m, p.solver, phase, self.left(), p.mip_rel_gap, alpha_lower, dump_path)
        self.solve_seconds += raw.phase.seconds
        return raw


def solve_allocation(problem: AllocationProblem, diagnose: bool = True,
                     instance: Instance | None = None) -> AllocationResult:
    """Solve the allocation problem (see ``planning.allocate.formulation`` for the math).

    Parameters
    ----------
    problem:
        Templates, offers, demand classes, running instances, K, objective, budget, solver options.
    diagnose:
        When the cost objective is infeasible, compute per-group best fractions and binding capacities.
    instance:
        An instance built (:func:`planning.allocate.instance.build_instance`) for this problem with another
        objective or time limit: reused instead of pruning and indexing the templates again (a baseline's cost
        ILP, then its max-served MIP). Ignored when it was built for another problem.

    Returns
    -------
    ``AllocationResult`` — always; status ``optimal | feasible | infeasible | time_limit | error``.
    """
    t0 = time.perf_counter()
    inst = _instance(problem, instance)
    builder = resolve_builder(problem)
    served_mode = problem.objective == "served"
    runner = _Runner(inst, problem, builder, served_mode)
    out = _Outcome(messages=list(inst.notes))
    try:
        _solve_phases(inst, problem, runner, out)
    except Exception as exc:  # the solver failing is reported as a status, with the reason
        out.messages.append(f"solver error: {type(exc).__name__}: {exc}")
        out.phases.append(PhaseResult("error", "error", None, None, None, 0.0, str(exc)))
    return _assemble(problem, inst, runner, out, diagnose, t0)


def _instance(problem: AllocationProblem, built: Instance | None) -> Instance:
    """``built`` for ``problem`` when it was built for the same problem but its objective and its stops (time,
    node and improving-solution limits: pruning and indexing do not read them), else a new instance."""
    if built is None or replace(built.problem, objective=problem.objective, time_limit_s=problem.time_limit_s,
                                node_limit=problem.node_limit, improving_limit=problem.improving_limit) != problem:
        return build_instance(problem)
    inst = replace(built, problem=problem)
    inst.seconds = 0.0
    return inst


@dataclass
class _Outcome:
    """What the phases of one solve left: their results, the final solution, α* (served) and the messages."""

    messages: list[str]
    phases: list[PhaseResult] = field(default_factory=list)
    final: RawSolution | None = None
    alpha_star: float | None = None


def _solve_phases(inst: Instance, problem: AllocationProblem, runner: _Runner, out: _Outcome) -> None:
    """Run the phases into ``out``: no solver when nothing can be bought or a demanded class has no template; the
    cost objective group by group when that is exact (else jointly); the served objective in two phases."""
    builder, served_mode = runner.builder, runner.served
    if inst.n_pairs == 0:
        # nothing can be bought: answer without a solver (CBC rejects an empty model)
        out.final = _empty_plan(inst, served_mode)
        out.phases.append(out.final.phase)
        if served_mode and out.final.values is not None:
            out.alpha_star = float(out.final.values[-1])
    elif not served_mode and _unservable(inst):
        # a demanded group or class that no purchasable template serves: infeasible without a solve
        out.final = RawSolution(None, PhaseResult("cost", "infeasible", None, None, None, 0.0,
                                                  "a demanded class has no purchasable template"))
        out.phases.append(out.final.phase)
    elif not served_mode:
        final = None
        if (builder == "matrix" and problem.decompose and len(inst.groups) > 1 and not problem.dump_model
                and not problem.commitments):  # commitments join every group's availability
            final = out.final = _decomposed(inst, problem, runner)
            if final is not None:
                out.messages.append("solved group by group: the groups' optimal plans fit the shared availability together"
                                    if final.phase.solver_status.startswith("Optimal per group") else
                                    f"solved part by part: {final.phase.solver_status.lower()}")
                runner.describe()
        if final is None and runner.spent():
            # the group-by-group attempt used the whole limit: HiGHS given a few ms still sets up and
            # presolves the joint model (measured: 19.8 s past a 0.05 s limit), so stop here and say so
            final = RawSolution(None, PhaseResult("cost", "time_limit", None, None, None, 0.0,
                                                  "time limit reached before the joint model was solved"))
        elif final is None:
            final = runner.run("cost", dump=True)
        out.final = final
        out.phases.append(final.phase)
    elif _nothing_servable(inst, problem):
        # a demanded class no purchasable template serves: α* = 0 without a solver, and the cheapest plan with
        # α ≥ 0 buys nothing (the answer HiGHS gives in two phases; single-type baselines on a GPU too small)
        out.final = _nothing_bought(inst)
        out.alpha_star = 0.0
        out.phases.extend([PhaseResult("served", "optimal", 0.0, 0.0, 0.0, 0.0, _UNSERVABLE),
                           out.final.phase])
    else:
        first = runner.run("served", dump=False)
        out.phases.append(first.phase)
        if first.values is not None:
            out.alpha_star = float(first.values[-1])
            lower = max(0.0, out.alpha_star * (1 - ALPHA_REL_TOL) - ALPHA_ABS_TOL)
            start = first.values if builder == "matrix" else None
            second = runner.run("cost", alpha_lower=lower, start=start, dump=True)
            out.phases.append(second.phase)
            out.final = second if second.values is not None else first
        else:
            out.final = first


def _assemble(problem: AllocationProblem, inst: Instance, runner: _Runner, out: _Outcome, diagnose: bool,
              t0: float) -> AllocationResult:
    """The result of the phases: the worst phase's status, the plan, stats, timings and (infeasible cost
    objective, ``diagnose``) the diagnostics."""
    served_mode, phases, alpha_star, messages = runner.served, out.phases, out.alpha_star, out.messages
    status: Status = max((ph.status for ph in phases), key=lambda s: _SEVERITY[s]) if phases else "error"
    stats = SolveStats(
        templates_in=len(problem.templates),
        templates_unsold=inst.pruned_unsold,
        templates_dominated=inst.pruned_dominated,
        templates_no_demand=inst.pruned_no_demand,
        pairs=inst.n_pairs,
        **runner.stats,
    )
    timings = {
        "prune_seconds": inst.seconds,
        "build_seconds": runner.build_seconds,
        "solve_seconds": runner.solve_seconds,
    }
    values = out.final.values if out.final is not None else None
    plan = _extract(inst, values) if values is not None else None
    diagnostics: tuple = ()
    if diagnose and not served_mode and status == "infeasible":
        from planning.allocate.diagnostics import diagnose_infeasible

        td = time.perf_counter()
        diagnostics, sentences = diagnose_infeasible(problem, inst)
        messages.extend(sentences)
        timings["diagnostics_seconds"] = time.perf_counter() - td
    timings["total_seconds"] = time.perf_counter() - t0
    last = phases[-1] if phases else None
    return AllocationResult(
        status=status,
        objective=problem.objective,
        objective_value=(alpha_star if served_mode else
                         (plan["cost"] + plan["penalty"] + plan["transfer"] + plan["commitment_cost"] if plan else None)),
        cost_per_hour=plan["cost"] if plan else None,
        penalty_per_hour=plan["penalty"] if plan else None,
        alpha=(alpha_star if served_mode else (1.0 if plan else None)),
        counts=plan["counts"] if plan else {},
        assignment=plan["assignment"] if plan else {},
        served=plan["served"] if plan else {},
        nodes_used=plan["nodes"] if plan else {},
        gap=last.gap if last else None,
        phases=tuple(phases),
        timings=timings,
        stats=stats,
        builder=runner.builder,
        solver=problem.solver,
        diagnostics=diagnostics,
        messages=tuple(messages),
        transfer_per_hour=plan["transfer"] if plan else 0.0,
        flows=plan["flows"] if plan else {},
        commitments=plan["commitments"] if plan else {},
        commitment_cost=plan["commitment_cost"] if plan else 0.0,
    )


@dataclass(frozen=True)
class _Part:
    """One part of the group-by-group shortcut solved alone: its groups, its pairs' plan and its proven bound."""

    groups: tuple[int, ...]
    pairs: np.ndarray
    trip: np.ndarray
    sub: Instance
    values: np.ndarray
    primal: float
    bound: float
    used: np.ndarray  # nodes per offer row of its plan


def model_digest(m: Any, *costs: np.ndarray, gap_tol: float) -> bytes:
    """A digest of everything HiGHS is given for a part ILP ``m``: its matrix, bounds and integrality, the cost
    vectors ``costs`` (the objective and whatever else decides its answer), the gap and the problem's search
    options (``lean``); the stops are the problem's. Two part ILPs with one digest have one answer."""
    h = hashlib.blake2b(digest_size=20)
    a = m.matrix
    for arr in (a.indptr, a.indices, a.data, m.col_lower, m.col_upper, m.integrality, m.row_lower, m.row_upper,
                *costs, np.array([gap_tol, a.shape[0], a.shape[1], float(m.inst.problem.lean)], dtype=float)):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.digest()


def _model_key(m: Any, gap_tol: float) -> bytes | None:
    """:func:`model_digest` of a part's cost ILP; None with a MIP start (the start is not in the digest)."""
    from planning.allocate.matrix_model import cost_vector

    if m.inst.problem.start:
        return None
    return model_digest(m, cost_vector(m.inst, m.col), gap_tol=gap_tol)


def full_search(inst: Instance) -> Instance:
    """``inst`` for an ILP that keeps HiGHS's sub-MIP heuristics even when its problem is ``lean``: a merged part
    or the joint model. Lean is for the small part ILPs, whose plans the root finds at once; where parts compete,
    the heuristics find the plan that lets branch and bound close (coral-extended's single:L40S at demand ×2: its
    merged ILP proved $857.66/h in 9,448 nodes with them, and stopped at the 10,000-node limit at $869.77/h, 2.5 %
    from its bound, without them)."""
    if not inst.problem.lean:
        return inst
    return replace(inst, problem=replace(inst.problem, lean=False))


def _solve_part(inst: Instance, groups: Sequence[int], runner: _Runner, time_left_s: float,
                gap_tol: float, solved: dict[bytes, RawSolution] | None = None,
                start: np.ndarray | None = None, merged: bool = False) -> tuple[_Part | None, float]:
    """One part (a set of groups, availability its own) to ``gap_tol``: (the part or None, seconds spent). None
    when it has no pair or was not solved to its gap. ``solved`` holds the answers of parts solved before, by
    their model's digest: a part whose model is the same as an earlier one's (two models with the same specs,
    demand and offers) gets that answer, which HiGHS would give again (deterministic on the same model) when the
    earlier solve took less than the time left now. ``start`` (ν per pair of ``inst``) is the part's MIP start; a
    started part neither reads nor writes ``solved`` (the digest leaves the start out, as ``_model_key`` says)."""
    from planning.allocate.matrix_model import PartialStart, build_matrix, solve_matrix

    sub, pairs, trip = inst.restrict(list(groups))
    if sub.n_pairs == 0:
        return None, 0.0
    m = build_matrix(full_search(sub) if merged else sub, False, None)
    runner.build_seconds += m.build_seconds
    key = _model_key(m, gap_tol) if solved is not None and start is None else None
    limit = max(0.1, time_left_s)
    earlier = solved.get(key) if solved is not None and key is not None else None
    if earlier is not None and earlier.phase.seconds < limit:
        raw = replace(earlier, values=np.array(earlier.values), phase=replace(earlier.phase, seconds=0.0))
    else:
        raw = solve_matrix(m, "cost", limit, gap_tol, start=None if start is None else PartialStart(start[pairs]))
        if solved is not None and key is not None and raw.values is not None:
            solved[key] = raw
    if raw.values is None or raw.phase.bound is None or not reached_gap(raw.phase.gap, gap_tol):
        return None, raw.phase.seconds
    nu = np.rint(raw.values[: sub.n_pairs])
    used = np.zeros(len(inst.offer_keys))
    np.add.at(used, sub.use_row, nu[sub.use_pair] * sub.use_val)
    return _Part(tuple(groups), pairs, trip, sub, raw.values, float(raw.phase.objective or 0.0),
                 float(raw.phase.bound), used), raw.phase.seconds


def _merge_conflicts(parts: list[_Part], avail: np.ndarray) -> list[int] | None:
    """When the parts' plans together over-use some offer: the groups of every part that uses such an offer (to be
    solved as one part); None when they fit."""
    used = np.sum([p.used for p in parts], axis=0)
    over = used > avail + 1e-9
    if not over.any():
        return None
    return sorted(g for p in parts if np.any(p.used[over] > 0) for g in p.groups)


def _decomposed(inst: Instance, problem: AllocationProblem, runner: _Runner) -> RawSolution | None:
    """Exact shortcut for the cost objective: solve each part alone; if the union of the parts' optimal plans fits
    the shared availability (and budget), it is optimal for the joint problem, because the joint optimum is at
    least the sum of the parts' separate optima (each part's problem is a relaxation of its share of the joint
    one). Groups joined by region links (a model's prefill and decode) are one part. When the plans over-use some
    offer, the parts that use it are merged into one part and solved together (still a relaxation of their
    share, so the sum of bounds stays a lower bound), until the plans fit or one part would hold every group.
    Returns None then, or when a part is not solved to its gap (``part_mip_rel_gap``, else ``mip_rel_gap``).
    """
    from planning.allocate.matrix_model import columns

    t0 = time.perf_counter()
    gap_tol = problem.mip_rel_gap if problem.part_mip_rel_gap is None else problem.part_mip_rel_gap
    budget_left = runner.left()
    groups = [part for part in inst.components()
              if np.any(np.isin(inst.class_group, part) & (inst.class_rate > 0))]
    parts: list[_Part] = []
    todo: list[list[int]] = groups
    linked = -np.inf  # the best linked Lagrangian bound (planning.allocate.linked), valid for the joint problem
    settled = False
    answers: dict[bytes, RawSolution] = {}
    start: np.ndarray | None = None  # ν of the settle's best plan that did not close: the merged part's start
    merging = False  # the parts in ``todo`` were merged: they get HiGHS's full search (:func:`full_search`)
    while todo:
        for part_groups in todo:
            solved, seconds = _solve_part(inst, part_groups, runner, budget_left, gap_tol, answers, start,
                                          merged=merging)
            budget_left -= seconds
            if solved is None:
                runner.solve_seconds += time.perf_counter() - t0
                return None
            parts.append(solved)
        merged = _merge_conflicts(parts, inst.offer_avail)
        if merged is None:
            break
        fitted = None
        if problem.settle:
            fitted, linked, budget_left, start = _settle(inst, parts, budget_left, gap_tol, linked)
        if fitted is not None:
            parts, settled = fitted, True
            break
        if len(merged) >= sum(len(p.groups) for p in parts):
            runner.solve_seconds += time.perf_counter() - t0
            return None  # one part would hold every group: that is the joint model
        parts = [p for p in parts if not set(p.groups) & set(merged)]
        todo, merging = [merged], True
    values = _joint_values(inst, columns(inst), parts)
    primal = sum(p.primal for p in parts)
    # settled parts' own bounds are of their priced or restricted problems, not of the joint one: only L(λ) holds
    bound = linked if settled else max(linked, sum(p.bound for p in parts))
    seconds = time.perf_counter() - t0
    runner.solve_seconds += seconds
    if problem.budget_per_hour is not None and primal > problem.budget_per_hour + 1e-9:
        return None
    gap = rel_gap(primal, bound)
    status = classify(True, "optimal" if reached_gap(gap, gap_tol) else "other", gap, gap_tol, primal, bound)
    how = ("Optimal per part, competing parts settled by the linked Lagrangian bound (no merged ILP)" if settled
           else "Optimal per group, shared availability not binding" if len(parts) == len(groups) else
           f"Optimal per part, {len(groups)} parts solved as {len(parts)} (merged where availability binds)")
    return RawSolution(values, PhaseResult("cost (by group)", status, primal, bound, gap, seconds, how))


def _settle(inst: Instance, parts: list[_Part], budget_left: float, gap_tol: float,
            linked: float) -> tuple[list[_Part] | None, float, float, np.ndarray | None]:
    """Competing parts settled without merging them (``planning.allocate.linked``): (plans that fit together
    and are optimal within ``gap_tol``, else None; the best linked bound so far; the seconds left; ν per pair of
    the best plan that fits when it is not proven, else None: the merged ILP's start)."""
    from planning.allocate.linked import settle

    out, seconds = settle(inst, parts, budget_left, gap_tol)
    budget_left -= seconds
    if out is None:
        return None, linked, budget_left, None
    if out.closed:
        return list(out.parts), max(linked, out.bound), budget_left, None
    nu = np.zeros(inst.n_pairs)
    for p in out.parts:
        nu[p.pairs] = np.rint(p.values[: p.sub.n_pairs])
    return None, max(linked, out.bound), budget_left, nu


def _joint_values(inst: Instance, col: Any, parts: Sequence[_Part]) -> np.ndarray:
    """The joint model's column vector of the parts' plans (ν, x, penalties, link splits)."""
    values = np.zeros(col.n)
    values[-1] = 1.0
    lk = inst.links()
    parent_split = {(int(li), int(a), int(b)): j
                    for j, (li, a, b) in enumerate(zip(lk.split_link, lk.split_src, lk.split_dst, strict=True))}
    from planning.allocate.matrix_model import columns

    for part in parts:
        sub, pairs, trip, raw = part.sub, part.pairs, part.trip, part.values
        sub_col = columns(sub)
        values[pairs] = raw[: sub.n_pairs]
        values[col.x0 + trip] = raw[sub.n_pairs : sub.n_pairs + len(trip)]
        for j, p in enumerate(sub_col.pen_pairs):
            values[col.i0 + int(np.searchsorted(col.pen_pairs, pairs[p]))] = raw[sub_col.i0 + j]
        sub_links = sub.links()
        for j, (li, a, b) in enumerate(zip(sub_links.split_link, sub_links.split_src, sub_links.split_dst,
                                           strict=True)):
            values[col.s0 + parent_split[(int(li), int(a), int(b))]] = raw[sub_col.s0 + j]
    return values


def _unservable(inst: Instance) -> bool:
    """Whether some demanded class has no (template, region) pair that can serve it (cost model infeasible)."""
    demanded = np.nonzero(inst.class_rate > 0)[0]
    if len(demanded) == 0:
        return False
    served = np.zeros(len(inst.class_ids), dtype=bool)
    served[inst.thr_class[inst.thr_val > 0]] = True
    for g in range(len(inst.groups)):
        if inst.single_class[g] and np.any((inst.pair_group == g) & (inst.single_thr > 0)):
            served[inst.group_class[g]] = True
    return bool(np.any(~served[demanded]))


_UNSERVABLE = "a demanded class has no purchasable template: nothing can be served"


def _nothing_servable(inst: Instance, problem: AllocationProblem) -> bool:
    """Served objective whose answer needs no solver: some demanded class no pair serves (α* = 0), every column's
    cost is positive where buying is possible and nothing is running or committed, so the cheapest plan at α ≥ 0
    is the empty one (``problem.dump_model`` still builds and solves the model, to write it)."""
    if problem.dump_model or problem.budget_per_hour is not None or inst.n_commit or problem.start:
        return False
    return (_unservable(inst) and not np.any(inst.pair_current > 0) and bool(np.all(inst.pair_price > 0))
            and not np.any(inst.links().split_cost < 0))


def _nothing_bought(inst: Instance) -> RawSolution:
    """Phase 2 of :func:`_nothing_servable`'s case: every column 0 (α = 0), cost 0."""
    from planning.allocate.matrix_model import columns

    values = np.zeros(columns(inst).n)
    return RawSolution(values, PhaseResult("cost", "optimal", 0.0, 0.0, 0.0, 0.0, _UNSERVABLE))


def _empty_plan(inst: Instance, served_mode: bool) -> RawSolution:
    """The answer when no template can be bought anywhere: α = 1 only if nothing is demanded."""
    demanded = bool(np.any(inst.class_rate > 0))
    alpha = 0.0 if demanded else 1.0
    values = np.zeros(1 + 0)
    values[-1] = alpha
    if not served_mode and demanded:
        return RawSolution(None, PhaseResult("cost", "infeasible", None, None, None, 0.0, "no purchasable template"))
    objective = alpha if served_mode else 0.0
    return RawSolution(values, PhaseResult("served" if served_mode else "cost", "optimal", objective, objective, 0.0, 0.0, "no purchasable template"))


def _extract(inst: Instance, values: np.ndarray) -> dict[str, Any]:
    """Counts, cost, penalty, class assignment (rates), served fractions and nodes used from a column vector."""
    n = inst.n_pairs
    nu = np.rint(values[:n]).astype(np.int64)
    alpha = float(values[-1])
    k = inst.problem.K
    cost = float(np.dot(inst.pair_price, nu))
    pen = float(np.sum(k * inst.pair_price * np.maximum(0, nu - inst.pair_current)))
    counts = {inst.pair_key(int(p)): int(nu[p]) for p in np.nonzero(nu)[0]}
    nodes: dict[tuple[str, str], int] = {}
    for row, p, u in zip(inst.use_row, inst.use_pair, inst.use_val, strict=True):
        if nu[p]:
            key = inst.offer_keys[int(row)]
            nodes[key] = nodes.get(key, 0) + int(nu[p] * u)
    assignment: dict[tuple[str, str, str], float] = {}
    served_rate = np.zeros(len(inst.class_ids))
    # single-class groups: demand routed to instances in proportion to their capacity; a linked class
    # (a model's prefill and decode) in proportion within each region, the region getting its flows λ Σ f
    # (out of r for the link's sender, into r for a receiver)
    lk = inst.links()
    split = values[len(values) - 1 - lk.n_split : len(values) - 1]  # columns [ν | x | I | f | α]
    region_share: dict[int, dict[int, float]] = {}
    flows: dict[tuple[str, str, str], float] = {}
    transfer = 0.0
    for j, (li, a, b) in enumerate(zip(lk.split_link, lk.split_src, lk.split_dst, strict=True)):
        f = max(0.0, float(split[j]))
        qs = inst.link_class[int(li)]
        transfer += float(lk.split_cost[j]) * f
        if f > 1e-12:
            flows[(inst.class_ids[int(qs[0])], inst.regions[int(a)], inst.regions[int(b)])] = f
        for pos, q in enumerate(qs):
            side = int(a) if pos == 0 else int(b)
            share = region_share.setdefault(int(q), {})
            share[side] = share.get(side, 0.0) + f
    for g in range(len(inst.groups)):
        if not inst.single_class[g]:
            continue
        q = inst.group_class[g]
        pairs = np.nonzero((inst.pair_group == g) & (nu > 0))[0]
        cap = float(np.dot(inst.single_thr[pairs], nu[pairs]))
        rate = float(inst.class_rate[q])
        routed = min(cap, rate)
        served_rate[q] = routed
        shares = region_share.get(int(q))
        if cap <= 0:
            continue
        if shares is None:
            for p in pairs:
                t, r = inst.pair_key(int(p))
                assignment[(inst.class_ids[q], t, r)] = float(inst.single_thr[p] * nu[p]) * routed / cap
            continue
        total_share = sum(shares.values())
        for region in np.unique(inst.pair_region[pairs]):
            in_r = pairs[inst.pair_region[pairs] == region]
            cap_r = float(np.dot(inst.single_thr[in_r], nu[in_r]))
            want = routed * shares.get(int(region), 0.0) / total_share if total_share > 0 else 0.0
            for p in in_r:
                t, r = inst.pair_key(int(p))
                assignment[(inst.class_ids[q], t, r)] = float(inst.single_thr[p] * nu[p]) * min(want, cap_r) / cap_r
    # multi-class groups: the solver's x, trimmed to the demanded rate
    x0 = n
    xs = values[x0 : x0 + len(inst.thr_pair)]
    for q in range(len(inst.class_ids)):
        if inst.single_class[inst.class_group[q]]:
            continue
        idx = np.nonzero(inst.thr_class == q)[0]
        total = float(xs[idx].sum()) if len(idx) else 0.0
        rate = float(inst.class_rate[q])
        scale = min(1.0, rate / total) if total > 0 else 0.0
        served_rate[q] = min(total, rate)
        for i in idx:
            if xs[i] > 1e-9:
                t, r = inst.pair_key(int(inst.thr_pair[i]))
                assignment[(inst.class_ids[q], t, r)] = float(xs[i]) * scale
    served: dict[str, float] = {}
    for g, name in enumerate(inst.groups):
        qs = np.nonzero(inst.class_group == g)[0]
        fr = [served_rate[q] / inst.class_rate[q] for q in qs if inst.class_rate[q] > 0]
        served[name] = float(min(fr)) if fr else 1.0
    n_commit = inst.n_commit
    first = len(values) - 1 - lk.n_split - n_commit  # columns [ν | x | I | R | f | α]
    committed = np.rint(values[first : first + n_commit]).astype(np.int64)
    commitments = {c.id: int(r) for c, r in zip(inst.problem.commitments, committed, strict=True) if r > 0}
    return {"counts": counts, "cost": cost, "penalty": pen, "assignment": assignment, "served": served,
            "nodes": nodes, "alpha": alpha, "transfer": transfer, "flows": flows, "commitments": commitments,
            "commitment_cost": float(np.dot(inst.commit_cost, committed))}


def with_classes(problem: AllocationProblem, keep_groups: set[str], **changes: Any) -> AllocationProblem:
    """A copy of ``problem`` restricted to the classes (and templates) of ``keep_groups``."""
    classes = tuple(q for q in problem.classes if q.group in keep_groups)
    templates = tuple(t for t in problem.templates if t.group in keep_groups)
    ids = {t.id for t in templates}
    current: Mapping[tuple[str, str], int] = {k: v for k, v in problem.current.items() if k[0] in ids}
    return replace(problem, classes=classes, templates=templates, current=current, **changes)
