"""Public entry points of the measurements room (re-exported by :mod:`planning.api`): import the user's benchmark
files into the store, list them, and fit the perf model's corrections to them through the simulator."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from planning.measurements.checks import check_point
from planning.measurements.fit import SettingFit, by_setting, fit_setting
from planning.measurements.readers import Setup, read_files
from planning.measurements.schema import COLUMNS, Measurement
from planning.measurements.store import add, load_store, store_path

__all__ = ["ImportReport", "Setup", "fit_frame", "fit_measurements", "import_measurements", "measurements_frame", "points_frame",
           "read_measurements"]


@dataclass(frozen=True)
class ImportReport:
    """What an import did: the points read (checked), how many were new, the store's size and where it is."""

    points: tuple[Measurement, ...]
    added: int
    total: int
    store: Path


def read_measurements(paths: Sequence[str | os.PathLike[str]], setup: Setup | None = None,
                      fmt: str = "auto") -> list[Measurement]:
    """The checked points of benchmark files, without storing them.

    Parameters
    ----------
    paths: ``vllm bench serve --save-result`` JSON, GuideLLM report JSON, or plain CSV files.
    setup: what the files do not say (model, GPU, count, TP, engine, version, dtype, plan instance); a sidecar
        ``<file>.yaml`` fills what the setup leaves None.
    fmt: ``auto`` (by content), ``vllm``, ``guidellm`` or ``csv``.

    Raises
    ------
    PlanningError: unreadable or hostile files, missing setup, a point faster than the hardware allows or whose
        throughput contradicts its latencies (the message names the point, the field and the likely cause).
    """
    from planning.catalog import load_catalog

    catalog = load_catalog()
    points = read_files([Path(p) for p in paths], setup, catalog, fmt)
    for m in points:
        check_point(m, catalog)
    return points


def import_measurements(paths: Sequence[str | os.PathLike[str]], setup: Setup | None = None, fmt: str = "auto",
                        home: str | os.PathLike[str] | None = None) -> ImportReport:
    """Read and check benchmark files (:func:`read_measurements`) and add them to the store under ``home``
    (default ``$PLANNING_HOME``), written atomically; a point already stored is kept once."""
    points = read_measurements(paths, setup, fmt)
    path = store_path(home)
    added, total = add(points, path)
    return ImportReport(tuple(points), added, total, path)


def measurements_frame(home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The stored measurements, one row per point (columns of the store schema)."""
    return pd.DataFrame([m.as_row() for m in load_store(store_path(home))], columns=list(COLUMNS))


def fit_measurements(points: Sequence[Measurement] | None = None, home: str | os.PathLike[str] | None = None,
                     loo: bool = True, max_evals: int = 90) -> list[SettingFit]:
    """Fit each setting's corrections (prefill rate, decode rate, step overhead) to ``points`` (default: the
    store's) through the simulator's benchmark mode; errors before/after and leave-one-out per setting
    (``max_evals``: simulator evaluations of one fit; a fit with the leave-one-out costs points + 1 fits)."""
    from planning.perf.model import PerfModel

    pts = list(points) if points is not None else load_store(store_path(home))
    perf = PerfModel()
    return [fit_setting(group, perf, loo=loo, max_evals=max_evals) for group in by_setting(pts).values()]


def fit_frame(fits: Sequence[SettingFit]) -> pd.DataFrame:
    """One row per setting: its corrections and median errors before, after and leave-one-out (fractions)."""
    rows = []
    for f in fits:
        model, gpu, count, tp, engine = f.key
        rows.append({"model": model, "shape": f"{count}x{gpu}", "tp": tp, "engine": engine,
                     "points": len({id(e.point) for e in f.before}), "prefill_factor": f.corrections.prefill,
                     "decode_factor": f.corrections.decode, "step_ms_added": f.corrections.step_ms,
                     "error_before": f.error_before, "error_after": f.error_after,
                     "error_leave_one_out": f.loo_error if not math.isnan(f.loo_error) else None,
                     "trusted": f.trusted,
                     "sources": "; ".join(f.sources)})
    return pd.DataFrame(rows)


def points_frame(fits: Sequence[SettingFit]) -> pd.DataFrame:
    """Every measured quantity beside the simulator before and after the fit (the fit chart's data)."""
    rows = []
    for f in fits:
        for b, a in zip(f.before, f.after, strict=True):
            rows.append({"model": b.point.model, "shape": f"{b.point.count}x{b.point.gpu}", "tp": b.point.tp,
                         "concurrency": b.point.concurrency, "request_rate": b.point.request_rate,
                         "quantity": b.quantity, "measured": b.measured, "predicted_before": b.predicted,
                         "predicted_after": a.predicted, "error_before": b.rel_error, "error_after": a.rel_error,
                         "file": b.point.file})
    return pd.DataFrame(rows)
