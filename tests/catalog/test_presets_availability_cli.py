"""Presets load and reference catalog ids; availability series loader; `planning catalog` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planning.cli
from planning.catalog.availability import cheapest_configs, load_availability_series, shape_availability
from planning.catalog.load import load_catalog
from planning.catalog.presets import list_presets, load_preset
from planning.errors import PlanningError, UnknownIdError


def test_presets_load_and_reference_known_ids() -> None:
    catalog = load_catalog()
    assert {"coral-core", "coral-extended", "melange-arena", "demystifying"} <= set(list_presets())
    for name in list_presets():
        preset = load_preset(name)
        assert preset["mode"] in {"aggregated", "disaggregated"}
        ids = {m["id"] for m in preset["models"]}
        for model in preset["models"]:  # a catalog model, a custom architecture, or a variant of either
            assert (model["id"] in catalog.models or "custom_config" in model
                    or model.get("base") in catalog.models or model.get("base") in ids)
            assert model["slo"]["decode_ms"] > 0
        for region in preset["regions"]:
            assert region in catalog.regions
        for shape in preset["shapes"]:
            count, gpu = shape.split("x", 1)
            assert gpu in catalog.gpus and 1 <= int(count) <= 16
        for offer in preset["offers"]:
            assert offer["shape"] in preset["shapes"] and offer["price_per_hour"] > 0


def test_coral_core_shapes_are_all_offered_in_both_regions() -> None:
    catalog = load_catalog()
    preset = load_preset("coral-core")
    offered = cheapest_configs(catalog)
    for region in preset["regions"]:
        for shape in preset["shapes"]:
            assert (region, shape) in offered, (region, shape)
            assert shape_availability(catalog, region, shape) > 0
    slos = {s.model_id: s for s in catalog.slo_presets.values() if s.model_id}
    for model in preset["models"]:
        assert model["slo"]["prefill_ms"] == slos[model["id"]].prefill_ms


def test_unknown_preset_lists_known_ones() -> None:
    with pytest.raises(UnknownIdError) as err:
        load_preset("coral")
    assert "coral-core" in err.value.closest


def test_availability_series_by_config_and_by_region_shape(tmp_path: Path) -> None:
    by_config = tmp_path / "a.csv"
    by_config.write_text(
        "timestamp,config_id,nodes\n2024-05-01T01:00:00,aws:us-east-2:g6.xlarge,7\n"
        "2024-05-01T00:00:00,aws:us-east-2:g6.xlarge,10\n",
        encoding="utf-8",
    )
    frame = load_availability_series(by_config)
    assert frame["nodes"].to_list() == [10, 7]  # sorted by time
    assert frame["shape"].to_list() == ["1xL4", "1xL4"]
    by_shape = tmp_path / "b.csv"
    by_shape.write_text("timestamp,region,shape,nodes\n0,aws:us-east-2,4xL4,3\n1.5,aws:us-east-2,4xL4,2\n")
    assert load_availability_series(by_shape)["timestamp"].to_list() == [0.0, 1.5]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("timestamp,region,shape,nodes\n0,aws:us-east-2,4xL4,-1\n", "line 2: nodes"),
        ("timestamp,region,shape,nodes\nsoon,aws:us-east-2,4xL4,1\n", "line 2: timestamp"),
        ("timestamp,region,shape,nodes\n0,aws:us-east-2,four L4,1\n", "bad shape"),
        ("timestamp,nodes\n0,1\n", "needs config_id"),
        ("timestamp,config_id,nodes\n0,aws:nowhere:x,1\n", "unknown id"),
    ],
)
def test_availability_series_rejects_bad_rows(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "s.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(PlanningError, match=message):
        load_availability_series(path)


@pytest.fixture
def catalog_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only this area's commands, so the test does not depend on other areas being merged.
    monkeypatch.setattr(planning.cli, "_COMMAND_MODULES", ("planning.cli.catalog",))


@pytest.mark.parametrize("kind", ["gpus", "configs", "models", "regions", "slos"])
def test_cli_json_matches_catalog(kind: str, catalog_cli: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert planning.cli.main(["catalog", kind, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    catalog = load_catalog()
    table = {"gpus": catalog.gpus, "configs": catalog.configs, "models": catalog.models,
             "regions": catalog.regions, "slos": catalog.slo_presets}[kind]  # fmt: skip
    assert {r.get("id", r.get("key")) for r in rows} == set(table)


def test_cli_table_and_filters(catalog_cli: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        planning.cli.main(["catalog", "configs", "--region", "aws:us-east-2", "--gpu", "L40S", "--json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["gpu_id"] == "L40S" and r["region_key"] == "aws:us-east-2" for r in rows)
    assert planning.cli.main(["catalog", "gpus"]) == 0
    text = capsys.readouterr().out
    assert "RTX4090" in text and "(13 rows)" in text
    with pytest.raises(SystemExit):
        planning.cli.main(["catalog", "nonsense"])
