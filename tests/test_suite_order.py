"""The suite's file order (tests/conftest.py): the longest files run first, and `make test` keeps that order."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SLOW_FILES, slow_files_first

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_file_exists() -> None:
    """A renamed or removed file cannot stay in the list unnoticed (it would silently run at its old place)."""
    assert [path for path in SLOW_FILES if not (ROOT / path).is_file()] == []
    assert len(set(SLOW_FILES)) == len(SLOW_FILES)


def test_slow_files_go_first_in_their_order_and_the_rest_keep_theirs() -> None:
    """The listed files' tests come first, in the list's order; within a file, and among the other files, the
    collection's order is kept."""
    ids = ["a.py::x", "slow2.py::p", "b.py::y", "slow1.py::q", "slow2.py::r", "a.py::z"]
    order = [ids[i] for i in slow_files_first(ids, ("slow1.py", "slow2.py"))]
    assert order == ["slow1.py::q", "slow2.py::p", "slow2.py::r", "a.py::x", "b.py::y", "a.py::z"]


def test_make_test_hands_files_out_in_the_collections_order() -> None:
    """xdist's default hands out the files with the most tests first, which would undo the order: `make test`
    says ``--no-loadscope-reorder`` beside ``--dist loadfile``."""
    line = next(x for x in (ROOT / "Makefile").read_text().splitlines() if "-m pytest" in x and "PYTEST_WORKERS" in x)
    assert re.search(r"--dist loadfile\b", line) and "--no-loadscope-reorder" in line
