"""Stage-table caching (memory + disk, content keyed), fingerprints, and measured-profile overrides."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel, Workload, load_profiles
from planning.perf.calibration import Calibration
from planning.perf.tables import best_over_batches

ROOT = Path(__file__).resolve().parents[2]
WL = Workload(1000, 200)


def test_stage_tables_stack_and_cache(pm: PerfModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = pm.model("phi-4")
    shapes = ["1xL40S", "2xL40S", "4xL4"]
    many = pm.stage_tables(spec, shapes, "prefill", 1200, WL)
    for k, s in enumerate(shapes):
        assert np.array_equal(many[k], pm.stage_table(spec, s, "prefill", 1200, WL))
    disk = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    first = disk.stage_tables(spec, shapes, "decode", 60, WL)
    assert len(list(tmp_path.glob("T_*.npy"))) == 1  # one file for the stack, not one per shape
    again = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    monkeypatch.setattr(again, "_compute_table", lambda *_a, **_k: pytest.fail("computed although on disk"))
    assert np.array_equal(again.stage_tables(spec, shapes, "decode", 60, WL), first)
    assert not first.flags.writeable
    monkeypatch.undo()
    assert np.array_equal(again.stage_table(spec, "2xL40S", "decode", 60, WL), first[1])


def test_batch_curves_are_mirrored_on_disk(pm: PerfModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second process reads the decode batch curves an earlier one computed (equal arrays, no computation)."""
    spec = pm.model("llama-3-8b")
    first = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    b, dp, tau = first.stacked_decode_curves(spec, ["1xL4", "2xL4"], 60, WL)
    assert len(list(tmp_path.glob("C_*.npy"))) == 2  # dp and tau
    assert np.array_equal(tau[1], first.decode_batch_curves(spec, "2xL4", 60, WL)[2])
    again = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)

    def no_compute(*_a: object, **_k: object) -> None:
        raise AssertionError("computed although the curves are on disk")

    monkeypatch.setattr(again, "_budget_and_curves", no_compute)
    b2, dp2, tau2 = again.stacked_decode_curves(spec, ["1xL4", "2xL4"], 60, WL)
    assert np.array_equal(b, b2) and np.array_equal(dp, dp2) and np.array_equal(tau, tau2)


def test_decode_tables_leave_their_batch_curves(pm: PerfModel, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A group's decode T̂ tables and its batch curves come from one evaluation of the node curves: reading the
    curves afterwards computes nothing, and both equal what a model computing each on its own gives."""
    spec = pm.model("llama-3-8b")
    shapes = ["1xL4", "2xL4", "1xL40S"]
    one = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    tables = one.stage_tables(spec, shapes, "decode", 60, WL)
    monkeypatch.setattr(one, "_budget_and_curves", lambda *_a, **_k: pytest.fail("curves evaluated twice"))
    b, dp, tau = one.stacked_decode_curves(spec, shapes, 60, WL)
    monkeypatch.undo()
    alone = PerfModel(catalog=pm.catalog, calibration=pm.calibration)
    b2, dp2, tau2 = alone.stacked_decode_curves(spec, shapes, 60, WL)
    assert np.array_equal(b, b2) and np.array_equal(dp, dp2) and np.array_equal(tau, tau2)
    separate = PerfModel(catalog=pm.catalog, calibration=pm.calibration)
    for k, s in enumerate(shapes):  # the prefill-style evaluation (best over batches alone) gives the same table
        budget, curves = separate._budget_and_curves(spec, s, "decode", 60, WL, 6, None)
        arch = separate._layer_arch(spec)
        want = best_over_batches(curves, arch.full_in_window, arch.layers, budget, 6, kv_extra=0.0,
                                 kv_sigmas=separate.calibration.settings.kv_sigmas)
        assert np.array_equal(tables[k], want)


def test_disk_tables_of_other_code_damaged_files_and_size_are_handled(pm: PerfModel, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The file name carries the perf code's fingerprint (an edit without a PHYSICS_VERSION bump reads nothing
    stale); a damaged file is a miss, recomputed; the first write prunes other code's files, prune() the oldest."""
    import planning.perf.tables as tables_mod

    spec = pm.model("llama-3-8b")
    disk = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    good = disk.stage_tables(spec, ["1xL4"], "decode", 60, WL)
    (path,) = tmp_path.glob("T_*.npy")
    assert tables_mod.code_fingerprint() in path.name
    path.write_bytes(b"not a table")
    fresh = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    assert np.array_equal(fresh.stage_tables(spec, ["1xL4"], "decode", 60, WL), good)
    assert np.array_equal(np.load(path), good)  # rewritten whole
    monkeypatch.setattr(tables_mod, "_CODE_FP", "edited-code")
    edited = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    edited.stage_tables(spec, ["1xL4"], "decode", 60, WL)  # a miss: computed; its first write prunes the old file
    (only,) = tmp_path.glob("T_*.npy")
    assert "edited-code" in only.name
    edited.stage_tables(spec, ["2xL4"], "decode", 60, WL)
    assert len(list(tmp_path.glob("T_*.npy"))) == 2
    assert edited._bundles.prune(max_bytes=only.stat().st_size) == 1  # the oldest goes


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
    PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path).stage_tables(spec, ["1xL4"],
                                                                                               "decode", 60, WL)
    before = pm.fingerprint()
    monkeypatch.setattr(model_mod, "PHYSICS_VERSION", "perf-next")
    fresh = PerfModel(catalog=pm.catalog, calibration=pm.calibration, cache_dir=tmp_path)
    assert fresh.fingerprint() != before
    fresh.stage_tables(spec, ["1xL4"], "decode", 60, WL)
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
