"""Provenance dates are honest: no shipped row says it was read after today (issue 38 §6: a reservation discount,
spot interruption bands and the owned-site egress row were dated 2026-12-01 on 2026-11-28)."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"


def _dated(path: Path) -> bool:
    with path.open(encoding="utf-8") as fh:
        return "as_of" in (csv.DictReader(fh).fieldnames or [])


DATED = [p for p in sorted(DATA.rglob("*.csv")) if _dated(p)]


def test_the_catalog_has_dated_files() -> None:
    assert {"reservations.csv", "spot_interruptions.csv", "egress.csv", "node_configs.csv"} <= {p.name for p in DATED}


@pytest.mark.parametrize("path", DATED, ids=lambda p: p.name)
def test_no_as_of_after_today(path: Path) -> None:
    with path.open(encoding="utf-8") as fh:
        dates = {r["as_of"] for r in csv.DictReader(fh) if r.get("as_of")}
    today = dt.date.today().isoformat()
    future = sorted(d for d in dates if d[:10] > today)  # ISO dates (YYYY-MM or YYYY-MM-DD) compare as text
    assert future == [], f"{path.name}: as_of {future} is after today ({today}): date a row the day it was read"
