"""The Catalog and Scenario pages warn when a price is older than 30 days (a user's price layer dated long ago)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from planning import api
from tests.app.conftest import ROOT, app, texts


def _old_layer(home: Path, region: str) -> None:
    """The user's price layer with every shipped config of ``region`` re-dated 2020-01-01."""
    with (ROOT / "data" / "node_configs.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    old = [{**r, "as_of": "2020-01-01"} for r in rows if f"{r['cloud']}:{r['region']}" == region]
    assert old
    (home / "catalog").mkdir(parents=True)
    with (home / "catalog" / "node_configs.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(old)


@pytest.mark.parametrize("page", ["views/6_Catalog.py", "views/1_Scenario.py"])
def test_an_old_price_is_warned_about(page: str, planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("planning.context._CTX", None)  # the engine context loads the price layer of this PLANNING_HOME
    region = api.load_preset_scenario("coral-core").regions[0]
    _old_layer(planning_home, region)
    at = app(page)
    assert not at.exception
    assert "prices are older than 30 days" in texts(at) and "planning prices refresh" in texts(at)

