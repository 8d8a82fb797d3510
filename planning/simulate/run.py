"""Run the simulator on a plan (Poisson or trace arrivals), find its headroom, or benchmark one node closed-loop."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

import numpy as np

from planning.catalog.schema import ModelSpec
from planning.errors import PlanningError, quote
from planning.perf.model import PerfModel
from planning.result import EnginePlan, InstancePlan, KvFlow, PlanResult
from planning.scenario import ModelRequest, Scenario
from planning.simulate.engine import DecodeEngine, Engine, PrefillEngine, Requests
from planning.simulate.loop import Sim
from planning.simulate.metrics import HeadroomResult, InstanceSim, RequestTimes, SimResult, model_metrics
from planning.simulate.pipelined import PipelinedEngine
from planning.simulate.routing import ModelRoutes, Router, _Weights
from planning.simulate.steps import InstanceModel, engine_defaults
from planning.simulate.workload import OpenArrivals, merge, poisson_arrivals, trace_arrivals
from planning.traces import Trace, read_trace

ROUTERS = ("proportional", "least-loaded")
DEFAULT_PREFILL_SLO_MS = 10_000.0  # aggregated mode without a TTFT target (the planner's default budget)


MAX_DURATION_S = 7 * 86400.0  # arrival window: a week
MAX_RATE_SCALE = 1000.0
MAX_ARRIVALS = 20_000_000  # requests of one open-loop run (memory: a few hundred bytes each)


class RunOptions(TypedDict, total=False):
    """The :class:`SimConfig` fields a caller gives as keywords (``api.simulate``); defaults as there."""

    duration_s: float
    rate_scale: float
    seed: int
    router: str
    trace: Trace | None
    chunk_tokens: int | None
    max_seqs: int | None


@dataclass(frozen=True)
class SimConfig:
    """How to run: arrivals, length, seed, routing and engine limits.

    ``duration_s`` is the arrival window (every request that arrives in it is run to completion);
    ``chunk_tokens`` the per-step token budget of aggregated engines (vLLM ``max_num_batched_tokens``);
    ``max_seqs`` the largest decode batch of one engine copy (vLLM ``max_num_seqs``); None = the perf model's
    engine settings (see ``steps.engine_defaults``), and with ``chunk_tokens`` None each aggregated instance
    steps with the budget its TPOT SLO allows (``InstanceModel.step_token_budget``, at most the engine setting):
    the step the planner's aggregated tables assume, and what a deployment sets as ``max_num_batched_tokens``.
    """

    duration_s: float = 600.0
    rate_scale: float = 1.0
    seed: int = 0
    router: str = "proportional"
    router_classes: bool = True  # follow the plan's class assignment (histogram plans); False: scalar weights only
    trace: Trace | None = None
    chunk_tokens: int | None = None
    max_seqs: int | None = None
    # spot interruptions to replay: (spot region, interruptions per node-hour); each interrupted instance is down
    # for recovery_s (planning.simulate.interruptions)
    interruptions: tuple[tuple[str, float], ...] = ()
    recovery_s: float = 900.0

    def __post_init__(self) -> None:
        if not (self.recovery_s > 0 and all(math.isfinite(q) and q >= 0 for _r, q in self.interruptions)):
            raise PlanningError("interruptions", "rates must be ≥ 0 per node-hour and the recovery time > 0 s.",
                                "use the plan's finance.spot.rates, e.g. interruptions=True in api.simulate.")
        if not (0 < self.duration_s <= MAX_DURATION_S):
            raise PlanningError("duration_s", f"{quote(self.duration_s)} is not a number of seconds in "
                                f"(0, {MAX_DURATION_S:,.0f}] (a week).", "use e.g. --duration 600.")
        if not (0 < self.rate_scale <= MAX_RATE_SCALE):
            raise PlanningError("rate_scale", f"{quote(self.rate_scale)} is not a factor in (0, {MAX_RATE_SCALE:g}].",
                                "use e.g. --rate-scale 1.")
        if self.router not in ROUTERS:
            raise PlanningError("router", f"unknown router {self.router!r}.", f"use one of {', '.join(ROUTERS)}.")
        if (self.chunk_tokens is not None and self.chunk_tokens < 1) or (self.max_seqs is not None and self.max_seqs < 1):
            raise PlanningError("chunk_tokens", "chunk_tokens and max_seqs must be >= 1.", "use the defaults.")


@dataclass
class _Instance:
    plan: InstancePlan
    model: InstanceModel
    token_budget: int = 0


@dataclass
class Topology:
    """A plan turned into simulator instance models (built once, reused across runs of one plan)."""

    scenario: Scenario
    instances: list[_Instance] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    served: dict[str, float] = field(default_factory=dict)  # share of each model's demand the plan serves
    chunk_tokens: int = 2048  # engine limits the instance models were built with
    max_seqs: int = 1024
    kv_flows: tuple[KvFlow, ...] = ()  # the plan's prefill region -> decode region shares (cross-region KV)


def _with_defaults(cfg: SimConfig, perf: PerfModel) -> SimConfig:
    """``cfg`` with unset engine limits taken from the perf model's engine settings."""
    chunk, seqs = engine_defaults(perf)
    return replace(cfg, chunk_tokens=cfg.chunk_tokens or chunk, max_seqs=cfg.max_seqs or seqs)


def _specs(perf: PerfModel, scenario: Scenario) -> dict[str, ModelSpec]:
    """Every model's architecture as the planner resolves it: catalog ids, custom configs and variants (``base``)."""
    from planning.resolve import resolve_models

    return resolve_models(scenario, perf.catalog)


def build_topology(plan: PlanResult, scenario: Scenario, perf: PerfModel, config: SimConfig | None = None) -> Topology:
    """Instance models of every instance template in ``plan``.

    Raises
    ------
    PlanningError: the plan has no instances, or one cannot be simulated (no placement, does not fit).
    """
    fixed_chunk = config is not None and config.chunk_tokens is not None
    cfg = _with_defaults(config or SimConfig(), perf)
    if not plan.instances:
        raise PlanningError("plan", f"has no instances (status {plan.status}).", "simulate a feasible plan.")
    topo = Topology(scenario, chunk_tokens=int(cfg.chunk_tokens or 2048), max_seqs=int(cfg.max_seqs or 1024),
                    kv_flows=tuple(plan.kv_flows))
    for g in plan.service:
        topo.served[g.model] = min(topo.served.get(g.model, 1.0), g.fraction)
    for m, f in topo.served.items():
        if f < 1.0 - 1e-9:
            topo.notes.append(f"{m}: the plan serves {f:.1%} of its demand; arrivals run at that share.")
    specs = _specs(perf, scenario)
    fixed_seqs = config is not None and config.max_seqs is not None
    for inst in plan.instances:
        req = scenario.model(inst.model)
        im = _instance_model(perf, specs[inst.model], req, inst, topo.max_seqs, topo.chunk_tokens,
                             None if fixed_seqs else inst.engine)
        budget = 0
        if inst.phase == "prefill":
            budget = im.prefill_token_budget(_slo_ms(req, "prefill"), req.demand.input_len)
        elif inst.phase == "aggregated":
            budget = topo.chunk_tokens if fixed_chunk else _step_budget(im, req, inst, topo.chunk_tokens)
        topo.instances.append(_Instance(inst, im, budget))
    if not fixed_seqs and any(inst.engine is None and inst.phase != "prefill" for inst in plan.instances):
        topo.notes.append("the plan carries no engine limits (stored before they were part of plans): its engines "
                          "admit what their KV cache holds, up to the engine's max_num_seqs.")
    return topo


def _step_budget(im: InstanceModel, req: ModelRequest, inst: InstancePlan, cap: int) -> int:
    """An aggregated instance's step token budget: the plan's (``EnginePlan.max_batched_tokens``), else the chunk
    whose step keeps its TPOT SLO (``InstanceModel.step_token_budget``), at most ``cap``."""
    if inst.engine is not None:  # per engine; a pipeline's stages run their copies' chunks side by side (fluid)
        copies = min(len(cs) for cs in im.stage_copies) if im.n_stages > 1 else 1
        return max(1, min(int(inst.engine.max_batched_tokens) * copies, cap))
    return im.step_token_budget(_slo_ms(req, inst.phase), cap)


def _slo_ms(req: ModelRequest, phase: str) -> float:
    """The latency target an instance of ``phase`` is planned against: TTFT for prefill, else TPOT."""
    if phase == "prefill":
        return float(req.slo.prefill_ms or DEFAULT_PREFILL_SLO_MS)
    return float(req.slo.decode_ms or req.slo.prefill_ms or DEFAULT_PREFILL_SLO_MS)


def _instance_model(perf: PerfModel, spec: ModelSpec, req: ModelRequest, inst: InstancePlan, max_seqs: int,
                    chunk_tokens: int, engine: EnginePlan | None = None) -> InstanceModel:
    """The instance's step and KV model. With the plan's ``engine`` limits a decode or aggregated instance admits at
    most its ``max_num_seqs`` sequences, and a decode instance's activation workspace is that of its step
    (``max_batched_tokens``, one token per sequence), as the exported engine profiles it."""
    d = req.demand
    step_tokens = 16384 if inst.phase == "prefill" else chunk_tokens
    cap = None
    if engine is not None and inst.phase != "prefill":
        cap = int(engine.max_num_seqs)
        if inst.phase == "decode":
            step_tokens = int(engine.max_batched_tokens)
    return InstanceModel(perf, spec, inst.stages, inst.phase, _slo_ms(req, inst.phase), d.input_len, d.output_len,
                         max_seqs_per_copy=max_seqs, max_step_tokens=step_tokens, max_batch=cap)


def engine_token_budgets(plan: PlanResult, scenario: Scenario, perf: PerfModel) -> dict[int, int]:
    """Instance index → per-step token budget of each aggregated instance of ``plan``.

    What ``build_topology`` gives the simulator's engines: the plan's step budget T per engine
    (``EnginePlan.max_batched_tokens``, which a deployment sets as vLLM's ``--max-num-batched-tokens``), times the
    copies of a pipeline stage (the simulator runs a pipeline's data-parallel copies as one engine whose stages split
    each step's prompt work); for a plan without engine limits, the largest chunk whose step keeps the TPOT SLO on
    every stage (``InstanceModel.step_token_budget``), capped at the engine setting. Instances without a placement
    are left out.

    Raises
    ------
    PlanningError: an instance's model is not in ``scenario`` or its placement cannot hold its layers.
    """
    if not any(inst.phase == "aggregated" and inst.stages for inst in plan.instances):
        return {}
    cfg = _with_defaults(SimConfig(), perf)
    chunk, seqs = int(cfg.chunk_tokens or 2048), int(cfg.max_seqs or 1024)
    specs = _specs(perf, scenario)
    out: dict[int, int] = {}
    for idx, inst in enumerate(plan.instances):
        if inst.phase != "aggregated" or not inst.stages:
            continue
        req = scenario.model(inst.model)
        im = _instance_model(perf, specs[inst.model], req, inst, seqs, chunk, inst.engine)
        out[idx] = _step_budget(im, req, inst, chunk)
    return out


def _engines(sim: Sim, topo: Topology, cfg: SimConfig) -> tuple[list[ModelRoutes], list[tuple[Engine, InstancePlan]]]:
    models = [m.id for m in topo.scenario.models]
    by_group: dict[tuple[str, str], list[tuple[Engine, float]]] = {}
    plans: dict[tuple[str, str], list[InstancePlan]] = {}  # the plan of each engine of by_group, same order
    engines: list[tuple[Engine, InstancePlan]] = []
    for item in topo.instances:
        p = item.plan
        for j in range(p.count):
            name = f"{p.model}/{p.phase}/{p.template_id}@{p.region}#{j}"
            eng: Engine
            if p.phase == "prefill":
                eng = PrefillEngine(sim, item.model, name, item.token_budget)
            elif p.phase == "aggregated" and item.model.n_stages > 1:
                eng = PipelinedEngine(sim, item.model, name, item.token_budget)
            else:
                eng = DecodeEngine(sim, item.model, name, p.phase == "aggregated",
                                   item.token_budget or topo.chunk_tokens)
            sim.region[eng] = p.region
            by_group.setdefault((p.model, p.phase), []).append((eng, p.throughput))
            plans.setdefault((p.model, p.phase), []).append(p)
            engines.append((eng, p))
    routes = []
    for m in models:
        first = by_group.get((m, "aggregated")) or by_group.get((m, "prefill"))
        dec = by_group.get((m, "decode"))

        def router(group: list[tuple[Engine, float]] | None, key: tuple[str, str]) -> Router | None:
            if not group:
                return None
            return Router([e for e, _ in group], [w for _, w in group], cfg.router,
                          class_weights(plans[key]) if cfg.router_classes else None)

        phase = "aggregated" if by_group.get((m, "aggregated")) else "prefill"
        disaggregated = bool(first) and not by_group.get((m, "aggregated"))
        local: dict[Engine, Router] = {}
        spread: dict[Engine, tuple[list[Router], _Weights]] = {}
        if disaggregated and dec:
            dec_plans = plans[(m, "decode")]
            by_region: dict[str, list[int]] = {}
            for k, pl in enumerate(dec_plans):
                by_region.setdefault(pl.region, []).append(k)
            regional = {region: Router([dec[k][0] for k in ks], [dec[k][1] for k in ks], cfg.router,
                                       class_weights([dec_plans[k] for k in ks]) if cfg.router_classes else None)
                        for region, ks in by_region.items()}
            # cross-region KV (options.kv_transfer: cross-region): region r's prefills go to region r' decode
            # routers in the plan's proportions f(r, r') / Σ_r' f(r, r'), the hand-off over the WAN
            flows: dict[str, dict[str, float]] = {}
            for f in topo.kv_flows:
                if f.model == m and f.share > 0 and f.dst in regional:
                    flows.setdefault(f.src, {})[f.dst] = f.share
                    if f.cross_region and f.wan_gbps > 0:
                        sim.wan[(f.src, f.dst)] = (f.one_way_ms * 1e-3, f.wan_gbps)
            for eng, pl in zip((e for e, _ in first or []), plans[(m, phase)], strict=True):
                dests = flows.get(pl.region, {})
                if any(d != pl.region for d in dests):
                    regions = sorted(dests)
                    spread[eng] = ([regional[d] for d in regions], _Weights([dests[d] for d in regions]))
                elif pl.region in regional:
                    local[eng] = regional[pl.region]
        routes.append(ModelRoutes(router(first, (m, phase)), router(dec, (m, "decode")) if disaggregated else None,
                                  local, spread))
    return routes, engines


def class_weights(plans: Sequence[InstancePlan]) -> dict[tuple[float, float], list[float]] | None:
    """Per request class (input_len, output_len), the req/s the plan assigned to each engine (one per instance
    copy, in ``plans`` order); None when the plan has no class assignment (single-class demand)."""
    if not any(p.class_rps for p in plans):
        return None
    out: dict[tuple[float, float], list[float]] = {}
    for j, p in enumerate(plans):
        for inp, outp, rps in p.class_rps:
            out.setdefault((inp, outp), [0.0] * len(plans))[j] += rps / max(p.count, 1)
    return out


def _arrivals(topo: Topology, cfg: SimConfig, rate_scale: float) -> list[OpenArrivals]:
    expected = sum(req.demand.rate_rps * rate_scale * topo.served.get(req.id, 1.0) for req in topo.scenario.models)
    if expected * cfg.duration_s > MAX_ARRIVALS:
        raise PlanningError("duration_s", f"{expected:,.1f} req/s for {cfg.duration_s:,.0f} s is about "
                            f"{expected * cfg.duration_s:,.0f} requests, more than one run simulates "
                            f"({MAX_ARRIVALS:,}).", "shorten --duration or lower --rate-scale.")
    seeds = np.random.SeedSequence(cfg.seed).spawn(len(topo.scenario.models))
    out = []
    for req, ss in zip(topo.scenario.models, seeds, strict=True):
        rng = np.random.default_rng(ss)
        share = rate_scale * topo.served.get(req.id, 1.0)
        if cfg.trace is not None:
            rate = req.demand.rate_rps * share
            if rate <= 0:
                out.append(OpenArrivals(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
            else:
                out.append(trace_arrivals(cfg.trace, rate, cfg.duration_s, rng))
        else:
            out.append(poisson_arrivals(req, cfg.duration_s, share, rng))
    return out


def simulate_topology(topo: Topology, config: SimConfig | None = None, rate_scale: float | None = None) -> SimResult:
    """One open-loop run of a built topology (see :func:`simulate_plan`)."""
    cfg = config or SimConfig()
    scale = cfg.rate_scale if rate_scale is None else rate_scale
    wall = time.perf_counter()
    t, i, o, m = merge(_arrivals(topo, cfg, scale))
    req = Requests.empty(len(t))
    req.arrival, req.inp, req.out, req.model = t.tolist(), i.tolist(), o.tolist(), m.tolist()
    sim = Sim([], req)
    routes, engines = _engines(sim, topo, cfg)
    sim.routes = routes
    down = {}
    if cfg.interruptions:
        from planning.simulate.interruptions import apply, down_windows

        down = down_windows([(e, sum(p.usage.values()), p.region) for e, p in engines], dict(cfg.interruptions),
                            cfg.recovery_s, cfg.duration_s, cfg.seed)
        apply(sim, routes, down)
        n_down = sum(len(w) for w in down.values())
        topo.notes.append(f"{n_down} spot interruptions replayed ({sum(b - a for w in down.values() for a, b in w) / 3600:.2f} "
                          f"instance-hours down, {cfg.recovery_s:g} s to recover each).")
    for k, r in enumerate(routes):
        if r.first is None or (r.decode is None and topo.scenario.mode == "disaggregated"):
            topo.notes.append(f"{topo.scenario.models[k].id}: the plan has no instance for it; its requests drop.")
    _run_open(sim)
    result = _result(sim, topo, engines, cfg, scale, "trace" if cfg.trace is not None else "poisson",
                     time.perf_counter() - wall)
    if down:
        result = replace(result, interruptions=sum(len(w) for w in down.values()),
                         down_instance_s=sum(min(b, cfg.duration_s) - a for w in down.values() for a, b in w))
    return result


def _run_open(sim: Sim) -> None:
    sim.run(range(len(sim.req.arrival)))


def _result(sim: Sim, topo: Topology, engines: Sequence[tuple[Engine, InstancePlan]], cfg: SimConfig,
            scale: float, arrivals: str, wall_s: float) -> SimResult:
    req = sim.req
    times = RequestTimes.of(req)
    model = np.array(req.model, dtype=np.int64)
    models = [model_metrics(mr.id, mr.slo.prefill_ms, mr.slo.decode_ms, times.select(model == k), cfg.duration_s)
              for k, mr in enumerate(topo.scenario.models)]
    horizon = max(cfg.duration_s, sim.now)
    insts = []
    for eng, plan in engines:
        eng._kv_change(horizon, 0.0, 0.0)
        if isinstance(eng, PipelinedEngine):
            eng.close(horizon)
        if isinstance(eng, PrefillEngine):
            busy = max(eng.stage_busy) if eng.stage_busy else 0.0
        else:
            busy = eng.busy_s
        insts.append(InstanceSim(eng.name, plan.model, plan.phase, plan.template_id, plan.region, eng.served,
                                 busy / horizon, eng.kv_area / horizon, eng.kv_peak, eng.tokens_out,
                                 eng.peak_batch, eng.seq_seconds / horizon))
    n = len(times.arrival)
    ok = sum(m.attainment * m.requests for m in models if m.requests)
    return SimResult(models=tuple(models), instances=tuple(insts), duration_s=cfg.duration_s, requests=n,
                     attainment=float(ok / n) if n else float("nan"),
                     goodput_tokens_per_s=float(sum(m.goodput_tokens_per_s for m in models)), arrivals=arrivals,
                     rate_scale=scale, seed=cfg.seed, router=cfg.router, wall_s=wall_s, events=sim.events,
                     finish_events=sim.finish_events,
                     notes=tuple(dict.fromkeys(topo.notes)))


def simulate_plan(plan: PlanResult, scenario: Scenario | None = None, config: SimConfig | None = None,
                  perf: PerfModel | None = None) -> SimResult:
    """Simulate ``plan`` under Poisson arrivals at its scenario's planned rates (× ``rate_scale``) or a trace.

    Parameters
    ----------
    plan: a solved plan (its ``scenario`` dict is used when ``scenario`` is None).
    scenario: the scenario the plan was made for.
    config: arrivals, duration, seed, router, engine limits.
    perf: the planner's perf model (default: the shipped one).

    Returns
    -------
    SimResult with per-model latencies, attainment and goodput, and per-instance utilisation and KV pressure.

    Raises
    ------
    PlanningError: no scenario, an empty plan, or an instance that cannot be simulated.
    """
    if scenario is None:
        if not plan.scenario:
            raise PlanningError("scenario", "the plan carries no scenario.", "pass the scenario it was solved for.")
        scenario = Scenario.from_dict(plan.scenario)
    if perf is None:
        perf = PerfModel()
    topo = build_topology(plan, scenario, perf, config)
    return simulate_topology(topo, config)


def headroom(topo: Topology, config: SimConfig | None = None, target: float = 0.99, lo: float = 0.25,
             hi: float = 4.0, iterations: int = 7) -> HeadroomResult:
    """Highest uniform demand scale in [lo, hi] with attainment ≥ ``target``, by bisection (same seed each run).

    Returns ``scale = 0`` when even ``lo`` misses the target and ``hi`` when ``hi`` still meets it.
    """
    cfg = config or SimConfig()
    evals: list[tuple[float, float]] = []

    def att(k: float) -> float:
        a = simulate_topology(topo, cfg, rate_scale=k).attainment
        evals.append((k, a))
        return a

    if att(lo) < target:
        return HeadroomResult(0.0, target, tuple(evals))
    if att(hi) >= target:
        return HeadroomResult(hi, target, tuple(evals))
    a, b = lo, hi
    for _ in range(iterations):
        mid = math.sqrt(a * b)
        if att(mid) >= target:
            a = mid
        else:
            b = mid
    return HeadroomResult(a, target, tuple(evals))


def load_trace(path: str | Path) -> Trace:
    """A trace file (Azure CSV, Mooncake JSONL/CSV or plain CSV) for :class:`SimConfig` ``trace``."""
    return read_trace(path)
