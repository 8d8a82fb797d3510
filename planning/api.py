"""Public entry points shared by the CLI, the Streamlit pages and notebooks (one per use case)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario, load_scenario, parse_scenario_text, save_scenario
from planning.solve import (
    Cancelled,
    CancelToken,
    EngineContext,
    ProgressFn,
    build_group_templates,
    default_context,
    plan_groups,
    resolve_models,
)
from planning.solve import solve as _solve

__all__ = [
    "Cancelled",
    "PlanResult",
    "Scenario",
    "build_templates",
    "catalog_frames",
    "engine_context",
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
    from planning.offers import resolve_offers

    ctx = engine_context()
    offers = resolve_offers(scenario, ctx.catalog)
    resolve_models(scenario, ctx.catalog)
    warnings = []
    hypothetical = sorted({f"{o.region} {o.shape}" for o in offers if o.quality == "hypothetical"})
    if hypothetical:
        warnings.append(f"{len(hypothetical)} offers are hypothetical shapes (priced as the paper did), e.g. {hypothetical[0]}.")
    empty = [f"{o.region} {o.shape}" for o in offers if o.available == 0]
    if empty:
        warnings.append(f"{len(empty)} offers have zero availability, e.g. {empty[0]}.")
    for g in plan_groups(scenario):
        if g.demand <= 0:
            warnings.append(f"{g.id} has zero demand; it will get no instances.")
    return warnings


def build_templates(scenario: Scenario, *, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None) -> pd.DataFrame:
    """Serving templates of every (model, phase), with cheapest-region cost and throughput per dollar."""
    from planning.offers import resolve_offers

    ctx = engine_context()
    offers = resolve_offers(scenario, ctx.catalog)
    specs = resolve_models(scenario, ctx.catalog)
    groups = plan_groups(scenario)
    shapes = sorted({o.shape for o in offers}, key=lambda s: (s.partition("x")[2], int(s.partition("x")[0])))
    records = build_group_templates(ctx, scenario, specs, groups, shapes, progress, cancel)
    by_region: dict[str, dict[str, float]] = {}
    for o in offers:
        by_region.setdefault(o.region, {})[o.shape] = o.price_per_hour
    unit = {g.id: g.unit for g in groups}
    rows = []
    for r in records:
        costs = [(sum(prices[s] * c for s, c in r.usage.items()), region)
                 for region, prices in by_region.items() if all(s in prices for s in r.usage)]
        cost, region = min(costs) if costs else (float("nan"), "")
        thr = sum(r.throughput.values()) / max(len(r.throughput), 1)
        model, phase = r.group.split("/", 1)
        rows.append({
            "model": model, "phase": phase, "template_id": r.id, "n_nodes": sum(r.usage.values()),
            "n_gpus": sum(int(s.partition("x")[0]) * c for s, c in r.usage.items()),
            "n_gpu_types": len(r.gpu_types), "homogeneous": r.homogeneous, "throughput": thr, "unit": unit[r.group],
            "cost_per_hour": cost, "region": region,
            "tokens_per_dollar": thr * 3600 / cost if cost and cost == cost and cost > 0 else 0.0,
            "stages": [{"layers": s.layers, "layer_start": s.layer_start, "layer_end": s.layer_end,
                        "nodes": [n.__dict__ for n in s.nodes]} for s in r.stages],
            "provenance": r.provenance,
        })
    return pd.DataFrame(rows)


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
