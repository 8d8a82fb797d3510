"""Spot risk: interruption rates (scenario overrides, then data/spot_interruptions.csv) and expected prices.

A spot node is interrupted q times per node-hour (``planning.pools.hourly_rate`` of the monthly share). The
replacement serves after τ = ``spot.recovery_hours``. ``recovery: lost`` — the capacity is lost for τ (the node
is paid all the time: expected cost = the spot price p_s; expected served share of its capacity 1 − q·τ).
``recovery: on_demand`` — an on-demand node takes over for τ: no capacity is lost, and each interruption costs
τ hours at the on-demand price p_od, so the expected cost per node-hour is p_s + q·τ·p_od.
"""

from __future__ import annotations

from dataclasses import replace

from planning.pools import SpotRisk, site_of, spot_risk
from planning.scenario import Scenario


def risk_of(scenario: Scenario, region: str, gpu: str) -> SpotRisk:
    """The interruption rate of spot ``gpu`` nodes in ``region``: the scenario's override for the region (that
    GPU first, then ``*``), else the shipped table; × ``spot.interruption_scale`` (on the hourly rate: the
    monthly share becomes 1 − (1 − f)^k)."""
    site = site_of(region)
    found = None
    for want in (gpu, "*"):
        for rate in scenario.spot.interruptions:
            if found is None and site_of(rate.region) == site and rate.gpu == want:
                found = SpotRisk(rate.per_month, "given", "scenario", rate.source)
    risk = found or spot_risk(site, gpu)
    k = scenario.spot.interruption_scale
    if k == 1.0:
        return risk
    return replace(risk, per_month=1.0 - (1.0 - risk.per_month) ** k,
                   source=f"{risk.source}; × {k:g} (what-if interruption_scale)")


def spot_price(scenario: Scenario, region: str, gpu: str, listed: float, on_demand: float) -> tuple[float, float]:
    """(expected $ per spot node-hour, interruptions per node-hour q) for the scenario's recovery policy."""
    q = risk_of(scenario, region, gpu).per_hour
    if scenario.spot.recovery == "on_demand":
        return listed + q * scenario.spot.recovery_hours * on_demand, q
    return listed, q


def lost_share(scenario: Scenario, q: float) -> float:
    """Expected share of a spot node's capacity that does not serve: q·τ under ``recovery: lost``, else 0."""
    return min(1.0, q * scenario.spot.recovery_hours) if scenario.spot.recovery == "lost" else 0.0
