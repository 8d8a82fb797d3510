"""The node curves the precheck reads are the ones the T̂ tables build on: computed once per model and key
(``PerfModel._node_curves``), read-only once shared, and never mixed up across what they depend on."""

from __future__ import annotations

import numpy as np
import pytest

import planning.perf.model as model_module
from planning.catalog.presets import load_preset
from planning.context import EngineContext, engine_context
from planning.perf import PerfModel, Workload
from planning.precheck import refusals
from planning.resolve import resolve_scenario
from planning.scenario import Scenario

WL = Workload(1000, 250)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``build_curves`` call (the computation the memo saves), by phase."""
    calls: list[str] = []
    real = model_module.build_curves

    def counted(node, phase, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(phase)
        return real(node, phase, *args, **kwargs)

    monkeypatch.setattr(model_module, "build_curves", counted)
    return calls


def test_the_tables_after_the_precheck_compute_no_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fresh PerfModel, coral-core's precheck computes each node's curves; its groups' T̂ tables afterwards
    (the same shapes, workloads and batch grids) compute none, and equal the tables of a model that never ran the
    precheck."""
    base = engine_context()
    fresh = PerfModel(catalog=base.perf.catalog, calibration=base.perf.calibration)
    ctx = EngineContext(catalog=base.catalog, perf=fresh)
    resolved = resolve_scenario(Scenario.from_dict(load_preset("coral-core")), ctx.catalog)
    calls = _counted(monkeypatch)
    assert refusals(ctx, resolved) == []
    checked = len(calls)
    assert checked > 0
    other = PerfModel(catalog=base.perf.catalog, calibration=base.perf.calibration)
    for g in resolved.groups:
        c = g.classes[0]
        wl = Workload(c.input_len, c.output_len)
        spec = resolved.specs[g.model]
        tables = fresh.stage_tables(spec, list(resolved.shapes), g.phase, float(g.slo_ms), wl)
        assert len(calls) == checked, f"{g.id}: the tables computed curves the precheck had"
        monkeypatch.undo()
        assert np.array_equal(tables, other.stage_tables(spec, list(resolved.shapes), g.phase, float(g.slo_ms), wl))
        calls = _counted(monkeypatch)
        checked = len(calls)


def test_shared_curves_are_read_only_and_keyed_by_what_they_depend_on(pm: PerfModel) -> None:
    """The same request returns the same object, whose arrays cannot be written; another tp, phase, workload,
    batch grid or engine gets curves of its own."""
    spec = pm.model("llama-3-70b")
    grid = pm._grid("decode", WL)
    one = pm._node_curves(spec, "4xH100", 2, "decode", WL, grid)
    assert pm._node_curves(spec, "4xH100", 2, "decode", WL, grid) is one
    with pytest.raises(ValueError):
        one.t_full[0] = 0.0
    others = [pm._node_curves(spec, "4xH100", 4, "decode", WL, grid),
              pm._node_curves(spec, "4xH100", 2, "prefill", WL, pm._grid("prefill", WL)),
              pm._node_curves(spec, "4xH100", 2, "decode", Workload(2000, 250), grid),
              pm._node_curves(spec, "4xH100", 2, "decode", WL, grid[:-1]),
              pm.for_engine("trtllm")._node_curves(spec, "4xH100", 2, "decode", WL, grid)]
    assert all(o is not one for o in others)
    assert not np.array_equal(others[0].t_full, one.t_full)  # tp 4 is another node


def _fields(c: object) -> dict[str, object]:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in vars(c).items()}


@pytest.mark.parametrize("preset", ["coral-extended", "catalog-wide"])
def test_nodes_of_one_gpu_type_share_step_times_and_equal_curves_built_alone(preset: str) -> None:
    """``curves.TimesMemo``: nodes that differ only in their data-parallel copies, network or memory (1×, 2×, 8×
    one GPU at one tp) share their step times, so the precheck of a preset computes fewer than it asks for; every
    node's curves equal those built for it alone (the same floats, every field)."""
    base = engine_context()
    fresh = PerfModel(catalog=base.perf.catalog, calibration=base.perf.calibration)
    ctx = EngineContext(catalog=base.catalog, perf=fresh)
    resolved = resolve_scenario(Scenario.from_dict(load_preset(preset)), ctx.catalog)
    refusals(ctx, resolved)
    asked = len(fresh._node_memo)
    assert 0 < len(fresh._times_memo) < asked / 2, "most nodes shared another node's step times"
    for (spec, shape, tp, phase, wl, dtype, *_rest), curves in list(fresh._node_memo.items()):
        count, dev, prec, net, arch = fresh._node(spec, shape, dtype)
        alone = fresh._curves(spec, fresh._node_engine(arch, dev, prec, tp, count // tp), phase, wl, curves.batches,
                              net)
        assert _fields(curves) == _fields(alone), (shape, tp, phase)


def test_shared_step_times_stay_bounded_and_a_hit_evicts_nothing() -> None:
    """``TimesMemo.kept``: the oldest entry goes only when a new one comes; a hit computes and drops nothing."""
    from planning.perf.curves import TimesMemo

    store: dict[object, tuple[np.ndarray, np.ndarray]] = {}
    computed: list[str] = []

    def times(key: str) -> tuple[np.ndarray, np.ndarray]:
        def compute() -> tuple[np.ndarray, np.ndarray]:
            computed.append(key)
            return np.zeros(1), np.ones(1)

        return TimesMemo(store, key, 2).get(compute)

    times("a"), times("b"), times("a")
    assert computed == ["a", "b"] and list(store) == ["a", "b"]
    assert not times("a")[0].flags.writeable
    times("c")
    assert computed == ["a", "b", "c"] and list(store) == ["b", "c"]
