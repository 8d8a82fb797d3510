"""Performance model: roofline + calibration, memory fit, serving throughput, measured profiles, T̂ stage tables."""

from planning.perf.calibration import Calibration, GpuCalibration, load_calibration
from planning.perf.model import PerfModel, parse_shape
from planning.perf.profiles import ProfileSet, load_profiles
from planning.perf.results import MemoryBreakdown, PerfEstimate, ServingPoint, Workload

__all__ = [
    "Calibration",
    "GpuCalibration",
    "MemoryBreakdown",
    "PerfEstimate",
    "PerfModel",
    "ProfileSet",
    "ServingPoint",
    "Workload",
    "load_calibration",
    "load_profiles",
    "parse_shape",
]
