"""Hostile values through the public CLI: each is a one-line error naming the field (exit 2), never a crash,
an overflow, a hang or a segmentation fault (found by an audit of issue 8, 2026-11-25)."""

from __future__ import annotations

import json
import sqlite3
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
def test_out_of_range_numbers_are_refused_quickly(argv: list[str], field: str, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before the work the number would size: no arrivals are drawn, no simulation or benchmark replay
    runs and (for ``perf``) no step-time curve is computed (each of those raises here, which would exit 3);
    the one-line error names the field (exit 2). Quick by construction, not by a stopwatch."""
    import planning.perf.model as perf_model
    import planning.simulate.bench as bench
    import planning.simulate.run as sim_run

    def work(*_a: object, **_k: object) -> None:
        raise AssertionError("the work started before the value was refused")

    for module, name in ((sim_run, "simulate_topology"), (sim_run, "poisson_arrivals"), (bench, "replay")):
        monkeypatch.setattr(module, name, work)
    if argv[0] == "perf":
        monkeypatch.setattr(perf_model.PerfModel, "_curves", work)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and len(err) < 600 and "Traceback" not in err


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


def _melange(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {"workload_distribution": [[0.5, 0.5]], "total_request_rate": 10,
                               "gpu_info": {"A10G": {"cost": 1.0, "tputs": [[2.0, 1.0]]},
                                            "L4": {"cost": 0.8, "tputs": [[1.5, 0.7]]}}}
    return {**base, **changes}


@pytest.mark.parametrize(("text", "field"), [
    (json.dumps(_melange()).replace('"total_request_rate": 10', '"total_request_rate": ' + "9" * 5001),
     "total_request_rate"),
    (json.dumps(_melange(total_request_rate=1e300)), "total_request_rate"),
    (json.dumps(_melange(gpu_info={"A10G": {"cost": 1.0, "tputs": [[1e-300, 1e-300]]}})), "gpu_info.A10G.tputs[0][0]"),
    (json.dumps(_melange(gpu_info={"A10G": {"cost": 1.0, "tputs": [[1e300, 1.0]]}})), "gpu_info.A10G.tputs[0][0]"),
    (json.dumps(_melange(gpu_info={"A10G": {"cost": 1e300, "tputs": [[1.0, 1.0]]}})), "gpu_info.A10G.cost"),
    (json.dumps(_melange(workload_distribution=[[1e300, 0.5]])), "workload_distribution[0][0]"),
    (json.dumps(_melange(workload_distribution=[[1e-300, 0.5]])), "workload_distribution[0][0]"),
    (json.dumps(_melange(bucket_edges=[0, 10, 1e300])), "bucket_edges[2]"),
    # a huge need on a slow GPU: its availability is capped at the scenario's bound, and the scenario is valid
    (json.dumps(_melange(total_request_rate=1e7, gpu_info={"A10G": {"cost": 1.0, "tputs": [[1e-9, 1e-9]]}})), ""),
    ('{"total_request_rate": 10, "total_request_rate": 20, "workload_distribution": [[1]], '
     '"gpu_info": {"A10G": {"cost": 1, "tputs": [[1]]}}}', "'total_request_rate' twice"),
    (json.dumps(_melange(total_request_rate=float("nan"))), "total_request_rate"),
])
def test_import_melange_bounds_every_number(tmp_path: Path, text: str, field: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`import-melange` parsed with plain json.loads: a 5,001-digit integer raised ValueError, 1e-300
    throughputs an OverflowError (exit 3); now every number is bounded and the error names the field."""
    path = tmp_path / "m.json"
    path.write_text(text)
    code = main(["import-melange", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err and len(err) < 600
    if field:
        assert code == 2 and field in err, err
    else:
        assert code == 0, err


def test_import_melange_rate_flag_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_melange()))
    assert main(["import-melange", str(path), "--rate", "1e300"]) == 2
    assert "--rate" in capsys.readouterr().err
