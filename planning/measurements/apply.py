"""Plans on the perf model corrected by the user's trusted fits, keyed by setting (model, GPU, count, TP, engine).

A fit corrects one setting only: :class:`MeasuredPerfModel` swaps in the corrected GPU calibration
(``fit.corrected_perf``'s factors) where a curve of that model on that node shape at that TP is built, so a fit of
Llama-3-8B on 1×A10G leaves every other model on A10G, and the same model at another node size or TP, as shipped.
Its fingerprint includes the corrections, so the T̂ tables, batch curves and template libraries (keyed by their
tables' content) of a corrected model are never reused for the shipped one, nor the reverse.

The trusted fits are kept in ``$PLANNING_HOME/measurements/fits.json`` (``planning measurements fit`` writes it,
atomically); :func:`measured_context` builds the corrected engine context from them, which the face selects when a
scenario's ``options.measurements`` is ``use`` (or ``auto`` and trusted fits exist).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from planning.context import EngineContext
from planning.errors import PlanningError
from planning.measurements.schema import MEASURED_BAND as BAND
from planning.measurements.store import store_path
from planning.perf.calibration import GpuCalibration
from planning.perf.curves import Curves, TimesMemo
from planning.perf.engines import EngineMemory
from planning.perf.model import PerfModel
from planning.perf.results import Workload
from planning.perf.roofline import Device, NodeEngine
from planning.safeio import Limits, load_json_file
from planning.scenario import Scenario
from planning.scenario_io import atomic_write_text

FITS_NAME = "fits.json"
PLANNER_ENGINE = "vllm"  # the engine the planner's tables model: fits of other engines do not correct them
FITS_LIMITS = Limits(max_bytes=4 * 1024 * 1024, max_nodes=200_000)
SettingKey = tuple[str, str, int, int, str]


@dataclass(frozen=True)
class MeasuredSetting:
    """One trusted fit as plans use it: the setting, its factors and its source files."""

    model: str
    gpu: str
    count: int
    tp: int
    engine: str
    prefill: float
    decode: float
    step_ms: float
    points: int
    sources: tuple[str, ...]

    @property
    def key(self) -> SettingKey:
        return (self.model, self.gpu, self.count, self.tp, self.engine)

    def text(self) -> str:
        step = "" if math.isclose(self.step_ms, 0.0, abs_tol=1e-9) else f", step {self.step_ms:+.2f} ms"
        return (f"{self.model} on {self.count}x{self.gpu} TP{self.tp} ({self.engine}): prefill ×{self.prefill:.3f}, "
                f"decode ×{self.decode:.3f}{step}; band \"{BAND}\", source {', '.join(self.sources)}")


def settings_from_fits(fits: Sequence[Any]) -> list[MeasuredSetting]:
    """The trusted ones of ``fits`` (``fit.SettingFit``) as :class:`MeasuredSetting`."""
    out = []
    for f in fits:
        if f.trusted and not f.corrections.is_identity:
            model, gpu, count, tp, engine = f.key
            out.append(MeasuredSetting(model, gpu, int(count), int(tp), engine, float(f.corrections.prefill),
                                       float(f.corrections.decode), float(f.corrections.step_ms),
                                       len({id(e.point) for e in f.before}), tuple(f.sources)))
    return out


def fits_path(home: str | os.PathLike[str] | None = None) -> Path:
    """``<home>/measurements/fits.json`` beside the measurement store."""
    return store_path(home).parent / FITS_NAME


def save_settings(settings: Sequence[MeasuredSetting], home: str | os.PathLike[str] | None = None) -> Path:
    """Replace the kept trusted fits with ``settings`` (written atomically)."""
    import json

    path = fits_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{**{k: getattr(s, k) for k in ("model", "gpu", "count", "tp", "engine", "prefill", "decode", "step_ms",
                                         "points")}, "sources": list(s.sources)} for s in settings]
    atomic_write_text(path, json.dumps({"fits": rows}, indent=1) + "\n", field="measurements")
    return path


def _number(row: Mapping[str, Any], name: str, where: str, lo: float, hi: float) -> float:
    v = row.get(name)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not lo <= v <= hi:
        raise PlanningError(f"{where}.{name}", f"is {v!r}, not a number in [{lo}, {hi}].",
                            "run `planning measurements fit` again to rewrite the file, or delete it.")
    return float(v)


def _setting(row: Any, where: str) -> MeasuredSetting:
    if not isinstance(row, Mapping):
        raise PlanningError(where, "is not a mapping.", "run `planning measurements fit` again, or delete the file.")
    text = {k: row.get(k) for k in ("model", "gpu", "engine")}
    for k, v in text.items():
        if not isinstance(v, str) or not v:
            raise PlanningError(f"{where}.{k}", f"is {v!r}, not a name.", "run `planning measurements fit` again.")
    sources = row.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise PlanningError(f"{where}.sources", "is not a list of file names.", "run `planning measurements fit` again.")
    return MeasuredSetting(str(text["model"]), str(text["gpu"]), int(_number(row, "count", where, 1, 64)),
                           int(_number(row, "tp", where, 1, 64)), str(text["engine"]),
                           _number(row, "prefill", where, 1e-3, 1e3), _number(row, "decode", where, 1e-3, 1e3),
                           _number(row, "step_ms", where, -1e3, 1e3), int(_number(row, "points", where, 1, 1e6)),
                           tuple(sources))


def load_settings(home: str | os.PathLike[str] | None = None) -> list[MeasuredSetting]:
    """The kept trusted fits (empty when none was kept).

    Raises
    ------
    PlanningError: a damaged file (the message names the entry and field).
    """
    path = fits_path(home)
    if not path.is_file():
        return []
    data = load_json_file(path, field=str(path), limits=FITS_LIMITS, what="measurement fits")
    rows = data.get("fits") if isinstance(data, Mapping) else None
    if not isinstance(rows, list):
        raise PlanningError(f"{path}.fits", "is missing or not a list.", "run `planning measurements fit` again.")
    return [_setting(r, f"{path.name}.fits[{i}]") for i, r in enumerate(rows)]


def planned_settings(scenario: Scenario, home: str | os.PathLike[str] | None = None) -> list[MeasuredSetting]:
    """The kept trusted fits a solve of ``scenario`` plans on: none when its ``options.measurements`` is
    ``ignore``, else those of its models (``use`` and ``auto`` alike). The one rule for which perf model a plan
    runs on: empty means the shipped model (``api_measurements.plan_context`` corrects it otherwise, and the CLI
    prechecks on the shipped model before the solve only then).

    Raises
    ------
    PlanningError: a damaged fits file (:func:`load_settings`).
    """
    if scenario.options.measurements == "ignore":
        return []
    models = {m.id for m in scenario.models}
    return [s for s in load_settings(home) if s.model in models]


def _corrected_cal(cal: GpuCalibration, s: MeasuredSetting) -> GpuCalibration:
    """``cal`` with ``s``'s factors (as ``fit.corrected_perf``: efficiencies capped at 1, step overhead ≥ 0)."""
    return replace(cal, eff_compute_bf16=min(1.0, cal.eff_compute_bf16 * s.prefill),
                   eff_compute_fp8=min(1.0, cal.eff_compute_fp8 * s.prefill), eff_bw=min(1.0, cal.eff_bw * s.decode),
                   step_ms=max(0.0, cal.step_ms + s.step_ms), provenance="measured",
                   source=f"{cal.source}; corrected by your measurements")


class MeasuredPerfModel(PerfModel):
    """The perf model with per-setting corrections: a curve of model m on a node of c GPUs of type g at TP t uses
    the corrected calibration of the trusted fit (m, g, c, t, vLLM), every other curve the shipped one. An
    aggregated (continuous batching) table of a node takes the fit of that (model, shape) with the most points."""

    def __init__(self, base: PerfModel, settings: Sequence[MeasuredSetting]) -> None:
        super().__init__(catalog=base.catalog, calibration=base.calibration, profiles=base.profiles,
                         cache_dir=base.cache_dir, bands=base.bands)
        self.settings = tuple(s for s in settings if s.engine == PLANNER_ENGINE and s.gpu in base.catalog.gpus)
        self._by_key = {(s.model, s.gpu, s.count, s.tp): s for s in self.settings}
        by_shape: dict[tuple[str, str, int], MeasuredSetting] = {}
        for s in self.settings:
            k = (s.model, s.gpu, s.count)
            if k not in by_shape or s.points > by_shape[k].points:
                by_shape[k] = s
        self._by_shape = by_shape
        text = repr(sorted((s.key, s.prefill, s.decode, s.step_ms) for s in self.settings))
        self._measured_fp = hashlib.sha256(text.encode()).hexdigest()[:16]

    def _corrected(self, s: MeasuredSetting | None, dev: Device) -> Device:
        return dev if s is None else replace(dev, cal=_corrected_cal(dev.cal, s))

    def _node(self, model: Any, shape: str, dtype: str | None) -> Any:
        count, dev, prec, net, arch = super()._node(model, shape, dtype)
        return count, self._corrected(self._by_shape.get((model.id, dev.gpu_id, count)), dev), prec, net, arch

    def _curves(self, model: Any, node: NodeEngine, phase: str, wl: Workload, batches: np.ndarray,
                net_gbps: float, memory: EngineMemory | None = None, times: TimesMemo | None = None) -> Curves:
        """The base curves on the device of this curve's own setting: _node's whole-shape pick is undone, the TP
        decides. A fit is per GPU count, so the step times a node shares with the others of its GPU type and tp
        (``times``) are shared only among those the same fit (or none) corrects."""
        key = (model.id, node.dev.gpu_id, node.tp * node.dp, node.tp)
        setting = self._by_key.get(key)
        dev = self._corrected(setting, self.device(node.dev.gpu_id))
        if times is not None:
            times = replace(times, key=(times.key, key if setting is not None else None))
        return super()._curves(model, replace(node, dev=dev), phase, wl, batches, net_gbps, memory, times)

    def _calibration_fingerprint(self) -> str:
        return f"{super()._calibration_fingerprint()}:measured-{self._measured_fp}"

    def fingerprint(self) -> str:
        return hashlib.sha256(f"{super().fingerprint()}|{self._measured_fp}".encode()).hexdigest()[:16]

    def measured_setting(self, model: str, gpu: str, count: int) -> MeasuredSetting | None:
        """The fit that corrects ``model`` on a node of ``count`` × ``gpu`` (None: the shipped model)."""
        return self._by_shape.get((model, gpu, count))


def measured_context(base: EngineContext, settings: Sequence[MeasuredSetting]) -> EngineContext:
    """``base`` with its perf model corrected by ``settings`` (the same catalog and caches: their keys differ)."""
    return EngineContext(catalog=base.catalog, perf=MeasuredPerfModel(base.perf, settings), cache_dir=base.cache_dir)
