"""Each GPU's memory as the driver reports it (nvidia-smi MiB, with source and date) and its peer-to-peer flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from planning.catalog import load_catalog
from planning.errors import PlanningError

HEADER = "id,memory_gb,hbm_bw_gbps,bf16_tflops,fp8_tflops,intra_link,intra_link_gbps,generation,source,as_of"


def test_every_shipped_gpu_carries_its_driver_reported_memory() -> None:
    gpus = load_catalog().gpus
    for gpu in gpus.values():
        assert gpu.memory_mib is not None and gpu.memory_source and gpu.memory_as_of, gpu.id
        assert gpu.memory_bytes == gpu.memory_mib * 2**20
    # nvidia-smi totals (MiB): an HBM "80 GB" H100 is 79.6 GiB, a "24 GB" ECC GDDR6 L4 22.5 GiB, a GeForce 4090 24 GiB
    assert gpus["H100"].memory_mib == 81559 and gpus["A100-80G"].memory_mib == 81920
    assert gpus["L4"].memory_gib == pytest.approx(22.49, abs=0.01)
    assert gpus["RTX4090"].memory_gib == pytest.approx(23.99, abs=0.01)
    assert not gpus["RTX4090"].p2p and not gpus["A10G"].p2p and gpus["H100"].p2p


def test_a_gpu_row_without_a_driver_reading_is_read_conservatively(tmp_path: Path) -> None:
    """Older override files (no memory_mib column) still load; the marketed GB is read as 10^9 bytes, below every
    driver total, and the row says so. A reading needs its source and date and must match the marketed size."""
    (tmp_path / "gpus.csv").write_text(HEADER + "\nMyGPU,24,300,100,,PCIe,32,Ada,me,2026-01-01\n", encoding="utf-8")
    gpu = load_catalog(overrides_dir=tmp_path).gpus["MyGPU"]
    assert gpu.memory_mib is None and gpu.memory_bytes == 24e9 and gpu.p2p
    assert "derived" in gpu.memory_source
    full = HEADER + ",memory_mib,memory_source,memory_as_of\n"
    (tmp_path / "gpus.csv").write_text(full + "MyGPU,24,300,100,,PCIe,32,Ada,me,2026-01-01,23028,,\n", encoding="utf-8")
    with pytest.raises(PlanningError, match="memory_source"):
        load_catalog(overrides_dir=tmp_path)
    (tmp_path / "gpus.csv").write_text(full + "MyGPU,24,300,100,,PCIe,32,Ada,me,2026-01-01,81559,smi,2026-01-01\n",
                                       encoding="utf-8")
    with pytest.raises(PlanningError, match="memory_mib"):
        load_catalog(overrides_dir=tmp_path)
