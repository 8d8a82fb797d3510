"""The baseline interface: one result type, one entry point, a registry of strategies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from planning.allocate.problem import AllocationProblem, AllocationResult, Objective
from planning.allocate.solvers import reached_gap
from planning.catalog.schema import parse_shape
from planning.context import Cancelled, CancelToken, check_cancel, time_left, timed_out
from planning.errors import PlanningError

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


BASELINE_LIMIT_S = 15.0
"""Seconds for a baseline's cost ILP. With region links, an ILP baseline whose GPU type is scarce can take
minutes to prove optimal (catalog-wide single:A10G: 249 s to within 0.1 %); past this the best plan found is
reported with its gap. The plan is never compared against less than that baseline's optimum could be: the plan
is optimal over a superset of its templates."""
SERVED_LIMIT_S = 3.0
"""Seconds for the max-served-fraction MIP of a baseline that cannot meet all demand (both of its phases)."""


def from_allocation(name: str, problem: AllocationProblem, note_ok: str,
                    cancel: CancelToken | None = None) -> BaselineResult:
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

    Returns
    -------
    ``BaselineResult`` with the cost-optimal plan, or the max-served plan and an honest note.

    Raises
    ------
    Cancelled
        When ``cancel`` is set (or its deadline passes) before an ILP.
    """
    from planning.allocate.instance import build_instance
    from planning.allocate.solve import solve_allocation

    def bounded(objective: Objective) -> AllocationProblem:
        check_cancel(cancel, f"baseline {name}")
        return replace(problem, objective=objective, time_limit_s=time_left(cancel, problem.time_limit_s))

    cost_problem = bounded("cost")
    inst = build_instance(cost_problem)  # pruned and indexed once for both ILPs (they differ in objective only)
    res = solve_allocation(replace(cost_problem, time_limit_s=min(cost_problem.time_limit_s, BASELINE_LIMIT_S)),
                           diagnose=False, instance=inst)
    if res.has_plan and res.status in ("optimal", "feasible", "time_limit"):
        proven = reached_gap(res.gap, cost_problem.mip_rel_gap)
        note = note_ok if proven else (
            f"{note_ok}; its ILP stopped after {BASELINE_LIMIT_S:g} s within {100 * (res.gap or 0.0):.1f} % of its "
            "optimum (this baseline's best cost may be up to that much lower)")
        return _wrap(name, res, True, note, time_limited=not proven)
    if res.status == "error":
        return BaselineResult(name, 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False, f"solver error: {res.messages}")
    # a cost ILP its limit stopped before any plan (a busy machine, little time left on the solve) proves no
    # infeasibility: the served fraction below is then the answer of that moment, not this baseline's
    cut = (f"; its cost ILP stopped after {min(cost_problem.time_limit_s, BASELINE_LIMIT_S):g} s with no plan"
           if res.status == "time_limit" else "")
    # the fraction a failing baseline can serve is information, not a comparison (no saving is shown against
    # it): its max-α MIP gets at most SERVED_LIMIT_S and reports the best fraction found with its bound
    served_problem = bounded("served")
    served = solve_allocation(replace(served_problem, time_limit_s=min(served_problem.time_limit_s, SERVED_LIMIT_S)),
                              diagnose=False, instance=inst)
    if not served.has_plan:
        stopped = served.status == "time_limit"  # its limit, not infeasibility: another run may find a plan
        note = (f"no plan: its served-fraction ILP stopped after {min(served_problem.time_limit_s, SERVED_LIMIT_S):g} s"
                if stopped else f"no plan ({served.status})")
        return BaselineResult(name, 0.0, {g: 0.0 for g in problem.groups()}, {}, {}, {}, False, note,
                              details={"status": served.status, "time_limited": stopped})
    alpha = served.alpha or 0.0
    short = ", ".join(f"{g} {100 * f:.0f} %" for g, f in served.served.items() if f < _FULL)
    proven = reached_gap(served.phases[0].gap, served_problem.mip_rel_gap) if served.phases else False
    bound = served.phases[0].bound if served.phases else None
    best = (f"best uniform fraction {100 * alpha:.1f} %" if proven or bound is None else
            f"uniform fraction at least {100 * alpha:.1f} % (at most {100 * min(1.0, abs(bound)):.1f} %; "
            f"search stopped after {SERVED_LIMIT_S:g} s)")
    note = f"cannot meet all demand: {best} of every group's demand" + (f" (served: {short})" if short else "") + cut
    return _wrap(name, served, False, note, time_limited=bool(cut) or (not proven and bound is not None))


def _wrap(name: str, res: AllocationResult, feasible: bool, note: str, *, time_limited: bool = False
          ) -> BaselineResult:
    """``time_limited``: its ILP stopped at its own wall-clock limit before its gap (the incumbent of that moment:
    another run, on a faster or busier machine, may keep another; ``details["time_limited"]``)."""
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
        details={"status": res.status, "alpha": res.alpha, "gap": res.gap, "time_limited": time_limited},
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


def run_all_baselines(problem: AllocationProblem, cancel: CancelToken | None = None,
                      **options: Any) -> list[BaselineResult]:
    """Run every applicable baseline (see ``baseline_names``); options go to the strategies that take them.

    Parameters
    ----------
    problem:
        The allocation problem.
    cancel:
        Passed to every strategy. When its own deadline (a :class:`planning.context.Deadline`) stops a
        baseline, that one and the rest come back as :func:`skipped` placeholders.
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

    out: list[BaselineResult] = []
    names = baseline_names(problem)
    for i, name in enumerate(names):
        spec = entry(name)
        opts = {k: v for k, v in options.items() if spec is not None and k in spec.options}
        try:
            out.append(run_baseline(name, problem, cancel=cancel, **opts))
        except Cancelled:
            if not timed_out(cancel):
                raise
            out.extend(skipped(n, problem) for n in names[i:])
            break
    return out
