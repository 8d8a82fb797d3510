"""The user's imported measurements: one CSV of :data:`schema.COLUMNS` under ``$PLANNING_HOME/measurements``,
written atomically, every row with its source tool and file."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from pathlib import Path

from planning.catalog.schema import Catalog
from planning.measurements.readers import Setup, read_csv
from planning.measurements.schema import COLUMNS, Measurement
from planning.safeio import read_text
from planning.scenario_io import atomic_write_text

STORE_NAME = "measurements.csv"
MAX_STORE_BYTES = 32 * 1024 * 1024


def store_path(home: str | os.PathLike[str] | None = None) -> Path:
    """``<home>/measurements/measurements.csv``; home = ``$PLANNING_HOME`` or ``~/.cache/planning``."""
    base = Path(home) if home is not None else Path(os.environ.get("PLANNING_HOME") or Path.home() / ".cache" / "planning")
    return base.expanduser() / "measurements" / STORE_NAME


def load_store(path: Path | None = None, catalog: Catalog | None = None) -> list[Measurement]:
    """Every stored measurement (empty when nothing was imported).

    Raises
    ------
    PlanningError: a damaged store (the message names the row and field; delete or fix the file).
    """
    p = path or store_path()
    if not p.is_file():
        return []
    if catalog is None:
        from planning.catalog import load_catalog

        catalog = load_catalog()
    text = read_text(p, field=str(p), max_bytes=MAX_STORE_BYTES, what="measurement store")
    if not text.strip():
        return []
    return read_csv(text, Setup(), catalog, p.name)


def _csv(points: Iterable[Measurement]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for m in points:
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v) for k, v in m.as_row().items()})
    return buf.getvalue()


def add(points: Iterable[Measurement], path: Path | None = None, catalog: Catalog | None = None) -> tuple[int, int]:
    """Add ``points`` to the store (a point already stored is kept once); returns (added, total).

    The store is rewritten atomically: a crash leaves the old file.
    """
    p = path or store_path()
    old = load_store(p, catalog)
    seen = set(old)
    new = [m for m in points if not (m in seen or seen.add(m))]  # type: ignore[func-returns-value]
    if new:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, _csv([*old, *new]), field="measurements")
    return len(new), len(old) + len(new)


def clear(path: Path | None = None) -> int:
    """Delete the stored measurements; returns how many there were."""
    p = path or store_path()
    n = len(load_store(p))
    if p.is_file():
        p.unlink()
    return n
