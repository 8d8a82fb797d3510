"""What a serving engine runs with by default, by engine and version: step scheduling and batch limits.

A published benchmark ran an engine at its defaults unless it says otherwise, so validating the model against it
needs those defaults (``perf.validation``, the simulator's benchmark mode). A plan's engines get the planner's
limits instead: ``planning export`` writes them as flags.

- **Scheduling.** vLLM before 0.6 and TGI before 3 run waiting prompts as steps of their own (no chunked prefill by
  default); vLLM V1, SGLang, TensorRT-LLM and NIM chunk prompts into the decode steps. An unstated version is taken
  as the current engine.
- **vLLM limits** (``max_num_batched_tokens``, ``max_num_seqs``). V1 (0.8 on, ``EngineArgs.get_batch_defaults`` of
  the OpenAI server): 8,192 / 1,024 on GPUs with at least 70 GiB that are not A100s (larger steps lowered A100
  throughput, vLLM PR 17885), else 2,048 / 256. V0 (before 0.8): 256 sequences; without chunked prefill the step
  budget is the model length (the planner's 8,192 here), with it 2,048.
- **TGI** admits at most 128 concurrent requests (the router's ``max_concurrent_requests`` default).
- TensorRT-LLM, NIM, SGLang and unknown engines: the planner's limits (their benchmark tools size the batch to
  the memory, as the model does).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from planning.perf.calibration import GlobalSettings

if TYPE_CHECKING:
    from planning.perf.model import PerfModel

VLLM_LARGE_GPU_GIB = 70.0  # vLLM V1's larger batch defaults need >= 70 GiB and not an A100
VLLM_SMALL = (2048, 256)  # vLLM V1 below that, and V0's sequence cap
TGI_MAX_CONCURRENT = 128


def parse_version(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``"0.4.3 (docker ...)"`` or ``"v2.0.4"``; None when unstated."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def scheduling_of(engine: str, version: str) -> str:
    """The engine's default step scheduling: ``"prefill-first"`` for vLLM before 0.6 and TGI before 3 (no chunked
    prefill by default), else ``"chunked"`` (vLLM V1, SGLang, TensorRT-LLM, NIM; and an unstated version)."""
    v = parse_version(version)
    if v is None:
        return "chunked"
    if engine == "vllm" and v < (0, 6):
        return "prefill-first"
    if engine == "tgi" and v[0] < 3:
        return "prefill-first"
    return "chunked"


def vllm_v1_limits(gpu_id: str, memory_gb: float, settings: GlobalSettings) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of ``vllm serve`` (V1) on this GPU by default; the large tier is the
    planner's engine setting, so a calibrated setting carries over."""
    tokens, seqs = int(settings.max_batched_tokens), int(settings.max_num_seqs)
    large = memory_gb * 1e9 >= VLLM_LARGE_GPU_GIB * 2**30 and not gpu_id.upper().startswith("A100")
    return (tokens, seqs) if large else (min(tokens, VLLM_SMALL[0]), min(seqs, VLLM_SMALL[1]))


def engine_limits(engine: str, version: str, gpu_id: str, memory_gb: float,
                  settings: GlobalSettings) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the engine ran with by default (module docstring)."""
    tokens, seqs = int(settings.max_batched_tokens), int(settings.max_num_seqs)
    v = parse_version(version)
    if engine == "vllm":
        if v is None or v >= (0, 8):
            return vllm_v1_limits(gpu_id, memory_gb, settings)
        if scheduling_of(engine, version) == "prefill-first":
            return tokens, min(seqs, VLLM_SMALL[1])
        return min(tokens, VLLM_SMALL[0]), min(seqs, VLLM_SMALL[1])
    if engine == "tgi":
        return tokens, min(seqs, TGI_MAX_CONCURRENT)
    return tokens, seqs


def published_engine(perf: PerfModel, engine: str, version: str, gpu_id: str) -> tuple[str, int, int]:
    """(scheduling, max_num_batched_tokens, max_num_seqs) of a published run of ``engine`` ``version`` on
    ``gpu_id``: what validation runs the closed form and the simulator with."""
    tokens, seqs = engine_limits(engine, version, gpu_id, perf.gpu(gpu_id).memory_gb, perf.calibration.settings)
    return scheduling_of(engine, version), tokens, seqs
