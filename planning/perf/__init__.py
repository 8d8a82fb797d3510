"""Performance model: roofline + calibration, memory fit, measured profiles, Coral's T̂ stage tables."""

from planning.perf.calibration import Calibration, GpuCalibration, load_calibration
from planning.perf.model import MemoryBreakdown, PerfEstimate, PerfModel, Workload, parse_shape
from planning.perf.profiles import ProfileSet, load_profiles

__all__ = [
    "Calibration",
    "GpuCalibration",
    "MemoryBreakdown",
    "PerfEstimate",
    "PerfModel",
    "ProfileSet",
    "Workload",
    "load_calibration",
    "load_profiles",
    "parse_shape",
]
