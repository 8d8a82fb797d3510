"""The tensor-parallel all-reduce read from measured tables (data/allreduce.csv, perf v5.4, issue 42)."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel
from planning.perf.allreduce import DEFAULT_ALLREDUCE_PATH, SizeCurve, allreduce_engine, load_allreduce
from planning.perf.roofline import allreduce_time


def _measured(gpu: str, engine: str, tp: int) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, seconds) of one measured curve, read straight from the shipped CSV."""
    with DEFAULT_ALLREDUCE_PATH.open(encoding="utf-8") as fh:
        rows = sorted((float(r["bytes"]), float(r["latency_us"]) * 1e-6) for r in csv.DictReader(fh)
                      if (r["gpu"], r["engine"], int(r["tp"])) == (gpu, engine, tp))
    return np.array([b for b, _ in rows]), np.array([s for _, s in rows])


@pytest.mark.parametrize("gpu,engine,tp", [("H100", "nccl", 8), ("A100-80G", "trtllm", 4), ("A100-80G", "nccl", 2),
                                           ("H200", "nccl", 4)])
def test_measured_sizes_read_back_exactly(pm: PerfModel, gpu: str, engine: str, tp: int) -> None:
    b, s = _measured(gpu, engine, tp)
    assert len(b) >= 15
    dev = pm.device(gpu, "trtllm" if engine == "trtllm" else "vllm")
    assert np.allclose(allreduce_time(dev, b, tp), s, rtol=1e-9)


def test_engine_reads_its_own_allreduce_where_measured(pm: PerfModel) -> None:
    """TensorRT-LLM (and NIM on it) reads its custom all-reduce on the A100, NCCL elsewhere; vLLM reads NCCL."""
    assert allreduce_engine("trtllm") == allreduce_engine("nim-trtllm") == "trtllm"
    assert allreduce_engine("vllm") == allreduce_engine("sglang") == "nccl"
    trt, vllm = pm.device("A100-80G", "trtllm"), pm.device("A100-80G", "vllm")
    assert trt.allreduce is not None and trt.allreduce.engine == "trtllm"
    assert vllm.allreduce is not None and vllm.allreduce.engine == "nccl"
    h100 = pm.device("H100", "trtllm").allreduce
    assert h100 is not None and h100.engine == "nccl"
    # the custom all-reduce's one-shot kernel is faster than NCCL on small decode messages (8 GPUs, 64 KB)
    assert float(allreduce_time(trt, 65536.0, 8)) < 0.5 * float(allreduce_time(vllm, 65536.0, 8))


def test_gpus_without_a_table_keep_their_fitted_ring(pm: PerfModel) -> None:
    for gpu in ("L40S", "A100-40G", "RTX4090", "L4", "T4"):
        assert pm.device(gpu).allreduce is None
    host = pm.device("RTX4090")
    size = 1e6
    assert float(allreduce_time(host, size, 2)) == pytest.approx(
        host.cal.ar_latency_us * 1e-6 + size / (host.cal.ar_host_gbps * 1e9))


def test_extrapolation_below_and_above_the_measured_sizes() -> None:
    """Below: the floor + size / bandwidth of the smallest points; above: linear at the largest points' bandwidth."""
    b = np.array([1e3, 2e3, 4e3, 1e8, 2e8, 4e8])
    s = np.array([10e-6, 11e-6, 13e-6, 1e-3, 2e-3, 4e-3])
    c = SizeCurve.fit(b, s)
    low_slope = np.polyfit(b[:3], s[:3], 1)[0]
    assert float(c.seconds(np.array([1.0]))[0]) == pytest.approx(s[0] - low_slope * (b[0] - 1.0))
    assert 0 < c.floor_s < s[0]
    top = float(c.seconds(np.array([8e8]))[0])
    assert top == pytest.approx(4e-3 + np.polyfit(b[-3:], s[-3:], 1)[0] * 4e8)
    assert top == pytest.approx(8e-3, rel=0.05)  # bandwidth-bound: time doubles with the size
    inside = float(c.seconds(np.array([3e3]))[0])
    assert s[1] < inside < s[2]


def test_group_sizes_between_and_beyond_the_measured_ones(pm: PerfModel) -> None:
    dev = pm.device("H100")
    size = np.array([8192.0, 1e6, 1e8])
    t2, t3, t4, t8 = (allreduce_time(dev, size, n) for n in (2, 3, 4, 8))
    assert np.all(t2 < t3) and np.all(t3 < t4)
    t16 = allreduce_time(dev, size, 16)
    assert np.allclose(t16, t8 * (2 * 15 / 16) / (2 * 7 / 8))


def test_layer_time_reads_the_measured_allreduce(pm: PerfModel) -> None:
    """A decode step on 8xH100 changes when its all-reduce table does (the term is read, not a constant)."""
    base = pm.estimate("llama-3-70b", "H100", count=8, tp=8, batch=64, input_len=1000, output_len=100)
    curve = pm.device("H100").allreduce
    assert curve is not None
    slow = {tp: replace(c, log_s=c.log_s + np.log(2.0)) for tp, c in curve.by_tp.items()}
    tables = load_allreduce()
    other = PerfModel(allreduce=type(tables)([*[c for k, c in tables.curves.items() if k != ("H100", "nccl")],
                                              replace(curve, by_tp=slow)], "slower"))
    assert other.fingerprint() != pm.fingerprint()
    slower = other.estimate("llama-3-70b", "H100", count=8, tp=8, batch=64, input_len=1000, output_len=100)
    assert slower.decode_step_ms > base.decode_step_ms


@pytest.mark.parametrize("bad,problem", [("gpu,engine\nH100,nccl\n", "missing columns"),
                                         ("gpu,engine,tp,bytes,latency_us,source\nH100,nccl,2,x,1,s\n", "non-numeric"),
                                         ("gpu,engine,tp,bytes,latency_us,source\nH100,nccl,1,512,1,s\n", "tp < 2")])
def test_a_malformed_allreduce_file_names_the_problem(tmp_path: Path, bad: str, problem: str) -> None:
    path = tmp_path / "ar.csv"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(PlanningError) as err:
        load_allreduce(path)
    assert problem in str(err.value)
