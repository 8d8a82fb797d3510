"""Time the full T̂ tables (all j <= L, S <= 6, both phases) of the coral-extended setup; prints the median of 3."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from planning.perf import PerfModel, Workload  # noqa: E402

MODELS = ("qwen3-32b", "gpt-oss-20b", "phi-4", "qwen3-235b-a22b", "gpt-oss-120b", "llama-3-70b")
SHAPES = tuple(f"{n}x{g}" for g in ("L40S", "L4", "A10G", "H100", "A100-80G") for n in (1, 2, 4, 8))
# Coral Table 3 SLOs (prefill ms, decode ms).
SLO = {"phi-4": (1200, 60), "gpt-oss-20b": (900, 30), "qwen3-32b": (1600, 100), "llama-3-70b": (1500, 80),
       "gpt-oss-120b": (1000, 40), "qwen3-235b-a22b": (1800, 120)}
WORKLOAD = Workload(input_len=1000, output_len=250)


def build_all(pm: PerfModel) -> int:
    """Compute every table once; returns the number of table entries."""
    entries = 0
    for model_id in MODELS:
        spec = pm.model(model_id)
        for phase, slo in zip(("prefill", "decode"), SLO[model_id], strict=True):
            entries += pm.stage_tables(spec, SHAPES, phase, slo, WORKLOAD, max_stages=6).size
    return entries


def measure(repeats: int = 3) -> tuple[float, int]:
    """Median wall time (s) of a cold build (fresh PerfModel, empty cache), and the entry count."""
    base = PerfModel()
    times, entries = [], 0
    for _ in range(repeats):
        pm = PerfModel(catalog=base.catalog, calibration=base.calibration)
        start = time.perf_counter()
        entries = build_all(pm)
        times.append(time.perf_counter() - start)
    return statistics.median(times), entries


if __name__ == "__main__":
    seconds, n = measure()
    print(f"coral-extended T̂ tables: {len(MODELS)} models x {len(SHAPES)} shapes x 2 phases, {n} entries: "
          f"median of 3 cold builds {seconds:.3f} s (goal <= 5 s)")
