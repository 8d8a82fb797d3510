"""Public entry points of the measurements room (re-exported by :mod:`planning.api`): import the user's benchmark
files into the store, list them, and fit the perf model's corrections to them through the simulator."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planning.context import CancelToken, EngineContext, ProgressFn
from planning.errors import PlanningError
from planning.measurements.checks import check_point
from planning.measurements.readers import Setup, read_files
from planning.measurements.schema import COLUMNS, Measurement
from planning.measurements.store import add, load_store, store_path
from planning.result import PlanResult
from planning.scenario import Scenario

if TYPE_CHECKING:  # the fit and the plan check load the simulator: imported when called, not with the face
    import pandas as pd  # pandas: imported by the functions that build a frame (a CLI solve needs none)

    from planning.measurements.fit import SettingFit
    from planning.measurements.validate import InstanceCheck
    from planning.pipeline import Reuse

__all__ = [
    "ImportReport",
    "MeasuredWhatIf",
    "PlanValidation",
    "Setup",
    "fit_frame",
    "fit_measurements",
    "import_measurements",
    "kept_fits_fingerprint",
    "label_measured",
    "measured_lines",
    "measurements_frame",
    "measurements_impact",
    "measurements_what_if",
    "plan_context",
    "plan_diff",
    "points_frame",
    "read_measurements",
    "validate_plan",
]


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
    import pandas as pd

    return pd.DataFrame([m.as_row() for m in load_store(store_path(home))], columns=list(COLUMNS))


def fit_measurements(points: Sequence[Measurement] | None = None, home: str | os.PathLike[str] | None = None,
                     loo: bool = True, max_evals: int = 90, keep: bool = False) -> list[SettingFit]:
    """Fit each setting's corrections (prefill rate, decode rate, step overhead) to ``points`` (default: the
    store's) through the simulator's benchmark mode; errors before/after and leave-one-out per setting
    (``max_evals``: simulator evaluations of one fit; a fit with the leave-one-out costs points + 1 fits).
    ``keep``: replace the kept fits (``<home>/measurements/fits.json``) with the trusted ones, which later solves
    plan on (``options.measurements``)."""
    from planning.measurements.apply import save_settings, settings_from_fits
    from planning.measurements.fit import by_setting, fit_setting
    from planning.perf.model import PerfModel

    pts = list(points) if points is not None else load_store(store_path(home))
    perf = PerfModel()
    fits = [fit_setting(group, perf, loo=loo, max_evals=max_evals) for group in by_setting(pts).values()]
    if keep:
        save_settings(settings_from_fits(fits), home)
    return fits


def fit_frame(fits: Sequence[SettingFit]) -> pd.DataFrame:
    """One row per setting: its corrections (``fitted``: those its points identify, the others kept at the
    model's), and median errors before, after and leave-one-out (fractions)."""
    import pandas as pd

    rows = []
    for f in fits:
        model, gpu, count, tp, engine = f.key
        rows.append({"model": model, "shape": f"{count}x{gpu}", "tp": tp, "engine": engine,
                     "points": len({id(e.point) for e in f.before}), "prefill_factor": f.corrections.prefill,
                     "decode_factor": f.corrections.decode, "step_ms_added": f.corrections.step_ms,
                     "error_before": f.error_before, "error_after": f.error_after,
                     "fitted": ", ".join(f.fitted),
                     "error_leave_one_out": f.loo_error if not math.isnan(f.loo_error) else None,
                     "trusted": f.trusted,
                     "sources": "; ".join(f.sources)})
    return pd.DataFrame(rows)


def points_frame(fits: Sequence[SettingFit]) -> pd.DataFrame:
    """Every measured quantity beside the simulator before and after the fit (the fit chart's data)."""
    import pandas as pd

    rows = []
    for f in fits:
        for b, a in zip(f.before, f.after, strict=True):
            rows.append({"model": b.point.model, "shape": f"{b.point.count}x{b.point.gpu}", "tp": b.point.tp,
                         "concurrency": b.point.concurrency, "request_rate": b.point.request_rate,
                         "quantity": b.quantity, "measured": b.measured, "predicted_before": b.predicted,
                         "predicted_after": a.predicted, "error_before": b.rel_error, "error_after": a.rel_error,
                         "file": b.point.file})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class PlanValidation:
    """``validate_plan``'s answer: each measured instance beside its prediction, the fits of the measured settings,
    and (when an instance misses and the plan carries its scenario) the plan re-solved on the corrected model."""

    checks: tuple[InstanceCheck, ...]
    fits: tuple[SettingFit, ...]
    replanned: PlanResult | None
    note: str

    @property
    def missing(self) -> list[int]:
        """Plan instances whose measurements miss (sorted, once each)."""
        return sorted({c.instance for c in self.checks if c.misses})

    def frame(self) -> pd.DataFrame:
        """One row per measured point: measured vs predicted, SLOs, whether it misses and why."""
        import pandas as pd

        return pd.DataFrame([c.as_row() for c in self.checks])


def plan_diff(before: PlanResult, after: PlanResult) -> pd.DataFrame:
    """Instances of two plans side by side: (model, phase, template, region) with their counts and $/h, before
    and after (0 where a plan has none), and a total row; both costs are provisioning ($/h of the nodes)."""
    import pandas as pd

    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for side, plan in (("before", before), ("after", after)):
        for inst in plan.instances:
            row = rows.setdefault((inst.model, inst.phase, inst.template_id, inst.region),
                                  {"count_before": 0, "count_after": 0, "usd_h_before": 0.0, "usd_h_after": 0.0})
            row[f"count_{side}"] += inst.count
            row[f"usd_h_{side}"] += inst.cost_per_hour
    out = [{"model": k[0], "phase": k[1], "template": k[2], "region": k[3], **v} for k, v in sorted(rows.items())]
    out.append({"model": "total", "phase": "", "template": "", "region": "",
                "count_before": sum(r["count_before"] for r in out), "count_after": sum(r["count_after"] for r in out),
                "usd_h_before": before.provisioning_per_hour, "usd_h_after": after.provisioning_per_hour})
    return pd.DataFrame(out)


def validate_plan(plan: PlanResult, paths: Sequence[str | os.PathLike[str]], setup: Setup | None = None,
                  fmt: str = "auto", replan: bool = True) -> PlanValidation:
    """Measured vs predicted per plan instance, the instances that miss, and a re-plan with the measurements.

    Parameters
    ----------
    plan: a saved plan (``planning solve --json``) whose instances were deployed (``planning export``).
    paths: the benchmark results of its instances (the recipes' ``vllm bench serve`` command writes them with
        the instance index in ``--metadata``; other files name it with ``setup.instance``).
    replan: re-solve the plan's scenario on the model corrected by the measurements when an instance misses.

    Raises
    ------
    PlanningError: bad files (see :func:`read_measurements`), a point no instance matches, a plan without a plan.
    """
    from planning.context import default_context
    from planning.measurements.fit import by_setting, fit_setting
    from planning.measurements.validate import TOLERANCE, check_instances

    if not plan.has_plan:
        raise PlanningError("plan", f"has no plan to validate (status {plan.status}).", "give a solved PLAN.json.")
    points = read_measurements(paths, setup, fmt)
    base = default_context()
    checks = check_instances(plan, points, base.perf)
    fits = [fit_setting(group, base.perf, loo=len(group) > 1) for group in by_setting(points).values()]
    if not any(c.misses for c in checks):
        return PlanValidation(tuple(checks), tuple(fits), None, "every measured instance is within "
                              f"{100 * TOLERANCE:.0f} % of its prediction and meets its SLOs.")
    if not replan or not plan.scenario:
        return PlanValidation(tuple(checks), tuple(fits), None, "not re-planned: " + (
            "the plan carries no scenario." if replan else "re-planning was not asked for."))
    new = _solve_measured(Scenario.from_dict(plan.scenario), fits, base)
    return PlanValidation(tuple(checks), tuple(fits), new, "re-planned with your measurements (" + (
        "; ".join(measured_lines(fits)) or "no trusted fit") + ").")


def measured_lines(fits: Sequence[SettingFit]) -> list[str]:
    """One line per trusted fit: the setting, its corrections, band "measured (yours)" and its source files."""
    from planning.measurements.validate import corrections_text

    return [f"{f.key[0]} on {f.key[2]}x{f.key[1]} TP{f.key[3]}: {corrections_text(f.corrections)}; band "
            f"\"measured (yours)\", source {', '.join(f.sources)}" for f in fits if f.trusted]


def _solve_measured(scenario: Scenario, fits: Sequence[SettingFit], base: EngineContext) -> PlanResult:
    """``scenario`` planned on ``base``'s perf model with the trusted fits' corrections, each on its own setting
    (model, GPU, count, TP, engine); instances on corrected settings carry the band "measured (yours)" and the
    diagnostics name the fits and their source files (:func:`label_measured`)."""
    from planning.measurements.apply import measured_context, settings_from_fits
    from planning.pipeline import solve as pipeline_solve

    ctx = measured_context(base, settings_from_fits(fits))
    return label_measured(pipeline_solve(scenario, context=ctx, with_baselines=False), ctx)


@dataclass(frozen=True)
class MeasuredWhatIf:
    """A scenario planned without and with the user's stored measurements, and the plan diff."""

    without: PlanResult
    with_measurements: PlanResult
    fits: tuple[SettingFit, ...]

    def diff(self) -> pd.DataFrame:
        return plan_diff(self.without, self.with_measurements)


def measurements_what_if(scenario: Scenario, points: Sequence[Measurement] | None = None,
                         home: str | os.PathLike[str] | None = None) -> MeasuredWhatIf:
    """What-if: ``scenario`` planned on the shipped model and on the model corrected by ``points`` (default: the
    store's measurements of the scenario's models; only trusted fits correct anything).

    Raises
    ------
    PlanningError: no measurement of any of the scenario's models.
    """
    from planning.context import default_context
    from planning.measurements.fit import by_setting, fit_setting
    from planning.pipeline import solve as pipeline_solve

    models = {m.id for m in scenario.models}
    pts = [m for m in (list(points) if points is not None else load_store(store_path(home))) if m.model in models]
    if not pts:
        raise PlanningError("measurements", f"none of {', '.join(sorted(models))} has a measurement.",
                            "import some with `planning measurements import FILE --gpu ...`.")
    base = default_context()
    fits = [fit_setting(group, base.perf, loo=len(group) > 1) for group in by_setting(pts).values()]
    without = pipeline_solve(scenario, context=base, with_baselines=False)
    return MeasuredWhatIf(without, _solve_measured(scenario, fits, base), tuple(fits))


def plan_context(scenario: Scenario, base: EngineContext,
                 home: str | os.PathLike[str] | None = None) -> tuple[EngineContext, str]:
    """The engine context a solve of ``scenario`` plans on, and a note when it is not ``base``.

    ``options.measurements``: ``ignore`` plans on ``base``; ``use`` (and ``auto``, the default, when trusted fits
    are kept in ``$PLANNING_HOME/measurements/fits.json``) plans on ``base`` corrected by the kept fits of the
    scenario's models (``measurements.apply``); a fit corrects its own (model, GPU, count, TP, engine) only.
    """
    from planning.measurements.apply import measured_context, planned_settings

    kept = planned_settings(scenario, home)  # the rule the CLI's precheck follows too
    if not kept:
        return base, ("options.measurements is use but no trusted fit of this scenario's models is kept: "
                      "planned on the shipped model (run `planning measurements fit`)."
                      ) if scenario.options.measurements == "use" else ""
    key = (id(base), tuple(kept))
    if key not in _MEASURED:  # one corrected model per (context, fits): its in-memory tables are reused by solves
        if len(_MEASURED) >= 4:
            _MEASURED.pop(next(iter(_MEASURED)))
        _MEASURED[key] = (base, measured_context(base, kept))  # holding base keeps its id from being reused
    return _MEASURED[key][1], ""


_MEASURED: dict[tuple[int, tuple[Any, ...]], tuple[EngineContext, EngineContext]] = {}


def kept_fits_fingerprint(home: str | os.PathLike[str] | None = None) -> str:
    """'' without kept fits, else ``:fits-<hash>`` of them: a job cached before a fit is not reused after it."""
    import hashlib

    from planning.measurements.apply import load_settings

    try:
        kept = load_settings(home)
    except PlanningError:  # the solve itself names the damaged entry; a key is all this needs
        return ":fits-damaged"
    return f":fits-{hashlib.sha256(repr(kept).encode()).hexdigest()[:12]}" if kept else ""


def scenario_context(scenario: Scenario) -> EngineContext:
    """The engine context every answer about ``scenario`` is computed on (plans, sharing, timelines and the
    simulator alike): the process's, corrected by the user's kept fits when ``options.measurements`` asks
    (:func:`plan_context`), so a plan and its simulation never run on two different models."""
    from planning.context import engine_context

    return plan_context(scenario, engine_context())[0]


def solve_scenario(scenario: Scenario, *, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                   dump_model: str | Path | None = None, with_baselines: bool = True, cache: bool = True,
                   prechecked: bool = False) -> PlanResult:
    """``api.solve`` (its docstring says what each argument does): :func:`solve_measured` with the result cache of
    ``$PLANNING_HOME`` unless ``cache`` is False, and without the precheck when the caller ran it. Here, in a face
    part that imports no pandas, so that ``planning solve`` reaches the pipeline without loading the face's frames
    (pandas and pyarrow: a third of a second of CPU in every fresh process)."""
    from planning.pipeline import Reuse
    from planning.resultcache import default_cache

    reuse = Reuse(cache=default_cache() if cache else None, prechecked=prechecked)
    return solve_measured(scenario, reuse, progress=progress, cancel=cancel, with_baselines=with_baselines,
                          dump_model=dump_model)


def solve_measured(scenario: Scenario, reuse: Reuse | None = None, *, progress: ProgressFn | None = None,
                   cancel: CancelToken | None = None, with_baselines: bool = True,
                   dump_model: str | Path | None = None) -> PlanResult:
    """:func:`planning.pipeline.solve` on the engine context :func:`plan_context` picks (the perf model corrected
    by the user's kept fits when the scenario asks), the result labelled (:func:`label_measured`): what
    ``api.solve``, what-ifs, sweeps and slider positions all run."""
    from planning.context import engine_context
    from planning.pipeline import solve

    ctx, note = plan_context(scenario, engine_context())
    result = solve(scenario, context=ctx, progress=progress, cancel=cancel, dump_model=dump_model,
                   with_baselines=with_baselines, reuse=reuse)
    return label_measured(result, ctx, note)


def label_measured(result: PlanResult, ctx: EngineContext, note: str = "") -> PlanResult:
    """``result`` planned on ``ctx``: instances whose every node is a corrected setting of their model carry the
    band "measured (yours)"; the plan's provenance and diagnostics name each used fit and its source files."""
    from planning.measurements.apply import BAND, MeasuredPerfModel

    perf = ctx.perf
    if not isinstance(perf, MeasuredPerfModel):
        return replace(result, diagnostics=(*result.diagnostics, note)) if note and note not in \
            result.diagnostics else result  # a plan proven from its base (planning.relations) has it already
    used: dict[str, str] = {}
    instances = []
    for inst in result.instances:
        nodes = [n for st in inst.stages for n in st.nodes]
        hits = [perf.measured_setting(inst.model, n.gpu, n.count) for n in nodes]
        if nodes and all(h is not None for h in hits):
            inst = replace(inst, provenance=BAND)
        instances.append(inst)
        for h in hits:
            if h is not None:
                used[f"{BAND} {h.model} {h.count}x{h.gpu} TP{h.tp}"] = h.text()
    lines = tuple(f"perf model corrected by your measurements: {t}" for t in used.values())
    return replace(result, instances=tuple(instances), provenance={**result.provenance, **used},
                   diagnostics=(*result.diagnostics, *(line for line in lines if line not in result.diagnostics)))


IMPACT_COLUMNS = ["scenario", "changes", "corrected", "instances_before", "instances_after", "usd_h_before",
                  "usd_h_after", "usd_h_change", "change_pct", "note"]


def measurements_impact(scenarios: Mapping[str, Scenario], home: str | os.PathLike[str] | None = None,
                        cancel: CancelToken | None = None) -> pd.DataFrame:
    """Which saved scenarios' plans the kept trusted fits change, and by how much.

    Each scenario with a kept fit of one of its models is planned on the shipped model and on the corrected one
    (as ``options.measurements: use``); a scenario without one is listed unchanged without solving. Costs are
    provisioning $/h (the same components on both sides); ``change_pct`` is relative to the shipped plan.
    """
    import pandas as pd

    from planning.context import check_cancel, default_context
    from planning.measurements.apply import load_settings, measured_context
    from planning.pipeline import solve as pipeline_solve

    kept = load_settings(home)
    base = default_context()
    rows = []
    for name, scenario in scenarios.items():
        check_cancel(cancel, f"measurements impact: {name}")
        models = {m.id for m in scenario.models}
        mine = [s for s in kept if s.model in models]
        if not mine:
            rows.append({"scenario": name, "changes": False, "corrected": "", "note": "no trusted fit of its models"})
            continue
        before = pipeline_solve(scenario, context=base, with_baselines=False, cancel=cancel)
        ctx = measured_context(base, mine)
        after = label_measured(pipeline_solve(scenario, context=ctx, with_baselines=False, cancel=cancel), ctx)
        cost0, cost1 = before.provisioning_per_hour, after.provisioning_per_hour
        n0, n1 = (sum(i.count for i in p.instances) for p in (before, after))
        rows.append({"scenario": name, "changes": (n0, round(cost0, 6)) != (n1, round(cost1, 6))
                     or before.status != after.status,
                     "corrected": "; ".join(f"{s.model} on {s.count}x{s.gpu} TP{s.tp}" for s in mine),
                     "instances_before": n0, "instances_after": n1, "usd_h_before": cost0, "usd_h_after": cost1,
                     "usd_h_change": cost1 - cost0, "change_pct": _change_pct(before, after),
                     "note": f"{before.status} → {after.status}"})
    return pd.DataFrame(rows, columns=IMPACT_COLUMNS)


def _change_pct(before: PlanResult, after: PlanResult) -> float | None:
    """How much dearer (+) or cheaper (−) ``after`` is in %, by ``result.savings_pct`` (None: not comparable)."""
    from planning.result import savings_pct

    saved = savings_pct(after.provisioning_per_hour, before.provisioning_per_hour, after.served_fraction,
                        before.served_fraction)
    return None if saved is None else -saved
