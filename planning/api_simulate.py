"""Public entry points of request-level simulation (re-exported by :mod:`planning.api`, which the CLI, the pages
and notebooks use): simulate a plan or scenario, find its headroom, run a closed-loop benchmark, simulate shared
GPUs, read a trace, and rebuild a stored result."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from planning.context import engine_context
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario

if TYPE_CHECKING:
    from planning.sharing.result import SharingResult
    from planning.sharing.simulate import SharedSimResult
    from planning.simulate.bench import NodeOptions
    from planning.simulate.metrics import BenchmarkResult, HeadroomResult, SimResult
    from planning.simulate.run import RunOptions, SimConfig, Topology
    from planning.traces import Trace


def simulate_shared(result: SharingResult, scenario: Scenario, *, duration_s: float = 600.0, seed: int = 0,
                    admission: str = "moore-hodgson", kv: str = "paged", evict_after_s: float | None = None,
                    rate_scale: float = 1.0) -> SharedSimResult:
    """Simulate the shared nodes of a :func:`solve_shared` result request by request (Prism Sec. 6: co-located
    models time-share each GPU; ``admission`` ``"moore-hodgson"`` or ``"fcfs"``; ``kv`` ``"paged"`` or
    ``"reserve"``; optional eviction after ``evict_after_s`` idle seconds). Its dedicated part is a ``PlanResult``
    for :func:`simulate`. Returns ``planning.sharing.simulate.SharedSimResult``; raises PlanningError on bad options.
    """
    from planning.api_measurements import scenario_context
    from planning.sharing.simulate import SharedSimOptions, simulate_sharing

    options = SharedSimOptions(duration_s, seed, admission, evict_after_s, rate_scale, kv)
    return simulate_sharing(result, scenario, options, context=scenario_context(scenario))


def _sim_topology(target: PlanResult | Scenario, config: SimConfig) -> Topology:
    from planning.api_measurements import scenario_context, solve_measured
    from planning.simulate import build_topology

    if isinstance(target, Scenario):
        scenario = target
        plan = solve_measured(target)
    else:
        plan = target
        if not plan.scenario:
            raise PlanningError("plan", "carries no scenario.", "simulate a plan made by `solve`, or the scenario.")
        scenario = Scenario.from_dict(plan.scenario)
    return build_topology(plan, scenario, scenario_context(scenario).perf, config)


def simulate(target: PlanResult | Scenario, *, interruptions: bool = False, interruption_scale: float = 1.0,
             **run: Unpack[RunOptions]) -> SimResult:
    """Simulate a plan (a Scenario is planned first) under Poisson arrivals at the planned rates, or a trace.

    Parameters
    ----------
    target: a PlanResult (with its scenario) or a Scenario.
    duration_s: arrival window in seconds. rate_scale: multiplies every model's rate. seed: random seed.
    router: ``"proportional"`` (to instance capacity) or ``"least-loaded"``.
    trace: a ``planning.traces.Trace`` rescaled to each model's planned rate (None: Poisson).
    chunk_tokens, max_seqs: engine limits (vLLM ``max_num_batched_tokens``, ``max_num_seqs``; None: the perf
        model's engine settings, and each aggregated instance's step budget sized to its TPOT SLO).
    interruptions: replay spot interruptions at the plan's rates (``finance.spot.rates``, × ``interruption_scale``)
        with its recovery time (``planning.simulate.interruptions``); the plan must be a solved PlanResult.

    Returns
    -------
    ``planning.simulate.SimResult``.

    Raises
    ------
    PlanningError: bad options, an empty plan, or an instance the simulator cannot model.
    """
    from planning.simulate import SimConfig, simulate_topology

    rates: tuple[tuple[str, float], ...] = ()
    recovery_s = 900.0
    if interruptions:
        spot = (target.finance or {}).get("spot") if isinstance(target, PlanResult) else None
        if not spot:
            raise PlanningError("interruptions", "the plan has no spot nodes with interruption rates.",
                                "plan a scenario with spot.enabled (or pricing: spot) first.")
        per_region: dict[str, float] = {}
        for row in spot.get("rates", []):
            per_region[row["region"]] = max(per_region.get(row["region"], 0.0),
                                            float(row["interruptions_per_hour"]) * interruption_scale)
        rates = tuple(sorted(per_region.items()))
        recovery_s = float(spot.get("recovery_hours", 0.25)) * 3600.0
    cfg = SimConfig(**run, interruptions=rates, recovery_s=recovery_s)
    return simulate_topology(_sim_topology(target, cfg), cfg)


def simulate_headroom(target: PlanResult | Scenario, *, duration_s: float = 600.0, seed: int = 0,
                      router: str = "proportional", trace: Trace | None = None, target_attainment: float = 0.99,
                      chunk_tokens: int | None = None, max_seqs: int | None = None) -> HeadroomResult:
    """Highest uniform demand scale at which simulated SLO attainment stays ≥ ``target_attainment``.

    Returns ``planning.simulate.HeadroomResult``; raises PlanningError like :func:`simulate`.
    """
    from planning.simulate import SimConfig, headroom

    cfg = SimConfig(duration_s=duration_s, seed=seed, router=router, trace=trace, chunk_tokens=chunk_tokens,
                    max_seqs=max_seqs)
    return headroom(_sim_topology(target, cfg), cfg, target=target_attainment)


def simulate_benchmark(model: str, gpu: str, *, input_len: int, output_len: int, concurrency: int,
                       requests: int | None = None, **node: Unpack[NodeOptions]) -> BenchmarkResult:
    """Closed-loop single-node run (benchmark style): TTFT, ITL, throughput; see ``planning.simulate.benchmark``
    (``node``: count, tp, dtype, chunk_tokens, max_seqs, scheduling, ... as ``planning.simulate.NodeOptions``)."""
    from planning.simulate import benchmark

    return benchmark(model, gpu, input_len=input_len, output_len=output_len, concurrency=concurrency,
                     requests=requests, perf=engine_context().perf, **node)


def load_trace(path: str | Path) -> Trace:
    """Read a request trace (Azure CSV, Mooncake JSONL/CSV, plain CSV) for :func:`simulate`."""
    from planning.traces import read_trace

    return read_trace(path)


def sim_result_from_dict(data: Mapping[str, Any]) -> SimResult:
    """Rebuild a ``planning.simulate.SimResult`` from its ``to_dict()`` (a background job's stored result).

    Raises
    ------
    PlanningError: the dict is not a simulation result.
    """
    from planning.simulate.metrics import InstanceSim, ModelSim, Percentiles, SimResult

    try:
        def pct(d: Mapping[str, Any]) -> Percentiles:
            return Percentiles(*(float("nan") if d.get(k) is None else float(d[k]) for k in ("p50", "p90", "p99", "mean")))

        models = tuple(ModelSim(**{**m, **{k: pct(m[k]) for k in ("ttft_ms", "tpot_ms", "e2e_ms", "queue_prefill_ms",
                                                                    "queue_decode_ms")},
                                   "ttft_cdf_ms": tuple(m.get("ttft_cdf_ms") or ()),
                                   "tpot_cdf_ms": tuple(m.get("tpot_cdf_ms") or ())}) for m in data["models"])
        instances = tuple(InstanceSim(**i) for i in data["instances"])
        rest = {k: v for k, v in data.items() if k not in ("models", "instances")}
        rest["notes"] = tuple(rest.get("notes") or ())
        return SimResult(models=models, instances=instances, **rest)
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanningError("simulation", f"stored result cannot be read ({exc}).", "run the simulation again.") from exc


def simulated_checks(plan: PlanResult, sim: SimResult) -> PlanResult:
    """``plan`` with its SLO checks from a simulation of it (per model attainment, basis "simulated") and the
    status they allow (``planning.checks.with_simulation``: a model under 99 % makes it ``slo_miss``)."""
    from planning.checks import with_simulation

    return with_simulation(plan, {m.model: float(m.attainment) for m in sim.models if m.requests})
