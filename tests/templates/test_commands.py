"""``planning place``: single and list instances, JSON and text output, clear file errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from planning.cli import templates as commands
from planning.errors import PlanningError
from planning.templates import place

INSTANCE = {"layers": 4, "thr": [[[16, 12, 8, 0], [16, 12, 8, 0]], [[14, 9, 4, 0], [14, 9, 4, 0]]]}


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="planning")
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_single_instance_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "one.json"
    f.write_text(json.dumps(INSTANCE))
    assert _run(["place", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    api = place(INSTANCE["layers"], INSTANCE["thr"])  # CLI ≡ API
    assert out["throughput"] == api.throughput == 9.0
    assert out["stages"] == [{"layers": s.layers, "nodes": list(s.nodes)} for s in api.stages]
    assert out["seconds"] >= 0


def test_list_in_list_out_and_methods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "many.json"
    f.write_text(json.dumps([INSTANCE, {"layers": 3, "thr": [[[5, 0, 0]]]}]))
    assert _run(["place", str(f), "--json", "--method", "brute"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, list) and len(out) == 2
    assert out[0]["throughput"] == 9.0 and out[1]["throughput"] == 0 and out[1]["stages"] == []


def test_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "one.json"
    f.write_text(json.dumps(INSTANCE))
    assert _run(["place", str(f)]) == 0
    text = capsys.readouterr().out
    assert "throughput 9" in text and "layers 0-1 (2)" in text


def test_bad_json_reports_position(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{"layers": 2,\n "thr": [[[1, 1]]')
    with pytest.raises(PlanningError, match="line 2, column"):
        _run(["place", str(f)])


def test_bad_instance_names_index(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps([INSTANCE, {"layers": 2, "thr": [[[1, -1]]]}]))
    with pytest.raises(PlanningError) as err:
        _run(["place", str(f)])
    assert err.value.field == "instances[1].thr[0][0][1]"
    f.write_text(json.dumps({"layers": 2}))
    with pytest.raises(PlanningError, match="missing thr"):
        _run(["place", str(f)])


def test_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "big.json"
    f.write_text(json.dumps(INSTANCE))
    monkeypatch.setattr(commands, "MAX_FILE_BYTES", 10)
    with pytest.raises(PlanningError, match="limit"):
        _run(["place", str(f)])
