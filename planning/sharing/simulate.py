"""Request-level simulation of shared GPUs (Prism Sec. 6): co-located models time-share one GPU.

Sets: shared nodes n (one GPU each), models m on n, requests i of m.
Parameters per model (``ModelProfile`` on the node's GPU, from the perf model): prefill time of one request
e_m, decode step time t_m at its planned batch, KV pool P_m (tokens: the planner's pool / KV per request × the
request's I + O tokens), TTFT SLO s_m, TPOT SLO d_m (optional), mean rate r_m and burstiness b_m (peak/mean).
KV accounting (``kv``): ``paged`` (vLLM-like) — a running request holds I + (tokens generated so far); a prefill
is admitted when its model's pool has I + 1 tokens free (or nothing of that model runs); sequences grow without
preemption, so the pool may be overrun by the growth of the admitted ones (optimistic by at most that);
``reserve`` — each request reserves I + O for its whole life, i.e. ⌊P_m / (I + O)⌋ ≥ 1 at a time (conservative).

The GPU runs one thing at a time (co-located models do not batch together: each reads its own weights):
a prefill of one request, or a decode round — one step of every model with running sequences (each step
advances all of that model's running sequences by one token). After a prefill the GPU runs a decode round if
any sequence is running, so decodes are never starved; otherwise it takes the next prefill. Which waiting
request is prefilled next is the **admission** policy over the requests whose model has a free KV slot and is
loaded:
* ``fcfs``: earliest arrival;
* ``moore-hodgson``: Prism Alg. 2 over the waiting requests (the largest set that can all meet their TTFT
  deadlines, earliest deadline first; each model's ``MH_WINDOW`` oldest, which hold its earliest deadlines);
  when none can, the earliest deadline.
Eviction (optional, ``evict_after_s``): a model with nothing waiting or running for that long is unloaded; its
next request waits for its weights to load, weights / ``LOAD_GB_PER_S`` (0.7 s for an 8B model, Prism Sec. 7).
The planner reserves every co-located model's weights, so eviction frees nothing here: it only shows what the
activation delay costs.

Arrivals: per model, Poisson at the mean rate when b_m = 1; otherwise on/off (a burst at b_m·r_m for a mean
``BURST_PERIOD_S``, then idle for (b_m − 1)·``BURST_PERIOD_S`` on average), which keeps the mean rate r_m and has
the idle gaps and bursts of a long-tail model. Request sizes are the model's mean prompt and output lengths.

A request meets its SLO when TTFT = first token − arrival ≤ s_m and (with d_m) TPOT = (done − first token) /
(output − 1) ≤ d_m.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from planning.errors import PlanningError
from planning.sharing.admission import QueuedRequest, moore_hodgson
from planning.sharing.profiles import ModelProfile

if TYPE_CHECKING:
    from planning.context import EngineContext
    from planning.scenario import Scenario
    from planning.sharing.result import SharingResult

ADMISSIONS = ("moore-hodgson", "fcfs")
KV_MODES = ("paged", "reserve")
LOAD_GB_PER_S = 22.9  # weights loaded per second on activation: Prism's 0.7 s for Llama-3-8B (16 GB)
BURST_PERIOD_S = 60.0  # mean length of a burst of a bursty model (its idle gaps are (b − 1) times longer)
MAX_REQUESTS = 2_000_000
MH_WINDOW = 64  # Moore–Hodgson sees each model's 64 oldest waiting requests (bounded work under overload)


@dataclass(frozen=True)
class SharedModelSim:
    """One co-located model's outcome: requests, SLO attainment, TTFT/TPOT percentiles (ms), activations."""

    model: str
    node: int
    gpu: str
    requests: int
    attainment: float
    attainment_ttft: float
    ttft_ms_mean: float
    ttft_ms_p50: float
    ttft_ms_p99: float
    tpot_ms_p50: float
    tpot_ms_p99: float
    activations: int


@dataclass(frozen=True)
class SharedSimResult:
    """All shared nodes: per model, per node GPU busy share, and how it was run."""

    models: tuple[SharedModelSim, ...]
    node_busy: tuple[float, ...]
    duration_s: float
    seed: int
    admission: str
    evict_after_s: float | None
    kv: str = "paged"

    @property
    def requests(self) -> int:
        return sum(m.requests for m in self.models)

    @property
    def attainment(self) -> float:
        """Share of all requests that met their SLOs (1 when there were none)."""
        n = self.requests
        return sum(m.attainment * m.requests for m in self.models) / n if n else 1.0

    @property
    def min_attainment(self) -> float:
        return min((m.attainment for m in self.models if m.requests), default=1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"models": [asdict(m) for m in self.models], "node_busy": list(self.node_busy),
                "duration_s": self.duration_s, "seed": self.seed, "admission": self.admission,
                "evict_after_s": self.evict_after_s, "kv": self.kv, "requests": self.requests, "attainment": self.attainment,
                "min_attainment": self.min_attainment}


def arrivals(rate_rps: float, burstiness: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times (s) over ``duration_s`` at mean ``rate_rps``: Poisson, or on/off bursts (module docstring)."""
    if rate_rps <= 0 or duration_s <= 0:
        return np.zeros(0)
    if burstiness <= 1.0 + 1e-9:
        n = int(rng.poisson(rate_rps * duration_s))
        return np.sort(rng.uniform(0.0, duration_s, n))
    out: list[np.ndarray] = []
    on = bool(rng.uniform() < 1.0 / burstiness)  # start in the stationary state
    t = 0.0
    while t < duration_s:
        length = float(rng.exponential(BURST_PERIOD_S if on else (burstiness - 1.0) * BURST_PERIOD_S))
        end = min(t + length, duration_s)
        if on:
            n = int(rng.poisson(burstiness * rate_rps * (end - t)))
            out.append(rng.uniform(t, end, n))
        t, on = end, not on
    return np.sort(np.concatenate(out)) if out else np.zeros(0)


@dataclass(frozen=True)
class SharedSimOptions:
    """How shared GPUs are simulated: the window and seed, the admission policy, KV accounting, optional eviction
    after that many idle seconds, and a factor on every model's rate (module docstring)."""

    duration_s: float = 600.0
    seed: int = 0
    admission: str = "moore-hodgson"
    evict_after_s: float | None = None
    rate_scale: float = 1.0
    kv: str = "paged"

    def check(self) -> None:
        """Raise :class:`PlanningError` naming the bad option and the fix."""
        if self.admission not in ADMISSIONS:
            raise PlanningError("admission", f"unknown policy {self.admission!r}.",
                                f"use one of {', '.join(ADMISSIONS)}.")
        if self.kv not in KV_MODES:
            raise PlanningError("kv", f"unknown KV accounting {self.kv!r}.", f"use one of {', '.join(KV_MODES)}.")
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise PlanningError("duration_s", f"is {self.duration_s!r}.", "give a positive number of seconds.")


@dataclass
class _Model:
    profile: ModelProfile
    prefill_s: float
    step_s: float
    pool: float  # KV tokens
    need: float  # tokens a new request needs to be admitted
    load_s: float
    running: list[list[float]]  # [request index, tokens left, KV tokens released at the end]
    used: float = 0.0  # KV tokens held
    seqs: int = 0
    ready_at: float = 0.0
    last_active: float = 0.0
    activations: int = 0


def simulate_node(profiles: Sequence[ModelProfile], gpu: str, options: SharedSimOptions | None = None, *,
                  node: int = 0) -> tuple[list[SharedModelSim], float]:
    """Simulate one shared GPU (node number ``node`` of a plan: it seeds the arrivals); returns each model's
    outcome and the GPU's busy share of the run.

    Raises
    ------
    PlanningError
        Unknown admission policy or KV accounting, a model that has no profile on ``gpu``, or a run over
        ``MAX_REQUESTS``.
    """
    opts = options or SharedSimOptions()
    opts.check()
    models = _node_models(profiles, gpu, opts.kv)
    run = _GpuRun(models, _arrivals_of(models, opts, node), opts)
    run.run()
    return [_outcome(m, mi, run, gpu, node) for mi, m in enumerate(models)], run.busy / max(run.t, opts.duration_s)


def _node_models(profiles: Sequence[ModelProfile], gpu: str, kv: str) -> list[_Model]:
    """Each model's times on ``gpu``, its KV pool and what a new request needs of it (by the KV accounting)."""
    models: list[_Model] = []
    for p in profiles:
        g = p.gpus.get(gpu)
        if g is None:
            raise PlanningError(f"sharing.{p.id}", f"has no profile on {gpu}.", "re-plan the shared nodes.")
        seq = max(1.0, round(p.input_len)) + max(1.0, round(p.output_len))
        pool = p.kv_pool_gb / p.kv_gb_per_request * seq if p.kv_gb_per_request > 0 else math.inf
        if kv == "reserve":
            pool = max(1.0, math.floor(pool / seq + 1e-9)) * seq
        models.append(_Model(p, g.prefill_ms / 1e3, g.decode_step_ms / 1e3, pool,
                             seq if kv == "reserve" else max(1.0, round(p.input_len)) + 1,
                             p.weights_gb / LOAD_GB_PER_S, []))
    return models


def _arrivals_of(models: list[_Model], opts: SharedSimOptions, node: int) -> list[tuple[float, int]]:
    """Every request's (arrival time, model index), sorted; seeded per (seed, node, model)."""
    seeds = np.random.SeedSequence([opts.seed, node]).spawn(len(models))
    arr: list[tuple[float, int]] = []
    for mi, (m, ss) in enumerate(zip(models, seeds, strict=True)):
        times = arrivals(m.profile.rate_rps * opts.rate_scale, m.profile.burstiness, opts.duration_s,
                         np.random.default_rng(ss))
        arr.extend((float(t), mi) for t in times)
    if len(arr) > MAX_REQUESTS:
        raise PlanningError("duration_s", f"{len(arr):,} requests on one shared GPU (limit {MAX_REQUESTS:,}).",
                            "simulate a shorter window.")
    arr.sort()
    return arr


class _GpuRun:
    """One GPU's run (module docstring): a prefill or a decode round at a time, the clock ``t`` and busy time."""

    def __init__(self, models: list[_Model], arr: list[tuple[float, int]], opts: SharedSimOptions) -> None:
        self.models, self.arr, self.opts = models, arr, opts
        n = len(arr)
        self.first = [math.nan] * n
        self.done = [math.nan] * n
        self.out_tokens = [max(1, round(models[mi].profile.output_len)) for _t, mi in arr]
        self.pending: deque[int] = deque(range(n))  # arrivals not yet seen by the GPU
        self.waiting: list[deque[int]] = [deque() for _ in models]  # per model, in arrival order
        self.t = 0.0
        self.busy = 0.0
        self.last_was_prefill = False

    def run(self) -> None:
        """Until every request has finished."""
        while self.pending or any(self.waiting) or any(m.running for m in self.models):
            self.admit_arrivals(self.t)
            running = any(m.running for m in self.models)
            cands = self.candidates(self.t)
            if running and (self.last_was_prefill or not cands):  # a decode round: one step of every running model
                self.decode_round()
                continue
            if cands:
                self.prefill(self.choose(cands, self.t))
                continue
            # idle: until the next arrival or the next model activation
            wake = [x for x in ([self.arr[self.pending[0]][0]] if self.pending else [])
                    + [m.ready_at for m in self.models] if x > self.t]
            if not wake:
                break  # nothing can ever run (cannot happen: every waiting model has a slot once its runs finish)
            self.t = min(wake)
            self.last_was_prefill = False

    def admit_arrivals(self, now: float) -> None:
        arr, evict_after_s = self.arr, self.opts.evict_after_s
        while self.pending and arr[self.pending[0]][0] <= now:
            i = self.pending.popleft()
            m = self.models[arr[i][1]]
            idle = m.seqs == 0 and not self.waiting[arr[i][1]]
            if evict_after_s is not None and idle and arr[i][0] - m.last_active > evict_after_s and m.last_active > 0:
                m.ready_at = max(m.ready_at, arr[i][0] + m.load_s)
                m.activations += 1
            self.waiting[arr[i][1]].append(i)

    def candidates(self, now: float) -> list[int]:
        out: list[int] = []
        for mi, m in enumerate(self.models):
            q = self.waiting[mi]
            if q and m.ready_at <= now and (m.seqs == 0 or m.used + m.need <= m.pool + 1e-9):
                # FCFS needs each model's oldest; Moore–Hodgson sees each model's MH_WINDOW oldest (a model's
                # requests share one SLO, so its oldest have its earliest deadlines)
                out.extend(q[k] for k in range(min(len(q), 1 if self.opts.admission == "fcfs" else MH_WINDOW)))
        return out

    def choose(self, cands: list[int], now: float) -> int:
        arr, models = self.arr, self.models
        if self.opts.admission == "fcfs" or len(cands) == 1:
            return min(cands, key=lambda i: (arr[i][0], i))
        queue = [QueuedRequest(i, arr[i][0], models[arr[i][1]].profile.ttft_s, models[arr[i][1]].prefill_s)
                 for i in cands]
        adm = moore_hodgson(queue, now)
        if adm.admitted:
            return int(adm.admitted[0])
        return min(cands, key=lambda i: (arr[i][0] + models[arr[i][1]].profile.ttft_s, i))

    def decode_round(self) -> None:
        """One step of every model with running sequences."""
        for m in self.models:
            if not m.running:
                continue
            self.t += m.step_s
            self.busy += m.step_s
            still: list[list[float]] = []
            for run in m.running:
                run[1] -= 1
                if self.opts.kv == "paged":
                    m.used += 1  # one more token of KV
                if run[1] <= 0:
                    self.done[int(run[0])] = self.t
                    m.used -= run[2]
                    m.seqs -= 1
                    m.last_active = self.t
                else:
                    still.append(run)
            m.running = still
        self.last_was_prefill = False

    def prefill(self, i: int) -> None:
        """Prefill request ``i``: its first token, and its decode joins its model's running sequences."""
        self.waiting[self.arr[i][1]].remove(i)
        m = self.models[self.arr[i][1]]
        hold = m.need  # KV tokens taken at admission (reserve: the whole sequence; paged: the prompt + 1)
        m.used += hold
        m.seqs += 1
        self.t += m.prefill_s
        self.busy += m.prefill_s
        self.first[i] = self.t
        m.last_active = self.t
        if self.out_tokens[i] <= 1:
            self.done[i] = self.t
            m.used -= hold
            m.seqs -= 1
        else:  # [request, tokens left, KV tokens it will release]
            m.running.append([float(i), float(self.out_tokens[i] - 1),
                              hold if self.opts.kv == "reserve" else hold + self.out_tokens[i] - 1])
        self.last_was_prefill = True


def _outcome(m: _Model, mi: int, run: _GpuRun, gpu: str, node: int) -> SharedModelSim:
    """Model ``mi``'s requests, SLO attainment and TTFT/TPOT percentiles in the finished ``run``."""
    arr, first, done, out_tokens = run.arr, run.first, run.done, run.out_tokens
    idx = [i for i in range(len(arr)) if arr[i][1] == mi]
    ttft = np.array([first[i] - arr[i][0] for i in idx])
    multi = np.array([out_tokens[i] > 1 for i in idx], dtype=bool)
    per_token = np.array([(done[i] - first[i]) / (out_tokens[i] - 1) if out_tokens[i] > 1 else 0.0 for i in idx])
    tpot = per_token[multi] if idx else np.zeros(0)  # requests with one output token have no TPOT
    ok_ttft = ttft <= m.profile.ttft_s + 1e-9
    ok = ok_ttft.copy()
    if m.profile.tpot_s is not None:
        ok &= per_token <= m.profile.tpot_s + 1e-9

    def pct(a: np.ndarray, q: float) -> float:
        return float(np.percentile(a, q) * 1e3) if a.size else math.nan

    return SharedModelSim(m.profile.id, node, gpu, len(idx), float(ok.mean()) if idx else 1.0,
                          float(ok_ttft.mean()) if idx else 1.0,
                          float(ttft.mean() * 1e3) if ttft.size else math.nan, pct(ttft, 50), pct(ttft, 99),
                          pct(tpot, 50), pct(tpot, 99), m.activations)


def simulate_sharing(result: SharingResult, scenario: Scenario, options: SharedSimOptions | None = None, *,
                     context: EngineContext | None = None) -> SharedSimResult:
    """Simulate every shared node of a ``SharingResult`` (its dedicated part: :func:`planning.api.simulate`).

    Raises
    ------
    PlanningError
        As :func:`simulate_node`.
    """
    from planning.context import engine_context
    from planning.sharing.plan import shared_profiles

    opts = options or SharedSimOptions()
    ctx = context or engine_context()
    ids = [m.model for node in result.shared_nodes for m in node.models]
    profiles, _types = shared_profiles(scenario, ctx, ids) if ids else ([], [])
    by_id: Mapping[str, ModelProfile] = {p.id: p for p in profiles}
    models: list[SharedModelSim] = []
    busy: list[float] = []
    for k, node in enumerate(result.shared_nodes):
        sims, b = simulate_node([by_id[m.model] for m in node.models], node.gpu, opts, node=k)
        models.extend(sims)
        busy.append(b)
    return SharedSimResult(tuple(models), tuple(busy), opts.duration_s, opts.seed, opts.admission,
                           opts.evict_after_s, opts.kv)
