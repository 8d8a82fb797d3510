"""tests/conftest.py's PresetPlans: a preset solved by one process of the session is read, not solved again, by
every other (pytest-xdist), and a solve that raised is solved again by the next asker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PresetPlans, session_folder

ROOT = Path(__file__).resolve().parents[1]


def _counting(calls: list[str], text: str = '{"plan": 1}', code: int = 0):  # type: ignore[no-untyped-def]
    def solve(name: str, out: Path) -> int:
        calls.append(name)
        out.write_text(text)
        return code

    return solve


def test_a_second_process_reads_the_first_ones_plan(tmp_path: Path) -> None:
    """Two PresetPlans on one folder (what two xdist processes hold): the second returns the first's exit code
    and text and never calls its own solve; another preset is still solved, once."""
    first_calls: list[str] = []
    second_calls: list[str] = []
    first = PresetPlans(tmp_path, _counting(first_calls, '{"cost": 42}', code=3))
    second = PresetPlans(tmp_path, _counting(second_calls, "never written"))
    assert first.cli("enterprise").code == 3
    assert second.cli("enterprise").text == '{"cost": 42}' and second.cli("enterprise").code == 3
    assert first_calls == ["enterprise"] and second_calls == []
    second.cli("coral-core")
    first.cli("coral-core")
    assert first_calls == ["enterprise"] and second_calls == ["coral-core"]


def test_a_solve_that_raised_is_solved_again_by_the_next_asker(tmp_path: Path) -> None:
    """A solve that raises writes no exit code: the next asker (this process or another) solves it itself."""

    def broken(name: str, out: Path) -> int:
        out.write_text("half")
        raise RuntimeError("the solver died")

    with pytest.raises(RuntimeError):
        PresetPlans(tmp_path, broken).cli("enterprise")
    calls: list[str] = []
    assert PresetPlans(tmp_path, _counting(calls, "whole")).cli("enterprise").text == "whole"
    assert calls == ["enterprise"]


def test_a_plan_solved_in_another_process_is_read_here(tmp_path: Path) -> None:
    """A real second process (a fresh interpreter, as an xdist worker is) solves a preset into the folder; this
    one then reads its text without solving."""
    child = ("import sys; from pathlib import Path; from tests.conftest import PresetPlans\n"
             "def solve(name, out):\n    out.write_text('from the child'); return 0\n"
             "PresetPlans(Path(sys.argv[1]), solve).cli('demystifying')\n")
    subprocess.run([sys.executable, "-c", child, str(tmp_path)], cwd=ROOT, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    calls: list[str] = []
    assert PresetPlans(tmp_path, _counting(calls)).cli("demystifying").text == "from the child"
    assert calls == []


def test_the_session_folder_is_shared_by_xdist_workers(tmp_path_factory: pytest.TempPathFactory,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under xdist (``PYTEST_XDIST_WORKER`` set) the folder is beside the worker's base temp, in the session's
    base that every worker's ``popen-gwN`` shares; alone it is inside this process's base temp."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert session_folder(tmp_path_factory, "t-shared") == base.parent / "t-shared"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert session_folder(tmp_path_factory, "t-shared") == base / "t-shared"
