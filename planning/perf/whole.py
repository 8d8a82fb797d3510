"""Whole-node answers of the performance model: ``PerfModel.estimate`` (prefill time, decode step, memory, best
throughputs, provenance) and ``PerfModel.serving`` (continuous batching with chunked prefill). A mixin of
``PerfModel`` (planning/perf/model.py), which provides the lookups, devices and per-batch curves they read.

Both take the request's sizes, SLOs and engine options as keywords (``ServingOptions``, ``EstimateOptions``), which
travel on as one frozen value (``serving.ServingQuery``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

import numpy as np

from planning.catalog.schema import GPU, ModelSpec, Provenance
from planning.errors import PlanningError, quote
from planning.perf.curves import memory_breakdown
from planning.perf.engines import BenchSchedule, EngineMemory, RouterBatching
from planning.perf.results import MemoryBreakdown, PerfEstimate, ServingPoint, Workload
from planning.perf.roofline import NodeEngine, resolve_precision
from planning.perf.serving import ServingQuery, serving_point
from planning.perf.waves import bench_throughput

if TYPE_CHECKING:
    from planning.perf.bands import BandTable
    from planning.perf.calibration import Calibration
    from planning.perf.curves import Curves
    from planning.perf.roofline import Device, LayerArch

MAX_TOKENS = 16_777_216  # tokens of one request: beyond every model's context window
MAX_BATCH = 1_000_000  # requests in one estimated batch


class ServingOptions(TypedDict, total=False):
    """Keywords of :meth:`WholeNode.serving` (see there)."""

    input_len: Required[float]
    output_len: Required[float]
    ttft_ms: float | None
    tpot_ms: float | None
    concurrency: int | None
    scheduling: str
    engine_limits: tuple[int, int] | None
    memory: EngineMemory | None
    request_rate: float | None
    router: RouterBatching | None


class EstimateOptions(TypedDict, total=False):
    """Keywords of :meth:`WholeNode.estimate` (see there)."""

    input_len: Required[int]
    batch: int | None
    output_len: int | None
    ttft_ms: float | None
    tpot_ms: float | None
    scheduling: str


class WholeNode:
    """``estimate`` and ``serving`` of :class:`planning.perf.model.PerfModel` (see there)."""

    if TYPE_CHECKING:  # provided by PerfModel
        calibration: Calibration
        bands: BandTable
        engine: str

        def model(self, model_id: str) -> ModelSpec: ...
        def gpu(self, gpu_id: str) -> GPU: ...
        def device(self, gpu_id: str, engine: str | None = None) -> Device: ...
        def kernel_notes(self, model_id: str, gpu_id: str, tp: int, dtype: str | None = None,
                         engine: str | None = None) -> tuple[str, ...]: ...
        def tp_options(self, model: ModelSpec, count: int) -> list[int]: ...
        def network_gbps(self, shape: str) -> tuple[float, bool]: ...
        def _layer_arch(self, model: ModelSpec) -> LayerArch: ...
        def _curves(self, model: ModelSpec, node: NodeEngine, phase: str, wl: Workload, batches: np.ndarray,
                    net_gbps: float, memory: EngineMemory | None = None) -> Curves: ...
        @staticmethod
        def _grid(phase: str, wl: Workload) -> np.ndarray: ...

    # ----------------------------------------------------------------- estimate
    def _resolve(self, model_id: str, gpu_id: str, count: int, tp: int | None) -> tuple[ModelSpec, GPU, int]:
        spec = self.model(model_id)
        gpu = self.gpu(gpu_id)
        if count < 1:
            raise PlanningError("count", f"{count} GPUs.", "use count >= 1.")
        options = self.tp_options(spec, count)
        if tp is None:
            tp = max(options)
        elif tp not in options:
            raise PlanningError("tp", f"tp={tp} is not usable for {model_id} ({spec.num_heads} heads, "
                                f"{spec.num_kv_heads} KV heads) on {count} GPUs.", f"use one of {options}.")
        return spec, gpu, tp

    def serving(self, model_id: str, gpu_id: str, count: int = 1, tp: int | None = None, dtype: str | None = None,
                **options: Unpack[ServingOptions]) -> ServingPoint | None:
        """Peak sustainable aggregated serving of one node (continuous batching + chunked prefill).

        Parameters
        ----------
        model_id, gpu_id: catalog ids.
        count: GPUs in the node; tp: tensor-parallel degree (default as in ``estimate``); dtype: weight dtype.
        The keywords (``ServingOptions``):
        input_len, output_len: mean prompt and generated tokens per request.
        ttft_ms, tpot_ms: optional SLOs (None: the unconstrained peak that max-throughput benchmarks report).
        concurrency: evaluate a closed loop of this many clients instead of the open-loop peak.
        scheduling: ``"chunked"`` (default: chunked prefill) or ``"prefill-first"`` (engines without chunked
            prefill: prompt steps stall the decodes; see ``serving.serving_point``).
        engine_limits: the engine's ``(max_num_batched_tokens, max_num_seqs)`` (None: the calibrated settings, the
            limits ``planning export`` configures); ``engine_limits()`` gives an engine's defaults.
        memory: the engine's memory reservation (None: the planner's engine, vLLM V1 at the calibrated
            ``gpu_memory_utilization``); ``perf.engines.engine_memory()`` gives an engine's default.
        request_rate: evaluate an open loop at this many requests/s (Poisson) instead of the peak: TTFT and TPOT
            under that load (None when the node cannot sustain it).
        router: a prefill-first engine's rule for letting waiting prompts in (TGI 2's router holds them behind the
            decodes, ``engines.router_batching``; None: at the next step).

        Returns
        -------
        The operating point (output tokens/s, requests/s, batch, TTFT, TPOT, memory), or None when the model does
        not fit or no batch meets the SLOs.

        Raises
        ------
        UnknownIdError: unknown model or GPU. PlanningError: bad count, tp, dtype, lengths or concurrency.
        """
        o = _keywords(options, ServingOptions, "serving")
        input_len, output_len = o["input_len"], o["output_len"]
        concurrency, request_rate, engine_limits = o.get("concurrency"), o.get("request_rate"), o.get("engine_limits")
        node = self._serving_node(model_id, gpu_id, count, tp, dtype, engine_limits)
        wl = Workload(float(input_len), float(output_len))
        if concurrency is not None and concurrency < 1:
            raise PlanningError("concurrency", f"{concurrency} clients.", "use concurrency >= 1.")
        if request_rate is not None and concurrency is not None:
            raise PlanningError("request_rate", "both a request rate and a concurrency were given.",
                                "give one: an open loop at a rate or a closed loop of clients.")
        query = ServingQuery(o.get("ttft_ms"), o.get("tpot_ms"), concurrency, o.get("scheduling", "chunked"),
                             o.get("memory"), request_rate, o.get("router"))
        return serving_point(node, wl, query)

    def _serving_node(self, model_id: str, gpu_id: str, count: int, tp: int | None, dtype: str | None,
                      engine_limits: tuple[int, int] | None) -> NodeEngine:
        """The node ``serving`` and ``bench_throughput`` evaluate: this model's kernels, the engine's limits."""
        spec, gpu, tp = self._resolve(model_id, gpu_id, count, tp)
        prec = resolve_precision(spec, dtype, gpu)
        settings = self.calibration.settings
        if engine_limits is not None:
            tokens, seqs = engine_limits
            if tokens < 1 or seqs < 1:
                raise PlanningError("engine_limits", f"{engine_limits} has a limit below 1.",
                                    "give (max_num_batched_tokens, max_num_seqs) of at least 1 each.")
            settings = replace(settings, max_batched_tokens=float(tokens), max_num_seqs=float(seqs))
        return NodeEngine(self._layer_arch(spec), self.device(gpu_id), prec, settings, tp, count // tp)

    def bench_throughput(self, model_id: str, gpu_id: str, count: int, tp: int | None, dtype: str | None,
                         schedule: BenchSchedule, **options: Unpack[ServingOptions]) -> float | None:
        """Output tokens/s of a ``trtllm-bench`` dataset run on TensorRT-LLM's PyTorch backend (``schedule``:
        ``engines.bench_schedule``): the dataset in waves of the closed form's memory-limited batch, padded CUDA
        graphs and the overlap scheduler (``planning.perf.waves``). ``options`` as in :meth:`serving` (no SLOs,
        concurrency or rate: the run queues its whole dataset). None when the model does not fit."""
        point = self.serving(model_id, gpu_id, count, tp, dtype, **options)
        if point is None:
            return None
        node = self._serving_node(model_id, gpu_id, count, tp, dtype, options.get("engine_limits"))
        wl = Workload(float(options["input_len"]), float(options["output_len"]))
        return bench_throughput(node, wl, point.batch / node.dp, schedule)

    def estimate(self, model_id: str, gpu_id: str, count: int = 1, tp: int | None = None, dtype: str | None = None,
                 **options: Unpack[EstimateOptions]) -> PerfEstimate:
        """Whole model on one node of ``count`` x ``gpu_id``: prefill time, decode step, memory, best throughputs.

        Parameters
        ----------
        model_id, gpu_id: catalog ids.
        count: GPUs in the node.
        tp: tensor-parallel degree (default: all ``count`` GPUs when valid for the model's heads, else the
            largest valid divisor; remaining GPUs are data-parallel copies).
        dtype: weight dtype (default the model's own): bf16, fp16, fp8, mxfp4.
        The keywords (``EstimateOptions``):
        batch: requests in the batch for the prefill/decode times (default 1: single-request latency; the
            ``serving`` block gives the throughput operating point).
        input_len: prompt tokens per request.
        output_len: generated tokens per request (default 0: decode step at context ``input_len``).
        ttft_ms: prefill latency SLO for the max prefill throughput and the serving point (None: unconstrained).
        tpot_ms: per-token latency SLO for the max decode throughput and the serving point (None: unconstrained).
        scheduling: the serving point's engine scheduling, ``"chunked"`` (default) or ``"prefill-first"``.

        Returns
        -------
        PerfEstimate with a ``serving`` block. When the model does not fit, ``fits`` is False, both max
        throughputs are 0 and ``serving`` is None (times are still the roofline times of a large-enough GPU).

        Raises
        ------
        UnknownIdError: unknown model or GPU. PlanningError: bad count, tp, dtype, batch or lengths.
        """
        o = _keywords(options, EstimateOptions, "estimate")
        batch, input_len, output_len = o.get("batch"), o["input_len"], o.get("output_len")
        ttft_ms, tpot_ms = o.get("ttft_ms"), o.get("tpot_ms")
        spec, gpu, tp = self._resolve(model_id, gpu_id, count, tp)
        if batch is not None and batch < 1:
            raise PlanningError("batch", f"{batch} requests.", "use batch >= 1.")
        for name, value, top in (("batch", batch if batch is not None else 1, MAX_BATCH),
                                 ("input_len", input_len, MAX_TOKENS), ("output_len", output_len or 0, MAX_TOKENS)):
            if not (0 <= value <= top):  # before any float(): a 400-digit integer overflows it
                raise PlanningError(name, f"{quote(value)} is outside [0, {top:,}].",
                                    f"use {name} of at most {top:,}.")
        output_len = 0 if output_len is None else output_len
        wl = Workload(float(input_len), float(output_len))
        prec = resolve_precision(spec, dtype, gpu)
        dev = self.device(gpu_id)
        dp = count // tp
        arch = self._layer_arch(spec)
        s = self.calibration.settings
        node = NodeEngine(arch, dev, prec, s, tp, dp)
        serving = serving_point(node, wl, ServingQuery(ttft_ms, tpot_ms, scheduling=o.get("scheduling", "chunked")))
        if batch is None:
            batch = 1
        shape = f"{count}x{gpu_id}"
        L = arch.layers
        nf = float(arch.full_in_window[-1])
        ns = L - nf
        net, _ = self.network_gbps(shape)
        b = np.array([float(batch)])
        pre = self._curves(spec, node, "prefill", wl, b, net)
        dec = self._curves(spec, node, "decode", wl, b, net)
        prefill_s = float(nf * pre.t_full[0] + ns * pre.t_slide[0] + pre.step_s)
        decode_s = float(nf * dec.t_full[0] + ns * dec.t_slide[0] + dec.step_s)
        memory, total, cap = memory_breakdown(pre, dec, nf, ns, L, count, dp, batch)
        fits = bool(total <= cap)
        pf_thr, pf_b, pf_meas = self._best_whole(spec, node, "prefill", wl, ttft_ms, net)
        dc_thr, dc_b, dc_meas = self._best_whole(spec, node, "decode", wl, tpot_ms, net)
        if not fits:
            pf_thr, dc_thr = 0.0, 0.0
        base: Provenance = dev.cal.provenance

        def prov(measured: bool) -> Provenance:
            return "measured" if measured else base

        provenance: dict[str, Provenance] = {
            "prefill_ms": prov(bool(pre.measured[0])), "decode_step_ms": prov(bool(dec.measured[0])),
            "max_prefill_tokens_per_s": prov(pf_meas), "max_decode_tokens_per_s": prov(dc_meas),
            "serving": base, "memory": "roofline",
        }
        bands, band_source = self.bands.for_estimate(gpu, prec.name, provenance, s)
        notes = (_estimate_notes(node, gpu_id, batch, memory if not fits else None, base)
                 + self.kernel_notes(model_id, gpu_id, tp, dtype))
        return PerfEstimate(
            model_id=model_id, gpu_id=gpu_id, count=count, tp=tp, dtype=prec.name, batch=batch,
            input_len=input_len, output_len=output_len, prefill_ms=prefill_s * 1e3, decode_step_ms=decode_s * 1e3,
            fits=fits, memory=memory, max_prefill_tokens_per_s=pf_thr, best_prefill_batch=pf_b,
            max_decode_tokens_per_s=dc_thr, best_decode_batch=dc_b, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
            provenance=provenance, band=bands, notes=notes, serving=serving, band_source=band_source,
            engine=self.engine,
        )

    def _best_whole(self, spec: ModelSpec, node: NodeEngine, phase: str, wl: Workload, slo_ms: float | None,
                    net: float) -> tuple[float, int, bool]:
        """Best throughput of the whole model on the node (S = 1) over the batch grid, within memory and SLO."""
        arch = self._layer_arch(spec)
        batches = self._grid(phase, wl)
        c = self._curves(spec, node, phase, wl, batches, net)
        dp = node.dp
        L = arch.layers
        nf = float(arch.full_in_window[-1])
        t = nf * c.t_full + (L - nf) * c.t_slide + c.step_s
        mem = L * c.w_layer + nf * c.kv_full + (L - nf) * c.kv_slide + c.mem_fixed
        s = self.calibration.settings
        headroom = s.prefill_headroom if phase == "prefill" else s.decode_headroom
        budget = math.inf if slo_ms is None else slo_ms * 1e-3 / headroom
        ok = (t <= budget) & (mem <= c.capacity)
        if not ok.any():
            return 0.0, 0, False
        thr = np.where(ok, c.tokens / t, 0.0)
        i = int(np.argmax(thr))
        return float(thr[i] * dp), int(batches[i]), bool(c.measured[i])


def _estimate_notes(node: NodeEngine, gpu_id: str, batch: int, unfit: MemoryBreakdown | None,
                    base: Provenance) -> tuple[str, ...]:
    """``PerfEstimate.notes``: data-parallel copies, a batch that does not fit (``unfit``: its memory), no
    calibration data."""
    notes = []
    if node.dp > 1:
        notes.append(f"{node.dp} data-parallel copies of tp={node.tp} inside the node; times are per copy.")
    if unfit is not None:
        notes.append(f"batch {batch} does not fit: needs {unfit.total_gb:.1f} GB of {unfit.capacity_gb:.1f} GB.")
    if base == "roofline":
        notes.append(f"{gpu_id} has no calibration data: generation prior, wider band.")
    return tuple(notes)


def _keywords(options: ServingOptions | EstimateOptions, spec: type, method: str) -> dict[str, Any]:
    """``options`` checked as a call with named keywords would be: a missing required or an unknown keyword is a
    TypeError naming it (the keywords are typed by ``spec``, a TypedDict, for the type checker)."""
    missing = sorted(spec.__required_keys__ - options.keys())  # type: ignore[attr-defined]
    unknown = sorted(options.keys() - spec.__required_keys__ - spec.__optional_keys__)  # type: ignore[attr-defined]
    if missing:
        raise TypeError(f"PerfModel.{method}() missing required keyword argument(s): {', '.join(missing)}")
    if unknown:
        raise TypeError(f"PerfModel.{method}() got unexpected keyword argument(s): {', '.join(unknown)}")
    return dict(options)
