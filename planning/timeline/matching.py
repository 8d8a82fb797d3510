"""A demand series' shape on the scenario's own rates and request sizes (peak or mean matched), or as given.

A trace (or epoch table) is a sample of *somebody's* traffic: the shipped Azure conversation day runs at 3–5.5 req/s
with 211-token answers. A planner asks "my 20 req/s of 300-token answers, with this daily shape". Matching keeps the
series' shape (the rate of each epoch relative to the others; a histogram's request-size mix) and sets the
absolute level from the scenario's demand:

- ``peak``: the busiest epoch runs at the scenario's ``rate_rps`` (the scenario's rate is the peak to serve);
- ``mean``: the time-mean rate over the horizon is the scenario's ``rate_rps`` (the same requests per day);
- ``absolute``: the series as given (the trace's own requests per second and token counts).

In ``peak`` and ``mean`` every epoch has the scenario's ``input_len`` / ``output_len`` (so with ``peak`` the busiest
epoch is exactly the scenario's demand and the static peak plan is its constant plan); a request-size histogram
(``--histogram``) keeps its mix, its buckets scaled so that their rate-weighted horizon mean (the size the
libraries are built for, :meth:`DemandSeries.design_sizes`) is the scenario's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from planning.errors import PlanningError
from planning.scenario import Scenario
from planning.timeline.demand import DEMAND_MATCHES, DemandSeries
from planning.timeline.result import TimelineResult


def check_match(how: str) -> str:
    """``how`` if it is a known matching, else a PlanningError naming the choices."""
    if how not in DEMAND_MATCHES:
        raise PlanningError("demand_match", f"must be one of {', '.join(DEMAND_MATCHES)}, got {how!r}.",
                            "use peak (the scenario's rate at the busiest epoch), mean, or absolute (the trace's "
                            "own numbers), e.g. --match peak.")
    return how


def _scaled_sizes(values: tuple[float, ...], target: float, design: float) -> tuple[float, ...]:
    if len(set(values)) == 1:  # a constant size becomes exactly the scenario's
        return (float(target),) * len(values)
    k = target / design
    return tuple(max(1.0, v * k) for v in values)


def match_series(series: DemandSeries, rate_rps: float, input_len: float, output_len: float,
                 how: str = "peak") -> DemandSeries:
    """``series``' rate shape at the given rate (peak or mean matched) with the given request sizes (a histogram:
    its size mix at those mean sizes); unchanged for ``absolute``.

    Raises
    ------
    PlanningError
        An unknown ``how``.
    """
    if check_match(how) == "absolute":
        return series
    rates = series.rate_rps
    ref = max(rates) if how == "peak" else sum(rates) / len(rates)
    k_rate = rate_rps / ref if ref > 0 else 0.0
    if ref <= 0:  # no traffic at all: nothing to scale
        new_rates = rates
    elif len(set(rates)) == 1:  # constant: every epoch exactly the scenario's rate
        new_rates = (float(rate_rps),) * len(rates)
    else:
        new_rates = tuple(rate_rps * r / ref for r in rates)
    n = len(rates)
    if series.buckets:  # a request-size histogram keeps its mix, scaled to the scenario's mean sizes
        d_in, d_out = series.design_sizes()
        k_in, k_out = input_len / d_in, output_len / d_out
        buckets = tuple((max(1.0, i * k_in), max(1.0, o * k_out)) for i, o in series.buckets)
        new_in, new_out = _scaled_sizes(series.input_len, input_len, d_in), _scaled_sizes(series.output_len,
                                                                                          output_len, d_out)
    else:  # the scenario's request sizes in every epoch: the busiest epoch is exactly the scenario's demand
        buckets, new_in, new_out = (), (float(input_len),) * n, (float(output_len),) * n
    bucket_rates = tuple(tuple(x * k_rate for x in row) for row in series.bucket_rates)
    source = (f"{series.source}; shape at {rate_rps:g} req/s "
              f"({'peak' if how == 'peak' else 'mean'}), {input_len:g} in / {output_len:g} out tokens")
    return replace(series, rate_rps=new_rates, input_len=new_in, output_len=new_out, buckets=buckets,
                   bucket_rates=bucket_rates, source=source)


def match_demand(scenario: Scenario, demand: Sequence[DemandSeries], how: str = "peak") -> list[DemandSeries]:
    """Every series matched to its model's demand in ``scenario`` (see :func:`match_series`).

    Raises
    ------
    PlanningError
        A series for a model the scenario does not serve, or an unknown ``how``.
    """
    check_match(how)
    by_id = {m.id: m for m in scenario.models}
    out = []
    for s in demand:
        m = by_id.get(s.model)
        if m is None:
            raise PlanningError(f"demand.{s.model}", f"is not a model of scenario {scenario.name!r}.",
                                f"give demand for {', '.join(by_id)}.")
        out.append(match_series(s, m.demand.rate_rps, m.demand.input_len, m.demand.output_len, how))
    return out


def with_trace_rates(result: TimelineResult, demand: Sequence[DemandSeries], how: str) -> TimelineResult:
    """``result`` recording the matching and each series' own (unmatched) rate per epoch, for the epochs table."""
    trace: Mapping[str, tuple[float, ...]] = {s.model: tuple(s.rate_rps) for s in demand}
    return replace(result, demand_match=how, trace_rps=dict(trace))
