"""Importing benchmark files as vLLM, GuideLLM and a plain CSV write them; hostile files get a named error."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from planning.errors import PlanningError
from planning.measurements.checks import check_point
from planning.measurements.readers import Setup, read_file
from planning.measurements.schema import COLUMNS
from planning.simulate.metrics import BenchmarkResult
from tests.measurements.builders import guidellm_benchmark, guidellm_report, vllm_result, write_json

A10G = Setup(gpu="A10G", tp=1)


def test_vllm_save_result_reads_setup_from_flags(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    path = write_json(tmp_path / "bench.json", vllm_result(a10g_run, concurrency=8))
    [m] = read_file(path, A10G)
    assert (m.model, m.gpu, m.count, m.tp, m.engine, m.dtype) == ("llama-3-8b", "A10G", 1, 1, "vllm", "bf16")
    assert (m.concurrency, m.request_rate, m.requests) == (8, None, 64)
    assert m.input_len == 512 and m.output_len == 128
    assert m.ttft_ms_mean == pytest.approx(a10g_run.ttft_ms_mean)
    assert m.itl_ms_mean == pytest.approx(a10g_run.itl_ms_mean)
    assert m.output_tokens_per_s == pytest.approx(a10g_run.output_tokens_per_s)
    assert m.source == "vllm-bench-serve" and m.file == "bench.json" and m.date == "20261128-101500"


def test_vllm_goodput_gives_the_slo_attainment(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    [m] = read_file(write_json(tmp_path / "g.json", vllm_result(a10g_run, concurrency=8, within_slo=0.75)), A10G)
    assert m.slo_attainment == pytest.approx(0.75)
    [n] = read_file(write_json(tmp_path / "n.json", vllm_result(a10g_run, concurrency=8)), A10G)
    assert n.slo_attainment is None


def test_vllm_metadata_and_sidecar_give_the_setup(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    meta = {"gpu": "A10G", "tp": "1", "engine_version": "0.9.2", "instance": "3"}
    [m] = read_file(write_json(tmp_path / "a.json", vllm_result(a10g_run, concurrency=8, metadata=meta)))
    assert (m.gpu, m.tp, m.count, m.engine_version, m.instance) == ("A10G", 1, 1, "0.9.2", "3")
    side = write_json(tmp_path / "b.json", vllm_result(a10g_run, request_rate=2.5))
    (tmp_path / "b.json.yaml").write_text("gpu: A10G\ncount: 1\ntp: 1\n", encoding="utf-8")
    [s] = read_file(side)
    assert (s.gpu, s.concurrency, s.request_rate) == ("A10G", None, 2.5)
    [f] = read_file(side, Setup(gpu="L4"))  # flags win over the sidecar
    assert f.gpu == "L4"


def test_missing_gpu_is_asked_for_not_guessed(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    path = write_json(tmp_path / "bench.json", vllm_result(a10g_run, concurrency=8))
    with pytest.raises(PlanningError, match="--gpu") as e:
        read_file(path)
    assert e.value.field == "bench.json.gpu"
    with pytest.raises(PlanningError, match="--model"):
        read_file(write_json(tmp_path / "x.json", vllm_result(a10g_run, model_id="acme/unknown-7b")), A10G)


def test_detailed_lists_must_agree_with_the_means(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    data = vllm_result(a10g_run, concurrency=8, detailed=True)
    [m] = read_file(write_json(tmp_path / "d.json", data), A10G)
    assert m.ttft_ms_mean == pytest.approx(a10g_run.ttft_ms_mean)
    data["ttfts"] = [t * 2 for t in data["ttfts"]]
    with pytest.raises(PlanningError, match="contradicts the per-request ttfts"):
        read_file(write_json(tmp_path / "e.json", data), A10G)


def test_guidellm_report_gives_one_point_per_strategy(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    report = guidellm_report([guidellm_benchmark(a10g_run, {"type_": "synchronous"}),
                              guidellm_benchmark(a10g_run, {"type_": "concurrent", "streams": 8}),
                              guidellm_benchmark(a10g_run, {"type_": "constant", "rate": 3.0}),
                              guidellm_benchmark(a10g_run, {"type_": "throughput", "max_concurrency": None})])
    pts = read_file(write_json(tmp_path / "g.json", report), A10G)
    assert [(p.concurrency, p.request_rate) for p in pts] == [(1, None), (8, None), (None, 3.0), (None, math.inf)]
    assert all(p.source == "guidellm" and p.model == "llama-3-8b" for p in pts)
    assert pts[1].ttft_ms_mean == pytest.approx(a10g_run.ttft_ms_mean)
    assert pts[1].tpot_ms_mean == pytest.approx(a10g_run.tpot_ms_mean)
    report["benchmarks"][0]["config"]["strategy"] = {"type_": "sweep"}
    with pytest.raises(PlanningError, match="no fixed load"):
        read_file(write_json(tmp_path / "h.json", report), A10G)


def test_plain_csv_round_trips_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("model,gpu,count,tp,engine,engine_version,input_len,output_len,concurrency,ttft_ms_mean,"
                    "itl_ms_mean,output_tokens_per_s,source,date\n"
                    "llama-3-8b,A10G,1,1,vllm,0.9.2,512,128,8,400,40,180,lab run,2026-11-01\n"
                    "llama-3-8b,A10G,1,1,vllm,0.9.2,512,128,16,700,50,290,lab run,2026-11-01\n", encoding="utf-8")
    pts = read_file(path)
    assert [p.concurrency for p in pts] == [8, 16] and pts[0].source == "lab run" and pts[0].ttft_ms_mean == 400
    assert set(pts[0].as_row()) == set(COLUMNS)
    path.write_text("model,gpu,count,tp,input_len,output_len,concurrency,latency\n", encoding="utf-8")
    with pytest.raises(PlanningError, match="unknown column 'latency'"):
        read_file(path)


# ------------------------------------------------------------------------------------------ hostile files
def test_truncated_json_is_refused(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    text = json.dumps(vllm_result(a10g_run, concurrency=8))
    (tmp_path / "t.json").write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(PlanningError) as e:
        read_file(tmp_path / "t.json", A10G)
    assert "t.json" in e.value.field


def test_absurd_rate_is_refused_by_name(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    path = write_json(tmp_path / "r.json", vllm_result(a10g_run, request_rate=1e300))
    with pytest.raises(PlanningError, match=r"outside") as e:
        read_file(path, A10G)
    assert e.value.field == "r.json:request_rate"


def test_negative_latency_is_refused_by_name(tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    data = vllm_result(a10g_run, concurrency=8)
    data["mean_itl_ms"] = -3.0
    with pytest.raises(PlanningError, match="not a positive latency") as e:
        read_file(write_json(tmp_path / "n.json", data), A10G)
    assert e.value.field == "n.json:itl_ms_mean"


@pytest.mark.parametrize(("key", "factor", "hint"), [("mean_ttft_ms", 1e-3, "seconds"),
                                                      ("mean_itl_ms", 1e-3, "seconds"),
                                                      ("mean_tpot_ms", 1e3, "microseconds")])
def test_units_off_by_1000_are_refused(tmp_path: Path, a10g_run: BenchmarkResult, key: str, factor: float,
                                       hint: str) -> None:
    data = vllm_result(a10g_run, concurrency=8)
    data[key] *= factor
    with pytest.raises(PlanningError, match=hint):
        read_file(write_json(tmp_path / "u.json", data), A10G)


def test_latencies_that_contradict_the_throughput_are_refused(a10g_run: BenchmarkResult, tmp_path: Path) -> None:
    from planning.catalog import load_catalog

    data = vllm_result(a10g_run, concurrency=8)
    for key in ("mean_ttft_ms", "mean_itl_ms", "mean_tpot_ms"):
        data[key] *= 3  # in range, but 8 clients at these latencies receive a third of the measured tokens/s
    [m] = read_file(write_json(tmp_path / "c.json", data), A10G)
    with pytest.raises(PlanningError, match="clients at these latencies") as e:
        check_point(m, load_catalog())
    assert e.value.field.endswith("output_tokens_per_s") and "c.json" in e.value.field


def test_a_100_mb_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as fh:
        fh.truncate(100 * 1024 * 1024)
    with pytest.raises(PlanningError, match=r"huge\.json"):
        read_file(path, A10G)


def test_faster_than_the_hardware_names_the_point_and_the_cause(a10g_run: BenchmarkResult, tmp_path: Path) -> None:
    from planning.catalog import load_catalog

    [m] = read_file(write_json(tmp_path / "f.json", vllm_result(a10g_run, concurrency=8)), A10G)
    check_point(m, load_catalog())  # the simulator's own run is physical
    fast = replace(m, itl_ms_mean=2.0, tpot_ms_mean=2.0)  # 16 GB of weights in 2 ms is 8 TB/s on a 600 GB/s GPU
    with pytest.raises(PlanningError, match="faster than the hardware allows") as e:
        check_point(fast, load_catalog())
    assert "f.json" in e.value.field and "--gpu" in str(e.value)
