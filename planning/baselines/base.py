"""The baseline interface: one result type, one entry point, a registry of strategies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from planning.allocate.problem import AllocationProblem, AllocationResult, Objective
from planning.allocate.solvers import reached_gap
from planning.catalog.schema import parse_shape
from planning.context import CancelFlag, Cancelled, CancelToken, check_cancel, time_left, timed_out
from planning.errors import PlanningError

if TYPE_CHECKING:
    from planning.allocate.instance import Instance
    from planning.baselines.beside import EarlyStart
    from planning.baselines.memo import BaselineMemo

_FULL = 1 - 1e-9


@dataclass(frozen=True)
class BaselineResult:
    """What a baseline strategy buys and how much demand it serves.

    ``served_fraction`` maps group -> served / demanded (≤ 1); ``feasible`` is True only when every group is
    fully served; ``note`` says how the strategy went, honestly, including shortfalls.
    """

    name: str
    cost_per_hour: float  # provisioning + cross-region KV transfer (what the plan's comparable cost counts)
    served_fraction: Mapping[str, float]
    gpus_used: Mapping[str, int]
    nodes_used: Mapping[tuple[str, str], int]
    counts: Mapping[tuple[str, str], int]
    feasible: bool
    note: str
    penalty_per_hour: float = 0.0
    seconds: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def served_fraction_min(self) -> float:
        """The worst-served group's fraction (1.0 when nothing is demanded)."""
        return min(self.served_fraction.values(), default=1.0)


def gpus_of(nodes: Mapping[tuple[str, str], int]) -> dict[str, int]:
    """GPUs per GPU type from nodes per (region, shape)."""
    out: dict[str, int] = {}
    for (_r, shape), n in nodes.items():
        count, gpu = parse_shape(shape, bare_gpu=True)
        out[gpu] = out.get(gpu, 0) + count * n
    return out


BASELINE_NODES = 10_000
"""The work limit of a baseline's cost ILP: HiGHS branch-and-bound nodes (``mip_max_nodes``). A stop counted in
work is the same on every machine, busy or quiet, so a baseline stopped by it names the same incumbent, cost and
gap in every run (issue 37 §6); HiGHS has no deterministic work units, and nodes are its measure of the search.
Every baseline of coral-core, coral-extended and catalog-wide proves its gap far below it (the most: see
docs/benchmarks.md, "Baselines stopped on work"). Past it the best plan found is reported with its gap. The plan
is never compared against less than that baseline's optimum could be: the plan is optimal over a superset of its
templates."""
SERVED_NODES = 2_000
"""The work limit of the max-served-fraction MIP of a baseline that cannot meet all demand (both of its phases)."""
BASELINE_SAFETY_S = 300.0
"""The far wall-clock safety net of each baseline ILP, on ``planning.context``'s clock (HiGHS's MIP interrupt
callback checks it): it binds only when the work limit is out of reach on this machine, and then the baseline says
so ("time-limited", ``details["stopped_by"] == "clock"``) and its figures are out of the determinism digest. The
solve's own deadline (``cancel``) still bounds every ILP as HiGHS's time limit."""


@dataclass(frozen=True)
class BaselineLimits:
    """When a baseline's ILPs stop short of their gap: ``nodes`` (the cost ILP's work limit), ``served_nodes`` (the
    max-served MIP's) and ``safety_s`` (each ILP's wall-clock safety net)."""

    nodes: int = BASELINE_NODES
    served_nodes: int = SERVED_NODES
    safety_s: float = BASELINE_SAFETY_S


def from_allocation(name: str, problem: AllocationProblem, note_ok: str, cancel: CancelToken | None = None,
                    limits: BaselineLimits = BaselineLimits()) -> BaselineResult:
    """Run the joint ILP on ``problem``; when all demand cannot be met, report the best uniform fraction.

    Parameters
    ----------
    name:
        Baseline name.
    problem:
        The (restricted) allocation problem; its objective is overridden.
    note_ok:
        Note when all demand is met.
    cancel:
        Checked before each ILP; each ILP gets the time left on its deadline (:func:`planning.context.time_left`).
    limits:
        The ILPs' work limits and wall-clock safety net (:class:`BaselineLimits`).

    Returns
    -------
    ``BaselineResult`` with the cost-optimal plan, or the max-served plan and an honest note; ``details["stopped_by"]``
    is ``""`` (its gap reached), ``"work"`` (its work limit: the same on every machine), ``"gap"`` (above its gap,
    no limit named) or ``"clock"`` (a wall clock: ``details["time_limited"]``).

    Raises
    ------
    Cancelled
        When ``cancel`` is set (or its deadline passes) before an ILP.
    """
    from planning.allocate.instance import build_instance
    from planning.allocate.solve import solve_allocation

    def bounded(objective: Objective, nodes: int) -> AllocationProblem:
        check_cancel(cancel, f"baseline {name}")
        return replace(problem, objective=objective, time_limit_s=time_left(cancel, problem.time_limit_s),
                       node_limit=nodes, stop=CancelFlag(limits.safety_s), settle_stall=True, lean=True)

    cost_problem = bounded("cost", limits.nodes)
    inst = build_instance(cost_problem)  # pruned and indexed once for both ILPs (they differ in objective only)
    if not cannot_serve_all(inst, cost_problem):  # else its cost ILP is infeasible: no need to prove it again
        res = solve_allocation(cost_problem, diagnose=False, instance=inst)
        if (answer := _cost_answer(name, res, cost_problem, note_ok, limits)) is not None:
            return answer
    # the fraction a failing baseline can serve is information, not a comparison (no saving is shown against
    # it): its max-α MIP stops at its own work limit and reports the best fraction found with its bound
    served_problem = bounded("served", limits.served_nodes)
    served = solve_allocation(served_problem, diagnose=False, instance=inst)
    if not served.has_plan:
        if stopped := _stopped_by(served, served_problem):  # its limit, not infeasibility: another run may find one
            return _no_plan(name, served_problem, stopped, limits)
        return BaselineResult(name, 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False, f"no plan ({served.status})")
    alpha = served.alpha or 0.0
    short = ", ".join(f"{g} {100 * f:.0f} %" for g, f in served.served.items() if f < _FULL)
    proven = bool(served.phases) and (served.phases[0].status == "optimal"
                                      or reached_gap(served.phases[0].gap, served_problem.mip_rel_gap))
    bound = served.phases[0].bound if served.phases else None
    stopped = "" if proven or bound is None else _stopped_by(served, served_problem)
    best = (f"best uniform fraction {100 * alpha:.1f} %" if not stopped else
            f"uniform fraction at least {100 * alpha:.1f} % (at most {100 * min(1.0, abs(bound or 0.0)):.1f} %; "
            + (f"time-limited: search stopped after {_clock_word(served_problem, limits)})" if stopped == "clock" else
               f"search stopped at its work limit of {limits.served_nodes:,} nodes)" if stopped == "work" else
               "search stopped above its gap)"))
    note = f"cannot meet all demand: {best} of every group's demand" + (f" (served: {short})" if short else "")
    return _wrap(name, served, False, note, stopped)


LP_SHORT = 1e-6
"""How far below 1 the LP relaxation's best uniform fraction must be for :func:`cannot_serve_all` to call the
cost ILP infeasible without solving it: far above HiGHS's tolerances (a demand row short by 10⁻⁶ of its demand is
short by 10⁻⁶ × D, thousands of times its 10⁻⁷ feasibility tolerance), so a problem at the edge is solved as
before."""


def cannot_serve_all(inst: Instance, problem: AllocationProblem) -> bool:
    """Whether the LP relaxation of the max-served model proves that no plan meets all demand (best uniform
    fraction α_LP < 1 − :data:`LP_SHORT`).

    The cost model is the max-served model with α fixed at 1 (``matrix_model.build_matrix``), so α_LP < 1 makes
    its LP, hence its ILP, infeasible. A baseline that cannot meet demand then goes to its max-served MIP at once
    instead of proving infeasibility through its parts, their settle and the joint ILP (single:A100-80G at
    coral-extended's demand ×2: ~9 CPU-s for the answer "infeasible", which its LP gives in milliseconds). The
    answer is the same: the max-served MIP is the same model, solved the same way. False when it cannot say
    (another builder than HiGHS's matrix model, nothing to buy, the LP not solved, α_LP near 1)."""
    from planning.allocate.matrix_model import build_matrix, solve_matrix
    from planning.allocate.solve import resolve_builder

    if resolve_builder(problem) != "matrix" or inst.n_pairs == 0 or not np.any(inst.class_rate > 0):
        return False
    model = build_matrix(inst, True, problem.budget_per_hour)
    lp = solve_matrix(model, "served", problem.time_limit_s, 1e-9, relax=True)
    if lp.values is None or lp.phase.status != "optimal":
        return False
    return float(lp.values[model.col.alpha]) < 1 - LP_SHORT


def _cost_answer(name: str, res: AllocationResult, problem: AllocationProblem, note_ok: str,
                 limits: BaselineLimits) -> BaselineResult | None:
    """The baseline's answer from its cost ILP ``res``: its plan (with how it stopped), no plan because a limit
    stopped it, or a solver error; None when the ILP is infeasible (the max-served MIP answers then)."""
    if res.has_plan and res.status in ("optimal", "feasible", "time_limit"):
        proven = res.status == "optimal" or reached_gap(res.gap, problem.mip_rel_gap)
        stopped = "" if proven else _stopped_by(res, problem)
        return _wrap(name, res, True, note_ok + _stop_note(stopped, problem, limits, res.gap), stopped)
    if not res.has_plan and (stopped := _stopped_by(res, problem)):
        return _no_plan(name, problem, stopped, limits)
    if res.status == "error":
        return BaselineResult(name, 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False,
                              f"solver error: {res.messages}")
    return None


def _stopped_by(res: AllocationResult, problem: AllocationProblem) -> str:
    """What stopped an ILP short of its gap: ``"clock"`` (its wall-clock safety net, or the solve's deadline as
    HiGHS's time limit), ``"work"`` (its node limit, the same on every machine), ``"gap"`` (a plan above its gap
    with no limit named: the solver's own stop, reproducible too) or ``""`` (no plan and no limit: an ILP that is
    infeasible or failed)."""
    expired = problem.stop is not None and problem.stop.is_set()
    clocked = res.status == "time_limit" or any(
        ph.status == "time_limit" or "time limit" in ph.solver_status.lower() for ph in res.phases)
    if expired or clocked:
        return "clock"
    if any("solution limit" in ph.solver_status.lower() for ph in res.phases):  # HiGHS's node limit
        return "work"
    return "gap" if res.has_plan else ""


def _no_plan(name: str, problem: AllocationProblem, stopped: str, limits: BaselineLimits) -> BaselineResult:
    """A baseline whose cost ILP (or, after that proved infeasible, its max-served MIP: ``problem.objective``)
    stopped at a limit before its first plan: nothing to compare with, said why."""
    ilp = "its ILP" if problem.objective == "cost" else "its served-fraction ILP"
    nodes = limits.nodes if problem.objective == "cost" else limits.served_nodes
    why = (f"time-limited: {ilp} stopped after {_clock_word(problem, limits)} before its first plan (a busy "
           "machine; rerun, or raise options.time_limit_s)" if stopped == "clock" else
           f"{ilp} found no plan within its work limit of {nodes:,} branch-and-bound nodes")
    return BaselineResult(name, 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False, f"no plan: {why}",
                          details={"time_limited": stopped == "clock", "stopped_by": stopped})


def _clock_word(problem: AllocationProblem, limits: BaselineLimits) -> str:
    """Which wall clock stopped an ILP: its own safety net, or the solve's time limit (HiGHS's time limit)."""
    own = problem.stop is not None and problem.stop.is_set()
    return f"its {limits.safety_s:g} s wall-clock safety net" if own else "the solve's time limit"


def _stop_note(stopped: str, problem: AllocationProblem, limits: BaselineLimits, gap: float | None) -> str:
    """The note's tail for a cost ILP stopped short of its gap (empty when it reached it)."""
    within = f"within {100 * (gap or 0.0):.1f} % of its optimum (this baseline's best cost may be up to that much lower)"
    if stopped == "clock":
        return f"; time-limited: its ILP stopped after {_clock_word(problem, limits)} {within}"
    if stopped == "work":
        return f"; its ILP stopped at its work limit of {limits.nodes:,} branch-and-bound nodes {within}"
    return f"; its ILP stopped {within}" if stopped else ""


def _wrap(name: str, res: AllocationResult, feasible: bool, note: str, stopped: str = "") -> BaselineResult:
    """``stopped``: what stopped its ILP before its gap (``""``: nothing; :func:`_stopped_by`). ``"work"``: its work
    limit, the same incumbent on every machine; ``"clock"``: a wall clock (``details["time_limited"]``: the incumbent of that
    moment, another run on a faster or busier machine may keep another)."""
    served = dict(res.served)
    return BaselineResult(
        name=name,
        cost_per_hour=float(res.cost_per_hour or 0.0) + float(res.transfer_per_hour),  # nodes + KV egress, as the plan
        served_fraction=served,
        gpus_used=gpus_of(res.nodes_used),
        nodes_used=dict(res.nodes_used),
        counts=dict(res.counts),
        feasible=feasible and all(f >= _FULL for f in served.values()),
        note=note,
        penalty_per_hour=float(res.penalty_per_hour or 0.0),
        seconds=float(res.timings.get("total_seconds", 0.0)),
        details={"status": res.status, "alpha": res.alpha, "gap": res.gap, "time_limited": stopped == "clock",
                 "stopped_by": stopped},
    )


def baseline_names(problem: AllocationProblem) -> list[str]:
    """All baselines applicable to ``problem``, in the registry's order (``baselines.registry``): homo, homo-ilp,
    cauchy (when some model is planned in both phases: Cauchy deploys prefill–decode combos), one
    ``single:<gpu>`` per GPU type, memp."""
    from planning.baselines.registry import BASELINES

    gpus = sorted({g for t in problem.templates for g in t.gpu_types})
    names: list[str] = []
    for b in BASELINES:
        if b.applies(problem):
            names.extend([f"single:{g}" for g in gpus] if b.name == "single" else [b.name])
    return names


def run_baseline(name: str, problem: AllocationProblem, **options: Any) -> BaselineResult:
    """Run one baseline strategy.

    Parameters
    ----------
    name:
        ``"homo"`` (Coral's greedy, homogeneous replicas), ``"homo-ilp"`` (joint ILP, homogeneous templates
        only), ``"cauchy"`` (Cauchy's GPU combos as Coral ran it), ``"single:<gpu>"`` (Mélange: one GPU type for
        everything) or ``"memp"`` (LLMFabric's memory-proportional split).
    problem:
        The allocation problem (objective and budget are ignored: baselines meet demand at least cost or say
        how much they fall short).
    options:
        Strategy options (``order`` for homo; ``model_size``, ``gpu_memory_gb``, ``request_rate`` for memp).

    Returns
    -------
    ``BaselineResult``.

    Raises
    ------
    PlanningError
        For an unknown name.
    """
    from planning.baselines.registry import BASELINES, BY_NAME

    if name.startswith("single:"):
        return BY_NAME["single"].run(problem, name.split(":", 1)[1], **options)
    if name not in BY_NAME or name == "single":
        known = [b.name for b in BASELINES if b.name != "single"]
        raise PlanningError("baseline", f"unknown baseline {name!r}.", f"Use one of {[*known, 'single:<gpu>']}.")
    return BY_NAME[name].run(problem, **options)


def skipped(name: str, problem: AllocationProblem) -> BaselineResult:
    """The placeholder of a baseline the solve's deadline left no time for (``details["skipped"]`` is True)."""
    return BaselineResult(name, 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False,
                          "skipped: the solve's time limit was reached before this baseline finished",
                          details={"skipped": True})


def run_all_baselines(problem: AllocationProblem, cancel: CancelToken | None = None, *, workers: int = 1,
                      memo: BaselineMemo | None = None, early: EarlyStart | None = None,
                      **options: Any) -> list[BaselineResult]:
    """Run every applicable baseline (see ``baseline_names``); options go to the strategies that take them.

    Parameters
    ----------
    problem:
        The allocation problem.
    cancel:
        Passed to every strategy. When its own deadline (a :class:`planning.context.Deadline`) stops a
        baseline, that one and the rest come back as :func:`skipped` placeholders.
    workers:
        Processes to run them on, beside each other (:mod:`planning.baselines.beside`: the same answers, the
        wall time of the longest); 1 runs them here, one after another.
    memo:
        Results already known (:class:`planning.baselines.memo.BaselineMemo`): a baseline whose own problem
        and options were answered before comes back from it at once, and every new answer that no clock stopped
        is stored in it (a what-if that leaves single:A100-80G's problem as it was re-plans only the others).
    early:
        Baselines started before ``problem`` existed (:class:`planning.baselines.beside.EarlyStart`): their
        answers are taken when they ran on this problem's single-GPU-type part, the others run here as above.
    options:
        Strategy options (see :func:`run_baseline`).

    Returns
    -------
    One ``BaselineResult`` per name of ``baseline_names``, in that order.

    Raises
    ------
    Cancelled
        When the caller cancels.
    """
    from planning.baselines.registry import entry

    names = baseline_names(problem)
    chosen = {}
    for name in names:
        spec = entry(name)
        chosen[name] = {k: v for k, v in options.items() if spec is not None and k in spec.options}
    known: dict[str, BaselineResult] = {}
    keys: dict[str, str] = {}
    if memo is not None:
        from planning.baselines.beside import own_part

        for name in names:
            keys[name] = memo.key(name, own_part(name, problem), chosen[name])
            hit = memo.get(keys[name])
            if hit is not None:
                known[name] = hit
    ready = [n for n in early.usable(problem) if n in names and n not in known] if early is not None else []
    todo = [n for n in names if n not in known and n not in ready]
    try:
        done = dict(zip(todo, _run_names(todo, problem, cancel, workers, chosen), strict=True))
        if early is not None and ready:
            done.update(early.collect(ready, cancel))
    except BaseException:
        if early is not None:
            early.close()  # a cancel or an error: the early tasks not yet begun are dropped
        raise
    for name, result in done.items():
        known[name] = result
        if memo is not None:
            memo.put(keys[name], result)
    return [known[n] for n in names]


def _run_names(names: list[str], problem: AllocationProblem, cancel: CancelToken | None, workers: int,
               chosen: Mapping[str, Mapping[str, Any]]) -> list[BaselineResult]:
    """The baselines ``names`` of ``problem`` with their options ``chosen``: beside each other on ``workers``
    processes, or here one after another (a baseline the deadline stops is skipped, and so is every one after
    it)."""
    if workers > 1 and len(names) > 1:
        from planning.baselines.beside import run_beside, tasks_for

        return run_beside(tasks_for(names, problem, chosen, cancel), workers, cancel)
    out: list[BaselineResult] = []
    for i, name in enumerate(names):
        try:
            out.append(run_baseline(name, problem, cancel=cancel, **chosen[name]))
        except Cancelled:
            if not timed_out(cancel):
                raise
            out.extend(skipped(n, problem) for n in names[i:])
            break
    return out
