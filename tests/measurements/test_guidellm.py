"""GuideLLM reports written by GuideLLM's own classes (tests/measurements/guidellm_reports.py) import as written.

The default suite reads the committed ``data/guidellm-0.3.1-*.json``, which GuideLLM 0.3.1 wrote
(``make guidellm-fixtures``), and checks what ``planning measurements import`` takes from them against the request
schedules they were built from. With GuideLLM installed (tools/guidellm; ``make test-guidellm``, marker
``guidellm``) the reports are built afresh and must validate as GuideLLM's own model and read the same.
"""

from __future__ import annotations

import json
import math
import statistics
import tomllib
from pathlib import Path

import pytest

from planning.cli import main
from planning.errors import PlanningError
from planning.measurements.readers import Setup, read_file
from planning.measurements.schema import Measurement
from tests.measurements.guidellm_reports import DATA, GUIDELLM_VERSION, OUTPUT_TOKENS, REPORTS, schedule

ROOT = Path(__file__).resolve().parents[2]
A10G = Setup(gpu="A10G", count=1)


def _committed(name: str) -> Path:
    return DATA / f"guidellm-{GUIDELLM_VERSION}-{name}.json"


def test_the_committed_reports_are_of_the_guidellm_the_lock_pins() -> None:
    lock = tomllib.loads((ROOT / "tools" / "guidellm" / "uv.lock").read_text(encoding="utf-8"))
    assert {p["version"] for p in lock["package"] if p["name"] == "guidellm"} == {GUIDELLM_VERSION}
    for name in REPORTS:
        data = json.loads(_committed(name).read_text(encoding="utf-8"))
        assert list(data) == ["benchmarks"]  # 0.3's report: no metadata, strategy under args, model in worker
        assert {b["type_"] for b in data["benchmarks"]} == {"generative_benchmark"}


def test_cli_imports_guidellm_031_reports_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    files = [str(_committed(name)) for name in REPORTS]
    assert main(["measurements", "import", *files, "--gpu", "A10G", "--count", "1"]) == 0
    assert "4 point(s) read, 4 new" in capsys.readouterr().out
    assert main(["measurements", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["model"], r["source"], _given(r["concurrency"]), _given(r["request_rate"])) for r in rows] == [
        ("llama-3-8b", "guidellm", 1, None), ("llama-3-8b", "guidellm", 4, None),
        ("llama-3-8b", "guidellm", 16, None), ("llama-3-8b", "guidellm", None, 1.5)]
    assert {r["date"] for r in rows} == {"2025-11-28"}  # the runs' start, 0.3 reports carry no version


@pytest.mark.parametrize("name", list(REPORTS))
def test_guidellm_031_statistics_are_the_schedules(name: str) -> None:
    points = read_file(_committed(name), A10G)
    assert len(points) == len(REPORTS[name])
    for run, m in zip(REPORTS[name], points, strict=True):
        timings = schedule(run)
        ttfts = [1e3 * (t.first_token - t.start) for t in timings]
        itls = [1e3 * (t.last_token - t.first_token) / (OUTPUT_TOKENS - 1) for t in timings]
        assert m.ttft_ms_mean == pytest.approx(statistics.fmean(ttfts), rel=1e-9)
        assert m.ttft_ms_p50 == pytest.approx(statistics.median(ttfts), rel=0.02)
        assert m.itl_ms_mean == pytest.approx(statistics.fmean(itls), rel=1e-9)
        assert (m.input_len, m.output_len) == pytest.approx((512, OUTPUT_TOKENS)) and m.requests == run.requests
        span = max(t.last_token for t in timings) - min(t.start for t in timings)
        assert m.output_tokens_per_s == pytest.approx(run.requests * OUTPUT_TOKENS / span, rel=0.05)


def test_a_damaged_031_report_names_the_field(tmp_path: Path) -> None:
    data = json.loads(_committed("sweep").read_text(encoding="utf-8"))
    del data["benchmarks"][1]["args"]["strategy"]
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(PlanningError, match=r"benchmarks\[1\]\.args\.strategy"):
        read_file(path, A10G)
    data = json.loads(_committed("sweep").read_text(encoding="utf-8"))
    data["benchmarks"][0]["worker"].pop("backend_model")
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(PlanningError, match="--model"):
        read_file(path, A10G)
    assert read_file(path, Setup(gpu="A10G", count=1, model="llama-3-8b"))[0].model == "llama-3-8b"


@pytest.mark.guidellm
def test_guidellm_builds_the_committed_reports(tmp_path: Path) -> None:
    """GuideLLM's own model loads the committed files, and a fresh build reads the same points."""
    from importlib.metadata import version

    from guidellm.benchmark.output import GenerativeBenchmarksReport

    from tests.measurements.guidellm_reports import write_report

    assert version("guidellm") == GUIDELLM_VERSION
    for name in REPORTS:
        committed = GenerativeBenchmarksReport.load_file(_committed(name))
        assert len(committed.benchmarks) == len(REPORTS[name])
        fresh = write_report(name, tmp_path)
        assert _points(fresh) == _points(_committed(name)), "rewrite them: make guidellm-fixtures"


@pytest.mark.guidellm
def test_cli_imports_a_report_guidellm_just_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tests.measurements.guidellm_reports import write_report

    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    path = write_report("sweep", tmp_path)
    assert main(["measurements", "import", str(path), "--gpu", "A10G", "--count", "1"]) == 0
    assert "3 point(s) read, 3 new" in capsys.readouterr().out


def _given(v: float | None) -> float | None:
    """A listed value, None where the list says NaN (not measured)."""
    return None if v is None or math.isnan(v) else v


def _points(path: Path) -> list[Measurement]:
    return read_file(path, A10G)
