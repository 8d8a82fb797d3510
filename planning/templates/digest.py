"""Serving templates as a table for display: every template of a scenario's (model, phase) groups with its
throughput, cheapest-region cost and throughput per dollar (:func:`template_frame`), and a bounded digest of it
for pages and job results (:func:`template_digest`). ``planning.api.build_templates`` / ``template_digest`` are
their public faces."""

from __future__ import annotations

import numpy as np
import pandas as pd

from planning.catalog.schema import parse_shape
from planning.context import CancelToken, EngineContext, ProgressFn
from planning.resolve import resolve_scenario
from planning.scenario import Scenario
from planning.templates.sets import build_template_sets, template_costs


def template_frame(scenario: Scenario, *, context: EngineContext, progress: ProgressFn | None = None,
                   cancel: CancelToken | None = None) -> pd.DataFrame:
    """Serving templates of every (model, phase) under ``context``; columns as ``planning.api.build_templates``."""
    ctx = context
    resolved = resolve_scenario(scenario, ctx.catalog)
    sets = build_template_sets(ctx, resolved, progress, cancel)
    regions = resolved.regions
    frames = []
    for ts in sets:
        costs = template_costs(ts.usage, resolved.price_matrix(ts.shapes))
        best = costs.argmin(axis=1) if regions else np.zeros(len(ts), dtype=int)
        cost = costs[np.arange(len(ts)), best] if regions else np.full(len(ts), np.inf)
        thr = ts.throughput.mean(axis=1) if ts.throughput.size else np.zeros(len(ts))
        finite = np.isfinite(cost) & (cost > 0)
        gpu_count = np.array([parse_shape(s)[0] for s in ts.shapes])
        frames.append(pd.DataFrame({
            "model": ts.group.model, "phase": ts.group.phase, "template_id": list(ts.ids),
            "n_nodes": ts.usage.sum(axis=1), "n_gpus": ts.usage @ gpu_count, "n_gpu_types": ts.n_gpu_types,
            "single_shape": ts.single_shape, "single_gpu_type": ts.single_gpu_type,
            "throughput": thr, "unit": ts.group.unit,
            "cost_per_hour": np.where(np.isfinite(cost), cost, np.nan),
            "region": [regions[b] if f else "" for b, f in zip(best, np.isfinite(cost), strict=True)],
            "tokens_per_dollar": np.where(finite, thr * 3600 / np.where(finite, cost, 1), 0.0),
            "provenance": list(ts.provenance), "stages_json": list(ts.stages_json),
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()



def template_digest(frame: pd.DataFrame, per_group: int = 300) -> pd.DataFrame:
    """A bounded view of a library for display: per (model, phase) every single-shape template, the
    throughput-vs-cost Pareto frontier and the ``per_group`` best by throughput per dollar.

    A coral-extended library has ~10⁶ templates; pages and job results keep this digest (columns as
    :func:`build_templates`, plus ``n_in_group``, the group's full template count).
    """
    if frame.empty:
        return frame
    parts = []
    for (_model, _phase), sub in frame.groupby(["model", "phase"], sort=True):
        ranked = sub.sort_values("tokens_per_dollar", ascending=False)
        keep = set(ranked.index[:per_group]) | set(sub.index[sub["single_shape"].to_numpy()])
        ordered = sub.sort_values(["cost_per_hour", "throughput"], ascending=[True, False])
        best = -1.0
        for idx, thr in zip(ordered.index, ordered["throughput"].to_numpy(), strict=True):
            if thr > best:  # strictly more throughput than every cheaper template: on the frontier
                keep.add(idx)
                best = float(thr)
        part = sub.loc[sorted(keep)].copy()
        part["n_in_group"] = len(sub)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


