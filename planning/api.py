"""Public entry points shared by the CLI, the Streamlit pages and notebooks (one per use case)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from planning.catalog.schema import parse_shape
from planning.errors import PlanningError
from planning.result import PlanResult, StagePlan
from planning.scenario import Scenario, load_scenario, parse_scenario_text, save_scenario
from planning.solve import (
    Cancelled,
    CancelToken,
    EngineContext,
    ProgressFn,
    build_template_sets,
    default_context,
    resolve_scenario,
    stages_from_placement,
)
from planning.solve import solve as _solve

__all__ = [
    "Cancelled",
    "PlanResult",
    "Scenario",
    "build_templates",
    "catalog_frames",
    "engine_context",
    "fingerprint",
    "list_presets",
    "load_preset_scenario",
    "load_scenario",
    "parse_scenario_text",
    "planning_home",
    "preset_summaries",
    "result_json",
    "result_summary",
    "save_scenario",
    "solve",
    "sweep",
    "template_digest",
    "template_stages",
    "validate",
]

_CTX_LOCK = threading.Lock()
_CTX: EngineContext | None = None


def planning_home() -> Path:
    """Per-user state directory (caches, saved scenarios, job store): ``$PLANNING_HOME`` or ``~/.cache/planning``."""
    return Path(os.environ.get("PLANNING_HOME") or Path.home() / ".cache" / "planning")


def engine_context() -> EngineContext:
    """The process-wide read-only catalog + perf model + template cache (loaded once)."""
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            _CTX = default_context(cache_dir=planning_home() / "templates")
        return _CTX


def list_presets() -> list[str]:
    """Names of the shipped preset scenarios."""
    from planning.catalog.presets import list_presets as _list

    return list(_list())


def load_preset_scenario(name: str) -> Scenario:
    """A shipped preset as a validated Scenario.

    Raises
    ------
    UnknownIdError
        Unknown preset name (lists the presets).
    """
    from planning.catalog.presets import load_preset

    return Scenario.from_dict(load_preset(name))


def preset_summaries() -> list[dict[str, Any]]:
    """One row per preset: name, description, models, regions, source."""
    rows = []
    for name in list_presets():
        s = load_preset_scenario(name)
        rows.append({"name": name, "description": s.description, "models": [m.id for m in s.models],
                     "regions": list(s.regions) or sorted({o.region for o in s.offers}), "source": s.source})
    return rows


def solve(scenario: Scenario, *, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
          dump_model: str | Path | None = None, with_baselines: bool = True) -> PlanResult:
    """Plan a scenario (see :func:`planning.solve.solve`)."""
    return _solve(scenario, context=engine_context(), progress=progress, cancel=cancel, dump_model=dump_model,
                  with_baselines=with_baselines)


def validate(scenario: Scenario) -> list[str]:
    """Check a scenario against the catalog. Returns warnings; raises PlanningError on errors."""
    resolved = resolve_scenario(scenario, engine_context().catalog)
    offers = resolved.offers
    warnings = []
    hypothetical = sorted({f"{o.region} {o.shape}" for o in offers if o.quality == "hypothetical"})
    if hypothetical:
        warnings.append(f"{len(hypothetical)} offers are hypothetical shapes (priced as the paper did), e.g. {hypothetical[0]}.")
    empty = [f"{o.region} {o.shape}" for o in offers if o.available == 0]
    if empty:
        warnings.append(f"{len(empty)} offers have zero availability, e.g. {empty[0]}.")
    for g in resolved.groups:
        if g.demand <= 0:
            warnings.append(f"{g.id} has zero demand; it will get no instances.")
    return warnings


def build_templates(scenario: Scenario, *, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None) -> pd.DataFrame:
    """Serving templates of every (model, phase): throughput, cheapest-region cost, throughput per dollar.

    Returns
    -------
    DataFrame with columns model, phase, template_id, n_nodes, n_gpus, n_gpu_types, homogeneous (one shape),
    throughput, unit, cost_per_hour, region (cheapest where every shape is sold; NaN/"" when nowhere),
    tokens_per_dollar (units per $ = throughput × 3600 / cost), provenance, stages_json (placement in pipeline
    order; :func:`template_stages` turns one into StagePlans).
    """
    import numpy as np

    ctx = engine_context()
    resolved = resolve_scenario(scenario, ctx.catalog)
    offers, groups = resolved.offers, resolved.groups
    sets = build_template_sets(ctx, scenario, resolved.specs, groups, resolved.shapes, progress, cancel)
    regions = sorted({o.region for o in offers})
    frames = []
    for ts in sets:
        price = np.full((len(regions), len(ts.shapes)), np.nan)
        for o in offers:
            if o.shape in ts.shapes:
                price[regions.index(o.region), ts.shapes.index(o.shape)] = o.price_per_hour
        used = ts.usage > 0
        costs = np.full((len(ts), len(regions)), np.inf)
        for r in range(len(regions)):
            sold = ~np.isnan(price[r])
            ok = ~(used & ~sold[None, :]).any(axis=1)
            costs[ok, r] = ts.usage[ok] @ np.nan_to_num(price[r])
        best = costs.argmin(axis=1) if regions else np.zeros(len(ts), dtype=int)
        cost = costs[np.arange(len(ts)), best] if regions else np.full(len(ts), np.inf)
        thr = ts.throughput.mean(axis=1) if ts.throughput.size else np.zeros(len(ts))
        finite = np.isfinite(cost) & (cost > 0)
        gpu_count = np.array([parse_shape(s)[0] for s in ts.shapes])
        gpu_of = np.array(ts.shape_gpus)
        n_types = np.array([len(set(gpu_of[used[i]])) for i in range(len(ts))]) if len(ts) else np.zeros(0, int)
        frames.append(pd.DataFrame({
            "model": ts.group.model, "phase": ts.group.phase, "template_id": list(ts.ids),
            "n_nodes": ts.usage.sum(axis=1), "n_gpus": ts.usage @ gpu_count, "n_gpu_types": n_types,
            "homogeneous": ts.homogeneous, "throughput": thr, "unit": ts.group.unit,
            "cost_per_hour": np.where(np.isfinite(cost), cost, np.nan),
            "region": [regions[b] if f else "" for b, f in zip(best, np.isfinite(cost), strict=True)],
            "tokens_per_dollar": np.where(finite, thr * 3600 / np.where(finite, cost, 1), 0.0),
            "provenance": list(ts.provenance), "stages_json": list(ts.stages_json),
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def template_digest(frame: pd.DataFrame, per_group: int = 300) -> pd.DataFrame:
    """A bounded view of a library for display: per (model, phase) every homogeneous template, the
    throughput-vs-cost Pareto frontier and the ``per_group`` best by throughput per dollar.

    A coral-extended library has ~10⁶ templates; pages and job results keep this digest (columns as
    :func:`build_templates`, plus ``n_in_group``, the group's full template count).
    """
    if frame.empty:
        return frame
    parts = []
    for (_model, _phase), sub in frame.groupby(["model", "phase"], sort=True):
        ranked = sub.sort_values("tokens_per_dollar", ascending=False)
        keep = set(ranked.index[:per_group]) | set(sub.index[sub["homogeneous"].to_numpy()])
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


def fingerprint() -> str:
    """Hash of the catalog and performance model a result depends on (for job-cache keys)."""
    return str(engine_context().perf.fingerprint())


def template_stages(stages_json: str) -> tuple[StagePlan, ...]:
    """StagePlans (pipeline order, layer ranges) of one template's ``stages_json``."""
    import json

    return stages_from_placement(json.loads(stages_json)) if stages_json else ()


def result_json(result: PlanResult) -> str:
    """PlanResult as JSON with the CLI's contract keys on top (status, cost_per_hour, timings, baselines)."""
    import json

    payload = result.to_dict()
    payload["baselines"] = [{"name": b.name, "cost_per_hour": b.cost_per_hour, "served_fraction": b.served_fraction,
                             "feasible": b.feasible, "savings_pct": b.savings_pct, "note": b.note,
                             "served_by_group": dict(b.served_by_group), "gpus": dict(b.gpus)}
                            for b in result.baselines]
    return json.dumps(payload, indent=2, default=float)


def result_summary(result: PlanResult) -> str:
    """A short plain-text summary for the terminal."""
    lines = [f"status: {result.status}    cost: ${result.cost_per_hour:,.2f}/h    served: {result.served_fraction:.1%}"]
    best = result.best_homogeneous_baseline()
    if best is not None and best.cost_per_hour > 0 and result.status in ("optimal", "feasible"):
        lines.append(f"savings vs best baseline ({best.name}, ${best.cost_per_hour:,.2f}/h): "
                     f"{1 - result.cost_per_hour / best.cost_per_hour:.1%}")
    lines.append("GPUs: " + ", ".join(f"{n}×{g}" for g, n in result.gpus_by_type().items()))
    lines.append("")
    df = result.instances_frame()
    if not df.empty:
        lines.append(df[["model", "phase", "region", "count", "gpus", "throughput", "utilisation", "cost_per_hour"]]
                     .to_string(index=False))
    lines.append("")
    lines.append(result.baselines_frame()[["name", "cost_per_hour", "served_fraction", "feasible", "savings_pct"]]
                 .to_string(index=False))
    lines.extend(f"note: {d}" for d in result.diagnostics)
    t = result.timings
    lines.append(f"timings: templates {t.get('templates_seconds', 0):.2f}s, allocation {t.get('allocation_seconds', 0):.2f}s, "
                 f"baselines {t.get('baselines_seconds', 0):.2f}s")
    return "\n".join(lines) + "\n"


def sweep(scenario: Scenario, kind: str, values: Sequence[float], *, progress: ProgressFn | None = None,
          cancel: CancelToken | None = None) -> pd.DataFrame:
    """Cost of the mixed plan and of each baseline as demand (``kind="demand"``) or SLOs (``"slo"``) scale.

    Returns
    -------
    DataFrame with columns x, method, cost_per_hour, served_fraction, feasible.
    """
    if kind not in ("demand", "slo"):
        raise PlanningError("kind", f"unknown sweep {kind!r}.", 'use "demand" or "slo".')
    if not values:
        raise PlanningError("values", "is empty.", "give at least one multiplier, e.g. [0.5, 1, 2].")
    rows = []
    for i, x in enumerate(values):
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled by the user")
        variant = scenario.with_demand_scaled(x) if kind == "demand" else scenario.with_slo_scaled(x)
        variant = replace(variant, name=f"{scenario.name} ({kind} ×{x:g})")
        res = solve(variant, cancel=cancel)
        ok = res.status in ("optimal", "feasible")
        rows.append({"x": x, "method": "Plan (mixed templates)", "cost_per_hour": res.cost_per_hour if ok else float("nan"),
                     "served_fraction": res.served_fraction, "feasible": ok})
        for b in res.baselines:
            rows.append({"x": x, "method": b.name, "cost_per_hour": b.cost_per_hour if b.feasible else float("nan"),
                         "served_fraction": b.served_fraction, "feasible": b.feasible})
        if progress:
            progress((i + 1) / len(values), f"{kind} ×{x:g}")
    return pd.DataFrame(rows)


def catalog_frames() -> dict[str, pd.DataFrame]:
    """Catalog tables for display: gpus, configs, models, slo_presets, regions, availability."""
    ctx = engine_context()
    c = ctx.catalog
    frames = {
        "gpus": pd.DataFrame([g.__dict__ for g in c.gpus.values()]),
        "configs": pd.DataFrame([{**cfg.__dict__, "shape": cfg.shape, "region_key": cfg.region_key,
                                  "overridden": cfg.id in c.overridden} for cfg in c.configs.values()]),
        "models": pd.DataFrame([{k: v for k, v in m.__dict__.items() if k != "layer_types"} for m in c.models.values()]),
        "slo_presets": pd.DataFrame([s.__dict__ for s in c.slo_presets.values()]),
        "regions": pd.DataFrame([r.__dict__ for r in c.regions.values()]),
        "availability": pd.DataFrame([a.__dict__ for a in c.availability.values()]),
    }
    return frames


def timeline(scenario: Scenario, demand: Sequence[Any], *, availability: Any = None, options: Any = None,
             progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> Any:
    """Re-plan ``scenario`` epoch by epoch over demand (and availability) series; see :mod:`planning.timeline`.

    Returns a ``planning.timeline.TimelineResult`` (adaptive plan, static peak plan, homogeneous baselines).
    """
    from planning.timeline import run_timeline

    return run_timeline(scenario, demand, availability=availability, options=options, context=engine_context(),
                        progress=progress, cancel=cancel)
