"""Synthetic but realistic stage tables for tests and benchmarks until (and besides) the perf model's tables.

For a node of ``gpus`` GPUs with ``gpu_mem_gb`` each, relative speed ``speed`` (1.0 ≈ one L40S), holding j of L
layers of a model with ``weight_gb`` of weights, per-stage budget ``slo_ms / S``:

* weights per layer w = weight_gb / L; the node cannot hold j layers if j·w > 0.9 · node memory (entry 0);
* per-stage latency of a batch of b sequences: j · (a + b·β) / speed ms with a = ``layer_ms`` (weight read)
  and β = ``token_ms`` (per-sequence work), so b_lat = floor((budget·speed/j − a) / β);
* KV memory caps the batch: b_kv = floor((0.9 · node memory − j·w) / (j · ``kv_gb``));
* throughput = min(b_lat, b_kv) / budget · 1000 sequences per second, 0 if the batch is < 1.

Entries are non-increasing in j and in S (the real tables' shape) and have many ties, like real profiles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planning.catalog.schema import parse_shape

GPU_MEM_GB = {"H100": 80.0, "A100": 80.0, "L40S": 48.0, "L4": 24.0, "A10G": 24.0}
GPU_SPEED = {"H100": 3.0, "A100": 1.6, "L40S": 1.0, "L4": 0.35, "A10G": 0.4}


@dataclass(frozen=True)
class SyntheticCosts:
    """The synthetic node's costs (module docstring): ``layer_ms`` a per-layer weight read, ``token_ms`` the
    per-sequence work per layer, ``kv_gb`` one sequence's KV cache per layer."""

    layer_ms: float = 0.3
    token_ms: float = 0.02
    kv_gb: float = 0.002


def node_table(
    gpus: int,
    gpu_mem_gb: float,
    speed: float,
    layers: int,
    weight_gb: float,
    slo_ms: float,
    max_stages: int = 6,
    costs: SyntheticCosts = SyntheticCosts(),
) -> np.ndarray:
    """Stage table ``(max_stages, layers)`` of one node (see module docstring)."""
    layer_ms, token_ms, kv_gb = costs.layer_ms, costs.token_ms, costs.kv_gb
    mem = 0.9 * gpus * gpu_mem_gb
    node_speed = (
        speed * gpus * 0.9 ** max(0, gpus.bit_length() - 1)
    )  # intra-node TP loses a little per doubling
    w = weight_gb / layers
    j = np.arange(1, layers + 1, dtype=float)[None, :]
    S = np.arange(1, max_stages + 1, dtype=float)[:, None]
    budget = slo_ms / S
    b_lat = np.floor((budget * node_speed / j - layer_ms) / token_ms)
    free = mem - j * w
    b_kv = np.floor(np.where(free > 0, free, -1.0) / (j * kv_gb))
    b = np.minimum(b_lat, b_kv)
    thr = np.where(b >= 1, b / budget * 1000.0, 0.0)
    return np.round(thr, 6)


def shape_tables(
    shapes: list[str], layers: int, weight_gb: float, slo_ms: float, max_stages: int = 6
) -> tuple[np.ndarray, np.ndarray]:
    """Tables ``(K, max_stages, L)`` and node memory (GB) for shapes like ``"2xL40S"`` (GPUs in ``GPU_MEM_GB``)."""
    tabs = []
    mem = []
    for sh in shapes:
        g, gpu = parse_shape(sh)
        tabs.append(node_table(g, GPU_MEM_GB[gpu], GPU_SPEED[gpu], layers, weight_gb, slo_ms, max_stages))
        mem.append(g * GPU_MEM_GB[gpu])
    return np.stack(tabs), np.asarray(mem)


CORE_SHAPES = [f"{c}x{g}" for g in ("L40S", "L4", "A10G") for c in (1, 2, 4, 8)]
EXTENDED_SHAPES = CORE_SHAPES + [f"{c}x{g}" for g in ("H100", "A100") for c in (1, 2, 4, 8)]
# (name, layers, weight GB, prefill SLO ms, decode SLO ms) — Coral Table 3 layer counts and SLOs; weights are
# approximate checkpoint sizes (bf16, MXFP4 for gpt-oss) used only to shape the synthetic tables.
CORE_MODELS = [
    ("qwen3-32b", 64, 65.0, 1600.0, 100.0),
    ("gpt-oss-20b", 24, 13.0, 900.0, 30.0),
    ("phi-4", 40, 29.0, 1200.0, 60.0),
]
EXTENDED_MODELS = [
    *CORE_MODELS,
    ("llama-3-70b", 80, 141.0, 1500.0, 80.0),
    ("gpt-oss-120b", 36, 65.0, 1000.0, 40.0),
    ("qwen3-235b-a22b", 94, 470.0, 1800.0, 120.0),
]
