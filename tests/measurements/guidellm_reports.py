"""GuideLLM reports written by GuideLLM's own classes: the default suite's GuideLLM 0.3.1 fixtures.

Each benchmark of a report is ``GenerativeBenchmark.from_stats`` (guidellm 0.3.1, benchmark/benchmark.py) over
per-request timings laid out here as the benchmarked server would give them (clients back to back, or Poisson
arrivals), so every statistic in the file is GuideLLM's own arithmetic; the report is saved with
``GenerativeBenchmarksReport.save_file``. GuideLLM lives in its own environment (tools/guidellm; 0.3.1 is the
newest GuideLLM without torch): ``make guidellm-fixtures`` rewrites ``data/guidellm-0.3.1-*.json`` and
``make test-guidellm`` checks them against a fresh build. The schedules below import nothing, so the default suite
computes from them what the files must say.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
GUIDELLM_VERSION = "0.3.1"
MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"
PROMPT_TOKENS, OUTPUT_TOKENS = 512, 128
T0 = 1_764_320_000.0  # 2025-11-28 08:53 UTC: the runs' wall clock


@dataclass(frozen=True)
class Run:
    """One benchmark of a report: its strategy and the server's latencies under it."""

    strategy: str  # synchronous | concurrent | poisson | constant
    ttft_ms: float
    itl_ms: float
    streams: int = 1
    rate: float = 0.0
    requests: int = 24


@dataclass(frozen=True)
class Timing:
    """One request as GuideLLM records it (seconds since the epoch)."""

    start: float
    first_token: float
    last_token: float


# Llama-3-8B on one A10G (vLLM): latencies near the simulator's, a little slower, as a user's server would be
REPORTS: dict[str, tuple[Run, ...]] = {
    "sweep": (Run("synchronous", 165.0, 36.5, requests=12), Run("concurrent", 420.0, 38.5, streams=4),
              Run("concurrent", 980.0, 51.0, streams=16, requests=48)),
    "poisson": (Run("poisson", 300.0, 42.0, rate=1.5, requests=30),),
}


def _jitter(i: int) -> float:
    """A deterministic ±4 % spread between requests (GuideLLM's summaries then have a width)."""
    return 1.0 + 0.04 * math.sin(1.7 * i)


def schedule(run: Run) -> list[Timing]:
    """The requests of ``run``: ``streams`` clients back to back (synchronous is one), or arrivals at ``rate``
    (Poisson: exponential gaps of a fixed seed; constant: even gaps)."""
    out: list[Timing] = []
    decode_s = (OUTPUT_TOKENS - 1) * run.itl_ms / 1e3
    if run.strategy in ("poisson", "constant"):
        import random

        rng = random.Random(42)
        t = T0
        for i in range(run.requests):
            t += rng.expovariate(run.rate) if run.strategy == "poisson" else 1.0 / run.rate
            first = t + run.ttft_ms / 1e3 * _jitter(i)
            out.append(Timing(t, first, first + decode_s * _jitter(i + 1)))
        return out
    streams = 1 if run.strategy == "synchronous" else run.streams
    clock = [T0 + 0.002 * s for s in range(streams)]
    for i in range(run.requests):
        s = i % streams
        first = clock[s] + run.ttft_ms / 1e3 * _jitter(i)
        last = first + decode_s * _jitter(i + 1)
        out.append(Timing(clock[s], first, last))
        clock[s] = last + 0.001
    return out


def _benchmark(run: Run, index: int) -> Any:
    """``GenerativeBenchmark.from_stats`` over ``schedule(run)``, with GuideLLM's own argument models."""
    from guidellm.benchmark.benchmark import (
        BenchmarkArgs,
        BenchmarkRunStats,
        GenerativeBenchmark,
        GenerativeTextResponseStats,
    )
    from guidellm.benchmark.profile import AsyncProfile, ConcurrentProfile, SynchronousProfile
    from guidellm.objects import StatusBreakdown
    from guidellm.request.loader import GenerativeRequestLoaderDescription
    from guidellm.scheduler import (
        AsyncConstantStrategy,
        AsyncPoissonStrategy,
        ConcurrentStrategy,
        GenerativeRequestsWorkerDescription,
        SchedulerRequestInfo,
        SynchronousStrategy,
    )

    strategy: Any
    if run.strategy == "synchronous":
        strategy, profile = SynchronousStrategy(), SynchronousProfile()
    elif run.strategy == "concurrent":
        strategy, profile = ConcurrentStrategy(streams=run.streams), ConcurrentProfile(streams=run.streams)
    else:
        cls = AsyncPoissonStrategy if run.strategy == "poisson" else AsyncConstantStrategy
        strategy = cls(rate=run.rate)
        profile = AsyncProfile(strategy_type=run.strategy, rate=run.rate)
    done = [GenerativeTextResponseStats(
        request_id=f"req-{index}-{i}", request_type="text_completions",
        scheduler_info=SchedulerRequestInfo(requested=True, completed=True, request_start=t.start,
                                            request_end=t.last_token),
        prompt="(prompt)", output="(output)", prompt_tokens=PROMPT_TOKENS,
        output_tokens=OUTPUT_TOKENS, start_time=t.start, end_time=t.last_token, first_token_time=t.first_token,
        last_token_time=t.last_token) for i, t in enumerate(schedule(run))]
    start, end = min(r.start_time for r in done), max(r.end_time for r in done)
    n = len(done)
    return GenerativeBenchmark.from_stats(
        run_id=f"run-{index}", successful=done, incomplete=[], errored=[],
        args=BenchmarkArgs(profile=profile, strategy_index=index, strategy=strategy, max_number=n,
                           max_duration=None, warmup_number=None, warmup_duration=None, cooldown_number=None,
                           cooldown_duration=None),
        run_stats=BenchmarkRunStats(
            start_time=start, end_time=end,
            requests_made=StatusBreakdown(successful=n, incomplete=0, errored=0, total=n),
            queued_time_avg=0.0, scheduled_time_delay_avg=0.0, scheduled_time_sleep_avg=0.0,
            worker_start_delay_avg=0.0, worker_time_avg=(end - start) / n, worker_start_time_targeted_delay_avg=0.0,
            request_start_time_delay_avg=0.0, request_start_time_targeted_delay_avg=0.0, request_time_delay_avg=0.0,
            request_time_avg=sum(r.request_latency for r in done) / n),
        worker=GenerativeRequestsWorkerDescription(backend_type="openai_http", backend_target="http://localhost:8000",
                                                   backend_model=MODEL),
        requests_loader=GenerativeRequestLoaderDescription(
            data=f"prompt_tokens={PROMPT_TOKENS},output_tokens={OUTPUT_TOKENS}", data_args=None, processor=MODEL,
            processor_args=None),
        extras=None)


def write_report(name: str, folder: Path) -> Path:
    """Build report ``name`` of :data:`REPORTS` with GuideLLM's classes and save it as GuideLLM does."""
    from guidellm.benchmark.output import GenerativeBenchmarksReport

    report = GenerativeBenchmarksReport(benchmarks=[_benchmark(r, i) for i, r in enumerate(REPORTS[name])])
    return Path(report.save_file(folder / f"guidellm-{GUIDELLM_VERSION}-{name}.json"))


def main(argv: list[str]) -> None:
    if argv != ["--write"]:
        raise SystemExit("usage: python -m tests.measurements.guidellm_reports --write")
    from importlib.metadata import version

    if version("guidellm") != GUIDELLM_VERSION:
        raise SystemExit(f"guidellm {version('guidellm')} is installed; these files are {GUIDELLM_VERSION}'s "
                         "(make install-guidellm)")
    DATA.mkdir(exist_ok=True)
    for name in REPORTS:
        print(write_report(name, DATA))


if __name__ == "__main__":
    main(sys.argv[1:])
