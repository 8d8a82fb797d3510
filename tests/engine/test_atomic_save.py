"""Atomic saves: no temp files left behind on any failure, the existing file's mode kept, clean errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from planning.catalog.presets import load_preset
from planning.errors import PlanningError
from planning.scenario import Scenario, atomic_write_text, load_scenario, save_scenario


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "plan.yaml"
    target.write_text("old", encoding="utf-8")
    for mode in (0o640, 0o604, 0o755):
        os.chmod(target, mode)
        atomic_write_text(target, f"new {mode}")
        assert _mode(target) == mode
        assert target.read_text(encoding="utf-8") == f"new {mode}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]


def test_new_file_gets_the_umask_mode_not_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        target = atomic_write_text(tmp_path / "new.json", "{}")
    finally:
        os.umask(old)
    assert _mode(target) == 0o644


def test_failed_write_leaves_no_temp_file_and_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "plan.yaml"
    target.write_text("keep me", encoding="utf-8")
    os.chmod(target, 0o640)
    with pytest.raises(PlanningError, match="UTF-8"):
        atomic_write_text(target, "bad surrogate \udcff")  # encoding fails mid-write
    assert target.read_text(encoding="utf-8") == "keep me" and _mode(target) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]


def test_failed_rename_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "plan.yaml"

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PlanningError, match="No space left"):
        atomic_write_text(target, "text")
    assert list(tmp_path.iterdir()) == []


def test_out_under_a_file_and_a_directory_are_clean_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(PlanningError, match="a file is in the way") as err:
        atomic_write_text(blocker / "sub" / "out.json", "{}")
    assert err.value.field == "path"
    with pytest.raises(PlanningError, match="is a directory"):
        atomic_write_text(tmp_path, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_save_round_trip_keeps_mode(tmp_path: Path) -> None:
    scenario = Scenario.from_dict(load_preset("coral-core"))
    path = tmp_path / "s.yaml"
    save_scenario(scenario, path)
    os.chmod(path, 0o600)
    save_scenario(scenario, path)
    assert _mode(path) == 0o600 and load_scenario(path) == scenario
