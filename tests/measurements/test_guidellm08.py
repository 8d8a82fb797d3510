"""GuideLLM 0.8 reports written by GuideLLM itself (tests/measurements/guidellm08_reports.py) import as written.

The default suite reads the committed ``data/guidellm-0.8.1-*.json`` — real ``guidellm run`` reports of runs
against GuideLLM's own mock server (``make guidellm08-fixtures``) — and checks what ``planning measurements
import`` takes from them against the files' own statistics and the latencies the mock server was told to serve.
With GuideLLM 0.8.1 installed (tools/guidellm08; ``make test-guidellm08``, marker ``guidellm08``) every committed
file must load as GuideLLM's own report model.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from planning.cli import main
from planning.measurements.readers import Setup, read_file
from tests.measurements.guidellm08_reports import DATA, GUIDELLM08_VERSION, ITL_MS, MODEL, RUNS, TTFT_MS

ROOT = Path(__file__).resolve().parents[2]
FILES = [DATA / f"guidellm-{GUIDELLM08_VERSION}-{name}.json" for name in RUNS]


def _given(v: float | None) -> float | None:
    """A listed value, None where the list says NaN (not measured)."""
    return None if v is None or math.isnan(v) else v


def _report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_the_committed_reports_are_of_the_guidellm_the_lock_pins() -> None:
    lock = tomllib.loads((ROOT / "tools" / "guidellm08" / "uv.lock").read_text(encoding="utf-8"))
    assert {p["version"] for p in lock["package"] if p["name"] == "guidellm"} == {GUIDELLM08_VERSION}
    for path in FILES:
        data = _report(path)
        assert list(data) == ["metadata", "config", "benchmarks", "conclusions"]  # 0.8's report layout
        assert data["metadata"]["guidellm_version"] == GUIDELLM08_VERSION


def test_cli_imports_guidellm_08_reports_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    assert main(["measurements", "import", *map(str, FILES), "--gpu", "A10G", "--count", "1"]) == 0
    assert "4 point(s) read, 4 new" in capsys.readouterr().out
    assert main(["measurements", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    loads = sorted((_given(r["concurrency"]) or 0, _given(r["request_rate"]) or 0) for r in rows)
    assert loads == [(0, 3.0), (1, 0), (2, 0), (4, 0)]  # poisson at 3 req/s; synchronous = 1 client; 2 and 4 streams
    assert {(r["model"], r["source"]) for r in rows} == {(MODEL, "guidellm")}


@pytest.mark.parametrize("path", FILES, ids=list(RUNS))
def test_each_point_is_its_benchmarks_own_statistics(path: Path) -> None:
    points = read_file(path, Setup(gpu="A10G", count=1))
    benchmarks = _report(path)["benchmarks"]
    assert len(points) == len(benchmarks)
    for m, b in zip(points, benchmarks, strict=True):
        stats = b["metrics"]
        mean = {k: stats[k]["successful"]["mean"] for k in ("time_to_first_token_ms", "inter_token_latency_ms",
                                                              "time_per_output_token_ms", "output_tokens_per_second")}
        assert (m.ttft_ms_mean, m.itl_ms_mean, m.tpot_ms_mean, m.output_tokens_per_s) == pytest.approx(
            (mean["time_to_first_token_ms"], mean["inter_token_latency_ms"], mean["time_per_output_token_ms"],
             mean["output_tokens_per_second"]), rel=1e-12)
        assert m.requests == stats["request_totals"]["successful"]
        # the mock server waits its TTFT and ITL before each token: what GuideLLM measured is never less
        assert m.ttft_ms_mean is not None and m.ttft_ms_mean >= TTFT_MS
        assert m.itl_ms_mean is not None and m.itl_ms_mean >= ITL_MS


@pytest.mark.guidellm08
@pytest.mark.parametrize("path", FILES, ids=list(RUNS))
def test_guidellm_loads_the_committed_reports(path: Path) -> None:
    from guidellm.benchmark import GenerativeBenchmarksReport

    report = GenerativeBenchmarksReport.load_file(path)
    assert len(report.benchmarks) == len(_report(path)["benchmarks"])
