"""What a finished plan becomes, re-exported by :mod:`planning.api`: deployable files (``export_plan``,
``export_zip``, and ``export_preview``: what they run differently from the plan and what it costs), the finance report (``plan_report``), how far to trust its capacity (``plan_uncertainty``), and
the views beside a plan: the same demand in every market (``compare_markets``) and the teaching examples
(``lesson``). Split from ``api.py`` along its use cases (the module had grown past 600 lines)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from planning.context import engine_context
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario

if TYPE_CHECKING:
    from planning.export import ExportFile
    from planning.export.preview import ExportedSimulation, ExportPreview
    from planning.learn import Lesson


def _templates(scenario: Scenario) -> pd.DataFrame:
    """``planning.api.build_templates``: the template table under the process-wide context."""
    from planning.templates.digest import template_frame

    return template_frame(scenario, context=engine_context())


def _solve(scenario: Scenario, with_baselines: bool = True) -> PlanResult:
    """``planning.api.solve``: the plan under the process-wide context."""
    from planning.pipeline import solve

    return solve(scenario, context=engine_context(), with_baselines=with_baselines)


def export_plan(result: PlanResult, fmt: str = "skypilot") -> list[ExportFile]:
    """Deployable files for a plan: ``fmt`` ``"skypilot"``, ``"kubernetes"`` or ``"all"`` (docs/deploy.md).

    Every instance runs on the pinned vLLM (``planning.export.VLLM_VERSION``): one TP size per engine, the
    plan's layers per node, one Ray head per instance, and a prefill/decode proxy with the NixlConnector for
    disaggregated models. Serve commands use each catalog model's Hugging Face repository (custom models:
    ``/models/<id>``). Aggregated instances carry ``--max-num-batched-tokens``: the chunk whose step keeps the
    TPOT SLO, which the planner's tables and the simulator assume (``planning.simulate.engine_token_budgets``;
    left to the engine's default when the plan carries no scenario or a placement the step model cannot size).

    Raises
    ------
    PlanningError
        An unknown format, or a result without a plan (nothing to deploy).
    """
    from planning.export import kubernetes_manifests, model_facts, skypilot_tasks

    if fmt not in ("skypilot", "kubernetes", "all"):
        raise PlanningError("format", f"unknown export format {fmt[:40]!r}.", "use skypilot, kubernetes or all.")
    if not result.has_plan:  # nothing to deploy: refuse rather than write empty or $0 files
        raise PlanningError("plan", f"has no plan to export (status {result.status}).",
                            "solve the scenario until it returns a plan (the plan's message says why it did not), "
                            "then export.")
    ctx = engine_context()
    models = model_facts(result, ctx)
    budgets: dict[int, int] = {}
    if result.scenario and any(inst.phase == "aggregated" for inst in result.instances):
        from planning.simulate import engine_token_budgets

        try:
            budgets = engine_token_budgets(result, Scenario.from_dict(result.scenario), ctx.perf)
        except PlanningError:  # a placement the step model cannot size: the files keep the engine's default
            budgets = {}
    # Disaggregated engines get the limits the planner's tables assume, written explicitly (vLLM's own defaults
    # on GPUs under 70 GiB, 2048 tokens / 256 sequences, would cap a decode batch the plan counts on).
    # The memory flag: the KV cache the plan counts on is this share of each GPU's memory (vLLM's default moved to
    # 0.92 with CUDA-graph profiling in 0.21; writing it keeps the plan's budget whatever the version).
    settings = ctx.perf.calibration.settings
    limits = (int(settings.max_batched_tokens), int(settings.max_num_seqs))
    util = float(settings.gpu_memory_utilization)
    files: list[ExportFile] = []
    if fmt in ("skypilot", "all"):
        files += skypilot_tasks(result, models.repos, budgets, engine_limits=limits, tp_options=models.tp_options,
                                model_layers=models.layers, memory_utilization=util)
    if fmt in ("kubernetes", "all"):
        files += kubernetes_manifests(result, models.repos, step_tokens=budgets, engine_limits=limits,
                                      tp_options=models.tp_options, model_layers=models.layers,
                                      memory_utilization=util)
    return files


def lesson(key: str, **control: Any) -> Lesson:
    """One teaching example of :mod:`planning.learn` by key (``coral-contention``, ``coral-spectrum``,
    ``coral-mixed-pipeline``, ``melange``, ``slo``, ``demystifying``) with its "try it" control as keyword arguments."""
    from planning import learn

    functions: dict[str, Callable[..., Lesson]] = {
        "coral-contention": learn.coral_contention,
        "coral-spectrum": lambda **c: learn.coral_throughput_spectrum(_templates, **c),
        "coral-mixed-pipeline": lambda **c: learn.coral_mixed_pipeline(_templates, **c),
        "melange": learn.melange_request_size,
        "slo": learn.slo_changes_the_answer, "demystifying": learn.demystifying_worked_example}
    if key not in functions:
        raise PlanningError("lesson", f"unknown lesson {key[:40]!r}.", f"use one of {', '.join(functions)}.")
    return functions[key](**control)


def compare_markets(scenario: Scenario, *, pricings: Sequence[str] = ("on_demand", "spot"),
                    per_region: bool = True) -> pd.DataFrame:
    """The same demand planned per cloud, per region and mixed, on-demand and spot (see :mod:`planning.compare`)."""
    from planning.compare import compare_markets as _compare

    return _compare(scenario, _solve, pricings=pricings, per_region=per_region)


def plan_report(result: PlanResult, fmt: str = "markdown") -> str:
    """The finance report of a plan (:mod:`planning.report`): ``fmt`` ``"markdown"`` or ``"html"`` (printable)."""
    from planning.report import report_html, report_markdown

    if fmt not in ("markdown", "html"):
        raise PlanningError("format", f"unknown report format {fmt[:40]!r}.", "use markdown or html.")
    return report_markdown(result) if fmt == "markdown" else report_html(result)


def export_preview(result: PlanResult, *, price_alternative: bool = True, alternative: PlanResult | None = None,
                   simulate: bool = False, duration_s: float = 120.0) -> ExportPreview:
    """What the exported recipes run differently from ``result`` and what each difference costs, before export
    (``planning.export.preview``). Where an instance is exported without its planned KV transfer, the plan that
    deploys as planned is the scenario planned without pipelines (:func:`export_alternative`): pass its result as
    ``alternative``, or let ``price_alternative`` solve it here (one more solve). With ``simulate`` the plan and the
    plan as the files deploy it (``export.preview.as_exported``) are simulated side by side (``duration_s`` of
    Poisson arrivals at the planned rates, seed 0): per model with a lost KV transfer, SLO attainment and goodput.

    Raises
    ------
    PlanningError
        A result without a plan (as :func:`export_plan`).
    """
    from dataclasses import replace

    from planning.export.preview import preview

    files = export_plan(result, "all")
    out = preview(result, files)
    if not any(d.kind == "kv-transfer" for d in out.differences):
        return out
    scenario = export_alternative(result)
    if alternative is not None:
        out = preview(result, files, alternative, priced=True)
    elif price_alternative and scenario is not None:
        out = preview(result, files, _solve(scenario, with_baselines=False), priced=True)
    if simulate:
        out = replace(out, simulation=_simulate_as_exported(result, out, duration_s))
    return out


def _simulate_as_exported(result: PlanResult, preview: ExportPreview, duration_s: float) -> ExportedSimulation:
    """The plan and the plan as exported, simulated with the same arrivals (the models whose KV transfer is lost)."""
    from planning.export.preview import ExportedSimulation, as_exported, exported_runs, lost_kv_instances
    from planning.simulate import SimConfig, simulate_plan

    lost = lost_kv_instances(preview.differences)
    exported, notes = as_exported(result, lost)
    models = list(dict.fromkeys(result.instances[k].model for k in sorted(lost)))
    config = SimConfig(duration_s=duration_s, seed=0)
    how = f"{duration_s:g} s of Poisson arrivals at the planned rates, seed 0, the same for both"
    perf = engine_context().perf
    try:
        planned = simulate_plan(result, config=config, perf=perf)
        deployed = simulate_plan(exported, config=config, perf=perf)
    except PlanningError as exc:
        return ExportedSimulation((), how, notes, error=f"{exc.field}: {exc.problem}")
    return ExportedSimulation(exported_runs(models, planned, deployed), how, notes)


def export_alternative(result: PlanResult) -> Scenario | None:
    """The scenario planned without pipelines (``options.max_stages: 1``), whose plan every recipe deploys with
    its KV transfer; None when ``result`` carries no scenario or has no pipelines to remove."""
    from planning.export.preview import alternative_scenario

    return alternative_scenario(result)


def export_zip(result: PlanResult, fmt: str = "all") -> bytes:
    """The deployable files of :func:`export_plan` in one zip archive (for a single download)."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for f in export_plan(result, fmt):
            archive.writestr(f.name, f.text)
    return buffer.getvalue()


def plan_uncertainty(result: PlanResult) -> tuple[pd.DataFrame, dict[str, float]]:
    """How far to trust a plan's capacity and cost: each instance's throughput band and the plan's cost range.

    The band b of an instance is the largest validation-derived throughput error (p90 of |predicted / measured − 1|
    over the published measurements of the same GPU class and dtype, ``PerfModel.kind_bands``) among its GPU types.
    It is read as a factor: real capacity within [capacity / (1 + b), capacity · (1 + b)], so serving the same
    demand costs between cost / (1 + b) and cost · (1 + b). (Read as 1 − b, a band of 1 or more, a model 2x off,
    would give a capacity of zero or less.)

    Returns
    -------
    (frame, totals)
        frame: model, phase, region, gpus, capacity, unit, band, capacity_low, capacity_high per instance;
        totals: ``cost_per_hour``, ``cost_low``, ``cost_high`` and the cost-weighted ``band``.
    """
    ctx = engine_context()
    rows = []
    weighted = 0.0
    total = 0.0
    for inst in result.instances:
        spec = ctx.catalog.models.get(inst.model)
        dtype = getattr(spec, "dtype", "bf16") if spec is not None else "bf16"
        bands = [ctx.perf.kind_bands(g, dtype)["throughput"] for g in inst.gpus if g in ctx.catalog.gpus]
        band = max(bands) if bands else float("nan")
        capacity = inst.throughput * inst.count
        rows.append({"model": inst.model, "phase": inst.phase, "region": inst.region,
                     "gpus": ", ".join(f"{n}×{g}" for g, n in sorted(inst.gpus.items())), "capacity": capacity,
                     "unit": inst.throughput_unit, "band": band, "capacity_low": capacity / (1 + band),
                     "capacity_high": capacity * (1 + band)})
        if band == band:  # not NaN
            weighted += band * inst.cost_per_hour
            total += inst.cost_per_hour
    mean_band = weighted / total if total > 0 else 0.0
    cost = result.comparable_cost
    totals = {"cost_per_hour": cost, "band": mean_band, "cost_low": cost / (1 + mean_band),
              "cost_high": cost * (1 + mean_band)}
    return pd.DataFrame(rows, columns=["model", "phase", "region", "gpus", "capacity", "unit", "band", "capacity_low",
                                       "capacity_high"]), totals
