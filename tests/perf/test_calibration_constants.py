"""Fast checks on the committed calibration constants (data/calibration.csv); no reference data needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel, load_calibration
from planning.perf.calibration import GPU_PARAMS

MEASURED_GPUS = {"H100", "H200", "A100-80G", "A100-40G", "L40S", "L4", "A40", "T4", "V100"}


def test_every_catalog_gpu_has_physical_constants(pm: PerfModel) -> None:
    for gpu in pm.catalog.gpus.values():
        cal = pm.calibration.for_gpu(gpu)
        for p in ("eff_bw", "eff_compute_bf16", "eff_compute_fp8", "eff_attn", "ar_eff"):
            assert 0 < getattr(cal, p) <= 1, (gpu.id, p)
        assert 0.5 <= cal.kernel_us <= 60 and 0 < cal.step_ms < 20
        assert 0.1 <= cal.band_prefill < 1 and 0.1 <= cal.band_decode < 1
        expected = "calibrated" if gpu.id in MEASURED_GPUS else "roofline"
        assert cal.provenance == expected, gpu.id


def test_hbm_efficiency_is_plausible_on_hopper(pm: PerfModel) -> None:
    # Measured streaming GEMMs reach ~85-95 % of spec bandwidth on H100/H200 (aiconfigurator, vidur).
    for gpu_id in ("H100", "H200"):
        assert 0.75 <= pm.gpu_calibration(gpu_id).eff_bw <= 1.0


def test_roofline_only_band_is_wider_than_every_fitted_band(pm: PerfModel) -> None:
    # Bands shown on estimates come from the validation errors of their kind (data/perf_bands.csv); a GPU with no
    # calibration data never gets a band narrower than band_roofline.
    wide = pm.calibration.settings.band_roofline
    for gpu_id in ("H100", "A100-80G"):
        est = pm.estimate("llama-3-8b", gpu_id, batch=1, input_len=100)
        assert all("validation" in src for src in est.band_source.values()), gpu_id
        assert max(est.band.values()) <= wide + 0.25
    # A calibrated PCIe GPU's serving band is its class's validation p90 (docs/perf-model.md Sec. 7), which the
    # roofline-only floor does not override.
    est = pm.estimate("llama-3-8b", "L40S", batch=1, input_len=100)
    assert all("validation" in src for src in est.band_source.values())
    assert "pcie/16bit/throughput" in est.band_source["serving"]
    assert 0.1 < est.band["serving"] < wide
    est = pm.estimate("llama-3-8b", "A10G", batch=1, input_len=100)
    assert est.provenance["decode_step_ms"] == "roofline" and est.band["decode_step_ms"] >= wide


def test_rows_carry_provenance_columns() -> None:
    text = Path(load_calibration().path).read_text(encoding="utf-8").splitlines()
    assert text[0] == "gpu,param,value,source,n_points,fitted_on,as_of"
    params = {line.split(",")[1] for line in text[1:]}
    assert set(GPU_PARAMS) <= params


def test_bad_calibration_file_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "cal.csv"
    bad.write_text("gpu,param,value,source,n_points,fitted_on,as_of\nH100,eff_bw,1.7,x,1,,2025-01-01\n")
    with pytest.raises(PlanningError, match=r"cal.csv:2:value"):
        load_calibration(bad)
    bad.write_text("gpu,param,value,source,n_points,fitted_on,as_of\nH100,warp_speed,1,x,1,,2025-01-01\n")
    with pytest.raises(PlanningError, match="unknown parameter"):
        load_calibration(bad)
