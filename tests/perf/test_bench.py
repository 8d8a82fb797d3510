"""Benchmark: the coral-extended T̂ tables build within the 5 s goal (run with -m benchmark)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.benchmark
def test_coral_extended_tables_within_five_seconds() -> None:
    spec = importlib.util.spec_from_file_location("bench_perf_tables", ROOT / "benchmarks" / "bench_perf_tables.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    seconds, entries = module.measure()
    print(f"coral-extended T̂ tables: {entries} entries, median {seconds:.3f} s")
    assert entries > 0 and seconds <= 5.0
