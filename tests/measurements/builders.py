"""Benchmark files laid out as the tools write them, for the measurement tests.

vLLM: the keys and their order of ``result_json`` in vllm/benchmarks/serve.py (vllm 0.33.0, read from the wheel:
setup keys, ``--metadata KEY=VALUE`` pairs, traffic keys, then ``benchmark_result`` with ``process_one_metric``'s
``mean_/median_/std_/p99_<metric>_ms``; ``--save-detailed`` keeps the per-request lists, TTFTs in seconds), for
the hostile and edge cases; the whole vLLM files of the suite are vLLM 0.33.0's own runs (``vllm_results.py``,
tools/vllmbench).
GuideLLM 0.8: hand-built to ``GenerativeBenchmarksReport.model_dump(mode="json")`` of guidellm 0.8.1
(benchmark/schemas/report.py, benchmark.py, metrics.py; DistributionSummary in schemas/base/statistics.py), the
fields the reader uses plus their siblings (not a whole report), for the hostile and edge cases of test_import.py;
the whole 0.8.1 reports of the suite are GuideLLM's own runs (``guidellm08_reports.py``, tools/guidellm08).
GuideLLM 0.3.1's reports are written by GuideLLM itself (``guidellm_reports.py``, tools/guidellm).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planning.simulate.metrics import BenchmarkResult


def vllm_result(run: BenchmarkResult, *, model_id: str = "meta-llama/Meta-Llama-3-8B-Instruct",
                concurrency: int | None = None, request_rate: float | str = "inf", detailed: bool = False,
                metadata: dict[str, str] | None = None, within_slo: float | None = None) -> dict[str, Any]:
    """A ``vllm bench serve --save-result`` JSON for a run with ``run``'s statistics (``within_slo``: the share
    of requests meeting ``--goodput``'s SLOs, None = run without ``--goodput``)."""
    n = run.requests
    duration = n / run.requests_per_s
    out: dict[str, Any] = {"date": "20261128-101500", "endpoint_type": "openai-chat", "backend": "openai-chat",
                           "label": None, "model_id": model_id, "tokenizer_id": model_id, "num_prompts": n}
    out.update(metadata or {})
    out.update({"request_rate": request_rate, "burstiness": 1.0, "max_concurrency": concurrency})
    out.update({
        "duration": duration, "completed": n, "failed": 0, "total_input_tokens": run.input_len * n,
        "total_output_tokens": run.output_len * n, "request_throughput": run.requests_per_s,
        "request_goodput": None if within_slo is None else within_slo * run.requests_per_s, "output_throughput": run.output_tokens_per_s,
        "total_token_throughput": run.total_tokens_per_s,
        "latencies": [run.e2e_latency_ms_mean / 1e3] * n, "queue_times": [0.0] * n,
        "max_output_tokens_per_s": run.output_tokens_per_s * 1.2, "max_concurrent_requests": concurrency or n,
        "rtfx": 0.0,
    })
    if detailed:
        out.update({"input_lens": [run.input_len] * n, "output_lens": [run.output_len] * n,
                    "start_times": [0.0] * n, "ttfts": [run.ttft_ms_mean / 1e3] * n,
                    "itls": [[run.itl_ms_mean / 1e3] * (run.output_len - 1)] * n, "generated_texts": [""] * n,
                    "errors": [""] * n})
    for metric, mean, median, p99 in (("ttft", run.ttft_ms_mean, run.ttft_ms_p50, run.ttft_ms_p99),
                                      ("tpot", run.tpot_ms_mean, run.tpot_ms_p50, run.itl_ms_p90),
                                      ("itl", run.itl_ms_mean, run.itl_ms_mean, run.itl_ms_p90),
                                      ("e2el", run.e2e_latency_ms_mean, run.e2e_latency_ms_mean,
                                       run.e2e_latency_ms_mean)):
        out.update({f"mean_{metric}_ms": mean, f"median_{metric}_ms": median, f"std_{metric}_ms": 0.0,
                    f"p99_{metric}_ms": p99})
    return out


def _dist(mean: float, count: int) -> dict[str, Any]:
    pct = {k: mean for k in ("p001", "p01", "p05", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p999")}
    return {"mean": mean, "median": mean, "mode": mean, "variance": 0.0, "std_dev": 0.0, "min": mean, "max": mean,
            "count": count, "total_sum": mean * count, "percentiles": pct, "pdf": None, "mean_ci": None,
            "percentile_cis": None}


def _status(mean: float, count: int) -> dict[str, Any]:
    return {"successful": _dist(mean, count), "errored": _dist(0.0, 0), "incomplete": _dist(0.0, 0),
            "total": _dist(mean, count)}


def guidellm_benchmark(run: BenchmarkResult, strategy: dict[str, Any],
                       model: str = "meta-llama/Meta-Llama-3-8B-Instruct") -> dict[str, Any]:
    """One ``GenerativeBenchmark`` of a report, with ``run``'s statistics under ``strategy``."""
    n = run.requests
    metrics = {
        "request_totals": {"successful": n, "errored": 0, "incomplete": 0, "total": n},
        "requests_per_second": _status(run.requests_per_s, n),
        "request_concurrency": _status(float(run.concurrency or 1), n),
        "request_latency": _status(run.e2e_latency_ms_mean / 1e3, n),
        "prompt_token_count": _status(float(run.input_len), n),
        "output_token_count": _status(float(run.output_len), n),
        "total_token_count": _status(float(run.input_len + run.output_len), n),
        "time_to_first_token_ms": _status(run.ttft_ms_mean, n),
        "time_per_output_token_ms": _status(run.tpot_ms_mean, n),
        "inter_token_latency_ms": _status(run.itl_ms_mean, n),
        "output_tokens_per_second": _status(run.output_tokens_per_s, n),
        "tokens_per_second": _status(run.total_tokens_per_s, n),
    }
    return {"type_": "generative_benchmark", "id_": "b", "run_id": "r", "run_index": 0,
            "config": {"id_": "c", "run_id": "r", "run_index": 0, "strategy": strategy, "constraints": {},
                       "sample_size": None, "profile": {}, "requests": {}, "backend": {"model": model},
                       "environment": {}},
            "metrics": metrics, "warnings": []}


def guidellm_report(benchmarks: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``GenerativeBenchmarksReport`` holding ``benchmarks``."""
    return {"metadata": {"version": 2, "guidellm_version": "0.8.1", "python_version": "3.11", "platform": "Linux"},
            "config": {}, "benchmarks": benchmarks, "conclusions": []}


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
