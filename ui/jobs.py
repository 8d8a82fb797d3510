"""Job functions run by planning.jobs worker threads; plain Python, never streamlit (no st.* off the script thread)."""

from __future__ import annotations

from typing import Any

import planning
from planning import api
from planning.errors import PlanningError
from planning.jobs import JobToken, ProgressFn
from planning.result import PlanResult
from planning.scenario import Scenario

# Bump when the shape of a job's result dict changes, so cached results in the job store are not reused.
RESULT_VERSION = 3  # 3: InstancePlan.single_shape, savings only between equal demand


def engine_fingerprint() -> str:
    """What, besides the scenario, a result depends on: engine version, result version, catalog/perf hash."""
    return "/".join([planning.__version__, f"r{RESULT_VERSION}", api.fingerprint()])


def solve_request(scenario: Scenario) -> dict[str, Any]:
    """The job request (and cache key) for planning ``scenario``."""
    return {"scenario": scenario.to_dict(), "engine": engine_fingerprint()}


def solve_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Plan one scenario: ``planning.api.solve`` → ``PlanResult.to_dict()``."""
    scenario = Scenario.from_dict(request["scenario"])
    result = api.solve(scenario, progress=progress, cancel=cancel)
    out: dict[str, Any] = result.to_dict()
    return out


def near_request(scenario: Scenario, base: PlanResult, with_baselines: bool = False) -> dict[str, Any]:
    """The job request for planning ``scenario`` (a variant of ``base``'s scenario) from the columns of ``base``
    and, for the proofs by relation, the scenario ``base`` answers (the job finds the plan itself in the result
    cache); without baselines by default (a slider shows the plan and its diff against the base)."""
    return {**solve_request(scenario), "warm": api.warm_columns(base), "base_scenario": dict(base.scenario),
            "with_baselines": bool(with_baselines)}


def near_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Plan one variant from its base: ``planning.api.solve_near`` with the base plan when the result cache holds
    it (a price change or an unused GPU dropped is then proven from it at once), else with its columns →
    ``PlanResult.to_dict()``."""
    scenario = Scenario.from_dict(request["scenario"])
    base = _cached_base(request.get("base_scenario"))
    result = api.solve_near(scenario, base or request.get("warm"), progress=progress, cancel=cancel,
                            with_baselines=bool(request.get("with_baselines", True)))
    out: dict[str, Any] = result.to_dict()
    return out


def _cached_base(data: Any) -> PlanResult | None:
    """The base plan of a near request from the result cache (None: no base scenario, one that no longer
    validates, or a miss: the job then starts from the base's columns alone)."""
    if not isinstance(data, dict) or not data:
        return None
    try:
        return api.cached_plan(Scenario.from_dict(data))
    except PlanningError:
        return None


def library_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Build the template libraries of a scenario: ``planning.api.build_templates`` → ``{"templates": rows}``."""
    scenario = Scenario.from_dict(request["scenario"])
    frame = api.build_templates(scenario, progress=progress, cancel=cancel)
    cancel.check()
    digest = api.template_digest(frame)
    counts = frame.groupby(["model", "phase"]).size().reset_index(name="n").to_dict(orient="records") if not frame.empty else []
    return {"templates": _records(digest), "counts": counts, "total": len(frame)}


def sweep_request(scenario: Scenario, kind: str, values: list[float],
                  point_limit_s: float | None = None) -> dict[str, Any]:
    """The job request for a cost-vs-demand or cost-vs-SLO sweep (``point_limit_s``: each point's time limit),
    with a first look at every point (``api.FIRST_PASS_S`` each) before the points are solved as asked."""
    return {"scenario": scenario.to_dict(), "kind": kind, "values": [float(v) for v in values],
            "point_limit_s": point_limit_s, "first_pass_s": api.FIRST_PASS_S, "engine": engine_fingerprint()}


def sweep_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Run ``planning.api.sweep`` → ``{"rows": [...]}``; the rows so far are the job's partial answer."""
    scenario = Scenario.from_dict(request["scenario"])
    options = api.SweepOptions(point_limit_s=request.get("point_limit_s"), first_pass_s=request.get("first_pass_s"))
    frame = api.sweep(scenario, request["kind"], request["values"], progress=progress, cancel=cancel,
                      options=options)
    cancel.check()
    return {"rows": _records(frame)}


def _records(frame: Any) -> list[dict[str, Any]]:
    """DataFrame → JSON-safe records (NaN → None, numpy scalars → Python)."""
    import json

    text = frame.to_json(orient="records", default_handler=str)
    rows: list[dict[str, Any]] = json.loads(text)
    return rows


def simulate_request(result_json: str, duration_s: float, seed: int, headroom: bool) -> dict[str, Any]:
    """The job request for simulating a finished plan (the plan JSON carries its scenario)."""
    return {"plan": result_json, "duration_s": float(duration_s), "seed": int(seed), "headroom": bool(headroom),
            "engine": engine_fingerprint()}


def simulate_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """``planning.api.simulate`` on a plan at its planned rates, then (optionally) ``simulate_headroom``.

    Returns ``{"sim": SimResult.to_dict(), "headroom": HeadroomResult.to_dict() | None}``.
    """
    from planning.result import PlanResult

    plan = PlanResult.from_json(request["plan"])
    duration, seed = float(request["duration_s"]), int(request["seed"])
    progress(0.05, f"simulating {duration:g} s of requests at the planned rates")
    sim = api.simulate(plan, duration_s=duration, seed=seed)
    cancel.check()
    head = None
    if request.get("headroom"):
        progress(0.4, "searching the highest demand scale that still meets 99 % of SLOs")
        head = api.simulate_headroom(plan, duration_s=duration, seed=seed).to_dict()
        cancel.check()
    progress(1.0, "done")
    return {"sim": sim.to_dict(), "headroom": head}


def export_simulation_request(result_json: str, duration_s: float = 120.0) -> dict[str, Any]:
    """The job request for simulating a plan beside the plan as its files deploy it (``api.export_preview``)."""
    return {"plan": result_json, "duration_s": float(duration_s), "engine": engine_fingerprint()}


def export_simulation_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """``api.export_preview(..., simulate=True)``'s simulation: per model with a lost KV transfer, SLO attainment
    and goodput as planned and as exported, how it was run, the notes, or why it could not be simulated."""
    from dataclasses import asdict

    plan = PlanResult.from_json(request["plan"])
    progress(0.05, "simulating the plan and the plan as its files deploy it")
    sim = api.export_preview(plan, price_alternative=False, simulate=True,
                             duration_s=float(request["duration_s"])).simulation
    cancel.check()
    progress(1.0, "done")
    if sim is None:
        return {"runs": [], "how": "", "notes": [], "error": "every instance deploys with its planned KV transfer"}
    return {"runs": [asdict(r) for r in sim.runs], "how": sim.how, "notes": list(sim.notes), "error": sim.error}


def markets_request(scenario: Scenario) -> dict[str, Any]:
    """The job request for planning the same demand per cloud, per region and mixed, on-demand and spot."""
    return {"scenario": scenario.to_dict(), "engine": engine_fingerprint()}


def markets_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """``planning.api.compare_markets`` → ``{"rows": [...]}`` (one plan per market; can take a while)."""
    scenario = Scenario.from_dict(request["scenario"])
    progress(0.05, "planning the same demand in every cloud and region, on-demand and spot")
    frame = api.compare_markets(scenario)
    cancel.check()
    return {"rows": _records(frame)}


def sharing_request(scenario: Scenario, method: str, threshold_rps: float) -> dict[str, Any]:
    """The job request for planning with GPU sharing (``method`` kvpr|exact, models below ``threshold_rps`` share)."""
    data = scenario.to_dict()
    data["options"] = {**data["options"], "sharing": method, "sharing_threshold_rps": float(threshold_rps)}
    return {"scenario": data, "method": method, "engine": engine_fingerprint()}


def sharing_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """``planning.api.solve_shared`` → ``SharingResult.to_dict()``, plus ``simulated``: the shared GPUs simulated
    request by request (``api.simulate_shared``, 600 s of arrivals, seed 0; NaN → None) or ``simulated_error``,
    and ``simulated_dedicated``: the dedicated plan of the popular models (``api.simulate``, same window and
    seed; per-model rows without the latency CDFs) or ``simulated_dedicated_error``."""
    scenario = Scenario.from_dict(request["scenario"])
    result = api.solve_shared(scenario, method=request["method"], progress=progress, cancel=cancel)
    out: dict[str, Any] = result.to_dict()
    if result.shared_nodes:
        cancel.check()
        progress(0.9, "simulating the shared GPUs request by request")
        try:
            sim = api.simulate_shared(result, scenario, duration_s=SHARED_SIM_S, seed=0)
            out["simulated"] = api.json_safe(sim.to_dict())
        except PlanningError as exc:
            out["simulated_error"] = str(exc)
    if result.shared_nodes and result.dedicated is not None and result.dedicated.instances:
        cancel.check()
        progress(0.95, "simulating the dedicated models request by request")
        try:
            ded = api.simulate(result.dedicated, duration_s=SHARED_SIM_S, seed=0)
            out["simulated_dedicated"] = {
                "attainment": ded.attainment, "requests": ded.requests,
                "models": [{"model": m.model, "requests": m.requests, "attainment": m.attainment,
                            "ttft_ms_p99": m.ttft_ms.p99, "tpot_ms_p99": m.tpot_ms.p99} for m in ded.models]}
            out["simulated_dedicated"] = api.json_safe(out["simulated_dedicated"])
        except PlanningError as exc:
            out["simulated_dedicated_error"] = str(exc)
    return out


SHARED_SIM_S = 600.0


def fit_request(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The job request for fitting the perf model to the stored measurements (their rows: a new import refits)."""
    return {"points": points, "engine": engine_fingerprint()}


def fit_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Run ``planning.api.fit_measurements`` on the store → ``{"settings": [...], "points": [...]}``."""
    progress(0.05, "fitting the simulator to your measurements")
    fits = api.fit_measurements(keep=True)
    cancel.check()
    return {"settings": _records(api.fit_frame(fits)), "points": _records(api.points_frame(fits))}


def validate_request(plan_json: str, results: dict[str, str]) -> dict[str, Any]:
    """The job request for ``validate-plan``: the plan's JSON and the result files' texts by name."""
    return {"plan": plan_json, "results": results, "engine": engine_fingerprint()}


def validate_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Run ``planning.api.validate_plan`` → measured vs predicted rows, the misses, the note and the plan diff."""
    import tempfile
    from pathlib import Path

    plan = api.plan_from_json(request["plan"], origin="uploaded plan")
    progress(0.05, "comparing the measurements with the plan's predictions")
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for name, text in request["results"].items():
            path = Path(folder) / Path(name).name
            path.write_text(text, encoding="utf-8")
            paths.append(path)
        report = api.validate_plan(plan, paths)
    cancel.check()
    diff = api.plan_diff(plan, report.replanned) if report.replanned is not None else None
    return {"instances": _records(report.frame()), "missing": report.missing, "note": report.note,
            "diff": None if diff is None else _records(diff)}


def impact_request(scenarios: dict[str, str]) -> dict[str, Any]:
    """The job request for :func:`impact_job`: the saved scenarios' YAML texts by name."""
    return {"scenarios": scenarios, "engine": engine_fingerprint()}


def impact_job(request: dict[str, Any], progress: ProgressFn, cancel: JobToken) -> dict[str, Any]:
    """Run ``planning.api.measurements_impact`` on the saved scenarios → ``{"rows": [...]}``."""
    progress(0.05, "planning the saved scenarios with and without your measurements")
    scenarios = {name: api.parse_scenario_text(text) for name, text in request["scenarios"].items()}
    return {"rows": _records(api.measurements_impact(scenarios, cancel=cancel))}
