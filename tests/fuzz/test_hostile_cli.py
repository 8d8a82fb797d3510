"""Hostile values through the public CLI: each is a one-line error naming the field (exit 2), never a crash,
an overflow, a hang or a segmentation fault (found by an audit of issue 8, 2026-11-25)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from planning.cli import main
from planning.jobs.store import JobStore

HUGE = "9" * 400


@pytest.mark.parametrize(("argv", "field"), [
    (["perf", "--model", "llama-3-8b", "--gpu", "H100", "--input-len", HUGE], "input_len"),
    (["perf", "--model", "llama-3-8b", "--gpu", "H100", "--input-len", "512", "--batch", HUGE], "batch"),
    (["simulate", "--preset", "melange-arena", "--duration", "1e308"], "duration_s"),
    (["simulate", "--preset", "melange-arena", "--rate-scale", "1e300"], "rate_scale"),
    (["simulate", "--preset", "melange-arena", "--rate-scale", "900", "--duration", "600000"], "duration_s"),
    (["simulate", "--model", "llama-3-8b", "--gpu", "H100", "--input-len", "100", "--output-len", "100",
      "--concurrency", "9" * 24], "concurrency"),
    (["simulate", "--model", "llama-3-8b", "--gpu", "H100", "--input-len", "100", "--output-len", "100",
      "--concurrency", "8", "--requests", "100000000"], "requests"),
])
def test_out_of_range_numbers_are_refused_quickly(argv: list[str], field: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and len(err) < 600 and "Traceback" not in err
    assert time.perf_counter() - start < 30


@pytest.mark.parametrize("value", [10 ** 400, 1e308, 1e18, -1, 2.5])
def test_allocation_json_with_an_absurd_node_count(tmp_path: Path, value: float,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    problem = {"templates": [{"id": "a:H100", "group": "a/decode", "usage": {"1xH100": 1}, "throughput": {"a": 10.0}}],
               "offers": [{"region": "r", "shape": "1xH100", "price_per_hour": 4.0, "available": value}],
               "classes": [{"id": "a", "group": "a/decode", "rate": 5.0}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(problem))
    assert main(["allocate", str(path)]) == 2
    assert "available" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["afile/m.lp", "missing/m.lp", "m.txt", "."])
def test_a_model_dump_path_highs_cannot_write_is_refused_before_solving(tmp_path: Path, target: str,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS ended the process with a segmentation fault on a dump path under a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    assert main(["solve", "--preset", "melange-arena", "--dump-model", target]) == 2
    assert "--dump-model" in capsys.readouterr().err


def test_a_damaged_job_row_does_not_break_the_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.sqlite"
    with JobStore(path) as store:
        job_id, _ = store.create_or_reuse("k", "solve", {"a": 1}, None)
    with sqlite3.connect(path) as db:  # a valid database whose row holds text where numbers belong
        db.execute("UPDATE jobs SET created = 'notanumber', request_json = '{oops' WHERE id = ?",
                   (job_id,))
    assert main(["jobs", "--store", str(path), "list"]) == 0
    assert main(["jobs", "--store", str(path), "show", job_id]) == 0
    assert job_id in capsys.readouterr().out


@pytest.mark.parametrize("total", ["abc", HUGE, "[1, 2]", ".nan"])
def test_a_catalog_override_with_a_bad_parameter_count(tmp_path: Path, total: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "models.yaml").write_text(
        "- id: my-m\n  source: x\n  as_of: \"2025-01-01\"\n"
        f"  published_params: {{total: {total}}}\n"
        "  config: {model_type: llama, num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, "
        "num_key_value_heads: 8, intermediate_size: 14336, vocab_size: 128256, torch_dtype: bfloat16}\n")
    assert main(["catalog", "models", "--overrides", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "published_params.total" in err and len(err) < 600


def test_a_huge_variant_value_is_quoted_clipped(capsys: pytest.CaptureFixture[str]) -> None:
    """A 100,000-character --variant value came back whole in the error message."""
    assert main(["solve", "--preset", "coral-core", "--variant", "demand=" + "x" * 100_000]) == 2
    err = capsys.readouterr().err
    assert "demand" in err and len(err) < 600


def test_validate_refuses_what_solve_refuses_on_explicit_templates(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`validate` said valid (exit 0) for a duplicated explicit template id and for running instances of an
    unknown template, both of which `solve` refuses (exit 2)."""
    import yaml

    from planning.melange_import import import_melange

    example = Path(__file__).resolve().parents[1] / "data" / "melange" / "example.json"
    base = import_melange(example).to_dict()
    dup = {**base, "explicit_templates": base["explicit_templates"] + base["explicit_templates"][:1]}
    running = {**base, "current": [{"template_id": "nope", "region": base["offers"][0]["region"], "count": 1}]}
    for data, field in ((dup, "duplicate id"), (running, "current[0].template_id")):
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(data))
        assert main(["validate", str(path)]) == 2
        assert field in capsys.readouterr().err
    path.write_text(yaml.safe_dump(base))
    assert main(["validate", str(path)]) == 0
