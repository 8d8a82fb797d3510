"""Stage-table caching (memory + disk, content keyed), fingerprints, and measured-profile overrides."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel, Workload, load_profiles
from planning.perf.calibration import Calibration

ROOT = Path(__file__).resolve().parents[2]
WL = Workload(1000, 200)


def test_stage_tables_stack_and_cache(pm: PerfModel, tmp_path: Path) -> None:
    spec = pm.model("phi-4")
    shapes = ["1xL40S", "2xL40S", "4xL4"]
    many = pm.stage_tables(spec, shapes, "prefill", 1200, WL)
    for k, s in enumerate(shapes):
        assert np.array_equal(many[k], pm.stage_table(spec, s, "prefill", 1200, WL))
    disk = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    first = disk.stage_table(spec, "2xL40S", "decode", 60, WL)
    assert len(list(tmp_path.glob("T_*.npy"))) == 1
    again = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    assert np.array_equal(again.stage_table(spec, "2xL40S", "decode", 60, WL), first)
    assert not first.flags.writeable


def test_fingerprint_follows_calibration(pm: PerfModel) -> None:
    cal = pm.calibration
    h100 = replace(cal.gpus["H100"], eff_bw=cal.gpus["H100"].eff_bw * 0.9)
    other = Calibration(gpus={**cal.gpus, "H100": h100}, settings=cal.settings, as_of=cal.as_of, path=cal.path)
    pm2 = PerfModel(catalog=pm.catalog, calibration=other)
    assert pm2.fingerprint() != pm.fingerprint()
    spec = pm.model("llama-3-70b")
    assert not np.array_equal(pm2.stage_table(spec, "4xH100", "decode", 80, WL),
                              pm.stage_table(spec, "4xH100", "decode", 80, WL))


def test_fingerprint_and_table_keys_follow_the_physics_and_the_memory(pm: PerfModel, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A code change to the physics (PHYSICS_VERSION) or a GPU's driver-reported memory changes the fingerprint and
    the disk cache key: an older table, library or plan is not reused."""
    import planning.perf.model as model_mod

    spec = pm.model("llama-3-8b")
    PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path).stage_table(spec, "1xL4", "decode",
                                                                                              60, WL)
    before = pm.fingerprint()
    monkeypatch.setattr(model_mod, "PHYSICS_VERSION", "perf-next")
    fresh = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    assert fresh.fingerprint() != before
    fresh.stage_table(spec, "1xL4", "decode", 60, WL)
    assert len(list(tmp_path.glob("T_*.npy"))) == 2
    monkeypatch.undo()
    l4 = replace(pm.catalog.gpus["L4"], memory_mib=22000.0)
    smaller = PerfModel(catalog=replace(pm.catalog, gpus={**pm.catalog.gpus, "L4": l4}), calibration=pm.calibration)
    assert smaller.fingerprint() != before


def test_bad_inputs_are_errors(pm: PerfModel) -> None:
    spec = pm.model("phi-4")
    with pytest.raises(PlanningError, match="shape"):
        pm.stage_table(spec, "L40S", "prefill", 1000, WL)
    with pytest.raises(PlanningError, match="slo_ms"):
        pm.stage_table(spec, "1xL40S", "prefill", -1, WL)
    with pytest.raises(PlanningError, match="phase"):
        pm.stage_table(spec, "1xL40S", "train", 100, WL)
    with pytest.raises(PlanningError, match="input_len"):
        Workload(0, 10)


def test_profile_overrides_model_where_it_has_points(pm: PerfModel) -> None:
    prof = load_profiles(ROOT / "sample_profiles" / "llama2_70b_1xL4_per_layer.csv")
    pm2 = PerfModel(catalog=pm.catalog, calibration=pm.calibration, profiles=prof)
    est = pm2.estimate("llama-2-70b", "L4", batch=8, input_len=750, output_len=500)
    measured_per_layer = 7.0  # the sample file's decode point at batch 8
    assert est.provenance["decode_step_ms"] == "measured"
    assert est.decode_step_ms == pytest.approx(80 * measured_per_layer + pm.gpu_calibration("L4").step_ms, rel=0.02)
    outside = pm2.estimate("llama-2-70b", "L4", batch=1, input_len=750, output_len=500)
    assert outside.provenance["decode_step_ms"] == "calibrated"
    assert pm2.fingerprint() != pm.fingerprint()
    whole = load_profiles(ROOT / "sample_profiles" / "llama2_70b_4xH100_whole_model.csv")
    pm3 = PerfModel(catalog=pm.catalog, calibration=pm.calibration, profiles=whole)
    est3 = pm3.estimate("llama-2-70b", "H100", 4, batch=4, input_len=512)
    assert est3.prefill_ms == pytest.approx(195.28, rel=0.02)


@pytest.mark.parametrize(("text", "match"), [
    ("model_id,gpu_id\nx,y\n", "missing columns"),
    ("model_id,gpu_id,count,tp,phase,batch,input_len,context_len,layers,time_ms,source,as_of\n"
     "m,H100,1,1,decode,2,10,10,1,abc,s,2025\n", r":2:time_ms"),
    ("model_id,gpu_id,count,tp,phase,batch,input_len,context_len,layers,time_ms,source,as_of\n"
     "m,H100,1,1,training,2,10,10,1,1,s,2025\n", "phase"),
    ("model_id,gpu_id,count,tp,phase,batch,input_len,context_len,layers,time_ms,source,as_of\n"
     "m,H100,4,3,decode,2,10,10,1,1,s,2025\n", "does not divide"),
])
def test_bad_profiles_are_rejected(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text(text)
    with pytest.raises(PlanningError, match=match):
        load_profiles(path)


def test_oversized_profile_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * 5_000_001)
    with pytest.raises(PlanningError, match="limit"):
        load_profiles(path)
