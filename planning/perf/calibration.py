"""Fitted per-GPU performance constants (data/calibration.csv) and the device parameters built from them."""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, fields, replace
from pathlib import Path

from planning.catalog.schema import GPU, Provenance
from planning.errors import PlanningError

DEFAULT_CALIBRATION_PATH = Path(__file__).resolve().parents[2] / "data" / "calibration.csv"

# Parameters a GPU row may carry; every one is physically meaningful (see docs/perf-model.md).
GPU_PARAMS: tuple[str, ...] = (
    "eff_bw",  # achieved / spec HBM bandwidth for streaming kernels
    "eff_compute_bf16",  # achieved / spec dense BF16 tensor TFLOPS for large GEMMs
    "eff_compute_fp8",  # achieved / spec dense FP8 tensor TFLOPS for large GEMMs
    "eff_attn",  # achieved / spec BF16 TFLOPS inside flash attention
    "kernel_us",  # fixed latency of one GEMM / element-wise kernel (launch + tail), microseconds
    "attn_us",  # fixed latency of one attention kernel (split-KV, metadata), microseconds
    "attn_tile_tokens",  # per-tile fixed work of flash attention, in equivalent key tokens
    "ar_latency_us",  # all-reduce latency between 2 GPUs of one node, microseconds
    "ar_eff",  # achieved / spec intra-node link bandwidth for a 2-GPU all-reduce
    "ar_scaling",  # exponent: link efficiency falls as (2/n)**ar_scaling with n GPUs (PCIe contention)
    "ar_host_gbps",  # all-reduce bus bandwidth (GB/s) through host memory, for GPUs without peer-to-peer
    "step_ms",  # fixed engine overhead per forward step (scheduling, sampling), milliseconds
    "band_prefill",  # held-out p90 absolute relative error, prefill-like points (uncertainty band)
    "band_decode",  # held-out p90 absolute relative error, decode-like points (uncertainty band)
)
# Global settings stored under gpu id ``default``.
GLOBAL_PARAMS: tuple[str, ...] = (
    "gpu_memory_utilization",  # the planner's engine budget: share of the driver-reported memory (vLLM, export flag)
    "engine_overhead_gib",  # per-GPU non-KV memory inside that budget (CUDA context, NCCL buffers), GiB
    "activation_factor",  # activation workspace per token as a multiple of (hidden + intermediate/tp) * 2 B
    "max_batched_tokens",  # engine token budget per step (chunked prefill); bounds the activation workspace
    "max_num_seqs",  # engine cap on sequences running together (continuous batching)
    "graph_kernel_factor",  # share of kernel_us left when a step replays a CUDA graph (decode and mixed steps)
    "network_gbps",  # node network bandwidth (Gbit/s) when the config does not publish one
    "network_latency_ms",  # one pipeline hop: latency of sending activations to the next node
    "prefill_headroom",  # queueing headroom h: prefill batch time must fit in (slo/S)/h
    "decode_headroom",  # disaggregated decode cycle must fit in (hand-off budget of the TPOT)/h
    "aggregated_headroom",  # aggregated (chunked prefill) step must fit in (TPOT/S)/h
    "prefill_max_load",  # utilisation cap: a prefill instance is planned at <= this share of its batch rate
    "kv_sigmas",  # decode/aggregated KV room for this many sqrt(sequences) beyond the planned ones (Erlang C)
    "aggregated_max_load",  # utilisation cap of aggregated (continuous batching + chunked prefill) instances
    "band_roofline",  # uncertainty band for GPUs without any measurement (roofline-only)
    "band_measured",  # uncertainty band on numbers interpolated from imported measured profiles
)


@dataclass(frozen=True)
class GpuCalibration:
    """Fitted constants of one GPU type, with where they came from."""

    gpu_id: str
    eff_bw: float
    eff_compute_bf16: float
    eff_compute_fp8: float
    eff_attn: float
    kernel_us: float
    attn_us: float
    attn_tile_tokens: float
    ar_latency_us: float
    ar_eff: float
    ar_scaling: float
    ar_host_gbps: float
    step_ms: float
    band_prefill: float
    band_decode: float
    provenance: Provenance
    source: str


@dataclass(frozen=True)
class GlobalSettings:
    """Engine-level constants shared by all GPUs (memory reserve, network default, queueing headroom)."""

    gpu_memory_utilization: float
    engine_overhead_gib: float
    activation_factor: float
    max_batched_tokens: float
    max_num_seqs: float
    graph_kernel_factor: float
    network_gbps: float
    network_latency_ms: float
    prefill_headroom: float
    decode_headroom: float
    aggregated_headroom: float
    prefill_max_load: float
    kv_sigmas: float
    aggregated_max_load: float
    band_roofline: float
    band_measured: float


@dataclass(frozen=True)
class Calibration:
    """All rows of a calibration file: per-GPU constants, generation priors and global settings."""

    gpus: dict[str, GpuCalibration]
    settings: GlobalSettings
    as_of: str
    path: str

    def for_gpu(self, gpu: GPU, engine: str | None = None) -> GpuCalibration:
        """Constants for ``gpu``: under ``engine``, its row fitted on that engine's own kernels (``A100-80G@trtllm``)
        when there is one; else its own fitted row, else the prior of its generation, else ``default``.

        Parameters
        ----------
        gpu: the GPU type.
        engine: the serving engine whose kernels run (None: the planner's, vLLM, whose kernels the GPU rows fit).

        Returns
        -------
        The calibration; provenance ``"roofline"`` when it is not fitted on that GPU's own data.

        Raises
        ------
        PlanningError: when neither the GPU, its generation nor ``default`` has a row.
        """
        if engine is not None and f"{gpu.id}@{engine}" in self.gpus:
            return replace(self.gpus[f"{gpu.id}@{engine}"], gpu_id=gpu.id)
        if gpu.id in self.gpus:
            return self.gpus[gpu.id]
        for key in (f"generation:{gpu.generation.lower()}", "default"):
            if key in self.gpus:
                base = self.gpus[key]
                return replace(base, gpu_id=gpu.id, provenance="roofline")
        raise PlanningError(
            "calibration",
            f"no calibration row for GPU {gpu.id!r}, its generation {gpu.generation!r} or 'default'.",
            f"add rows for gpu 'default' to {self.path} (run tools/calibrate_perf.py).",
        )

    def fingerprint(self) -> str:
        """Stable hash of every constant (part of every cache key)."""
        text = repr(sorted((k, _as_dict(v)) for k, v in self.gpus.items())) + repr(self.settings)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _as_dict(obj: GpuCalibration) -> dict[str, object]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


_CACHE: dict[str, Calibration] = {}


def load_calibration(path: Path | None = None) -> Calibration:
    """Read ``data/calibration.csv`` (columns gpu, param, value, source, n_points, fitted_on, as_of).

    Parameters
    ----------
    path: file to read; default the shipped ``data/calibration.csv``.

    Returns
    -------
    The validated calibration (cached per path).

    Raises
    ------
    PlanningError: a missing column, an unknown parameter, a non-numeric or out-of-range value,
        or a GPU row that lacks some parameter (the message names the file, row and column).
    """
    path = Path(path) if path is not None else DEFAULT_CALIBRATION_PATH
    key = str(path.resolve())
    if key in _CACHE:
        return _CACHE[key]
    if not path.exists():
        raise PlanningError("calibration", f"file {path} does not exist.", "run tools/calibrate_perf.py.")
    values: dict[str, dict[str, float]] = {}
    sources: dict[str, set[str]] = {}
    as_of = ""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        required = {"gpu", "param", "value", "source", "n_points", "fitted_on", "as_of"}
        missing = required - set(reader.fieldnames or [])
        if missing:
            raise PlanningError(f"{path.name}", f"missing columns {sorted(missing)}.", f"columns are {sorted(required)}.")
        for row_no, row in enumerate(reader, start=2):
            gpu, param = row["gpu"].strip(), row["param"].strip()
            if gpu.startswith("engine:"):  # a reference engine's own overhead (used only to score the fit)
                continue
            allowed = GLOBAL_PARAMS if gpu == "default" and param in GLOBAL_PARAMS else GPU_PARAMS
            if param not in allowed:
                raise PlanningError(f"{path.name}:{row_no}:param", f"unknown parameter {param!r}.",
                                    f"use one of {', '.join(GPU_PARAMS + GLOBAL_PARAMS)}.")
            try:
                value = float(row["value"])
            except ValueError:
                raise PlanningError(f"{path.name}:{row_no}:value", f"{row['value']!r} is not a number.",
                                    "write a decimal number.") from None
            bad_sign = value < 0 and param != "ar_scaling"
            fraction = param.startswith("eff_") or param == "gpu_memory_utilization"
            if value != value or bad_sign or (fraction and not 0 < value <= 1.0):
                raise PlanningError(f"{path.name}:{row_no}:value", f"{param}={value} is out of range.",
                                    "efficiencies and gpu_memory_utilization lie in (0, 1]; ar_scaling may be negative; other constants are >= 0.")
            values.setdefault(gpu, {})[param] = value
            sources.setdefault(gpu, set()).add(row["source"].strip())
            as_of = max(as_of, row["as_of"].strip())
    if "default" not in values:
        raise PlanningError(f"{path.name}", "no rows for gpu 'default'.", "add the global settings rows.")
    default = values["default"]
    missing_globals = [p for p in GLOBAL_PARAMS if p not in default]
    if missing_globals:
        raise PlanningError(f"{path.name}", f"gpu 'default' lacks {missing_globals}.", "add those rows.")
    settings = GlobalSettings(**{p: default[p] for p in GLOBAL_PARAMS})
    gpus: dict[str, GpuCalibration] = {}
    for gpu, params in values.items():
        gpu_params = {p: params.get(p, default.get(p)) for p in GPU_PARAMS}
        absent = [p for p, v in gpu_params.items() if v is None]
        if absent:
            raise PlanningError(f"{path.name}", f"gpu {gpu!r} lacks {absent} and 'default' has no value.",
                                "add those rows.")
        src = sorted(sources[gpu])
        fitted = gpu not in ("default",) and not gpu.startswith("generation:") and any(
            not s.startswith("prior") for s in src)
        gpus[gpu] = GpuCalibration(
            gpu_id=gpu, provenance="calibrated" if fitted else "roofline", source="; ".join(src),
            **{p: float(v) for p, v in gpu_params.items() if v is not None},
        )
    calibration = Calibration(gpus=gpus, settings=settings, as_of=as_of, path=str(path))
    _CACHE[key] = calibration
    return calibration


def kept_dates(lines: list[str], path: Path) -> list[str]:
    """``lines`` with each row's ``as_of`` taken from the file at ``path`` where that row (gpu, param, value,
    source, n_points, fitted_on) is unchanged: ``as_of`` says when a value last changed, so a re-run that moves
    three values shows three rows in the diff, not every row re-dated."""
    import csv

    if not path.exists():
        return lines
    old = {tuple(r[:2]): r for r in csv.reader(path.read_text(encoding="utf-8").splitlines()[1:]) if len(r) == 7}
    out = lines[:1]
    for line in lines[1:]:
        row = next(csv.reader([line]))
        before = old.get(tuple(row[:2]))
        out.append(line if before is None or before[:6] != row[:6] else line[: line.rindex(",") + 1] + before[6])
    return out
