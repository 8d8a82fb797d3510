"""The Home page's quick estimate: model, traffic, a latency-target preset and clouds → a one-model Scenario."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from planning.errors import PlanningError
from planning.scenario import Scenario

# Latency targets a non-specialist can pick (TTFT = prefill_ms, TPOT = decode_ms).
SLO_PRESETS: dict[str, dict[str, Any]] = {
    # the form opens on "standard" (the second entry)
    "interactive": {"label": "interactive chat (TTFT 500 ms, TPOT 30 ms)", "prefill_ms": 500.0, "decode_ms": 30.0},
    "standard": {"label": "standard (TTFT 1 s, TPOT 50 ms)", "prefill_ms": 1000.0, "decode_ms": 50.0},
    "relaxed": {"label": "relaxed / batch-like (TTFT 5 s, TPOT 150 ms)", "prefill_ms": 5000.0, "decode_ms": 150.0},
}


NOT_A_CLOUD = "(not a real region)"  # data/regions.csv marks the papers' price sets so (cloud "paper")


def estimate_clouds(regions: pd.DataFrame) -> list[str]:
    """The clouds a quick estimate offers: those with a real region (never ``paper``, the papers' price sets)."""
    real = ~regions["display_name"].astype(str).str.contains(NOT_A_CLOUD, regex=False)
    return sorted(regions.loc[real, "cloud"].astype(str).unique())


def estimate_scenario(regions: pd.DataFrame, *, model: str, rate_rps: float, input_len: int, output_len: int,
                      slo: str, clouds: Sequence[str], pricing: str = "on_demand") -> Scenario:
    """A one-model scenario over every catalog region of ``clouds``.

    Parameters
    ----------
    regions: the catalog's regions frame (columns ``key``, ``cloud``).
    model, rate_rps, input_len, output_len: the model and its mean traffic.
    slo: a key of :data:`SLO_PRESETS`. clouds: cloud ids (``aws``, ``gcp``, ...). pricing: on_demand or spot.

    Returns
    -------
    Scenario named after the model, traffic and clouds, its description stating the assumptions.

    Raises
    ------
    PlanningError: no cloud chosen, an unknown SLO preset, or values the scenario rejects (e.g. a negative rate).
    """
    if not clouds:
        raise PlanningError("clouds", "none chosen.", "pick at least one cloud.")
    if slo not in SLO_PRESETS:
        raise PlanningError("latency target", f"unknown preset {slo!r}.", f"use one of {', '.join(SLO_PRESETS)}.")
    keys = [str(k) for k, c in zip(regions["key"], regions["cloud"], strict=True) if str(c) in set(clouds)]
    if not keys:
        raise PlanningError("clouds", f"{', '.join(clouds)} has no region in the catalog.", "pick another cloud.")
    target = SLO_PRESETS[slo]
    name = f"{model} at {rate_rps:g} req/s on {'+'.join(clouds)}"
    description = (f"Quick estimate: {model}, {rate_rps:g} requests/s of {input_len} prompt and {output_len} output "
                   f"tokens on average, latency target {target['label']}, {pricing.replace('_', '-')} prices in "
                   f"{len(keys)} regions of {', '.join(clouds)}.")
    return Scenario.from_dict({
        "name": name, "description": description, "regions": keys, "pricing": pricing,
        "models": [{"id": model, "slo": {"prefill_ms": target["prefill_ms"], "decode_ms": target["decode_ms"]},
                    "demand": {"rate_rps": rate_rps, "input_len": input_len, "output_len": output_len}}],
    })
