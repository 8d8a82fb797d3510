"""Uncertainty bands from the shipped validation set: p90 |error| of published measurements of the same kind.

A kind is (GPU class, dtype class, quantity kind): GPU class ``nvlink-hbm`` (data-center parts with NVLink) or
``pcie`` (PCIe cards); dtype class ``16bit`` (bf16/fp16) or ``fp8`` (fp8, mxfp4); quantity kind ``ttft``
(prefill latency), ``tpot`` (decode step / inter-token latency) or ``throughput``. The table
``data/perf_bands.csv`` is written by ``benchmarks/bench_fidelity.py --write-bands`` from
``data/validation/``; a test checks that it matches a recomputation. A kind with fewer than ``MIN_POINTS``
points falls back to (GPU class, any dtype), then (any, any); GPUs without calibration data never get a band
narrower than ``band_roofline``, measured profiles get ``band_measured``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from planning.catalog.schema import GPU, Provenance
from planning.errors import PlanningError
from planning.perf.calibration import GlobalSettings

DEFAULT_BANDS_PATH = Path(__file__).resolve().parents[2] / "data" / "perf_bands.csv"
MIN_POINTS = 3
BAND_FLOOR = 0.05
ANY = "any"
QUANTITY_KIND = {"ttft_ms": "ttft", "prefill_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "tpot",
                 "decode_step_ms": "tpot", "output_tokens_per_s": "throughput", "total_tokens_per_s": "throughput",
                 "requests_per_s": "throughput", "e2e_latency_ms": "tpot"}
# Which kind each number of a PerfEstimate is.
ESTIMATE_KIND = {"prefill_ms": "ttft", "decode_step_ms": "tpot", "max_prefill_tokens_per_s": "throughput",
                 "max_decode_tokens_per_s": "throughput", "serving": "throughput"}


def gpu_class(gpu: GPU) -> str:
    """``nvlink-hbm`` for NVLink data-center GPUs, else ``pcie``."""
    return "nvlink-hbm" if gpu.intra_link.lower().startswith("nvlink") else "pcie"


def dtype_class(dtype: str) -> str:
    """``fp8`` for 8-bit-or-less weights, else ``16bit``."""
    return "fp8" if dtype.lower() in ("fp8", "mxfp4") else "16bit"


@dataclass(frozen=True)
class BandRow:
    """p90 and median absolute relative error of one kind, over ``n`` validation points."""

    gpu_class: str
    dtype_class: str
    kind: str
    p90: float
    median: float
    n: int


@dataclass(frozen=True)
class BandTable:
    """All band rows; ``lookup`` applies the fallback order of the module docstring."""

    rows: tuple[BandRow, ...]

    def lookup(self, gclass: str, dclass: str, kind: str) -> tuple[float, str] | None:
        """(band, kind label) of the most specific kind with enough points, or None."""
        index = {(r.gpu_class, r.dtype_class, r.kind): r for r in self.rows}
        for key in ((gclass, dclass, kind), (gclass, ANY, kind), (ANY, ANY, kind)):
            r = index.get(key)
            if r is not None and r.n >= MIN_POINTS:
                return max(BAND_FLOOR, r.p90), f"validation p90 of {r.n} points ({'/'.join(key)})"
        return None

    def for_estimate(self, gpu: GPU, dtype: str, provenance: dict[str, Provenance],
                     settings: GlobalSettings) -> tuple[dict[str, float], dict[str, str]]:
        """Band and its source for every number of a PerfEstimate."""
        bands: dict[str, float] = {}
        sources: dict[str, str] = {}
        for key, kind in ESTIMATE_KIND.items():
            prov = provenance.get(key, "roofline")
            if prov == "measured":
                bands[key], sources[key] = settings.band_measured, "measured profile run-to-run spread"
                continue
            hit = self.lookup(gpu_class(gpu), dtype_class(dtype), kind)
            band, src = hit if hit is not None else (settings.band_roofline, "no validation points of this kind")
            if prov == "roofline" and band < settings.band_roofline:
                band, src = settings.band_roofline, f"{gpu.id} has no calibration data (roofline band)"
            bands[key], sources[key] = round(band, 3), src
        return bands, sources


def load_bands(path: Path | None = None) -> BandTable:
    """Read ``data/perf_bands.csv`` (columns gpu_class, dtype_class, kind, p90_abs_error, median_abs_error, n).

    Returns an empty table when the default file is absent (every band then falls back to ``band_roofline``).

    Raises
    ------
    PlanningError: a missing column or a non-numeric value.
    """
    p = Path(path) if path is not None else DEFAULT_BANDS_PATH
    if not p.exists():
        if path is None:
            return BandTable(())
        raise PlanningError("bands", f"file {p} does not exist.", "run benchmarks/bench_fidelity.py --write-bands.")
    rows = []
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        need = {"gpu_class", "dtype_class", "kind", "p90_abs_error", "median_abs_error", "n"}
        if not need <= set(reader.fieldnames or []):
            raise PlanningError(p.name, f"missing columns {sorted(need - set(reader.fieldnames or []))}.",
                                f"columns are {sorted(need)}.")
        for i, r in enumerate(reader, start=2):
            try:
                rows.append(BandRow(r["gpu_class"], r["dtype_class"], r["kind"], float(r["p90_abs_error"]),
                                    float(r["median_abs_error"]), int(r["n"])))
            except ValueError:
                raise PlanningError(f"{p.name}:{i}", "a band or count is not a number.", "write numbers.") from None
    return BandTable(tuple(rows))
