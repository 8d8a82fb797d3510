"""A measured table under data/ (written by ``make calibrate``): read bounded, its columns checked, errors named.

Shared by the loaders of the MoE kernels (``moe.py``) and the all-reduce (``allreduce.py``), which parse the rows
they get and hash the text for their fingerprints."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from planning.errors import PlanningError
from planning.safeio import read_text


def read_table(path: Path, *, field: str, what: str, columns: Sequence[str], max_bytes: int,
               fix: str) -> tuple[str, list[dict[str, str]]]:
    """The text of the CSV at ``path`` and its rows (row ``i`` of the list is line ``i + 2`` of the file).

    Raises
    ------
    PlanningError
        The file is missing (``field``, with ``fix``), too large, or lacks one of ``columns``.
    """
    if not path.exists():
        raise PlanningError(field, f"file {path} does not exist.", fix)
    text = read_text(path, field=field, max_bytes=max_bytes, what=what)
    reader = csv.DictReader(text.splitlines())
    missing = set(columns) - set(reader.fieldnames or [])
    if missing:
        raise PlanningError(path.name, f"missing columns {sorted(missing)}.", f"columns are {', '.join(columns)}.")
    return text, list(reader)
