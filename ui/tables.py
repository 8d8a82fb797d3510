"""Scenario ↔ editable tables for the Scenario page (pure pandas; no streamlit). The offers table itself is
``planning.api.offers_frame`` (the engine's own offers); this module only turns edits into overrides."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

from planning.scenario import AvailabilityOverride, OfferSpec, Scenario

MODEL_COLUMNS = ["id", "prefill_ms", "decode_ms", "rate_rps", "input_len", "output_len"]


def _clean(value: Any) -> Any:
    """NaN/empty cells → None; numpy scalars → Python."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, str) and not value.strip():
        return None
    return value


def models_frame(scenario: Scenario) -> pd.DataFrame:
    """One row per model: id, SLO (prefill_ms = TTFT, decode_ms = TPOT) and mean demand."""
    rows = [{"id": m.id, "prefill_ms": m.slo.prefill_ms, "decode_ms": m.slo.decode_ms,
             "rate_rps": m.demand.rate_rps, "input_len": m.demand.input_len, "output_len": m.demand.output_len}
            for m in scenario.models]
    return pd.DataFrame(rows, columns=MODEL_COLUMNS)


def models_from_frame(scenario: Scenario, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Edited model rows → ``models`` list for :meth:`Scenario.from_dict`.

    A model whose demand numbers were not edited keeps its original demand (a request-size histogram survives);
    custom configs are kept by id.
    """
    before = {m.id: m for m in scenario.models}
    out: list[dict[str, Any]] = []
    for raw in frame.to_dict(orient="records"):
        row = {k: _clean(raw.get(k)) for k in MODEL_COLUMNS}
        if row["id"] is None and all(row[k] is None for k in MODEL_COLUMNS[1:]):
            continue  # an empty row the editor added
        model_id = str(row["id"] or "")
        entry: dict[str, Any] = {"id": model_id,
                                 "slo": {k: row[k] for k in ("prefill_ms", "decode_ms") if row[k] is not None}}
        old = before.get(model_id)
        same_demand = old is not None and all(
            row[k] is not None and abs(float(row[k]) - float(getattr(old.demand, k))) < 1e-9
            for k in ("rate_rps", "input_len", "output_len"))
        if old is not None and same_demand:
            entry["demand"] = old.demand.to_dict()
        else:
            entry["demand"] = {k: row[k] for k in ("rate_rps", "input_len", "output_len")}
        if old is not None and old.custom_config is not None:
            entry["custom_config"] = dict(old.custom_config)
        if old is not None and old.weights:
            entry["weights"] = old.weights
        out.append(entry)
    return out


def apply_offer_edits(scenario: Scenario, before: pd.DataFrame, after: pd.DataFrame) -> Scenario:
    """Turn edited price/availability cells into scenario overrides (the shipped catalog is never edited).

    A changed price becomes an explicit offer for (region, shape); a changed availability alone becomes an
    availability override.
    """
    offers = {(o.region, o.shape): o for o in scenario.offers}
    overrides = {(a.region, a.shape): a for a in scenario.availability_overrides}
    for (_, old), (_, new) in zip(before.iterrows(), after.iterrows(), strict=True):
        key = (str(old["region"]), str(old["shape"]))
        price_old, price_new = _clean(old["price_per_hour"]), _clean(new["price_per_hour"])
        avail_old, avail_new = _clean(old["available"]), _clean(new["available"])
        price_changed = price_new is not None and price_new != price_old
        avail_changed = avail_new is not None and avail_new != avail_old
        if key in offers and (price_changed or avail_changed):
            o = offers[key]
            offers[key] = replace(o, price_per_hour=float(price_new if price_new is not None else o.price_per_hour),
                                  available=int(avail_new if avail_new is not None else o.available))
        elif price_changed:
            available = avail_new if avail_new is not None else 0
            offers[key] = OfferSpec(key[0], key[1], float(price_new), int(available), source="user override")
            overrides.pop(key, None)
        elif avail_changed:
            overrides[key] = AvailabilityOverride(key[0], key[1], int(avail_new))
    return replace(scenario, offers=tuple(offers.values()), availability_overrides=tuple(overrides.values()))
