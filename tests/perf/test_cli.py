"""`planning perf` through planning.cli.main: text, JSON, errors, and agreement with the API."""

from __future__ import annotations

import json

import pytest

import planning.cli
from planning.perf import PerfModel


@pytest.fixture(autouse=True)
def _only_built_areas(monkeypatch: pytest.MonkeyPatch) -> None:
    # planning.cli imports every area's commands; areas not merged yet must not break these tests.
    present = []
    for name in planning.cli._COMMAND_MODULES:
        try:
            __import__(name)
        except ModuleNotFoundError:
            continue
        present.append(name)
    monkeypatch.setattr(planning.cli, "_COMMAND_MODULES", tuple(present))


def test_perf_json_matches_api(capsys: pytest.CaptureFixture[str], pm: PerfModel) -> None:
    code = planning.cli.main(["perf", "--model", "llama-3-8b", "--gpu", "H100", "--batch", "4", "--input-len", "1000",
                              "--output-len", "200", "--ttft", "500", "--tpot", "40", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    api = pm.estimate("llama-3-8b", "H100", batch=4, input_len=1000, output_len=200, ttft_ms=500, tpot_ms=40)
    for key in ("prefill_ms", "decode_step_ms", "fits", "provenance", "memory", "band",
                "max_prefill_tokens_per_s", "max_decode_tokens_per_s"):
        assert key in out
    assert out["prefill_ms"] == pytest.approx(api.prefill_ms)
    assert out["decode_step_ms"] == pytest.approx(api.decode_step_ms)
    assert out["fits"] is True and out["provenance"]["decode_step_ms"] == "calibrated"


def test_perf_text_and_oom_is_an_answer(capsys: pytest.CaptureFixture[str]) -> None:
    code = planning.cli.main(["perf", "--model", "llama-3-70b", "--gpu", "T4", "--batch", "1", "--input-len", "100"])
    assert code == 0
    text = capsys.readouterr().out
    assert ("DOES NOT FIT" in text and "roofline" not in text.split("\n")[1]) or "calibrated" in text


def test_unknown_model_names_closest(capsys: pytest.CaptureFixture[str]) -> None:
    code = planning.cli.main(["perf", "--model", "lama-3-8b", "--gpu", "H100", "--batch", "1", "--input-len", "10"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown id 'lama-3-8b'" in err and "llama-3-8b" in err


def test_unknown_gpu_and_fp8_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert planning.cli.main(["perf", "--model", "phi-4", "--gpu", "H10", "--batch", "1", "--input-len", "10"]) == 2
    assert "H100" in capsys.readouterr().err
    assert planning.cli.main(["perf", "--model", "phi-4", "--gpu", "V100", "--dtype", "fp8", "--batch", "1",
                              "--input-len", "10"]) == 2
    assert "FP8" in capsys.readouterr().err


def test_invalid_tp_names_valid_choices(capsys: pytest.CaptureFixture[str]) -> None:
    code = planning.cli.main(["perf", "--model", "phi-4", "--gpu", "L4", "--count", "8", "--tp", "8", "--batch", "1",
                              "--input-len", "10"])
    assert code == 2
    assert "use one of" in capsys.readouterr().err


def test_perf_reports_ttft_under_load(capsys: pytest.CaptureFixture[str], pm: PerfModel) -> None:
    """--request-rate: TTFT and TPOT at that load (text and JSON, the API's numbers); a rate beyond the node's
    peak says there is no steady state."""
    args = ["perf", "--model", "llama-3-8b", "--gpu", "H100", "--input-len", "1000", "--output-len", "200"]
    assert planning.cli.main([*args, "--request-rate", "10", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["serving_at_rate"]
    api = pm.serving("llama-3-8b", "H100", input_len=1000, output_len=200, request_rate=10)
    assert api is not None and data["ttft_ms"] == pytest.approx(api.ttft_ms) and data["request_rate"] == 10
    assert planning.cli.main([*args, "--request-rate", "10"]) == 0
    assert f"TTFT {api.ttft_ms:,.0f} ms under load" in capsys.readouterr().out
    assert planning.cli.main([*args, "--request-rate", "1000"]) == 0
    assert "no steady state" in capsys.readouterr().out
