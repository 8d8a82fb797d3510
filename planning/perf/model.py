"""PerfModel: T̂_j(g) stage tables for the solvers and single-node estimates, with provenance and bands."""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from planning.catalog.schema import GPU, ModelSpec, Provenance, parse_shape
from planning.errors import PlanningError, UnknownIdError
from planning.perf.calibration import Calibration, GpuCalibration, load_calibration
from planning.perf.roofline import (
    ACT_BYTES,
    Device,
    LayerArch,
    Precision,
    layer_time,
    resolve_precision,
    valid_tp,
)

if TYPE_CHECKING:
    from planning.catalog.schema import Catalog
    from planning.perf.profiles import ProfileSet

Phase = Literal["prefill", "decode"]
PHASES: tuple[str, ...] = ("prefill", "decode")

# Batch sizes tried (requests per step): powers of two and the half-steps between them.
_GRID = sorted({round(2 ** (k / 2)) for k in range(0, 25)})  # 1 .. 4096
PREFILL_MAX_TOKENS = 65536  # a prefill batch larger than this gains nothing and no engine schedules it
DECODE_MAX_BATCH = 4096


@dataclass(frozen=True)
class Workload:
    """Mean tokens per request: prompt (input) and generated (output)."""

    input_len: float
    output_len: float

    def __post_init__(self) -> None:
        if not (self.input_len >= 1 and math.isfinite(self.input_len)):
            raise PlanningError("workload.input_len", f"{self.input_len} is not >= 1 token.", "use a mean prompt length >= 1.")
        if not (self.output_len >= 0 and math.isfinite(self.output_len)):
            raise PlanningError("workload.output_len", f"{self.output_len} is negative.", "use a mean output length >= 0.")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of one node (all its GPUs) in GB for the whole model at the asked batch."""

    weights_gb: float
    kv_cache_gb: float
    activations_gb: float
    reserve_gb: float
    total_gb: float
    capacity_gb: float
    max_decode_batch: int  # largest decode batch whose KV cache fits (input+output tokens per sequence)


@dataclass(frozen=True)
class PerfEstimate:
    """What one node does with the whole model: times, memory fit, best throughputs, provenance, band."""

    model_id: str
    gpu_id: str
    count: int
    tp: int
    dtype: str
    batch: int
    input_len: int
    output_len: int
    prefill_ms: float
    decode_step_ms: float
    fits: bool
    memory: MemoryBreakdown
    max_prefill_tokens_per_s: float
    best_prefill_batch: int
    max_decode_tokens_per_s: float
    best_decode_batch: int
    ttft_ms: float | None
    tpot_ms: float | None
    provenance: dict[str, Provenance]
    band: dict[str, float]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (used by ``planning perf --json``)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "memory"}
        out["memory"] = {k: getattr(self.memory, k) for k in self.memory.__dataclass_fields__}
        out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True)
class _Curves:
    """Per-batch quantities of one node option (tp, dp) for one phase; arrays over the batch grid."""

    batches: np.ndarray
    tokens: np.ndarray  # throughput numerator per step (prompt tokens or output tokens)
    t_full: np.ndarray  # seconds per full-attention layer
    t_slide: np.ndarray  # seconds per sliding-window layer
    step_s: float  # fixed engine overhead per step
    transfer_s: np.ndarray  # activation send to the next stage
    w_layer: float  # weight bytes per layer per GPU
    kv_full: np.ndarray  # KV bytes per full layer per GPU
    kv_slide: np.ndarray
    mem_fixed: np.ndarray  # activations + reserve per GPU
    capacity: float  # bytes per GPU
    dp: int
    measured: np.ndarray  # bool: a measured profile covers this batch


def _load_catalog() -> Catalog:
    """The shipped catalog (imported lazily: the catalog area reads data files)."""
    from planning.catalog import load_catalog

    return load_catalog()


class PerfModel:
    """Roofline + calibration performance model over a catalog (see docs/perf-model.md)."""

    def __init__(self, catalog: Catalog | None = None, calibration: Calibration | None = None,
                 profiles: ProfileSet | None = None, cache_dir: Path | None = None, cache_size: int = 2048) -> None:
        if catalog is None:
            catalog = _load_catalog()
        self.catalog = catalog
        self.calibration = calibration if calibration is not None else load_calibration()
        self.profiles = profiles
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._arch: dict[ModelSpec, LayerArch] = {}

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

    def device(self, gpu_id: str) -> Device:
        gpu = self.gpu(gpu_id)
        return Device.from_specs(gpu, self.calibration.for_gpu(gpu))

    def gpu_calibration(self, gpu_id: str) -> GpuCalibration:
        return self.calibration.for_gpu(self.gpu(gpu_id))

    def network_gbps(self, shape: str) -> tuple[float, bool]:
        """Slowest published network (Gbit/s) among configs of ``shape``; (default, False) when none publishes."""
        known = [c.network_gbps for c in self.catalog.configs.values() if c.shape == shape and c.network_gbps]
        if known:
            return float(min(known)), True
        return self.calibration.settings.network_gbps, False

    def _layer_arch(self, model: ModelSpec) -> LayerArch:
        if model not in self._arch:
            self._arch[model] = LayerArch.from_spec(model)
        return self._arch[model]

    def fingerprint(self) -> str:
        """Hash of the calibration, the catalog GPU/model specs and the profiles (cache invalidation key)."""
        parts = [self.calibration.fingerprint(), repr(sorted(self.catalog.gpus.items())),
                 repr(sorted(self.catalog.models.items())),
                 self.profiles.fingerprint() if self.profiles is not None else "no-profiles"]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]

    # ----------------------------------------------------------------- node curves
    def tp_options(self, model: ModelSpec, count: int) -> list[int]:
        """Tensor-parallel degrees usable on a node of ``count`` GPUs (the rest of the GPUs are data parallel)."""
        arch = self._layer_arch(model)
        return [tp for tp in range(1, count + 1) if count % tp == 0 and valid_tp(arch, tp)]

    def _curves(self, model: ModelSpec, dev: Device, prec: Precision, tp: int, dp: int, phase: str,
                wl: Workload, batches: np.ndarray, net_gbps: float, shape: str) -> _Curves:
        arch = self._layer_arch(model)
        s = self.calibration.settings
        inp, out = float(wl.input_len), float(wl.output_len)
        if phase == "prefill":
            q_len, context, tokens = inp, 0.0, batches * inp
            kv_tokens = inp
            act_tokens = batches * inp
        elif phase == "decode":
            q_len, context, tokens = 1.0, inp + out / 2.0, batches.astype(float)
            kv_tokens = inp + out  # a sequence holds its KV until its last token
            act_tokens = batches.astype(float)
        else:
            raise PlanningError("phase", f"unknown phase {phase!r}.", "use 'prefill' or 'decode'.")
        t_full = layer_time(dev, arch, prec, tp, batches, q_len, context, False, phase)
        t_slide = layer_time(dev, arch, prec, tp, batches, q_len, context, True, phase) if arch.window else t_full
        measured = np.zeros(batches.shape, dtype=bool)
        if self.profiles is not None:
            factor, measured = self.profiles.correction(self, model, dev.gpu_id, tp * dp, tp, phase, wl, batches)
            t_full, t_slide = t_full * factor, t_slide * factor
        # Pipeline hop: the hidden state of every token of the step goes to the next node.
        transfer = s.network_latency_ms * 1e-3 + act_tokens * arch.hidden * ACT_BYTES / (net_gbps * 1e9 / 8)
        kv_tok = arch.kv_bytes_per_token(tp)
        kv_full = batches * kv_tokens * kv_tok
        kv_slide = batches * min(kv_tokens, arch.window or kv_tokens) * kv_tok
        inter_act = (arch.active * arch.moe_inter if arch.is_moe else arch.inter) / tp
        act = act_tokens * s.activation_factor * (arch.hidden + inter_act) * ACT_BYTES
        capacity = dev.memory_gb * 1e9
        reserve = s.mem_reserve_frac * capacity + s.mem_reserve_gb * 1e9
        return _Curves(
            batches=batches, tokens=np.asarray(tokens, dtype=float), t_full=t_full, t_slide=t_slide,
            step_s=dev.cal.step_ms * 1e-3, transfer_s=np.asarray(transfer, dtype=float),
            w_layer=arch.weight_bytes_per_layer(prec) / tp, kv_full=kv_full, kv_slide=kv_slide,
            mem_fixed=act + reserve, capacity=capacity, dp=dp, measured=measured,
        )

    @staticmethod
    def _grid(phase: str, wl: Workload) -> np.ndarray:
        g = np.array(_GRID, dtype=float)
        if phase == "prefill":
            keep = g * wl.input_len <= max(PREFILL_MAX_TOKENS, wl.input_len)
            return g[keep]
        return g[g <= DECODE_MAX_BATCH]

    # ----------------------------------------------------------------- T̂ tables
    def stage_table(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, workload: Workload,
                    max_stages: int = 6, dtype: str | None = None) -> np.ndarray:
        """T̂_j(g): max throughput of one node of ``shape`` holding j layers under per-stage budget slo/S.

        Parameters
        ----------
        model: architecture.
        shape: node shape ``"{count}x{gpu}"``; the node runs tensor parallel over ``tp`` of its GPUs and
            ``count/tp`` data-parallel copies (the best valid split is taken for each entry).
        phase: ``"prefill"`` (prompt tokens/s under the TTFT budget) or ``"decode"`` (output tokens/s
            under the TPOT budget).
        slo_ms: the whole pipeline's latency SLO in ms (prefill: TTFT; decode: TPOT).
        workload: mean input/output tokens per request.
        max_stages: number of pipeline-stage counts S = 1..max_stages.
        dtype: weight dtype override (default the model's own).

        Returns
        -------
        Array (max_stages, L); entry [S-1, j-1] in tokens/s; 0 where the node cannot hold j layers or
        cannot meet the budget at any batch.

        Raises
        ------
        PlanningError: bad shape, phase, SLO, or FP8 on a GPU without it. UnknownIdError: unknown GPU.
        """
        key = self._key(model, shape, phase, slo_ms, workload, max_stages, dtype)
        hit = self._cache_get(key)
        if hit is not None:
            return hit
        table = self._compute_table(model, shape, phase, slo_ms, workload, max_stages, dtype)
        self._cache_put(key, table)
        return table

    def stage_tables(self, model: ModelSpec, shapes: list[str] | tuple[str, ...], phase: str, slo_ms: float,
                     workload: Workload, max_stages: int = 6, dtype: str | None = None) -> np.ndarray:
        """``stage_table`` for many shapes at once: array (len(shapes), max_stages, L), each cached."""
        tables = [self.stage_table(model, s, phase, slo_ms, workload, max_stages, dtype) for s in shapes]
        if not tables:
            return np.zeros((0, max_stages, model.layers))
        return np.stack(tables)

    def _compute_table(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, wl: Workload,
                       max_stages: int, dtype: str | None) -> np.ndarray:
        if not (slo_ms > 0 and math.isfinite(slo_ms)):
            raise PlanningError("slo_ms", f"{slo_ms} is not a positive number of ms.", "give the SLO in ms, e.g. 1500.")
        if max_stages < 1:
            raise PlanningError("max_stages", f"{max_stages} < 1.", "use at least 1 stage.")
        count, gpu_id = parse_shape(shape)
        gpu = self.gpu(gpu_id)
        dev = self.device(gpu_id)
        prec = resolve_precision(model, dtype, gpu)
        net, _known = self.network_gbps(shape)
        arch = self._layer_arch(model)
        batches = self._grid(phase, wl)
        headroom = self.calibration.settings.prefill_headroom if phase == "prefill" else \
            self.calibration.settings.decode_headroom
        stages = np.arange(1, max_stages + 1, dtype=float)
        budget = (slo_ms * 1e-3 / stages) / headroom  # (S,)
        j = np.arange(1, arch.layers + 1, dtype=float)
        nf = arch.full_in_window  # (L,)
        ns = j - nf
        best = np.zeros((max_stages, arch.layers))
        for tp in self.tp_options(model, count):
            c = self._curves(model, dev, prec, tp, count // tp, phase, wl, batches, net, shape)
            run = nf[:, None] * c.t_full[None, :] + ns[:, None] * c.t_slide[None, :] + c.step_s  # (L, B)
            mem = (j[:, None] * c.w_layer + nf[:, None] * c.kv_full[None, :] + ns[:, None] * c.kv_slide[None, :]
                   + c.mem_fixed[None, :])
            fits = mem <= c.capacity  # (L, B)
            # Stage time: run + send activations to the next stage (none when S = 1).
            send = np.where(stages[:, None] > 1, c.transfer_s[None, :], 0.0)  # (S, B)
            t = run[None, :, :] + send[:, None, :]  # (S, L, B)
            ok = (t <= budget[:, None, None]) & fits[None, :, :]
            thr = np.where(ok, c.tokens[None, None, :] / t, 0.0).max(axis=2) * c.dp
            best = np.maximum(best, thr)
        return best

    # ----------------------------------------------------------------- caching
    def _key(self, model: ModelSpec, shape: str, phase: str, slo_ms: float, wl: Workload, max_stages: int,
             dtype: str | None) -> str:
        count, gpu_id = parse_shape(shape)
        gpu = self.gpu(gpu_id)
        net = self.network_gbps(shape)
        text = repr((model, gpu, count, phase, float(slo_ms), wl, max_stages, dtype, net,
                     self.calibration.fingerprint(),
                     self.profiles.fingerprint() if self.profiles is not None else None))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _cache_get(self, key: str) -> np.ndarray | None:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if self.cache_dir is not None:
            path = self.cache_dir / f"T_{key}.npy"
            if path.exists():
                table = np.load(path)
                self._cache_put(key, table, write=False)
                return table
        return None

    def _cache_put(self, key: str, table: np.ndarray, write: bool = True) -> None:
        table.setflags(write=False)
        self._cache[key] = table
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        if write and self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_dir / f"T_{key}.tmp.npy"
            np.save(tmp, table)
            tmp.replace(self.cache_dir / f"T_{key}.npy")

    # ----------------------------------------------------------------- estimate
    def estimate(self, model_id: str, gpu_id: str, count: int = 1, tp: int | None = None, dtype: str | None = None,
                 *, batch: int, input_len: int, output_len: int | None = None, ttft_ms: float | None = None,
                 tpot_ms: float | None = None) -> PerfEstimate:
        """Whole model on one node of ``count`` x ``gpu_id``: prefill time, decode step, memory, best throughputs.

        Parameters
        ----------
        model_id, gpu_id: catalog ids.
        count: GPUs in the node.
        tp: tensor-parallel degree (default: all ``count`` GPUs when valid for the model's heads, else the
            largest valid divisor; remaining GPUs are data-parallel copies).
        dtype: weight dtype (default the model's own): bf16, fp16, fp8, mxfp4.
        batch: requests in the batch.
        input_len: prompt tokens per request.
        output_len: generated tokens per request (default 0: decode step at context ``input_len``).
        ttft_ms: prefill latency SLO for the max prefill throughput (None: unconstrained).
        tpot_ms: per-token latency SLO for the max decode throughput (None: unconstrained).

        Returns
        -------
        PerfEstimate. When the model does not fit, ``fits`` is False and both max throughputs are 0
        (times are still the roofline times of a hypothetical large-enough GPU).

        Raises
        ------
        UnknownIdError: unknown model or GPU. PlanningError: bad count, tp, dtype, batch or lengths.
        """
        spec = self.model(model_id)
        gpu = self.gpu(gpu_id)
        if count < 1:
            raise PlanningError("count", f"{count} GPUs.", "use count >= 1.")
        if batch < 1:
            raise PlanningError("batch", f"{batch} requests.", "use batch >= 1.")
        output_len = 0 if output_len is None else output_len
        wl = Workload(float(input_len), float(output_len))
        options = self.tp_options(spec, count)
        if tp is None:
            tp = max(options)
        elif tp not in options:
            raise PlanningError("tp", f"tp={tp} is not usable for {model_id} ({spec.num_heads} heads, "
                                f"{spec.num_kv_heads} KV heads) on {count} GPUs.", f"use one of {options}.")
        prec = resolve_precision(spec, dtype, gpu)
        dev = self.device(gpu_id)
        shape = f"{count}x{gpu_id}"
        arch = self._layer_arch(spec)
        L = arch.layers
        nf = float(arch.full_in_window[-1])
        ns = L - nf
        dp = count // tp
        net, _ = self.network_gbps(shape)
        b = np.array([float(batch)])
        pre = self._curves(spec, dev, prec, tp, dp, "prefill", wl, b, net, shape)
        dec = self._curves(spec, dev, prec, tp, dp, "decode", wl, b, net, shape)
        prefill_s = float(nf * pre.t_full[0] + ns * pre.t_slide[0] + pre.step_s)
        decode_s = float(nf * dec.t_full[0] + ns * dec.t_slide[0] + dec.step_s)
        # Memory at this batch: weights + KV for batch x (input+output) + activations of the prefill step.
        weights = L * dec.w_layer
        kv = nf * dec.kv_full[0] + ns * dec.kv_slide[0]
        s = self.calibration.settings
        cap = dev.memory_gb * 1e9
        reserve = s.mem_reserve_frac * cap + s.mem_reserve_gb * 1e9
        act = float(pre.mem_fixed[0]) - reserve
        total = weights + kv + act + reserve
        fits = bool(total <= cap)
        per_seq_kv = (nf * dec.kv_full[0] + ns * dec.kv_slide[0]) / batch
        free = cap - reserve - weights
        max_dec_batch = int(max(0.0, free // per_seq_kv)) if per_seq_kv > 0 else 0
        gpus_per_copy = tp
        memory = MemoryBreakdown(
            weights_gb=weights * gpus_per_copy * dp / 1e9, kv_cache_gb=kv * gpus_per_copy * dp / 1e9,
            activations_gb=act * gpus_per_copy * dp / 1e9, reserve_gb=reserve * count / 1e9,
            total_gb=total * count / 1e9, capacity_gb=cap * count / 1e9, max_decode_batch=max_dec_batch * dp,
        )
        pf_thr, pf_b, pf_meas = self._best_whole(spec, dev, prec, tp, dp, "prefill", wl, ttft_ms, net, shape)
        dc_thr, dc_b, dc_meas = self._best_whole(spec, dev, prec, tp, dp, "decode", wl, tpot_ms, net, shape)
        if not fits:
            pf_thr, dc_thr = 0.0, 0.0
        cal = dev.cal
        base: Provenance = cal.provenance

        def prov(measured: bool) -> Provenance:
            return "measured" if measured else base

        def band(p: Provenance, phase_band: float) -> float:
            if p == "measured":
                return s.band_measured
            return phase_band if p == "calibrated" else s.band_roofline

        provenance: dict[str, Provenance] = {
            "prefill_ms": prov(bool(pre.measured[0])), "decode_step_ms": prov(bool(dec.measured[0])),
            "max_prefill_tokens_per_s": prov(pf_meas), "max_decode_tokens_per_s": prov(dc_meas),
            "memory": "roofline",
        }
        bands = {
            "prefill_ms": band(provenance["prefill_ms"], cal.band_prefill),
            "decode_step_ms": band(provenance["decode_step_ms"], cal.band_decode),
            "max_prefill_tokens_per_s": band(provenance["max_prefill_tokens_per_s"], cal.band_prefill),
            "max_decode_tokens_per_s": band(provenance["max_decode_tokens_per_s"], cal.band_decode),
        }
        notes = []
        if dp > 1:
            notes.append(f"{dp} data-parallel copies of tp={tp} inside the node; times are per copy.")
        if not fits:
            notes.append(f"does not fit: needs {total * count / 1e9:.1f} GB of {cap * count / 1e9:.1f} GB.")
        if cal.provenance == "roofline":
            notes.append(f"{gpu_id} has no calibration data: generation prior, wider band.")
        return PerfEstimate(
            model_id=model_id, gpu_id=gpu_id, count=count, tp=tp, dtype=prec.name, batch=batch,
            input_len=input_len, output_len=output_len, prefill_ms=prefill_s * 1e3, decode_step_ms=decode_s * 1e3,
            fits=fits, memory=memory, max_prefill_tokens_per_s=pf_thr, best_prefill_batch=pf_b,
            max_decode_tokens_per_s=dc_thr, best_decode_batch=dc_b, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
            provenance=provenance, band=bands, notes=tuple(notes),
        )

    def _best_whole(self, spec: ModelSpec, dev: Device, prec: Precision, tp: int, dp: int, phase: str,
                    wl: Workload, slo_ms: float | None, net: float, shape: str) -> tuple[float, int, bool]:
        """Best throughput of the whole model on the node (S = 1) over the batch grid, within memory and SLO."""
        arch = self._layer_arch(spec)
        batches = self._grid(phase, wl)
        c = self._curves(spec, dev, prec, tp, dp, phase, wl, batches, net, shape)
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
