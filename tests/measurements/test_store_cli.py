"""The measurement store under $PLANNING_HOME, the API and `planning measurements import|list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planning import api
from planning.cli import main
from planning.errors import PlanningError
from planning.measurements.readers import Setup
from planning.measurements.store import load_store, store_path
from planning.simulate.metrics import BenchmarkResult
from tests.measurements.builders import vllm_result, write_json


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("PLANNING_HOME", str(h))
    return h


def test_import_stores_once_with_source(home: Path, tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    path = write_json(tmp_path / "bench.json", vllm_result(a10g_run, concurrency=8))
    rep = api.import_measurements([path], Setup(gpu="A10G", tp=1))
    assert (rep.added, rep.total, rep.store) == (1, 1, home / "measurements" / "measurements.csv")
    again = api.import_measurements([path], Setup(gpu="A10G", tp=1))
    assert (again.added, again.total) == (0, 1)
    [m] = load_store(store_path())
    assert m == rep.points[0]  # the stored row reads back as the same point
    frame = api.measurements_frame()
    assert frame["source"].tolist() == ["vllm-bench-serve"] and frame["file"].tolist() == ["bench.json"]
    assert not list((home / "measurements").glob("*.tmp*"))  # atomic write left no temp file


def test_a_refused_file_stores_nothing(home: Path, tmp_path: Path, a10g_run: BenchmarkResult) -> None:
    good = write_json(tmp_path / "good.json", vllm_result(a10g_run, concurrency=8))
    bad = vllm_result(a10g_run, concurrency=8)
    bad["mean_itl_ms"] = 1.0
    with pytest.raises(PlanningError, match="faster than the hardware"):
        api.import_measurements([good, write_json(tmp_path / "bad.json", bad)], Setup(gpu="A10G", tp=1))
    assert api.measurements_frame().empty


def test_cli_import_and_list(home: Path, tmp_path: Path, a10g_run: BenchmarkResult,
                             capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path / "bench.json", vllm_result(a10g_run, concurrency=8))
    assert main(["measurements", "import", str(path), "--gpu", "A10G", "--tp", "1"]) == 0
    assert "1 point(s) read, 1 new" in capsys.readouterr().out
    assert main(["measurements", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["model"], r["gpu"], r["concurrency"]) for r in rows] == [("llama-3-8b", "A10G", 8)]
    assert main(["measurements", "import", str(path)]) == 2  # no --gpu: a named error, exit code 2
    assert "--gpu" in capsys.readouterr().err


def test_cli_fit_prints_errors_before_and_after(home: Path, tmp_path: Path, a10g_run: BenchmarkResult,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["measurements", "fit"]) == 0
    assert "no measurements stored" in capsys.readouterr().out
    path = write_json(tmp_path / "bench.json", vllm_result(a10g_run, concurrency=8))
    assert main(["measurements", "import", str(path), "--gpu", "A10G", "--tp", "1", "--json"]) == 0
    capsys.readouterr()
    assert main(["measurements", "fit", "--no-loo", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    [row] = out["settings"]
    assert (row["model"], row["shape"], row["points"]) == ("llama-3-8b", "1xA10G", 1)
    assert row["error_before"] < 0.05 and row["error_leave_one_out"] is None  # the simulator's own run
    assert {p["quantity"] for p in out["points"]} == {"ttft_ms", "itl_ms", "output_tokens_per_s"}


def test_cli_help_names_both_guidellm_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # GuideLLM 0.3 wrote reports with `guidellm benchmark`; 0.8 has no such command, only `guidellm run`
    with pytest.raises(SystemExit):
        main(["measurements", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "guidellm benchmark --output-path" in text and "guidellm run --output kind=json,path=" in text
    with pytest.raises(SystemExit):
        main(["measurements", "import", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "`guidellm benchmark`" in text and "`guidellm run`" in text
