"""Timeline as a background job: a plain-JSON request (the job cache key) → ``TimelineResult.to_dict()``.

The request holds everything the result depends on: the scenario, per model a demand source (a shipped
sample, an uploaded file's text, or a diurnal curve), the epoch length, options, an optional availability CSV
text, and the engine fingerprint.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planning.context import CancelToken, ProgressFn, engine_context
from planning.errors import PlanningError
from planning.scenario import Scenario

if TYPE_CHECKING:
    from planning.timeline.demand import DemandSeries

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "data" / "demand"
RESULT_VERSION = 3  # 2: policies (myopic, look-ahead, offline) and their labels; 3: demand matched to the scenario


def shipped_samples() -> dict[str, Path]:
    """The shipped day-long demand tables (``data/demand/*_day.csv``) by file stem."""
    return {p.stem: p for p in sorted(SAMPLES_DIR.glob("*_day.csv")) if not p.stem.startswith("availability")}


def shipped_availability() -> dict[str, Path]:
    """The shipped availability series (``data/demand/availability_*.csv``) by file stem."""
    return {p.stem: p for p in sorted(SAMPLES_DIR.glob("availability_*.csv"))}


@dataclass(frozen=True)
class TimelineJobOptions:
    """What a timeline job runs with besides the scenario and its demand (see :func:`timeline_request`)."""

    epoch: str = "1h"
    rate_scale: float = 1.0
    K: float | None = None
    spot: dict[str, Any] | None = None
    availability: str | None = None
    baselines: tuple[str, ...] = ("homo", "homo-ilp")
    engine: str = ""
    policies: tuple[str, ...] = ("myopic",)
    horizon: int | None = None
    offline_time_limit_s: float = 600.0
    demand_match: str = "peak"


def timeline_request(scenario: Scenario, demand: dict[str, dict[str, Any]], **options: Any) -> dict[str, Any]:
    """The job request. ``demand[model]`` is ``{"sample": stem}``, ``{"text": csv, "name": file}`` or
    ``{"diurnal": [24 values], "peak_rps": r, "input_len": i, "output_len": o}``; ``options`` are
    :class:`TimelineJobOptions` fields: ``availability`` a CSV text or a shipped stem; ``policies`` the planning
    policies (the first plans the epochs, the others are compared); ``demand_match`` how the series are set on the
    scenario's demand (peak, mean or absolute; ``planning.timeline.matching``).

    Raises
    ------
    PlanningError
        An unknown option or demand matching.
    """
    from planning.timeline.matching import check_match

    unknown = sorted(set(options) - {f.name for f in fields(TimelineJobOptions)})
    if unknown:
        raise PlanningError("timeline options", f"unknown option(s) {', '.join(unknown)}.",
                            f"use {', '.join(f.name for f in fields(TimelineJobOptions))}.")
    o = TimelineJobOptions(**options)
    return {"scenario": scenario.to_dict(), "demand": demand, "epoch": o.epoch, "rate_scale": float(o.rate_scale),
            "K": o.K, "spot": o.spot or {}, "availability": o.availability, "baselines": list(o.baselines),
            "policies": list(o.policies), "horizon": o.horizon, "offline_time_limit_s": float(o.offline_time_limit_s),
            "demand_match": check_match(o.demand_match), "engine": f"{o.engine}/t{RESULT_VERSION}"}


def demand_series(request: dict[str, Any]) -> list[DemandSeries]:
    """The request's demand sources as DemandSeries.

    Raises
    ------
    PlanningError
        Unknown samples or invalid content, naming the model.
    """
    from planning.timeline.demand import diurnal, load_demand, parse_demand_text, parse_duration_hours

    hours = parse_duration_hours(request.get("epoch", "1h"))
    out = []
    samples = shipped_samples()
    for model, spec in request["demand"].items():
        if "sample" in spec:
            if spec["sample"] not in samples:
                raise PlanningError(f"demand.{model}", f"unknown sample {spec['sample']!r}.",
                                    f"use one of {', '.join(samples)}.")
            out.append(load_demand(model, samples[spec["sample"]], hours))
        elif "text" in spec:
            out.append(parse_demand_text(model, str(spec["text"]), hours, name=str(spec.get("name", "upload"))))
        elif "diurnal" in spec:
            out.append(diurnal(model, spec["diurnal"], float(spec["peak_rps"]), float(spec["input_len"]),
                               float(spec["output_len"]), hours))
        else:
            raise PlanningError(f"demand.{model}", "has no sample, text or diurnal curve.", "pick a demand source.")
    return out


def timeline_job(request: dict[str, Any], progress: ProgressFn, cancel: CancelToken) -> dict[str, Any]:
    """Run :func:`planning.timeline.run_timeline` under the process-wide engine context for a request (see
    :func:`timeline_request`); what :func:`planning.api.timeline` does for a caller in the foreground."""
    from planning.timeline import SpotOptions, TimelineOptions, load_series, run_timeline
    from planning.timeline.matching import match_demand, with_trace_rates

    scenario = Scenario.from_dict(request["scenario"])
    demand = demand_series(request)
    n = max(len(d) for d in demand)
    availability = None
    src = request.get("availability")
    if src:
        shipped = shipped_availability()
        if src in shipped:
            availability = load_series(shipped[src], n, demand[0].epoch_hours, demand[0].start_hour)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "availability.csv"
                path.write_text(str(src), encoding="utf-8")
                availability = load_series(path, n, demand[0].epoch_hours, demand[0].start_hour)
    spot = request.get("spot") or {}
    options = TimelineOptions(K=request.get("K"), rate_scale=float(request.get("rate_scale", 1.0)),
                              baselines=tuple(request.get("baselines", ())), spot=SpotOptions(**spot),
                              policies=tuple(request.get("policies") or ("myopic",)), horizon=request.get("horizon"),
                              offline_time_limit_s=float(request.get("offline_time_limit_s", 600.0)))
    match = str(request.get("demand_match", "peak"))
    matched = match_demand(scenario, demand, match)
    result = run_timeline(scenario, matched, availability=availability, options=options, context=engine_context(),
                          progress=progress, cancel=cancel)  # Cancelled propagates: the runner records it as cancelled
    result = with_trace_rates(result, demand, match)
    out: dict[str, Any] = result.to_dict()
    return out
