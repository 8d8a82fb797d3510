"""vLLM result files written by vLLM itself (tests/measurements/vllm_results.py) import as written.

The default suite reads the committed ``data/vllm-0.33.0-*.json`` — ``vllm bench serve --save-result`` files of
vLLM 0.33.0's own runs against tools/vllmbench's fake server (``make vllm-fixtures``) — and checks that ``planning
measurements import`` takes from them exactly what the files state, with no edit: the setup from flags or from the
file's ``--metadata`` pairs, the load, the statistics, the goodput share and the per-request lists.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from planning.cli import main
from planning.measurements.readers import Setup, read_file
from tests.measurements.vllm_results import (
    DATA,
    INPUT_LEN,
    ITL_MS,
    METADATA,
    MODEL,
    OUTPUT_LEN,
    PROMPTS,
    RUNS,
    TTFT_MS,
    VLLM_VERSION,
)

ROOT = Path(__file__).resolve().parents[2]
FILES = {name: DATA / f"vllm-{VLLM_VERSION}-{name}.json" for name in RUNS}
FLAGS = Setup(gpu="A10G", count=1)


def _result(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _given(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else v


def test_the_committed_files_are_of_the_vllm_the_tool_pins() -> None:
    pins = (ROOT / "tools" / "vllmbench" / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(rf"^vllm=={re.escape(VLLM_VERSION)}$", pins, re.M)
    for path in FILES.values():
        data = _result(path)
        assert list(data)[:7] == ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
                                  "num_prompts"]  # serve.py's result_json opens with the setup keys
        assert (data["model_id"], data["num_prompts"], data["completed"], data["failed"]) == (MODEL, PROMPTS,
                                                                                              PROMPTS, 0)
    assert all(_result(FILES["goodput"])[k] == v for k, v in METADATA.items())  # --metadata pairs as written


def test_cli_imports_vllms_own_files_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    # the goodput run names its setup with --metadata; the other asks for it as flags
    assert main(["measurements", "import", str(FILES["goodput"])]) == 0
    assert main(["measurements", "import", str(FILES["concurrency"]), "--gpu", "A10G", "--count", "1"]) == 0
    assert "1 point(s) read, 1 new" in capsys.readouterr().out
    assert main(["measurements", "list", "--json"]) == 0
    rows = {r["file"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {p.name for p in FILES.values()}
    for name, path in FILES.items():
        row, data = rows[path.name], _result(path)
        assert (row["model"], row["gpu"], row["count"], row["tp"], row["source"]) == (MODEL, "A10G", 1, 1,
                                                                                       "vllm-bench-serve")
        assert (row["input_len"], row["output_len"], row["requests"]) == (INPUT_LEN, OUTPUT_LEN, PROMPTS)
        assert row["ttft_ms_mean"] == data["mean_ttft_ms"] and row["tpot_ms_p99"] == data["p99_tpot_ms"]
        assert row["output_tokens_per_s"] == data["output_throughput"] and row["date"] == data["date"]
        assert row["engine_version"] == (VLLM_VERSION if name == "goodput" else "")
    assert (_given(rows[FILES["concurrency"].name]["concurrency"]), _given(rows[FILES["goodput"].name]["request_rate"])
            ) == (4, 4.0)


@pytest.mark.parametrize("name", list(RUNS))
def test_each_point_is_its_files_own_statistics(name: str) -> None:
    path = FILES[name]
    data = _result(path)
    [m] = read_file(path, FLAGS)
    for metric in ("ttft", "itl", "tpot"):
        assert (getattr(m, f"{metric}_ms_mean"), getattr(m, f"{metric}_ms_p50"), getattr(m, f"{metric}_ms_p99")) == (
            data[f"mean_{metric}_ms"], data[f"median_{metric}_ms"], data[f"p99_{metric}_ms"])
    assert (m.output_tokens_per_s, m.requests_per_s) == (data["output_throughput"], data["request_throughput"])
    # the fake server sleeps its TTFT before the first token and its ITL between tokens: vLLM never saw less
    assert m.ttft_ms_mean is not None and m.ttft_ms_mean >= TTFT_MS
    assert m.itl_ms_mean is not None and m.itl_ms_mean >= ITL_MS


def test_goodput_and_per_request_lists_come_through() -> None:
    data = _result(FILES["goodput"])
    [m] = read_file(FILES["goodput"])
    assert m.slo_attainment == pytest.approx(data["request_goodput"] / data["request_throughput"], rel=1e-12)
    assert m.ttft_ms_each == pytest.approx([1e3 * t for t in data["ttfts"]], rel=1e-12)
    assert m.tpot_ms_each == pytest.approx([1e3 * sum(g) / len(g) for g in data["itls"]], rel=1e-12)
    # vLLM's goodput share is the share of the per-request lists within --goodput ttft:300 tpot:40: the fake server
    # paced every second request at 45 ms a token, so about half miss
    within = [t <= 300 and p is not None and p <= 40 for t, p in zip(m.ttft_ms_each, m.tpot_ms_each, strict=True)]
    assert m.slo_attainment == pytest.approx(sum(within) / len(within))
    assert 0 < m.slo_attainment < 1
    [plain] = read_file(FILES["concurrency"], FLAGS)
    assert plain.slo_attainment is None and not plain.ttft_ms_each  # run without --goodput / --save-detailed
