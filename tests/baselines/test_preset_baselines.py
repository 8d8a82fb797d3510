"""The presets' plans and baselines through ``planning solve --preset P --json`` are the ones recorded before the
baselines' shortcuts (issue 41 §3: faster, the same answers): the plan's cost, and every baseline's cost, served
fractions, GPUs and note, the baselines run beside each other on two processes (``baselines.beside``). The
baselines' ILPs stop on work (HiGHS nodes), so a busy machine gives the same answers;
only one a wall clock stopped (``time_limited``: its far safety net or the solve's deadline) has no fixed answer,
and it must say so in its note. So has one the solve's own deadline left no time for (``ran`` false: on a busy
machine the preset's time limit goes to the plan); it must carry the note "not run: time limit"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import planning.cli
from planning.pipeline import NOT_RUN

RECORDED = json.loads((Path(__file__).parent / "data" / "preset_baselines.json").read_text())["presets"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["coral-core", "coral-extended", "catalog-wide"])
def test_preset_plan_and_baselines_are_the_recorded_ones(preset: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, preset_plans: Any) -> None:
    """The CLI's run is the session's (``tests/conftest.py``: ``planning solve --preset P --json --out PLAN``, the
    result cache off, solved once and shared with the preset walks)."""
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "off")
    run = preset_plans.cli(preset)
    assert run.code == 0
    _recorded(preset, json.loads(run.text))


def test_baselines_beside_each_other_give_the_recorded_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """coral-core through the CLI with its baselines beside each other on two pool processes, as a user's solve
    runs them (the suite runs them in-process, ``tests/conftest.py``): the recorded plan and baselines, every
    baseline but memP started beside the allocation on its single-GPU-type templates and its answer taken
    (``beside.EarlyStart``)."""
    from planning.baselines.beside import EarlyStart

    monkeypatch.setenv("PLANNING_HOME", str(tmp_path))
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "off")
    monkeypatch.setenv("PLANNING_BASELINE_WORKERS", "2")
    taken: list[list[str]] = []
    usable = EarlyStart.usable
    monkeypatch.setattr(EarlyStart, "usable", lambda self, problem: taken.append(usable(self, problem)) or taken[-1])
    assert planning.cli.main(["solve", "--preset", "coral-core", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _recorded("coral-core", doc)
    assert len(taken) == 1 and sorted(taken[0]) == sorted(b["name"] for b in doc["baselines"] if b["name"] != "memp")


def _recorded(preset: str, doc: dict[str, Any]) -> None:
    """``doc`` (a ``planning solve --json``) is the recorded answer of ``preset``, plan and baselines."""
    want = RECORDED[preset]
    assert (doc["status"], _ulps(doc["cost_per_hour"])) == (want["status"], _ulps(want["cost_per_hour"]))
    assert [b["name"] for b in doc["baselines"]] == [b["name"] for b in want["baselines"]]
    for got, recorded in zip(doc["baselines"], want["baselines"], strict=True):
        if got["time_limited"]:
            assert "time-limited: " in got["note"], got
            continue
        if not got["ran"]:
            assert got["note"] == NOT_RUN, got
            continue
        assert {k: _ulps(got[k]) for k in recorded} == {k: _ulps(v) for k, v in recorded.items()}


def _ulps(value: object) -> object:
    """A float to 12 significant digits, so that an equal plan summed in another order (parts settled or merged
    in another order: 250.49643 vs 250.49642999999998) compares equal; any other value as it is."""
    return float(f"{value:.12g}") if isinstance(value, float) else value
