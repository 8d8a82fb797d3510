"""Public entry points shared by the CLI, the Streamlit pages and notebooks (one per use case)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from planning.api_fanout import (
    FIRST_PASS_S,
    PLAN_METHOD,
    SWEEP_COLUMNS,
    SweepOptions,
    cached_plan,
    nearest_base,
    proven_at_once,
    solve_near,
    sweep,
    sweep_notes,
    warm_columns,
    what_if,
)
from planning.api_finance import bill_csv, bill_frame, commitments_frame, cost_lines_csv, finance_summary
from planning.api_measurements import (
    ImportReport,
    MeasuredWhatIf,
    PlanValidation,
    fit_frame,
    fit_measurements,
    import_measurements,
    kept_fits_fingerprint,
    label_measured,
    measured_lines,
    measurements_frame,
    measurements_impact,
    measurements_what_if,
    plan_context,
    plan_diff,
    points_frame,
    read_measurements,
    scenario_context,
    solve_scenario,
    validate_plan,
)
from planning.api_measurements import Setup as MeasurementSetup
from planning.api_outputs import (
    compare_markets,
    export_alternative,
    export_plan,
    export_preview,
    export_zip,
    lesson,
    plan_report,
    plan_uncertainty,
)
from planning.api_simulate import (
    load_trace,
    sim_result_from_dict,
    simulate,
    simulate_benchmark,
    simulate_headroom,
    simulate_shared,
    simulated_checks,
)
from planning.api_timeline import (
    timeline,
    timeline_availability_samples,
    timeline_job,
    timeline_match_text,
    timeline_request,
    timeline_result,
    timeline_samples,
)
from planning.context import Cancelled, CancelToken, ProgressFn, engine_context, planning_home
from planning.errors import PlanningError, quote
from planning.report import terminal_summary
from planning.resolve import resolve_scenario, scenario_warnings
from planning.result import PlanResult, StagePlan
from planning.safeio import Limits, json_safe, load_json, read_text
from planning.scenario import Scenario, load_scenario, parse_scenario_text, save_scenario
from planning.templates.digest import template_digest as _template_digest
from planning.templates.digest import template_frame
from planning.templates.sets import build_template_sets
from planning.templates.stages import stages_from_json
from planning.whatif import (
    KINDS as VARIANT_KINDS,
)
from planning.whatif import (
    SLIDERS as VARIANT_SLIDERS,
)
from planning.whatif import (
    Variant,
    apply_variants,
    chart_frame,
    comparison_frame,
    diff_lines,
    make_variant,
    parse_variant,
    slider_neighbours,
    slider_position,
    slider_steps,
    slider_values,
    slider_variants,
)
from planning.whatif import (
    label as variant_label,
)

if TYPE_CHECKING:
    from planning.sharing.result import SharingResult

__all__ = [
    "FIRST_PASS_S",
    "PLAN_METHOD",
    "SOLVE_MODULES",
    "SWEEP_COLUMNS",
    "VARIANT_KINDS",
    "VARIANT_SLIDERS",
    "CancelToken",
    "Cancelled",
    "ImportReport",
    "MeasuredWhatIf",
    "MeasurementSetup",
    "PlanResult",
    "PlanValidation",
    "ProgressFn",
    "Scenario",
    "SweepOptions",
    "Variant",
    "apply_variants",
    "baseline_caption",
    "baseline_catalog",
    "bill_csv",
    "bill_frame",
    "build_templates",
    "cached_plan",
    "catalog_frames",
    "chart_frame",
    "check_custom_model",
    "commitments_frame",
    "compare_markets",
    "comparison_frame",
    "cost_lines_csv",
    "diff_lines",
    "engine_context",
    "export_alternative",
    "export_plan",
    "export_preview",
    "export_zip",
    "finance_summary",
    "fingerprint",
    "fit_frame",
    "fit_measurements",
    "import_measurements",
    "is_plan_json",
    "json_safe",
    "kept_fits_fingerprint",
    "label_measured",
    "lesson",
    "list_presets",
    "load_any_plan",
    "load_plan",
    "load_preset_scenario",
    "load_scenario",
    "load_trace",
    "make_variant",
    "measured_lines",
    "measurements_frame",
    "measurements_impact",
    "measurements_what_if",
    "nearest_base",
    "offers_frame",
    "parse_scenario_text",
    "parse_variant",
    "plan_context",
    "plan_diff",
    "plan_from_json",
    "plan_report",
    "plan_uncertainty",
    "planning_home",
    "points_frame",
    "preset_summaries",
    "proven_at_once",
    "read_measurements",
    "read_model_config",
    "result_json",
    "result_summary",
    "save_scenario",
    "sim_result_from_dict",
    "simulate",
    "simulate_benchmark",
    "simulate_headroom",
    "simulate_shared",
    "simulated_checks",
    "slider_neighbours",
    "slider_position",
    "slider_steps",
    "slider_values",
    "slider_variants",
    "solve",
    "solve_near",
    "solve_shared",
    "stale_price_warning",
    "sweep",
    "sweep_notes",
    "template_digest",
    "template_stages",
    "timeline",
    "timeline_availability_samples",
    "timeline_job",
    "timeline_match_text",
    "timeline_request",
    "timeline_result",
    "timeline_samples",
    "validate",
    "validate_plan",
    "variant_label",
    "warm_columns",
    "what_if",
]

SOLVE_MODULES = ("highspy", "scipy.sparse", "planning.allocate.ondemand", "planning.allocate.matrix_model",
                 "planning.allocate.reduce", "planning.allocate.diagnostics", "planning.baselines",
                 "planning.baselines.homo", "planning.baselines.cauchy", "planning.baselines.memp",
                 "planning.baselines.single_type", "planning.baselines.registry", "planning.explain",
                 "planning.transfer", "planning.templates.search", "planning.templates.library",
                 "planning.finance.plan", "planning.measurements.apply", "planning.allocate.linked",
                 "planning.baselines.beside", "planning.templates.placing", "planning.allocate.unbeaten",
                 "planning.allocate.knapcover")
"""Modules :func:`solve` imports on first use; a long-lived worker imports them while it warms up."""

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


PLAN_LIMITS = Limits(max_bytes=64 * 1024 * 1024, max_nodes=5_000_000)


def plan_from_json(text: str, *, origin: str = "plan") -> PlanResult:
    """A saved plan (``planning solve --json``) from untrusted text: bounded parsing, then the result's schema.

    Raises
    ------
    PlanningError
        Not JSON, too large or too deep, or not a plan; the message names ``origin`` and the fix.
    """
    return _plan_from_data(load_json(text, field="plan", origin=origin, limits=PLAN_LIMITS), origin)


def _plan_from_data(data: Any, origin: str) -> PlanResult:
    """:func:`plan_from_json` on the parsed JSON."""
    from planning.sharing.result import is_shared_plan

    fix = "write a plan with `planning solve SCENARIO --json --out plan.json`."
    if not (isinstance(data, dict) and "instances" in data and "status" in data):
        raise PlanningError("plan", f"{origin} is JSON but not a plan (no 'instances' and 'status').", fix)
    if is_shared_plan(data):
        raise PlanningError("plan", f"{origin} is a plan with shared GPUs (`--sharing`); this step reads plans "
                                    "without sharing.", "simulate it with `planning simulate PLAN.json`, or save "
                                                        "the plan without `--sharing`.")
    try:
        return PlanResult.from_dict(data)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise PlanningError("plan", f"{origin} looks like a plan but does not parse "
                                    f"({type(exc).__name__}: {quote(str(exc), 120, bare=True)}).", fix) from None


def load_any_plan(path: str | Path) -> PlanResult | SharingResult:
    """A saved plan file, with or without shared GPUs (``planning solve [--sharing …] --json``), within
    :data:`PLAN_LIMITS`.

    Raises
    ------
    PlanningError
        Not JSON, too large or too deep, or not a plan; the message names the file and the fix.
    """
    from planning.sharing.result import SharingResult, is_shared_plan

    p = Path(path)
    text = read_text(p, field="plan", max_bytes=PLAN_LIMITS.max_bytes, what="plan JSON")
    data = load_json(text, field="plan", origin=p.name, limits=PLAN_LIMITS)
    if not is_shared_plan(data):
        return _plan_from_data(data, p.name)
    try:
        return SharingResult.from_dict(data)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise PlanningError("plan", f"{p.name} looks like a plan with shared GPUs but does not parse "
                                    f"({type(exc).__name__}: {quote(str(exc), 120, bare=True)}).",
                            "write it again with `planning solve SCENARIO --sharing exact --json --out plan.json`."
                            ) from None


def is_plan_json(path: str | Path) -> bool:
    """Whether a file looks like a saved plan (a ``.json`` whose text names ``instances`` and ``status``)."""
    p = Path(path)
    if p.suffix.lower() != ".json" or not p.is_file():
        return False
    text = read_text(p, field="plan", max_bytes=PLAN_LIMITS.max_bytes, what="plan JSON")
    return '"instances"' in text and '"status"' in text


def load_plan(path: str | Path) -> PlanResult:
    """A saved plan file, read and parsed within :data:`PLAN_LIMITS` (see :func:`plan_from_json`)."""
    p = Path(path)
    text = read_text(p, field="plan", max_bytes=PLAN_LIMITS.max_bytes, what="plan JSON")
    return plan_from_json(text, origin=p.name)


def preset_summaries() -> list[dict[str, Any]]:
    """One row per preset: name, description, models, regions, source, mode, pricing, shapes, explicit offers,
    objective."""
    rows = []
    for name in list_presets():
        s = load_preset_scenario(name)
        rows.append({"name": name, "description": s.description, "models": [m.id for m in s.models],
                     "regions": list(s.regions) or sorted({o.region for o in s.offers}), "source": s.source,
                     "mode": s.mode, "pricing": s.pricing, "shapes": list(s.shapes),
                     "explicit_offers": len(s.offers), "objective": s.objective.kind})
    return rows


def solve(scenario: Scenario, *, progress: ProgressFn | None = None, cancel: CancelToken | None = None,
          dump_model: str | Path | None = None, with_baselines: bool = True, cache: bool = True,
          prechecked: bool = False) -> PlanResult:
    """Plan a scenario (see :func:`planning.pipeline.solve`), on the perf model corrected by your trusted
    measurement fits when ``options.measurements`` asks (:func:`plan_context`); ``cache`` False always solves anew
    instead of returning the final plan of the same question from ``$PLANNING_HOME/results``
    (:mod:`planning.resultcache`; its key holds the perf model's fingerprint, so corrected and shipped models never
    share an answer). ``prechecked``: the caller ran :func:`planning.precheck.precheck` on this scenario and the
    context it plans on (:func:`engine_context`; no fit of its models kept, ``planned_settings``) and it passed,
    so the solve does not run it again (the CLI does, before it imports the solve's modules). The CLI calls
    :func:`planning.api_measurements.solve_scenario` itself, which this delegates to, so that a command-line solve
    does not import this module's re-exports (pandas and the frames' modules)."""
    return solve_scenario(scenario, progress=progress, cancel=cancel, dump_model=dump_model,
                          with_baselines=with_baselines, cache=cache, prechecked=prechecked)


def validate(scenario: Scenario) -> list[str]:
    """Check a scenario against the catalog. Returns warnings; raises PlanningError on errors."""
    ctx = engine_context()
    resolved = resolve_scenario(scenario, ctx.catalog)
    # explicit templates are checked exactly as solve builds them (class ids, groups); libraries are not built
    explicit = replace(resolved, scenario=replace(scenario, generate_templates=False))
    sets = build_template_sets(ctx, explicit)
    if not scenario.generate_templates:  # the allocation model is fully known: duplicate ids, running instances
        from planning.allocate.certify import allocation_problem

        allocation_problem(explicit, sets)
    return scenario_warnings(resolved)


def build_templates(scenario: Scenario, *, progress: ProgressFn | None = None,
                    cancel: CancelToken | None = None) -> pd.DataFrame:
    """Serving templates of every (model, phase): throughput, cheapest-region cost, throughput per dollar.

    Returns
    -------
    DataFrame with columns model, phase, template_id, n_nodes, n_gpus, n_gpu_types, single_shape (one node shape), single_gpu_type (one GPU type),
    throughput, unit, cost_per_hour, region (cheapest where every shape is sold; NaN/"" when nowhere),
    tokens_per_dollar (units per $ = throughput × 3600 / cost), provenance, stages_json (placement in pipeline
    order; :func:`template_stages` turns one into StagePlans).
    """
    return template_frame(scenario, context=engine_context(), progress=progress, cancel=cancel)


def template_digest(frame: pd.DataFrame, per_group: int = 300) -> pd.DataFrame:
    """A bounded view of a library for display: per (model, phase) every single-shape template, the
    throughput-vs-cost Pareto frontier and the ``per_group`` best by throughput per dollar.

    A coral-extended library has ~10⁶ templates; pages and job results keep this digest (columns as
    :func:`build_templates`, plus ``n_in_group``, the group's full template count).
    """
    return _template_digest(frame, per_group)


def fingerprint() -> str:
    """Hash of the catalog and performance model a result depends on (for job-cache keys), with the kept
    measurement fits a solve may plan on (:func:`kept_fits_fingerprint`)."""
    return str(engine_context().perf.fingerprint()) + kept_fits_fingerprint()


def template_stages(stages_json: str) -> tuple[StagePlan, ...]:
    """StagePlans (pipeline order, layer ranges) of one template's ``stages_json``."""
    return stages_from_json(stages_json)


def result_json(result: PlanResult) -> str:
    """PlanResult as JSON with the CLI's contract keys on top (status, cost_per_hour, timings, baselines)."""
    return result.to_json()


def result_summary(result: PlanResult) -> str:
    """A short plain-text summary for the terminal (``planning.report.terminal_summary``)."""
    return terminal_summary(result)


def catalog_frames() -> dict[str, pd.DataFrame]:
    """Catalog tables for display, one row builder with ``planning catalog`` (``planning.catalog.tables``).

    Returns
    -------
    dict
        ``gpus``, ``configs`` (with ``shape``, ``region_key``, ``available_nodes``, ``overridden``), ``models``
        (with ``params_total_b``, ``params_active_b``, ``weight_gb``), ``slo_presets``, ``regions``,
        ``availability``.
    """
    from planning.catalog.tables import catalog_rows

    c = engine_context().catalog
    models = pd.DataFrame(catalog_rows(c, "models"))
    return {
        "gpus": pd.DataFrame(catalog_rows(c, "gpus")),
        "configs": pd.DataFrame(catalog_rows(c, "configs")),
        "models": models.drop(columns=["layer_types"], errors="ignore"),
        "slo_presets": pd.DataFrame(catalog_rows(c, "slos")),
        "regions": pd.DataFrame(catalog_rows(c, "regions")),
        "availability": pd.DataFrame([a.__dict__ for a in c.availability.values()]),
    }


OFFER_COLUMNS = ["region", "shape", "instance_type", "price_per_hour", "available", "override", "quality",
                 "source", "as_of"]


def stale_price_warning(as_ofs: Iterable[str]) -> str:
    """A warning when any price dated ``as_ofs`` (ISO dates) is older than 30 days today (UTC); '' when none is."""
    import datetime as dt

    from planning.catalog.prices import stale_price_warning as _warning

    return _warning(as_ofs, dt.datetime.now(dt.UTC).date())


def offers_frame(scenario: Scenario) -> pd.DataFrame:
    """What the scenario can buy, per (region, shape): the engine's own offers (``resolve_offers``) before the
    scenario's price and availability scales, so edited cells become overrides of base values.

    Returns
    -------
    DataFrame with columns region, shape, instance_type, price_per_hour, available, override (explicit offer,
    availability override or user catalog override), quality, source, as_of; sorted by (region, shape).

    Raises
    ------
    PlanningError
        Unknown ids or nothing purchasable (as :func:`solve` would).
    """
    from planning.offers import resolve_offers

    base = replace(scenario, price_scale=1.0, availability_scale=1.0)
    rows = [{"region": o.region, "shape": o.shape, "instance_type": o.instance_type,
             "price_per_hour": o.price_per_hour, "available": o.available, "override": o.overridden,
             "quality": o.quality, "source": o.source, "as_of": o.as_of}
            for o in resolve_offers(base, engine_context().catalog)]
    return pd.DataFrame(rows, columns=OFFER_COLUMNS)


def check_custom_model(config: Mapping[str, Any], model_id: str) -> None:
    """Check that a Hugging Face ``config.json`` (parsed) describes a model the perf model can size.

    Raises
    ------
    PlanningError
        Naming the missing or invalid key.
    """
    from planning.catalog.models import model_from_hf_config

    model_from_hf_config(dict(config), model_id)


def read_model_config(raw: bytes, model_id: str, *, origin: str = "config.json") -> dict[str, Any]:
    """An uploaded Hugging Face ``config.json``: bounded JSON parsing (size, depth, values), a JSON object,
    and :func:`check_custom_model`.

    Raises
    ------
    PlanningError
        Not UTF-8, not JSON, too large or deep, not an object, or a key the perf model needs is missing.
    """
    fix = "upload the model's config.json as published on Hugging Face."
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanningError(origin, f"is not UTF-8 text (byte {exc.start}).", fix) from None
    data = load_json(text, field=origin, origin=origin)
    if not isinstance(data, dict):
        raise PlanningError(origin, f"holds a JSON {type(data).__name__}, not an object.", fix)
    check_custom_model(data, model_id)
    return data


def baseline_catalog() -> list[dict[str, Any]]:
    """Every baseline strategy a plan is compared with, from the one registry (``planning.baselines.registry``):
    ``name``, ``label``, ``description``, ``options`` and ``per_epoch`` (re-planned by the timeline), in the order a
    plan lists them; ``caption`` joins them as ``**label**: description`` for a legend."""
    from planning.baselines.registry import BASELINES

    return [{"name": b.name, "label": b.label, "description": b.description, "options": list(b.options),
             "per_epoch": b.per_epoch} for b in BASELINES]


def baseline_caption() -> str:
    """The baselines' legend, ``**label**: description`` per baseline (the Plan page's caption)."""
    from planning.baselines.registry import caption

    return caption()


def solve_shared(scenario: Scenario, *, method: str | None = None, progress: ProgressFn | None = None,
                 cancel: CancelToken | None = None) -> SharingResult:
    """Plan with GPU sharing for the low-rate models (``planning.sharing.checked.solve_checked``): a
    ``SharingResult`` whose ``cost_per_hour`` and ``gpus()`` cover the shared nodes and the dedicated plan of the
    popular models; checked against the plan without sharing (never dearer, SLOs simulated), which is returned
    instead when the shared plan loses (``comparison`` says why)."""
    from planning.sharing.checked import solve_checked

    return solve_checked(scenario, method=method, context=scenario_context(scenario), progress=progress, cancel=cancel,
                         solve_dedicated=lambda plain: solve(plain, cancel=cancel))


