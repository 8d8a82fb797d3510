"""Measurements: the user's own serving benchmarks imported, checked, and fitted into the perf model."""
