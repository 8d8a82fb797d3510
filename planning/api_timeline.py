"""Plans over time, re-exported by :mod:`planning.api`: ``timeline`` (re-plan epoch by epoch), its shipped samples,
its background job (request, job function, result). Split from ``api.py`` along its use cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planning.context import CancelToken, ProgressFn
from planning.scenario import Scenario

if TYPE_CHECKING:
    from planning.timeline import AvailabilitySeries, DemandSeries, TimelineOptions, TimelineResult


def timeline(scenario: Scenario, demand: Sequence[DemandSeries], *, availability: AvailabilitySeries | None = None,
             options: TimelineOptions | None = None, progress: ProgressFn | None = None,
             cancel: CancelToken | None = None, demand_match: str = "peak") -> TimelineResult:
    """Re-plan ``scenario`` epoch by epoch over demand (and availability) series; see :mod:`planning.timeline`.

    ``demand_match`` sets each series on its model's demand in ``scenario`` (``planning.timeline.matching``):
    ``peak`` (default: the series' shape with its busiest epoch at the scenario's rate, request sizes at the
    scenario's means), ``mean`` (its mean rate at the scenario's) or ``absolute`` (the series' own numbers).

    Returns a ``planning.timeline.TimelineResult`` (adaptive plan, static peak plan, homogeneous baselines) that
    records the matching and each series' own rate per epoch.

    Raises ``PlanningError`` for bad inputs (an unknown ``demand_match``, a series for a model not in the scenario).
    """
    from planning.api_measurements import scenario_context
    from planning.timeline import run_timeline
    from planning.timeline.matching import match_demand, with_trace_rates

    matched = match_demand(scenario, demand, demand_match)
    result = run_timeline(scenario, matched, availability=availability, options=options,
                          context=scenario_context(scenario),
                          progress=progress, cancel=cancel)
    return with_trace_rates(result, demand, demand_match)


def timeline_samples() -> dict[str, Path]:
    """The shipped day-long demand samples by name (``data/demand``), for the Timeline page's pickers."""
    from planning.timeline.jobs import shipped_samples

    return shipped_samples()


def timeline_availability_samples() -> dict[str, Path]:
    """The shipped availability series by name (``data/demand``)."""
    from planning.timeline.jobs import shipped_availability

    return shipped_availability()


def timeline_match_text(demand_match: str) -> str:
    """What a demand matching (``peak``, ``mean``, ``absolute``) plans, in words, for the page and reports."""
    from planning.timeline.demand import DEMAND_MATCHES

    return DEMAND_MATCHES.get(demand_match, demand_match)


def timeline_request(scenario: Scenario, demand: dict[str, dict[str, Any]], **options: Any) -> dict[str, Any]:
    """A JSON-able timeline job request (see ``planning.timeline.jobs.timeline_request``)."""
    from planning.timeline.jobs import timeline_request as _request

    return _request(scenario, demand, **options)


def timeline_job(request: dict[str, Any], progress: ProgressFn, cancel: CancelToken) -> dict[str, Any]:
    """The background job function of a timeline request (runs :func:`timeline`)."""
    from planning.timeline.jobs import timeline_job as _job

    return _job(request, progress, cancel)


def timeline_result(data: Mapping[str, Any]) -> TimelineResult:
    """A ``TimelineResult`` from its ``to_dict()`` form (a finished job's result)."""
    from planning.timeline.result import TimelineResult

    return TimelineResult.from_dict(dict(data))
