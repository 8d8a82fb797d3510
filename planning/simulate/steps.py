"""Step times and KV budgets of one serving instance, read from the planner's own PerfModel (one source of truth).

An instance is a pipeline of stages; a stage holds a run of layers on one or more nodes; a node of ``count``
GPUs runs ``count / tp`` data-parallel copies of tensor-parallel degree ``tp``. The simulator treats each
instance as one engine whose step is composed from its copies (Coral's scheduler spreads a stage's requests
over its nodes by weighted round-robin with the nodes' template throughputs as weights, so copy ``i`` of a
stage carries the share ``w_i`` of its requests):

- one copy ``i`` holding ``f`` full and ``s`` sliding-window layers takes
  ``t_i(batch, context) = f * t_full + s * t_slide + step`` per step (``PerfModel`` curves, profiles applied);
- a stage takes ``τ_s(m) = max_i t_i(ceil(m * w_i))`` for a micro-batch of ``m`` sequences;
- a decode *cycle* (every running sequence gets one token) of ``b`` sequences over ``S`` stages runs
  ``u = min(S, b)`` micro-batches of ``m = ceil(b / S)``: ``C(b) = max(Σ_s τ_s(m) + Σ_s send_s, u · max_s τ_s(m))``
  (pipeline latency, or the bottleneck stage busy ``u`` times) — with ``S = 1`` simply ``τ_1(b)``;
- a prefill batch of ``k`` prompts of ``q`` tokens goes through the stages in order (tandem queue), stage ``s``
  busy ``τ_s(k, q)``, activations sent between stages over the node network;
- a mixed (chunked-prefill) step is one fused forward pass, as in vLLM/Sarathi: the prompt chunk and the ``b``
  decode tokens go through the GEMMs together (a prefill step of ``chunk + b`` tokens) and the decodes add
  their attention over the cached context (``C(b, c) − C(b, 1)``). The planner's aggregated templates are more
  conservative: they time-share the node between phases (``1 / (I/T_p + O/T_d)``).

The KV budget of copy ``i`` is its memory minus weights of its layers, activations of the largest step and the
reserve (same terms as ``PerfModel``); a request of ``L`` tokens takes ``f·L + s·min(L, W)`` token-layers of KV.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np

from planning.catalog.schema import ModelSpec, parse_shape
from planning.errors import PlanningError
from planning.perf.curves import Curves
from planning.perf.engines import EngineMemory, vllm_v1_limits
from planning.perf.model import PerfModel, Workload, cycle_budget_s, handoff_s, kv_request_bytes
from planning.perf.roofline import LayerArch, NodeEngine, resolve_precision
from planning.result import StagePlan

# Mean context (decode) and prompt tokens per sequence (prefill) at which step times are tabulated;
# in between, times are interpolated linearly (they are close to linear in both).
CONTEXT_GRID: tuple[float, ...] = (1, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
                                   16384, 24576, 32768, 49152, 65536, 98304, 131072)
PREFILL_Q_GRID: tuple[float, ...] = (1, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
                                     4096, 6144, 8192, 12288, 16384, 32768, 65536, 131072)
PREFILL_K_GRID: tuple[float, ...] = (*range(1, 17), 20, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024,
                                     2048, 4096)


def benchmark_engine_defaults(perf: PerfModel, gpu_id: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) a benchmark run of ``vllm serve`` (V1) gets on ``gpu_id`` by default
    (``perf.engines.vllm_v1_limits``); a plan's engines get the planner's limits instead (export)."""
    return vllm_v1_limits(gpu_id, perf.gpu(gpu_id).memory_bytes, perf.calibration.settings)


def engine_defaults(perf: PerfModel) -> tuple[int, int]:
    """(tokens per step, sequences per engine copy): the perf model's engine settings ``max_batched_tokens`` and
    ``max_num_seqs`` (vLLM's serving defaults unless calibrated)."""
    s = perf.calibration.settings
    return int(s.max_batched_tokens), int(s.max_num_seqs)


@dataclass(frozen=True)
class Copy:
    """One data-parallel copy of a stage: ``tp`` GPUs of one node holding ``n_full`` + ``n_slide`` layers."""

    shape: str
    gpu: str
    tp: int
    n_full: int
    n_slide: int
    share: float  # fraction of the stage's sequences this copy carries


def _interp_row(grid: Sequence[float], row: Sequence[float], x: float) -> float:
    """Linear interpolation of ``row`` over ``grid`` at ``x`` (clamped to the ends)."""
    if x <= grid[0]:
        return row[0]
    i = bisect_right(grid, x)
    if i >= len(grid):
        # beyond the grid: extrapolate along the last segment (times keep growing with context)
        g0, g1 = grid[-2], grid[-1]
        return row[-1] + (row[-1] - row[-2]) * (x - g1) / (g1 - g0)
    g0, g1 = grid[i - 1], grid[i]
    return row[i - 1] + (row[i] - row[i - 1]) * (x - g0) / (g1 - g0)


class EngineLimits(TypedDict, total=False):
    """An instance's engine settings, given as keywords to :class:`InstanceModel` (each optional)."""

    max_seqs_per_copy: int  # largest decode batch of one engine copy (default 1024)
    max_step_tokens: int  # largest prefill chunk / batch in tokens (default 8192)
    dtype: str | None
    tp: int | None
    memory: EngineMemory | None
    max_batch: int | None


class InstanceModel:
    """Composite step-time and KV model of one instance template (shared by its ``count`` copies).

    Parameters
    ----------
    perf: the planner's PerfModel.
    spec: the model architecture.
    stages: the placement in pipeline order (``InstancePlan.stages``).
    phase: ``"prefill"``, ``"decode"`` or ``"aggregated"`` (chooses the SLO budget used to pick each node's tp,
        as the planner did).
    slo_ms: that phase's SLO (TTFT for prefill; TPOT for decode and aggregated).
    mean_input, mean_output: the planned mean request (tp choice only).
    max_seqs_per_copy: largest decode batch of one engine copy (vLLM ``max_num_seqs``).
    max_step_tokens: largest prefill chunk / batch in tokens (sizes the activation memory).
    max_batch: sequences the whole instance admits at most (the plan's ``EnginePlan.max_num_seqs``); default
        ``max_seqs_per_copy`` per copy of the narrowest stage, per micro-batch.
    dtype: weight dtype override (default the model's own).
    tp: tensor-parallel degree for every node (default: the planner's choice per node).
    memory: the engine's memory reservation (default: the planner's engine).

    Raises
    ------
    PlanningError: a stage without nodes, a node that cannot hold its layers, or an unknown GPU.
    """

    def __init__(self, perf: PerfModel, spec: ModelSpec, stages: Sequence[StagePlan], phase: str, slo_ms: float,
                 mean_input: float, mean_output: float, **limits: Unpack[EngineLimits]) -> None:
        max_seqs_per_copy = limits.get("max_seqs_per_copy", 1024)
        max_step_tokens = limits.get("max_step_tokens", 8192)
        dtype, tp = limits.get("dtype"), limits.get("tp")
        memory, max_batch = limits.get("memory"), limits.get("max_batch")
        if not stages:
            raise PlanningError("instance.stages", f"the {spec.id} instance has no placement (explicit template).",
                                "simulate plans built from generated templates (generate_templates: true).")
        self.model_id = spec.id
        self.memory = memory
        self.n_stages = len(stages)
        self.perf = perf
        self.spec = spec
        self.dtype = dtype
        self.arch = LayerArch.from_spec(spec)
        settings = perf.calibration.settings
        kinds = self._layer_kinds(spec)
        wl = Workload(max(1.0, mean_input), max(0.0, mean_output))
        budget_phase = "prefill" if phase == "prefill" else "decode"
        budget_s = self._cycle_budget_s(perf, spec, stages, phase, slo_ms, wl, dtype) / self.n_stages
        self.stage_copies: list[list[Copy]] = []
        nets: list[float] = []
        for st in stages:
            if not st.nodes:
                raise PlanningError("instance.stages", f"stage of layers {st.layer_start}-{st.layer_end} has no node.",
                                    "re-plan; every stage needs at least one node.")
            seg = kinds[st.layer_start:st.layer_end]
            n_full = int(sum(seg))
            n_slide = len(seg) - n_full
            weights = [max(float(n.throughput), 0.0) for n in st.nodes]
            if sum(weights) <= 0:
                weights = [float(n.count) for n in st.nodes]
            total = sum(weights)
            copies: list[Copy] = []
            for node, w in zip(st.nodes, weights, strict=True):
                count, gpu = parse_shape(node.shape)
                if tp is not None:
                    if tp not in perf.tp_options(spec, count):
                        raise PlanningError("tp", f"tp={tp} is not usable for {spec.id} on {node.shape}.",
                                            f"use one of {perf.tp_options(spec, count)}.")
                    node_tp = tp
                else:
                    node_tp = self._best_tp(node.shape, n_full, n_slide, budget_phase, wl, budget_s)
                dp = count // node_tp
                copies += [Copy(node.shape, gpu, node_tp, n_full, n_slide, w / total / dp) for _ in range(dp)]
                nets.append(perf.network_gbps(node.shape)[0])
            self.stage_copies.append(copies)
        self.net_gbps = min(nets)
        self.net_latency_s = settings.network_latency_ms * 1e-3
        self.step_overhead_s = sum(max(perf.gpu_calibration(c.gpu).step_ms for c in cs) * 1e-3
                                   for cs in self.stage_copies)
        self.max_batch = int(min(8192, max_seqs_per_copy * self.n_stages
                                 * min(len(cs) for cs in self.stage_copies)))
        if max_batch is not None:
            self.max_batch = int(min(8192, max(1, max_batch)))
        self.max_step_tokens = int(max_step_tokens)
        self._build_kv()
        self._build_decode()
        self._build_prefill()

    # ------------------------------------------------------------------ setup
    @staticmethod
    def _cycle_budget_s(perf: PerfModel, spec: ModelSpec, stages: Sequence[StagePlan], phase: str, slo_ms: float,
                        wl: Workload, dtype: str | None) -> float:
        """The planner's time budget of one batch through all stages (``perf.model.cycle_budget_s``), with the
        decode hand-off over the first node's network, as the planner's table of that node counts it."""
        settings = perf.calibration.settings
        t_kv = 0.0
        if phase == "decode" and stages[0].nodes:
            shape = stages[0].nodes[0].shape
            _count, gpu_id = parse_shape(shape)
            prec = resolve_precision(spec, dtype, perf.gpu(gpu_id))
            t_kv = handoff_s(LayerArch.from_spec(spec), prec, perf.network_gbps(shape)[0], wl.input_len, settings)
        return cycle_budget_s(settings, phase, slo_ms, wl.output_len, t_kv)

    @staticmethod
    def _layer_kinds(spec: ModelSpec) -> list[int]:
        """1 for a full-attention layer, 0 for a sliding-window one, in layer order."""
        kinds = [k.lower() for k in spec.layer_types] if spec.layer_types else []
        if not kinds or spec.sliding_window is None or len(kinds) != spec.layers:
            return [1] * spec.layers
        return [0 if k == "sliding" else 1 for k in kinds]

    def _curves(self, shape: str, tp: int, phase: str, wl: Workload, batches: np.ndarray) -> Curves:
        """The PerfModel's per-batch curves of one copy (its own private helper: the one source of times)."""
        _count, gpu_id = parse_shape(shape)
        gpu = self.perf.gpu(gpu_id)
        dev = self.perf.device(gpu_id)
        prec = resolve_precision(self.spec, self.dtype, gpu)
        net = self.perf.network_gbps(shape)[0]
        node = NodeEngine(self.perf._layer_arch(self.spec), dev, prec, self.perf.calibration.settings, tp, 1)
        return self.perf._curves(self.spec, node, phase, wl, batches.astype(float), net, self.memory)

    def _kv_bytes_per_token(self, shape: str, tp: int) -> float:
        """KV bytes per token per layer per GPU as the perf model counts them (its KV dtype included)."""
        one = self._curves(shape, tp, "decode", Workload(1.0, 0.0), np.array([1.0]))
        return float(one.kv_full[0])

    def _best_tp(self, shape: str, n_full: int, n_slide: int, phase: str, wl: Workload, budget_s: float) -> int:
        """The tp the planner's table used for this node: highest throughput within the budget and memory."""
        count, _gpu = parse_shape(shape)
        options = self.perf.tp_options(self.spec, count)
        if not options:
            raise PlanningError("instance.stages", f"{self.spec.id} has no tensor-parallel degree for {shape}.",
                                "use a shape whose GPU count divides the model's attention heads.")
        grid = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], dtype=float)
        best, best_thr = max(options), -1.0
        for tp in options:
            c = self._curves(shape, tp, phase, wl, grid)
            t = n_full * c.t_full + n_slide * c.t_slide + c.step_s + (c.transfer_s if self.n_stages > 1 else 0.0)
            mem = (n_full + n_slide) * c.w_layer + n_full * c.kv_full + n_slide * c.kv_slide + c.mem_fixed
            ok = (t <= budget_s) & (mem <= c.capacity)
            thr = float(np.max(np.where(ok, c.tokens / t, 0.0))) * (count // tp)
            if thr > best_thr:
                best, best_thr = tp, thr
        return best

    def _build_kv(self) -> None:
        """Per copy: free KV bytes and bytes per token of its full and sliding layers, scaled by its share."""
        self.kv_window = float(self.arch.window) if self.arch.window else math.inf
        a, b, cap = [], [], []
        for cs in self.stage_copies:
            for c in cs:
                curves = self._curves(c.shape, c.tp, "prefill", Workload(float(self.max_step_tokens), 0.0),
                                      np.array([1.0]))
                free = curves.capacity - (c.n_full + c.n_slide) * curves.w_layer - float(curves.mem_fixed[0])
                if free <= 0:
                    raise PlanningError("instance.stages", f"{c.shape} (tp={c.tp}) cannot hold {c.n_full + c.n_slide} "
                                        f"layers of {self.spec.id} plus activations.", "re-plan with more memory.")
                kvt = self._kv_bytes_per_token(c.shape, c.tp)
                # A copy with share w holds w of the instance's sequences: scale its budget by 1/w.
                a.append(c.n_full * kvt)
                b.append(c.n_slide * kvt)
                cap.append(free / max(c.share, 1e-12))
        self.kv_a = a
        self.kv_b = b
        self.kv_cap = cap
        # Normalised per-copy coefficients, deduplicated (identical copies bind identically).
        self._kv_pairs = sorted({(x / c, y / c) for x, y, c in zip(a, b, cap, strict=True)})
        self._kv_single: float | None = None
        if all(y == 0.0 for _x, y in self._kv_pairs):
            self._kv_single = max(x for x, _y in self._kv_pairs)
        # KV precision of the prefill -> decode hand-off (all layers, all KV heads: ``perf.model.handoff_s``)
        self._handoff_prec = resolve_precision(self.spec, self.dtype, self.perf.gpu(self.stage_copies[0][0].gpu))

    def kv_units(self, tokens: float) -> tuple[float, float]:
        """(full-layer tokens, window-capped tokens) a sequence of ``tokens`` occupies."""
        return tokens, min(tokens, self.kv_window)

    def kv_fraction(self, full: float, slide: float) -> float:
        """Fill of the fullest copy's KV budget for reserved totals (full-layer tokens, window-capped tokens)."""
        if self._kv_single is not None:
            return self._kv_single * full
        return max(a * full + b * slide for a, b in self._kv_pairs)

    def kv_growth_steps(self, full: float, slide: float, batch: int) -> float:
        """Steps ``batch`` sequences can each add a token (to both totals) before the fill passes 1 (inf when
        ``batch`` is 0)."""
        if batch <= 0:
            return math.inf
        pairs = [(self._kv_single, 0.0)] if self._kv_single is not None else self._kv_pairs
        steps = math.inf
        for a, b in pairs:
            rate = (a + b) * batch
            if rate > 0:
                steps = min(steps, max(0.0, math.floor((1.0 - a * full - b * slide) / rate + 1e-9)))
        return steps

    def kv_fits(self, full: float, slide: float) -> bool:
        """Whether reserved totals (full-layer tokens, window-capped tokens) fit every copy."""
        return self.kv_fraction(full, slide) <= 1.0

    def kv_bytes(self, tokens: float) -> float:
        """Bytes of one request's whole KV cache of ``tokens`` tokens (``perf.model.kv_request_bytes``)."""
        return kv_request_bytes(self.arch, self._handoff_prec.kv_bytes, tokens)

    def kv_transfer_s(self, tokens: float, net_gbps: float) -> float:
        """Seconds to send one request's whole KV cache of ``tokens`` tokens over ``net_gbps`` (the planner's
        ``perf.model.handoff_s``)."""
        return handoff_s(self.arch, self._handoff_prec, net_gbps, tokens, self.perf.calibration.settings)

    def _build_decode(self) -> None:
        """Table C[b][c]: seconds per decode cycle of b sequences at mean context CONTEXT_GRID[c]."""
        s_count = self.n_stages
        b = np.arange(0, self.max_batch + 1, dtype=float)
        m = np.maximum(1.0, np.ceil(b / s_count))
        u = np.minimum(float(s_count), np.maximum(b, 1.0))
        table = np.zeros((len(b), len(CONTEXT_GRID)))
        # Row i of the per-stage tables is a micro-batch of i sequences: b = i·S gives m = i.
        n_micro = math.ceil(self.max_batch / s_count) + 1 if s_count > 1 else 0
        idx = np.minimum(np.arange(n_micro) * s_count, self.max_batch)
        stage_tau = [np.zeros((n_micro, len(CONTEXT_GRID))) for _ in range(s_count if s_count > 1 else 0)]
        stage_send = [np.zeros_like(x) for x in stage_tau]
        uniq: dict[tuple[Any, ...], np.ndarray] = {}
        for ci, ctx in enumerate(CONTEXT_GRID):
            wl = Workload(float(ctx), 0.0)
            total = np.zeros_like(b)
            worst = np.zeros_like(b)
            for si, cs in enumerate(self.stage_copies):
                tau = np.zeros_like(b)
                send = np.zeros_like(b)
                for c in cs:
                    batches = np.maximum(1.0, np.ceil(m * c.share))
                    key = (c.shape, c.tp, c.n_full, c.n_slide, ctx, round(c.share, 12))
                    if key not in uniq:
                        cur = self._curves(c.shape, c.tp, "decode", wl, batches)
                        uniq[key] = np.stack([c.n_full * cur.t_full + c.n_slide * cur.t_slide + cur.step_s,
                                              np.asarray(cur.transfer_s, dtype=float)
                                              * np.ones_like(batches)])
                    t_send = uniq[key]
                    tau = np.maximum(tau, t_send[0])
                    if si < s_count - 1:
                        send = np.maximum(send, t_send[1])
                total += tau + send
                worst = np.maximum(worst, tau)
                if s_count > 1:  # per stage, by micro-batch size m (the mixed cycle composes micro-batches)
                    stage_tau[si][:, ci] = tau[idx]
                    stage_send[si][:, ci] = send[idx]
            table[:, ci] = np.maximum(total, u * worst)
        self.decode_rows: list[list[float]] = table.tolist()
        self.stage_decode_rows = [x.tolist() for x in stage_tau]
        self.stage_decode_send = [x.tolist() for x in stage_send]

    def decode_cycle_s(self, b: int, mean_ctx: float) -> float:
        """Seconds for one decode cycle of ``b`` running sequences at mean context ``mean_ctx`` tokens."""
        return _interp_row(CONTEXT_GRID, self.decode_rows[b], mean_ctx)

    def _build_prefill(self) -> None:
        """Per stage, table τ_s[k][q] (seconds) and send_s[k][q] for k prompts of q tokens.

        ``prefill_tau`` gives each data-parallel copy of a stage whole prompts (``ceil(k · share)``): a batch of
        one prompt runs on one copy. ``fluid_tau`` splits the prompt tokens over the copies by share (fractional
        batches): the pipelined aggregated engine's view, where the copies of a stage take turns with the prompts
        of successive steps, so over a few steps each does its share of the prompt work (Coral's weighted
        round-robin over a stage's nodes).
        """
        self.prefill_tau, self.prefill_send = self._prefill_tables(fluid=False)
        if self.n_stages > 1 and any(len(cs) > 1 for cs in self.stage_copies):
            self.fluid_tau, self.fluid_send = self._prefill_tables(fluid=True)
        else:
            self.fluid_tau, self.fluid_send = self.prefill_tau, self.prefill_send

    def _prefill_tables(self, fluid: bool) -> tuple[list[list[list[float]]], list[list[list[float]]]]:
        k = np.array(PREFILL_K_GRID, dtype=float)
        taus: list[list[list[float]]] = []
        sends: list[list[list[float]]] = []
        for si, cs in enumerate(self.stage_copies):
            tau = np.zeros((len(k), len(PREFILL_Q_GRID)))
            send = np.zeros_like(tau)
            for qi, q in enumerate(PREFILL_Q_GRID):
                wl = Workload(float(q), 0.0)
                for c in cs:
                    batches = k * c.share if fluid else np.maximum(1.0, np.ceil(k * c.share))
                    cur = self._curves(c.shape, c.tp, "prefill", wl, batches)
                    t = c.n_full * cur.t_full + c.n_slide * cur.t_slide + cur.step_s
                    tau[:, qi] = np.maximum(tau[:, qi], t)
                    if si < self.n_stages - 1:
                        send[:, qi] = np.maximum(send[:, qi], np.asarray(cur.transfer_s) * np.ones_like(batches))
            taus.append(tau.T.tolist())  # [q][k]
            sends.append(send.T.tolist())
        return taus, sends

    def prefill_stage_s(self, k: int, tokens: float, fluid: bool | None = None) -> list[tuple[float, float]]:
        """(busy, send-to-next) seconds per stage for a prefill step of ``k`` prompts holding ``tokens`` tokens.

        A pipeline (S > 1) keeps up to S batches in flight, so the data-parallel copies of a stage take turns
        with the prompts of successive batches (Coral's weighted round-robin over a stage's nodes): the stage
        does each batch's prompt work at the copies' summed rate (``fluid_tau``), as the planner's stage
        throughput (a sum over the copies) assumes. One stage alone runs whole prompts per copy (``prefill_tau``).
        ``fluid`` forces one table or the other (None: by the pipeline's depth).
        Before 2026-11-25 pipelines used whole prompts per copy too: a stage of a 2×L40S and a 1×L40S copy ran 4
        prompts as 3 + 1 at 11.9 k tok/s instead of 17.6 k, and catalog-wide's qwen3-32b met 61 % of its SLOs.
        """
        q = max(1.0, tokens / max(k, 1))
        out = []
        use_fluid = self.n_stages > 1 if fluid is None else fluid
        taus, sends = (self.fluid_tau, self.fluid_send) if use_fluid else (self.prefill_tau, self.prefill_send)
        for tau, send in zip(taus, sends, strict=True):
            out.append((_interp2(PREFILL_Q_GRID, PREFILL_K_GRID, tau, q, float(k)),
                        _interp2(PREFILL_Q_GRID, PREFILL_K_GRID, send, q, float(k))))
        return out

    def prefill_s(self, k: int, tokens: float) -> float:
        """Pipeline latency of one prefill step (all stages and sends, no queueing)."""
        return sum(t + s for t, s in self.prefill_stage_s(k, tokens))

    def mixed_s(self, k: int, tokens: float, b: int, mean_ctx: float) -> float:
        """One fused chunked-prefill step: ``tokens`` prompt tokens of ``k`` prompts plus ``b`` decodes."""
        if b == 0:
            return self.prefill_s(k, tokens)
        attention = max(0.0, self.decode_cycle_s(b, mean_ctx) - self.decode_cycle_s(b, 1.0))
        return self.prefill_s(k, tokens + b) + attention

    def stage_step_s(self, m: int, k: int, tokens: float, mean_ctx: float) -> list[tuple[float, float]]:
        """(busy, send-to-next) seconds per stage for one micro-batch step of a pipelined aggregated engine.

        ``m`` decodes at mean context ``mean_ctx``, plus ``k`` prompt chunks of ``tokens`` tokens in all. Without
        prompts a stage runs its decode step of ``m`` sequences; with them one fused pass of ``tokens + m`` tokens
        plus the decodes' attention over their context (``mixed_s``'s rule, stage by stage).
        """
        if self.n_stages == 1:
            raise PlanningError("stage_step_s", "needs a pipeline of two or more stages.", "use mixed_s.")
        mi = min(m, len(self.stage_decode_rows[0]) - 1)
        out = []
        for s in range(self.n_stages):
            rows, sends = self.stage_decode_rows[s][mi], self.stage_decode_send[s][mi]
            dec = _interp_row(CONTEXT_GRID, rows, mean_ctx) if m else 0.0
            send = _interp_row(CONTEXT_GRID, sends, mean_ctx) if m else 0.0
            if k:
                q = max(1.0, (tokens + m) / k)
                busy = _interp2(PREFILL_Q_GRID, PREFILL_K_GRID, self.fluid_tau[s], q, float(k))
                if m:
                    busy += max(0.0, dec - _interp_row(CONTEXT_GRID, rows, 1.0))
                send = max(send, _interp2(PREFILL_Q_GRID, PREFILL_K_GRID, self.fluid_send[s], q, float(k)))
            else:
                busy = dec
            out.append((busy, send))
        return out

    def step_token_budget(self, tpot_ms: float, cap: int) -> int:
        """Tokens per step (per micro-batch) of an aggregated engine sized to the TPOT SLO, at most ``cap``.

        Sarathi-Serve's rule, and the step the planner's aggregated tables assume: a step on each stage takes at
        most ``TPOT / S / aggregated_headroom``, so the prompt work rides along with the decodes in small chunks
        instead of stalling them with one large chunk (a chunk past the GPU's compute knee costs its full FLOPs,
        one below it little more than the weight reads). The largest budget (in steps of 16 tokens, ≥ 64) whose
        one-chunk step fits; ``cap`` when every budget up to it fits.
        """
        limit = tpot_ms * 1e-3 / self.n_stages / self.perf.calibration.settings.aggregated_headroom
        taus = self.fluid_tau if self.n_stages > 1 else self.prefill_tau

        def step(tokens: float) -> float:
            return max(_interp2(PREFILL_Q_GRID, PREFILL_K_GRID, tau, tokens, 1.0) for tau in taus)

        lo, hi = 64, max(64, int(cap))
        if step(hi) <= limit:
            return hi
        if step(lo) > limit:
            return lo
        while hi - lo > 16:  # step time grows with tokens: bisect
            mid = (lo + hi) // 2
            if step(mid) <= limit:
                lo = mid
            else:
                hi = mid
        return lo

    def prefill_token_budget(self, slo_ms: float, mean_input: float) -> int:
        """Largest batch (tokens) whose pipeline latency stays within ``slo / prefill_headroom`` (≥ one prompt)."""
        limit = slo_ms * 1e-3 / self.perf.calibration.settings.prefill_headroom
        q = max(1.0, mean_input)
        best = q
        k = 1
        while k <= 4096:
            if self.prefill_s(k, k * q) <= limit:
                best = k * q
            else:
                break
            k += 1 if k < 16 else k // 4
        return int(min(max(best, q), 65536))


def _interp2(qgrid: Sequence[float], kgrid: Sequence[float], table: list[list[float]], q: float, k: float) -> float:
    """Bilinear interpolation of ``table[q][k]``."""
    if q <= qgrid[0]:
        return _interp_row(kgrid, table[0], k)
    i = bisect_right(qgrid, q)
    if i >= len(qgrid):
        i = len(qgrid) - 1
    q0, q1 = qgrid[i - 1], qgrid[i]
    v0 = _interp_row(kgrid, table[i - 1], k)
    v1 = _interp_row(kgrid, table[i], k)
    return v0 + (v1 - v0) * (q - q0) / (q1 - q0)
