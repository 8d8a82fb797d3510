"""PerfModel: the performance model's one public face (lookups, T̂ stage tables, whole-node estimates, serving).

The physics lives in roofline.py (kernels), moe.py (measured MoE experts), curves.py (per-batch times and memory),
tables.py (Coral's T̂ tables), serving.py (continuous batching with chunked prefill), budgets.py (the planner's time
budgets) and bands.py (uncertainty from validation errors); whole.py holds ``estimate`` and ``serving``.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from planning.catalog.schema import GPU, ModelSpec, parse_shape
from planning.errors import PlanningError, UnknownIdError
from planning.perf.allreduce import AllReduceTables, load_allreduce
from planning.perf.bands import BandTable, load_bands
from planning.perf.budgets import (
    cycle_budget_s,
    decode_cycle_budget_s,
    handoff_s,
    kv_element_bytes,
    kv_request_bytes,
)
from planning.perf.calibration import Calibration, GpuCalibration, load_calibration
from planning.perf.curves import Curves, TimesMemo, build_curves
from planning.perf.engines import EngineMemory, fuses_activation_quant
from planning.perf.moe import PLANNER_ENGINE, MoeBinding, MoeKernels, load_moe_kernels
from planning.perf.results import MemoryBreakdown, PerfEstimate, ServingPoint, StagePoint, Workload
from planning.perf.roofline import Device, LayerArch, NodeEngine, Precision, resolve_precision, valid_tp
from planning.perf.serving import serving_stage_entries, serving_stage_table
from planning.perf.tables import (
    TableCache,
    batch_curves,
    best_over_batches,
    entry_point,
    step_elasticity,
    table_and_batch_curves,
)
from planning.perf.whole import MAX_BATCH, MAX_TOKENS, WholeNode

if TYPE_CHECKING:
    from planning.catalog.schema import Catalog
    from planning.perf.profiles import ProfileSet

# the planner's budgets (planning/perf/budgets.py) and the estimate's limits (planning/perf/whole.py), long imported
# from here
__all__ = ["MAX_BATCH", "MAX_TOKENS", "PHASES", "MemoryBreakdown", "PerfEstimate", "PerfModel", "ServingPoint",
           "Workload", "cycle_budget_s", "decode_cycle_budget_s", "handoff_s", "kv_element_bytes", "kv_request_bytes",
           "parse_shape"]

PHASES: tuple[str, ...] = ("prefill", "decode")

# Batch sizes tried (requests per step): powers of two and the half-steps between them.
_GRID = sorted({round(2 ** (k / 2)) for k in range(0, 25)})  # 1 .. 4096
PREFILL_MAX_TOKENS = 65536  # a prefill batch larger than this gains nothing and no engine schedules it
DECODE_MAX_BATCH = 4096
BATCH_CURVES_CACHE = 64  # decode_batch_curves entries kept (a few hundred KB each)
NODE_CURVES_KEPT = 4096  # _node_curves entries kept (a few KB each: a coral-extended solve reads ~1,200)
# Bumped whenever the model's physics changes in code (not in data): part of every cache key and of fingerprint(),
# so tables, template libraries and plans computed by an older model are not reused. v3: engines' memory
# reservations, host-memory all-reduce without peer-to-peer, prompts in lumps, TTFT under load (issue 24). v4: the
# KV room for the running count's fluctuation grows with the step's elasticity in the batch (tables.kv_room). v5:
# MoE experts from measured fused-MoE kernels, engine-specific kernels (issue 42); v5.1: decode tables charge the
# experts at the engine's admission cap (curves.fluctuation_charged); v5.2: that charge on decode tables only (a
# prefill step holds the prompts it was planned with), and FP8 experts under an engine whose own MoE kernels are not
# measured on the GPU read the planner's BF16 kernel scaled to FP8 (moe.MoeKernels.choose); v5.3: TensorRT-LLM fuses
# the FP8 quantization of GEMM inputs into the kernel before (roofline.Device.fused_quant; the planner's vLLM does not);
# v5.4: the tensor-parallel all-reduce read from measured NCCL / engine all-reduce tables (planning.perf.allreduce).
PHYSICS_VERSION = "perf-v5.4"
# What attention-DP views (validation rows that state TensorRT-LLM's attention DP; the planner never runs it) add to
# the physics: bumped when only they change, so the planner's keys and tables stay those of PHYSICS_VERSION.
ATTENTION_DP_PHYSICS = "adp-2"


def _load_catalog() -> Catalog:
    """The shipped catalog (imported lazily: the catalog area reads data files)."""
    from planning.catalog import load_catalog

    return load_catalog()


class PerfModel(WholeNode):
    """Roofline + calibration performance model over a catalog (see docs/perf-model.md); ``estimate`` and
    ``serving`` (one whole node) come from :class:`planning.perf.whole.WholeNode`."""

    def __init__(self, catalog: Catalog | None = None, calibration: Calibration | None = None,
                 profiles: ProfileSet | None = None, cache_dir: Path | None = None, cache_size: int = 2048,
                 bands: BandTable | None = None, moe_kernels: MoeKernels | None = None,
                 allreduce: AllReduceTables | None = None) -> None:
        if catalog is None:
            catalog = _load_catalog()
        self.catalog = catalog
        self.calibration = calibration if calibration is not None else load_calibration()
        self.profiles = profiles
        self.bands = bands if bands is not None else load_bands()
        self._tables = TableCache(None, cache_size)  # one shape's table, in memory
        # on disk: one file per stacked request (``stage_tables``: all shapes of a group; ``stacked_decode_curves``:
        # dp and tau), not per shape: a file costs ~1 ms to write, catalog-wide has 672 (model, shape) tables
        self._bundles = TableCache(cache_dir, 64, prefix="T")
        self._curve_files = TableCache(cache_dir, 4, prefix="C")
        self._batch_curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._node_memo: dict[tuple[Any, ...], Curves] = {}  # _node_curves
        self._times_memo: dict[Hashable, tuple[np.ndarray, np.ndarray]] = {}  # _node_curves' step times (TimesMemo)
        self._arch: dict[ModelSpec, LayerArch] = {}
        self._net: dict[str, tuple[float, bool]] = {}
        self._cal_fp: tuple[int, str] | None = None
        self.moe_kernels: MoeKernels | None = moe_kernels if moe_kernels is not None else load_moe_kernels()
        self._moe: dict[str, MoeBinding | None] = {}
        self.allreduce: AllReduceTables = allreduce if allreduce is not None else load_allreduce()
        self.engine = PLANNER_ENGINE  # whose measured kernels estimates read (for_engine)
        self.attention_dp = False  # the engine runs attention data parallel (for_engine; the planner never does)
        self._views: dict[tuple[str, bool], PerfModel] = {}

    def for_engine(self, engine: str | None, attention_dp: bool = False) -> PerfModel:
        """This model reading ``engine``'s measured kernels (None: the planner's, vLLM), optionally with attention
        data parallelism (``LayerArch.attention_dp``): shares catalog, calibration and caches; both are part of
        every key (``_calibration_fingerprint``) and of each estimate."""
        key = ((engine or PLANNER_ENGINE).lower(), bool(attention_dp))
        if key == (self.engine, self.attention_dp):
            return self
        if key not in self._views:
            view = copy.copy(self)
            view.engine, view.attention_dp = key
            view._cal_fp, view._views, view._arch = None, {}, {}
            self._views[key] = view
        return self._views[key]

    @property
    def cache_dir(self) -> Path | None:
        """Directory mirroring the stacked tables and curves (None: memory only)."""
        return self._bundles.cache_dir

    # ----------------------------------------------------------------- lookups
    def model(self, model_id: str) -> ModelSpec:
        """The ModelSpec for ``model_id``; raises UnknownIdError with the closest ids."""
        if model_id not in self.catalog.models:
            raise UnknownIdError("model", model_id, self.catalog.models)
        return self.catalog.models[model_id]

    def gpu(self, gpu_id: str) -> GPU:
        """The GPU spec for ``gpu_id``; raises UnknownIdError with the closest ids."""
        if gpu_id not in self.catalog.gpus:
            raise UnknownIdError("gpu", gpu_id, self.catalog.gpus)
        return self.catalog.gpus[gpu_id]

    def device(self, gpu_id: str, engine: str | None = None) -> Device:
        """Spec numbers, calibration and measured kernels of one GPU type under ``engine`` (None: this model's,
        ``self.engine``), as the roofline reads them."""
        gpu = self.gpu(gpu_id)
        eng = engine or self.engine
        return Device.from_specs(gpu, self.calibration.for_gpu(gpu, eng), self._moe_binding(eng),
                                 fuses_activation_quant(eng), self.allreduce.curve(gpu.id, eng))

    def _planning_device(self, gpu_id: str) -> Device:
        """The device the planner's tables read: MoE experts charged at the running batch's upper fluctuation
        (``MoeBinding.sigmas`` = ``kv_sigmas``, docs/perf-model.md Sec. 1b); ``device`` is the step as it runs."""
        gpu = self.gpu(gpu_id)
        return Device.from_specs(gpu, self.calibration.for_gpu(gpu, self.engine),
                                 self._moe_binding(self.engine, self.calibration.settings.kv_sigmas),
                                 fuses_activation_quant(self.engine), self.allreduce.curve(gpu.id, self.engine))

    def _moe_binding(self, engine: str, sigmas: float = 0.0) -> MoeBinding | None:
        """The measured MoE kernels under ``engine`` (one binding per engine and sigmas, sharing its choices)."""
        if self.moe_kernels is None:
            return None
        key = f"{engine}|{sigmas}"
        if key not in self._moe:
            refs = {g: Device.from_specs(self.catalog.gpus[g], self.calibration.for_gpu(self.catalog.gpus[g], engine),
                                         fused_quant=fuses_activation_quant(engine))
                    for g in self.moe_kernels.gpus if g in self.catalog.gpus}
            self._moe[key] = MoeBinding(self.moe_kernels, engine, refs, sigmas)
        return self._moe[key]

    def kernel_notes(self, model_id: str, gpu_id: str, tp: int, dtype: str | None = None,
                     engine: str | None = None) -> tuple[str, ...]:
        """Provenance of the engine-specific kernels an estimate of ``model_id`` reads (empty for dense models)."""
        spec, gpu = self.model(model_id), self.gpu(gpu_id)
        dev = self.device(gpu_id, engine)
        arch = self._layer_arch(spec)
        if not arch.is_moe:
            return ()
        choice = dev.moe.choice(dev, arch, resolve_precision(spec, dtype, gpu), tp) if dev.moe else None
        if choice is None:
            return ("MoE experts: roofline (no measured MoE kernel for this GPU, engine or dtype).",)
        return (choice.describe(),)

    def gpu_calibration(self, gpu_id: str) -> GpuCalibration:
        """The fitted (or prior) constants of one GPU type."""
        return self.calibration.for_gpu(self.gpu(gpu_id))

    def kind_bands(self, gpu_id: str, dtype: str = "bf16") -> dict[str, float]:
        """Relative uncertainty of each quantity kind (ttft, tpot, throughput) on ``gpu_id`` at ``dtype``.

        The same validation-derived bands as ``PerfEstimate.band`` (docs/perf-model.md Sec. 7), for callers that
        label a whole plan (e.g. plan capacity ± band) rather than one estimate.
        """
        gpu = self.gpu(gpu_id)
        prov = self.calibration.for_gpu(gpu).provenance
        bands, _ = self.bands.for_estimate(gpu, dtype, dict.fromkeys(("prefill_ms", "decode_step_ms", "serving"),
                                                                      prov), self.calibration.settings)
        return {"ttft": bands["prefill_ms"], "tpot": bands["decode_step_ms"], "throughput": bands["serving"]}

    def network_gbps(self, shape: str) -> tuple[float, bool]:
        """Slowest published network (Gbit/s) among configs of ``shape``; (default, False) when none publishes."""
        key = f"{shape}|{id(self.calibration)}"
        if key not in self._net:
            known = [c.network_gbps for c in self.catalog.configs.values() if c.shape == shape and c.network_gbps]
            self._net[key] = (float(min(known)), True) if known else (self.calibration.settings.network_gbps, False)
        return self._net[key]

    def _calibration_fingerprint(self) -> str:
        """The calibration's fingerprint, computed once per calibration object."""
        if self._cal_fp is None or self._cal_fp[0] != id(self.calibration):
            moe = self.moe_kernels.fingerprint if self.moe_kernels is not None else "no-moe-kernels"
            moe = f"{moe}:{self.allreduce.fingerprint}"
            self._cal_fp = (id(self.calibration),
                            f"{PHYSICS_VERSION}:{self.calibration.fingerprint()}:{moe}:{self.engine}:"
                            f"{ATTENTION_DP_PHYSICS if self.attention_dp else False}")
        return self._cal_fp[1]

    def _layer_arch(self, model: ModelSpec) -> LayerArch:
        if model not in self._arch:
            arch = LayerArch.from_spec(model)
            self._arch[model] = replace(arch, attention_dp=True) if self.attention_dp else arch
        return self._arch[model]

    def fingerprint(self) -> str:
        """Hash of the physics version, the calibration, the catalog GPU/model specs (driver-reported memory and
        peer-to-peer included) and the profiles (cache invalidation key)."""
        parts = [PHYSICS_VERSION, self.calibration.fingerprint(), repr(sorted(self.catalog.gpus.items())),
                 self.moe_kernels.fingerprint if self.moe_kernels is not None else "no-moe-kernels",
                 self.allreduce.fingerprint, repr(sorted(self.catalog.models.items())),
                 self.profiles.fingerprint() if self.profiles is not None else "no-profiles"]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]

    def tp_options(self, model: ModelSpec, count: int) -> list[int]:
        """Tensor-parallel degrees usable on a node of ``count`` GPUs (the rest of the GPUs are data parallel)."""
        arch = self._layer_arch(model)
        return [tp for tp in range(1, count + 1) if count % tp == 0 and valid_tp(arch, tp)]

    # ----------------------------------------------------------------- node curves
    def _curves(self, model: ModelSpec, node: NodeEngine, phase: str, wl: Workload, batches: np.ndarray,
                net_gbps: float, memory: EngineMemory | None = None, times: TimesMemo | None = None) -> Curves:
        """Per-batch curves of one phase on ``node`` (``node.arch`` is ``model``'s), corrected by measured profiles;
        ``times``: step times another node with the same ones computed (``curves.TimesMemo``)."""
        correction = None
        if self.profiles is not None:
            correction = self.profiles.correction(self, model, node.dev.gpu_id, node.tp * node.dp, node.tp, phase, wl,
                                                  batches)
        return build_curves(node, phase, wl, batches, net_gbps, correction, memory, times)

    def _node_engine(self, arch: LayerArch, dev: Device, prec: Precision, tp: int, dp: int) -> NodeEngine:
        """The node's engine at the calibrated settings."""
        return NodeEngine(arch, dev, prec, self.calibration.settings, tp, dp)

    @staticmethod
    def _grid(phase: str, wl: Workload) -> np.ndarray:
        g = np.array(_GRID, dtype=float)
        if phase == "prefill":
            keep = g * wl.input_len <= max(PREFILL_MAX_TOKENS, wl.input_len)
            return g[keep]
        return g[g <= DECODE_MAX_BATCH]

    # ----------------------------------------------------------------- T̂ tables
    def stage_table(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, workload: Workload,
                    max_stages: int = 6, dtype: str | None = None, ttft_ms: float | None = None) -> np.ndarray:
        """T̂_j(g): max throughput of one node of ``shape`` holding j layers under per-stage budget slo/S.

        Parameters
        ----------
        model: architecture.
        shape: node shape ``"{count}x{gpu}"``; the node runs tensor parallel over ``tp`` of its GPUs and
            ``count/tp`` data-parallel copies (the best valid split is taken for each entry).
        phase: ``"prefill"`` (prompt tokens/s under the TTFT budget), ``"decode"`` (output tokens/s
            under the TPOT budget) or ``"aggregated"`` (requests/s of continuous batching with chunked prefill,
            ``slo_ms`` = TPOT, optional ``ttft_ms``; see serving.serving_stage_table).
        slo_ms: the whole pipeline's latency SLO in ms (prefill: TTFT; decode: TPOT).
        workload: mean input/output tokens per request.
        max_stages: number of pipeline-stage counts S = 1..max_stages.
        dtype: weight dtype override (default the model's own).
        ttft_ms: TTFT SLO of the aggregated phase (ignored by the others).

        Returns
        -------
        Array (max_stages, L); entry [S-1, j-1] in tokens/s (aggregated: requests/s); 0 where the node cannot hold j layers or
        cannot meet the budget at any batch.

        Raises
        ------
        PlanningError: bad shape, phase, SLO, or FP8 on a GPU without it. UnknownIdError: unknown GPU.
        """
        key = self._table_key(model, shape, phase, slo_ms, workload, max_stages, dtype, ttft_ms)
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        table = self._compute_table(model, shape, phase, slo_ms, workload, max_stages, dtype, ttft_ms)
        self._tables.put(key, table)
        return table

    def _table_key(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, workload: Workload,
                   max_stages: int, dtype: str | None, ttft_ms: float | None) -> str:
        """Content key of one ``stage_table`` entry (everything the table depends on)."""
        count, gpu_id = parse_shape(shape)
        return TableCache.key((model, self.gpu(gpu_id), count, phase, float(slo_ms), workload, max_stages, dtype,
                               ttft_ms if phase == "aggregated" else None,
                               self.network_gbps(shape), self._calibration_fingerprint(),
                               self.profiles.fingerprint() if self.profiles is not None else None))

    def stage_tables(self, model: ModelSpec, shapes: list[str] | tuple[str, ...], phase: str, slo_ms: float,
                     workload: Workload, max_stages: int = 6, dtype: str | None = None,
                     ttft_ms: float | None = None) -> np.ndarray:
        """``stage_table`` for many shapes at once: array (len(shapes), max_stages, L), each cached in memory and the
        stack mirrored on disk when the model has a ``cache_dir``."""
        if not shapes:
            return np.zeros((0, max_stages, model.layers))
        key = ""
        if self._bundles.cache_dir is not None:
            key = TableCache.key(("stage-tables", tuple(self._table_key(model, s, phase, slo_ms, workload, max_stages,
                                                                         dtype, ttft_ms) for s in shapes)))
            hit = self._bundles.get(key)
            if hit is not None and hit.shape == (len(shapes), max_stages, model.layers):
                return hit
        stacked = np.stack([self.stage_table(model, s, phase, slo_ms, workload, max_stages, dtype, ttft_ms)
                            for s in shapes])
        if key:
            self._bundles.put(key, stacked)
            if phase == "decode":  # the decode tables just computed left their batch curves: keep the stack too
                keys = [self._curves_key(model, s, slo_ms, workload, max_stages, dtype) for s in shapes]
                fresh = [self._batch_curves.get(k) for k in keys]
                if all(f is not None for f in fresh):
                    ckey = self._stacked_curves_key(keys)
                    self._curve_files.put(ckey + "-dp", np.stack([f[1] for f in fresh if f is not None]))
                    self._curve_files.put(ckey + "-tau", np.stack([f[2] for f in fresh if f is not None]))
        return stacked

    def _compute_table(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, wl: Workload,
                       max_stages: int, dtype: str | None, ttft_ms: float | None = None) -> np.ndarray:
        if not (slo_ms > 0 and math.isfinite(slo_ms)):
            raise PlanningError("slo_ms", f"{slo_ms} is not a positive number of ms.", "give the SLO in ms, e.g. 1500.")
        if max_stages < 1:
            raise PlanningError("max_stages", f"{max_stages} < 1.", "use at least 1 stage.")
        count, dev, prec, net, arch = self._node(model, shape, dtype)
        s = self.calibration.settings
        if phase == "aggregated":
            stages = np.arange(1, max_stages + 1, dtype=float)
            tpot_budget = cycle_budget_s(s, phase, slo_ms) / stages
            best = np.zeros((max_stages, arch.layers))
            for tp in self.tp_options(model, count):
                node = self._node_engine(arch, dev, prec, tp, count // tp)
                best = np.maximum(best, serving_stage_table(node, wl, tpot_budget, ttft_ms, net, stages, s.kv_sigmas))
            return best * s.aggregated_max_load
        if phase not in PHASES:
            raise PlanningError("phase", f"unknown phase {phase!r}.", "use 'prefill', 'decode' or 'aggregated'.")
        budget, curves = self._budget_and_curves(model, shape, phase, slo_ms, wl, max_stages, dtype)
        if phase == "decode":  # the table and its batch curves in one pass (decode_batch_curves reads them later)
            best, dp, tau = table_and_batch_curves(curves, arch.full_in_window, arch.layers, budget, max_stages,
                                                   kv_extra=0.0, kv_sigmas=s.kv_sigmas)
            self._keep_curves(self._curves_key(model, shape, slo_ms, wl, max_stages, dtype),
                              (self._grid("decode", wl), dp, tau))
            return best
        return best_over_batches(curves, arch.full_in_window, arch.layers, budget, max_stages,
                                 kv_extra=0.0 if phase == "decode" else 1.0,
                                 load_cap=s.prefill_max_load if phase == "prefill" else 1.0,
                                 kv_sigmas=s.kv_sigmas if phase == "decode" else 0.0)

    def _node(self, model: ModelSpec, shape: str, dtype: str | None) -> tuple[int, Device, Precision, float, LayerArch]:
        """(GPUs, device, precision, network Gbit/s, layer sizes) of one node of ``shape`` serving ``model``."""
        count, gpu_id = parse_shape(shape)
        net, _known = self.network_gbps(shape)
        return (count, self._planning_device(gpu_id), resolve_precision(model, dtype, self.gpu(gpu_id)), net,
                self._layer_arch(model))

    def _budget_and_curves(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, wl: Workload,
                           max_stages: int, dtype: str | None) -> tuple[np.ndarray, list[Curves]]:
        """Per-stage time budgets (S,) and the batch curves of every usable tp split of a prefill/decode node."""
        count, _dev, prec, net, arch = self._node(model, shape, dtype)
        s = self.calibration.settings
        batches = self._grid(phase, wl)
        handoff = handoff_s(arch, prec, net, wl.input_len, s) if phase == "decode" else 0.0
        budget = cycle_budget_s(s, phase, slo_ms, wl.output_len, handoff) / np.arange(1, max_stages + 1, dtype=float)
        curves = [self._node_curves(model, shape, tp, phase, wl, batches, dtype) for tp in self.tp_options(model, count)]
        return budget, curves

    def _node_curves(self, model: ModelSpec, shape: str, tp: int, phase: str, wl: Workload, batches: np.ndarray,
                     dtype: str | None = None) -> Curves:
        """:meth:`_curves` of one node of ``shape`` at ``tp`` as the planner's tables read it (``_node``'s
        device), kept in memory by everything it depends on: the precheck (``planning.precheck``) asks for the very
        curves the T̂ tables then build on, once per process instead of twice (a shared, read-only value)."""
        key = (model, shape, tp, phase, wl, dtype, batches.tobytes(), self._calibration_fingerprint(),
               self.profiles.fingerprint() if self.profiles is not None else None)
        hit = self._node_memo.get(key)
        if hit is not None:
            return hit
        count, dev, prec, net, arch = self._node(model, shape, dtype)
        times = TimesMemo(self._times_memo, (model, parse_shape(shape)[1], tp, phase, wl, dtype, *key[6:]),
                          NODE_CURVES_KEPT)
        curves = self._curves(model, self._node_engine(arch, dev, prec, tp, count // tp), phase, wl, batches, net,
                              times=times)
        for value in vars(curves).values():  # shared from now on: a caller that wrote into it would raise
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        if len(self._node_memo) >= NODE_CURVES_KEPT:
            self._node_memo.pop(next(iter(self._node_memo)))  # the oldest: a long-lived process stays bounded
        self._node_memo[key] = curves
        return curves

    def _curves_key(self, model: ModelSpec, shape: str, slo_ms: float, workload: Workload, max_stages: int,
                    dtype: str | None) -> str:
        count, gpu_id = parse_shape(shape)
        return TableCache.key(("decode-batch-curves", model, self.gpu(gpu_id), count, float(slo_ms), workload,
                               max_stages, dtype, self.network_gbps(shape), self._calibration_fingerprint(),
                               self.profiles.fingerprint() if self.profiles is not None else None))

    def stacked_decode_curves(self, model: ModelSpec, shapes: Sequence[str], slo_ms: float, workload: Workload,
                              max_stages: int = 6,
                              dtype: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(batches (B,), dp (K, S, L), tau (K, S, L, B)): :meth:`decode_batch_curves` of every shape, stacked; the
        stack is mirrored on disk (dp and tau files) when the model has a ``cache_dir``."""
        batches = self._grid("decode", workload)
        key = ""
        if self._curve_files.cache_dir is not None:
            key = self._stacked_curves_key([self._curves_key(model, s, slo_ms, workload, max_stages, dtype)
                                            for s in shapes])
            dp, tau = self._curve_files.get(key + "-dp"), self._curve_files.get(key + "-tau")
            if dp is not None and tau is not None and dp.shape[0] == tau.shape[0] == len(shapes):
                return batches, dp, tau
        curves = [self.decode_batch_curves(model, s, slo_ms, workload, max_stages, dtype) for s in shapes]
        dp, tau = np.stack([c[1] for c in curves]), np.stack([c[2] for c in curves])
        if key:
            self._curve_files.put(key + "-dp", dp)
            self._curve_files.put(key + "-tau", tau)
        return batches, dp, tau

    @staticmethod
    def _stacked_curves_key(keys: Sequence[str]) -> str:
        """Content key of one group's stacked decode curves (:meth:`stacked_decode_curves`) from its shapes' keys."""
        return TableCache.key(("stacked-decode-curves", tuple(keys)))

    def _keep_curves(self, key: str, out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Remember one shape's decode batch curves (a small LRU: the oldest entry goes first)."""
        self._batch_curves.pop(key, None)
        while len(self._batch_curves) >= BATCH_CURVES_CACHE:
            self._batch_curves.pop(next(iter(self._batch_curves)))
        self._batch_curves[key] = out

    def decode_batch_curves(self, model: ModelSpec, shape: str, slo_ms: float, workload: Workload,
                            max_stages: int = 6,
                            dtype: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-batch step times behind the decode ``stage_table`` of ``shape``: (batches, dp, tau).

        ``batches`` (B,) sequences per engine copy; ``dp[S-1, j-1]`` copies in the node for the entry's tp split;
        ``tau[S-1, j-1, b]`` (float32) seconds per step of the node with ``batches[b]`` sequences per copy
        (``inf`` where that batch does not fit or misses the per-stage budget). Cached (small LRU).
        """
        key = self._curves_key(model, shape, slo_ms, workload, max_stages, dtype)
        hit = self._batch_curves.get(key)
        if hit is not None:
            return hit
        arch = self._layer_arch(model)
        budget, curves = self._budget_and_curves(model, shape, "decode", slo_ms, workload, max_stages, dtype)
        dp, tau = batch_curves(curves, arch.full_in_window, arch.layers, budget, max_stages, kv_extra=0.0,
                               kv_sigmas=self.calibration.settings.kv_sigmas)
        out = (self._grid("decode", workload), dp, tau)
        self._keep_curves(key, out)
        return out

    def stage_point(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, workload: Workload,
                    entry: tuple[int, int], dtype: str | None = None,
                    ttft_ms: float | None = None) -> StagePoint | None:
        """The operating point behind entry ``[stages - 1, layers - 1]`` of :meth:`stage_table` (``entry`` is
        ``(stages, layers)``): the node's tp split, the batch it runs, its step time and (aggregated) step token
        budget; None where the entry is 0.

        Raises
        ------
        PlanningError: bad shape, phase, SLO or entry; FP8 on a GPU without it. UnknownIdError: unknown GPU.
        """
        stages, layers = entry
        if not (stages >= 1 and 1 <= layers <= model.layers):
            raise PlanningError("stages", f"entry (S={stages}, j={layers}) is outside the {model.id} table.",
                                f"use 1 <= j <= {model.layers} layers and S >= 1.")
        count, dev, prec, net, arch = self._node(model, shape, dtype)
        s = self.calibration.settings
        if phase == "aggregated":
            st = np.arange(1, stages + 1, dtype=float)
            tpot_budget = cycle_budget_s(s, phase, slo_ms) / st
            best: StagePoint | None = None
            for tp in self.tp_options(model, count):
                vals, b, t, tokens = serving_stage_entries(self._node_engine(arch, dev, prec, tp, count // tp),
                                                           workload, tpot_budget, ttft_ms, net, st, s.kv_sigmas)
                row = vals[stages - 1, layers - 1]
                i = int(np.argmax(row))
                if row[i] > 0 and (best is None or row[i] * s.aggregated_max_load > best.throughput):
                    e = step_elasticity(b, t[stages - 1, layers - 1])[i]
                    best = StagePoint(tp, count // tp, float(b[i]), float(t[stages - 1, layers - 1, i]),
                                      int(tokens[stages - 1, layers - 1]), float(row[i] * s.aggregated_max_load),
                                      float(e))
            return best
        if phase not in PHASES:
            raise PlanningError("phase", f"unknown phase {phase!r}.", "use 'prefill', 'decode' or 'aggregated'.")
        budget, curves = self._budget_and_curves(model, shape, phase, slo_ms, workload, stages, dtype)
        hit = entry_point(curves, arch.full_in_window, arch.layers, budget, stages, layers,
                          kv_extra=0.0 if phase == "decode" else 1.0,
                          kv_sigmas=s.kv_sigmas if phase == "decode" else 0.0)
        if hit is None:
            return None
        k, batch, step, thr, e = hit
        dp = curves[k].dp
        cap = s.prefill_max_load if phase == "prefill" else 1.0
        return StagePoint(count // dp, dp, batch, step, 0, thr * cap, e)
