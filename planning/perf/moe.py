"""MoE expert layers from measured fused grouped-GEMM kernels (data/moe_kernels.csv), per GPU, engine and dtype.

One MoE layer's expert work (routing permutation, the two grouped GEMMs and the activation, on one GPU of a
tensor-parallel group) is read from the measured table of the GPU and engine, interpolated log-log over the tokens
entering the layer. The table's routing is skewed (a power law, as real routers are), so the tokens each expert sees
follow batch, top-k and skew as measured: a small decode batch touches most experts' weights (memory-bound), a
large one is compute-bound. A layer shape, tensor-parallel degree, dtype or GPU the table lacks is scaled from the
nearest measured one by the ratio of the two roofline costs (``expert_roofline``: FLOPs of the active experts,
bytes of the experts touched), and the estimate's provenance says so (``MoeChoice.describe``).
docs/perf-model.md Sec. 1b.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planning.errors import PlanningError
from planning.perf.datafile import read_table
from planning.perf.roofline import (
    ACT_BYTES,
    Device,
    LayerArch,
    Precision,
    moe_input_quant_time,
    moe_roofline_time,
    roof,
)

DEFAULT_MOE_PATH = Path(__file__).resolve().parents[2] / "data" / "moe_kernels.csv"
PLANNER_ENGINE = "vllm"
COLUMNS = ("gpu", "engine", "dtype", "hidden", "inter", "topk", "experts", "tp", "tokens", "latency_ms", "source")
MAX_FILE_BYTES = 5_000_000

Shape = tuple[int, int, int, int]  # hidden, expert intermediate, top-k, experts


@dataclass(frozen=True)
class MoeCurve:
    """One measured curve: latency over tokens of one (GPU, engine, dtype, shape, tp)."""

    gpu: str
    engine: str
    dtype: str
    shape: Shape
    tp: int
    log_tokens: np.ndarray
    log_s: np.ndarray
    source: str

    def seconds(self, tokens: np.ndarray) -> np.ndarray:
        """Log-log interpolation; beyond the largest measured count, linear in tokens (compute-bound)."""
        t = np.maximum(np.asarray(tokens, dtype=float), 1.0)
        x = np.log(t)
        inside = np.exp(np.interp(x, self.log_tokens, self.log_s))
        top_t, top_s = float(np.exp(self.log_tokens[-1])), float(np.exp(self.log_s[-1]))
        return np.where(t > top_t, top_s * t / top_t, inside)


def expert_roofline(dev: Device, shape: Shape, tp: int, expert_bytes: float, compute: str,
                    tokens: np.ndarray) -> np.ndarray:
    """Roofline seconds of one MoE layer's experts (the scaling basis between measured and wanted settings).

    FLOPs of the ``top-k`` experts each token runs, weights of the distinct experts a batch of ``tokens`` routes
    to under uniform routing (E(1-(1-k/E)^N)), activations in and out, two kernel latencies; FP8 adds the input
    quantization. Split over ``tp`` GPUs (each holds 1/tp of every expert's intermediate dimension)."""
    h, inter, k, e = (float(v) for v in shape)
    t = np.asarray(tokens, dtype=float)
    params = 3.0 * h * inter
    touched = e * (1.0 - np.power(1.0 - k / e, t))
    flops = 2.0 * t * k * params / tp
    nbytes = touched * params * expert_bytes / tp + t * k * (2.0 * h + 3.0 * inter / tp) * ACT_BYTES
    out = 2.0 * dev.cal.kernel_us * 1e-6 + roof(dev, flops, nbytes, compute)
    if compute == "fp8":
        out = out + moe_input_quant_time(dev, t, h, k)
    return np.asarray(out, dtype=float)


def _dtype_key(p: Precision) -> str:
    return "bf16" if p.name == "fp16" else p.name


@dataclass(frozen=True)
class MoeChoice:
    """The measured curve a wanted setting reads, and on which device it was measured."""

    curve: MoeCurve
    ref: Device
    scaled: tuple[str, ...]  # physical differences from the wanted setting (empty: measured as is)
    engine: str  # the engine asked for (the curve's own engine when it was measured under it)

    def describe(self) -> str:
        c = self.curve
        what = (f"{c.engine} fused-MoE kernel measured on {c.gpu} {c.dtype} (hidden {c.shape[0]}, expert inter "
                f"{c.shape[1]}, top-{c.shape[2]} of {c.shape[3]}, TP {c.tp}; {c.source})")
        if c.engine != self.engine:
            what += f" in place of {self.engine}'s (none measured on {c.gpu})"
        if not self.scaled:
            return f"MoE experts: {what}, interpolated over tokens."
        return f"MoE experts: {what}, scaled by the roofline ratio for {', '.join(self.scaled)}."


class MoeKernels:
    """The measured MoE curves, indexed by (GPU, engine, dtype)."""

    def __init__(self, curves: list[MoeCurve], fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self._by_table: dict[tuple[str, str, str], list[MoeCurve]] = {}
        for c in curves:
            self._by_table.setdefault((c.gpu, c.engine, c.dtype), []).append(c)

    @property
    def gpus(self) -> list[str]:
        return sorted({g for g, _, _ in self._by_table})

    def has(self, gpu: str, engine: str) -> bool:
        return any(g == gpu and e == engine for g, e, _ in self._by_table)

    def choose(self, dev: Device, engine: str, shape: Shape, tp: int, p: Precision,
               refs: dict[str, Device]) -> MoeChoice | None:
        """The nearest measured curve: same GPU if measured (else the measured GPU nearest in bandwidth and
        compute, ``refs``), the engine if measured there (else the planner's, vLLM), the dtype if measured (else
        BF16), then the nearest shape and tensor-parallel degree in log space. None when nothing is measured.

        An FP8 setting under an engine whose own kernels are not measured on the GPU reads the planner's BF16
        kernel, scaled to FP8 by the roofline (the GPU's dense FP8 and BF16 GEMM efficiencies): vLLM's FP8 MoE
        kernels are vLLM's own (on Hopper its block-scaled Triton path runs 1.0-1.3x as fast as its BF16 kernel at
        2k-16k tokens, its per-tensor FlashInfer path slower than BF16, where the FP8 peak is 2x), a property of
        that engine, not of the GPU, while the grouped-GEMM shape, permutation and routing skew of its BF16 kernel
        are the layer's (docs/perf-model.md Sec. 1b)."""
        scaled: list[str] = []
        gpu = dev.gpu_id
        if gpu not in refs or not any(g == gpu for g, _, _ in self._by_table):
            if not refs:
                return None
            gpu = min(refs, key=lambda g: abs(np.log(refs[g].bw / dev.bw)) + abs(np.log(refs[g].bf16_flops
                                                                                       / dev.bf16_flops)))
            scaled.append(f"the GPU ({dev.gpu_id})")
        eng = engine if self.has(gpu, engine) else PLANNER_ENGINE
        dtype = _dtype_key(p)
        if eng != engine and dtype == "fp8" and (gpu, eng, "bf16") in self._by_table:
            scaled.append(f"the dtype (fp8; {eng}'s FP8 MoE kernels are its own)")
            dtype = "bf16"
        if (gpu, eng, dtype) not in self._by_table:
            if (gpu, eng, "bf16") not in self._by_table:
                return None
            scaled.append(f"the dtype ({dtype})")
            dtype = "bf16"
        curves = self._by_table[(gpu, eng, dtype)]
        want = np.log(np.asarray(shape, dtype=float))

        def distance(c: MoeCurve) -> tuple[float, float]:
            return float(((np.log(np.asarray(c.shape, dtype=float)) - want) ** 2).sum()), abs(np.log(c.tp / tp))

        best = min(curves, key=distance)
        if best.shape != shape:
            scaled.append("the layer shape")
        if best.tp != tp:
            scaled.append(f"TP {tp}")
        return MoeChoice(best, refs[gpu], tuple(scaled), engine)


def scaled_curve(choice: MoeChoice, dev: Device, arch: LayerArch, p: Precision, tp: int) -> MoeCurve:
    """The chosen curve restated for the wanted setting: each measured point times the roofline ratio (wanted /
    measured setting) at its token count, then made non-decreasing in tokens (a step with more tokens never takes
    less time: the measured noise and the ratio are not allowed to break the tables' monotonicity)."""
    c = choice.curve
    tokens = np.exp(c.log_tokens)
    secs = np.exp(c.log_s)
    if choice.scaled:
        shape = (arch.hidden, arch.moe_inter, arch.active, arch.experts)
        ref_bytes = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8.0}[c.dtype]
        ref_compute = "fp8" if c.dtype == "fp8" else "bf16"
        want = expert_roofline(dev, shape, tp, p.expert_bytes, p.expert_compute, tokens)
        base = expert_roofline(choice.ref, c.shape, c.tp, ref_bytes, ref_compute, tokens)
        secs = secs * want / base
    secs = np.maximum.accumulate(secs)
    return MoeCurve(dev.gpu_id, c.engine, p.name, (arch.hidden, arch.moe_inter, arch.active, arch.experts), tp,
                    c.log_tokens, np.log(secs), c.source)


_CACHE: dict[str, MoeKernels] = {}


def load_moe_kernels(path: Path | None = None) -> MoeKernels:
    """Read data/moe_kernels.csv (written by ``make calibrate``, tools/calibrate_kernels.py); cached per path.

    Raises
    ------
    PlanningError: missing file or column, a non-numeric or non-positive value (naming row and column).
    """
    path = Path(path) if path is not None else DEFAULT_MOE_PATH
    key = str(path.resolve())
    if key in _CACHE:
        return _CACHE[key]
    text, rows = read_table(path, field="moe_kernels", what="MoE kernel table", columns=COLUMNS,
                            max_bytes=MAX_FILE_BYTES, fix="run make calibrate (tools/calibrate_kernels.py).")
    points: dict[tuple[str, str, str, Shape, int], list[tuple[float, float]]] = {}
    sources: dict[tuple[str, str, str, Shape, int], str] = {}
    for row_no, row in enumerate(rows, start=2):
        try:
            ints = tuple(int(row[c]) for c in ("hidden", "inter", "topk", "experts", "tp", "tokens"))
            ms = float(row["latency_ms"])
        except ValueError:
            raise PlanningError(f"{path.name}:{row_no}", "has a non-numeric size or latency.",
                                "write integers for sizes and tokens, a decimal for latency_ms.") from None
        if min(ints) < 1 or not ms > 0:
            raise PlanningError(f"{path.name}:{row_no}", "has a size, token count or latency below 1 / 0.",
                                "sizes and tokens are >= 1 and latency_ms > 0.")
        shape: Shape = (ints[0], ints[1], ints[2], ints[3])
        k = (row["gpu"], row["engine"], row["dtype"], shape, ints[4])
        points.setdefault(k, []).append((float(ints[5]), ms * 1e-3))
        sources[k] = row["source"]
    curves = []
    for k, pts in sorted(points.items(), key=lambda kv: str(kv[0])):
        pts.sort()
        tok = np.log(np.array([t for t, _ in pts]))
        sec = np.log(np.array([s for _, s in pts]))
        curves.append(MoeCurve(k[0], k[1], k[2], k[3], k[4], tok, sec, sources[k]))
    kernels = MoeKernels(curves, hashlib.sha256(text.encode()).hexdigest()[:16])
    _CACHE[key] = kernels
    return kernels


class MoeBinding:
    """The MoE kernels one device reads under one engine: picks (and remembers) the curve per layer setting.

    ``sigmas`` > 0 (the planner's tables): a batch of n tokens is charged at n + sigmas·√(n·s), s the running count's
    variance over its mean (``curves.fluctuation_spread``; 1 unless :meth:`with_spread` gives it per batch). A decode
    engine's running batch fluctuates by √(n·s) around the planned n, the KV room of ``tables.kv_room`` and the
    engine's admission cap (``templates.engine_plan``) hold it, and measured fused-MoE kernels step up at their
    tile-configuration boundaries (vLLM 0.14 on A100: +39 % from 128 to 160 tokens for Qwen3-235B's shape), so a
    batch planned just below a step runs above it much of the time. The simulator and whole-node estimates read the
    kernel as it runs (``sigmas`` = 0, :meth:`running`)."""

    def __init__(self, kernels: MoeKernels, engine: str, refs: dict[str, Device], sigmas: float = 0.0) -> None:
        self.kernels = kernels
        self.engine = engine
        self.refs = refs
        self.sigmas = sigmas
        self._spread: tuple[np.ndarray, np.ndarray] | None = None
        self._choices: dict[tuple[object, ...], MoeChoice | None] = {}
        self._curves: dict[tuple[object, ...], MoeCurve] = {}

    def choice(self, dev: Device, arch: LayerArch, p: Precision, tp: int) -> MoeChoice | None:
        shape = (arch.hidden, arch.moe_inter, arch.active, arch.experts)
        key = (dev.gpu_id, shape, tp, p.name)
        if key not in self._choices:
            self._choices[key] = self.kernels.choose(dev, self.engine, shape, tp, p, self.refs)
        return self._choices[key]

    def seconds(self, dev: Device, arch: LayerArch, p: Precision, tp: int, tokens: np.ndarray) -> np.ndarray:
        """One MoE layer's expert seconds (measured, or scaled from the nearest measurement)."""
        c = self.choice(dev, arch, p, tp)
        if c is None:
            return moe_roofline_time(dev, arch, p, tp, tokens)
        key = (dev.gpu_id, dev.cal, dev.fused_quant, arch.hidden, arch.moe_inter, arch.active, arch.experts, tp, p.name)
        if key not in self._curves:
            self._curves[key] = scaled_curve(c, dev, arch, p, tp)
        t = np.asarray(tokens, dtype=float)
        spread = 1.0 if self._spread is None else np.interp(t, self._spread[0], self._spread[1])
        return self._curves[key].seconds(t + self.sigmas * np.sqrt(t * spread))

    def with_spread(self, tokens: np.ndarray, spread: np.ndarray) -> MoeBinding:
        """This binding charging n tokens at n + sigmas·√(n·s(n)), s given at ``tokens`` (interpolated, held beyond);
        it shares the choices and curves."""
        out = copy.copy(self)
        out._spread = (np.asarray(tokens, dtype=float), np.asarray(spread, dtype=float))
        return out

    def running(self) -> MoeBinding:
        """This binding reading the kernel as it runs (no fluctuation charge); it shares the choices and curves."""
        out = copy.copy(self)
        out.sigmas, out._spread = 0.0, None
        return out
