"""Plans over time: demand and availability series, epoch re-planning with Coral's penalty, comparisons."""

from planning.timeline.availability import AvailabilitySeries, SpotOptions, load_series
from planning.timeline.demand import (
    DemandSeries,
    diurnal,
    from_trace,
    load_demand,
    parse_demand_text,
    parse_duration_hours,
    parse_epoch_table,
)
from planning.timeline.plan import TimelineOptions, run_timeline
from planning.timeline.result import EpochResult, MethodEpoch, TimelineResult

__all__ = [
    "AvailabilitySeries",
    "DemandSeries",
    "EpochResult",
    "MethodEpoch",
    "SpotOptions",
    "TimelineOptions",
    "TimelineResult",
    "diurnal",
    "from_trace",
    "load_demand",
    "load_series",
    "parse_demand_text",
    "parse_duration_hours",
    "parse_epoch_table",
    "run_timeline",
]
