"""`planning prices refresh --skypilot-catalog DIR`: SkyPilot's vms.csv into the user price layer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from planning.catalog import load_catalog
from planning.catalog.prices import price_layer_dir
from planning.cli import main
from planning.context import default_context

# the columns of SkyPilot's catalogs/v8/aws/vms.csv (skypilot-org/skypilot-catalog)
HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone"


def _catalog(tmp_path: Path, rows: list[str], age_days: float = 0.0) -> Path:
    folder = tmp_path / "sky" / "v8"
    (folder / "aws").mkdir(parents=True)
    path = folder / "aws" / "vms.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    stamp = time.time() - age_days * 86400
    os.utime(path, (stamp, stamp))
    return folder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("PLANNING_HOME", str(h))
    return h


def test_refresh_writes_a_layer_the_engine_loads(home: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = _catalog(tmp_path, [
        "g5.xlarge,A10G,1,4,16,{},0.9,0.5,us-east-1,us-east-1a",
        "g5.xlarge,A10G,1,4,16,{},0.9,0.4,us-east-1,us-east-1b",  # spot: the lowest over zones
        "x9.none,A10G,1,4,16,{},9.9,,us-east-1,us-east-1a",  # not a shipped config: ignored
    ])
    assert main(["prices", "refresh", "--skypilot-catalog", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "1 node configs priced" in out and "warning" not in out
    assert (price_layer_dir() / "node_configs.csv").is_file()
    cfg = default_context().catalog.configs["aws:us-east-1:g5.xlarge"]
    assert (cfg.price_on_demand, cfg.price_spot) == (0.9, 0.4)
    assert "SkyPilot catalog" in cfg.source and cfg.as_of == time.strftime("%Y-%m-%d", time.gmtime())
    shipped = load_catalog().configs["aws:us-east-1:g5.xlarge"]
    assert shipped.price_on_demand != 0.9  # shipped files are never edited


def test_an_old_catalog_is_used_with_a_warning(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _catalog(tmp_path, ["g5.xlarge,A10G,1,4,16,{},1.0,,us-east-1,us-east-1a"], age_days=45)
    assert main(["prices", "refresh", "--skypilot-catalog", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "warning: aws:" in out and "45 days old" in out and "1 node configs priced" in out


@pytest.mark.parametrize(("rows", "message"), [
    (["g5.xlarge,A10G,1,4,16,{},1e300,,us-east-1,us-east-1a"], "is not a price"),
    (["g5.xlarge,A10G,1,4,16,{},-1,,us-east-1,us-east-1a"], "is not a price"),
])
def test_bad_prices_are_refused_by_name(home: Path, tmp_path: Path, rows: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = _catalog(tmp_path, rows)
    assert main(["prices", "refresh", "--skypilot-catalog", str(folder)]) == 2
    err = capsys.readouterr().err
    assert message in err and "vms.csv:2.Price" in err
    assert not (price_layer_dir() / "node_configs.csv").exists()


def test_a_folder_without_catalogs_is_refused(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prices", "refresh", "--skypilot-catalog", str(tmp_path)]) == 2
    assert "holds no <cloud>/vms.csv" in capsys.readouterr().err
