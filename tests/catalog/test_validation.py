"""Catalog files: bad rows rejected with file/line/column and a fix; overrides layer without editing files."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from planning.catalog.load import DATA_DIR, FILES, load_catalog
from planning.errors import PlanningError, UnknownIdError


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    target.mkdir()
    for name in FILES.values():
        shutil.copy(DATA_DIR / name, target / name)
    return target


def _rewrite(path: Path, edit_row: int, **changes: str) -> None:
    with path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[edit_row].update(changes)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_shipped_catalog_is_complete_and_sourced() -> None:
    catalog = load_catalog()
    for table in (catalog.gpus, catalog.configs, catalog.regions, catalog.models, catalog.slo_presets,
                  catalog.availability):  # fmt: skip
        assert table
        for record in table.values():
            assert record.source.strip() and record.as_of.strip()
    assert all(a.illustrative for a in catalog.availability.values())
    assert set(catalog.availability) == set(catalog.configs)


def test_configs_respect_the_real_shapes_rule() -> None:
    catalog = load_catalog()
    aws_2gpu_g = [c for c in catalog.configs.values()
                  if c.cloud == "aws" and c.gpu_count == 2 and c.gpu_id in {"L4", "L40S", "A10G"}]  # fmt: skip
    assert aws_2gpu_g and all(c.hypothetical for c in aws_2gpu_g)
    for cfg in aws_2gpu_g:
        assert "priced" in cfg.notes.lower()
    expected_regions = {"aws:us-east-1", "aws:us-east-2", "aws:us-west-2", "aws:ap-northeast-2", "aws:eu-west-1",
                        "gcp:us-central1", "gcp:europe-west4", "gcp:asia-northeast1", "azure:eastus"}  # fmt: skip
    assert expected_regions <= {c.region_key for c in catalog.configs.values()}
    assert {"lambda", "runpod"} <= {c.cloud for c in catalog.configs.values()}
    assert any(c.quality == "anomaly" for c in catalog.configs.values())


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("price_on_demand", "-1", "out of range"),
        ("price_on_demand", "cheap", "not a number"),
        ("gpu_count", "17", "not in 1..16"),
        ("gpu_count", "0", "not in 1..16"),
        ("quality", "great", "not one of"),
        ("as_of", "yesterday", "YYYY-MM-DD"),
        ("source", "", "is empty"),
    ],
)
def test_bad_config_cell_names_file_line_and_column(
    data_copy: Path, column: str, value: str, message: str
) -> None:
    _rewrite(data_copy / "node_configs.csv", 2, **{column: value})
    with pytest.raises(PlanningError) as err:
        load_catalog(data_copy)
    assert err.value.field == f"node_configs.csv:line 4:{column}"
    assert message in str(err.value)


def test_unknown_gpu_id_lists_closest(data_copy: Path) -> None:
    _rewrite(data_copy / "node_configs.csv", 0, gpu_id="H1OO")
    with pytest.raises(UnknownIdError) as err:
        load_catalog(data_copy)
    assert "gpu_id" in err.value.field and "H100" in err.value.closest


def test_duplicate_id_and_missing_column(data_copy: Path) -> None:
    path = data_copy / "gpus.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, lines[1]]) + "\n", encoding="utf-8")
    with pytest.raises(PlanningError, match="duplicate id 'H100'"):
        load_catalog(data_copy)
    header = lines[0].replace(",hbm_bw_gbps", "")
    path.write_text(
        "\n".join([header, *[",".join(r) for r in csv.reader(lines[1:2])]]) + "\n", encoding="utf-8"
    )
    with pytest.raises(PlanningError, match="missing column"):
        load_catalog(data_copy)


def test_config_id_must_match_cloud_region_instance(data_copy: Path) -> None:
    _rewrite(data_copy / "node_configs.csv", 0, id="my-node")
    with pytest.raises(PlanningError, match="cloud:region:instance_type"):
        load_catalog(data_copy)


def test_availability_for_unknown_config_rejected(data_copy: Path) -> None:
    _rewrite(data_copy / "availability.csv", 0, config_id="aws:us-east-2:p9.huge")
    with pytest.raises(UnknownIdError):
        load_catalog(data_copy)


def test_overrides_replace_and_add_rows_without_editing_shipped(tmp_path: Path) -> None:
    shipped = load_catalog()
    target_id = "aws:us-east-2:g6.xlarge"
    original = (DATA_DIR / "node_configs.csv").read_bytes()
    overrides = tmp_path / "overrides"
    overrides.mkdir()
    with (DATA_DIR / "node_configs.csv").open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        base = next(r for r in reader if r["id"] == target_id)
    new_row = {**base, "id": "aws:us-east-2:g6.custom", "instance_type": "g6.custom"}
    with (overrides / "node_configs.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerow({**base, "price_on_demand": "0.5", "source": "my negotiated price"})
        writer.writerow(new_row)
    catalog = load_catalog(overrides_dir=overrides)
    assert catalog.configs[target_id].price_on_demand == 0.5
    assert shipped.configs[target_id].price_on_demand != 0.5
    assert "aws:us-east-2:g6.custom" in catalog.configs
    assert {target_id, "aws:us-east-2:g6.custom"} <= catalog.overridden
    assert len(catalog.configs) == len(shipped.configs) + 1
    assert (DATA_DIR / "node_configs.csv").read_bytes() == original


def test_bad_override_row_is_reported_in_the_override_file(tmp_path: Path) -> None:
    (tmp_path / "gpus.csv").write_text(
        "id,memory_gb,hbm_bw_gbps,bf16_tflops,fp8_tflops,intra_link,intra_link_gbps,generation,source,as_of\n"
        "MyGPU,-24,300,100,,PCIe,32,Ada,me,2026-01-01\n",
        encoding="utf-8",
    )
    with pytest.raises(PlanningError) as err:
        load_catalog(overrides_dir=tmp_path)
    assert err.value.field == "gpus.csv:line 2:memory_gb"
