"""The Scenario page's finance inputs: owned GPUs, reservations, spot nodes and their interruption rates, the horizon
and its demand profile — the scenario's ``owned``, ``reservations``, ``spot`` and ``finance`` fields
(docs/finance.md), edited as tables and validated by the engine like every other field (errors name the field and
the fix). What the form leaves at its defaults is not written, so an unedited scenario saves to the same YAML."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from planning.errors import PlanningError
from planning.scenario import Scenario
from ui import widgets

OWNED_COLUMNS = ["name", "location", "shape", "count", "capex_usd", "amortisation_years", "power_usd_per_hour",
                 "ops_usd_per_hour", "source"]
RESERVATION_COLUMNS = ["region", "shape", "term_years", "status", "count", "payment", "upfront_usd", "hourly_usd",
                       "source"]
RATE_COLUMNS = ["region", "gpu", "per_month", "source"]


def _whole(value: Any) -> Any:
    """Whole floats as integers (1.0 → 1), as a hand-written file holds them, so an unedited scenario saves to the
    same YAML; other values unchanged."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 1e15 else value


def _clean(value: Any) -> Any:
    """An editor cell as the scenario file would hold it: NaN/empty → None, numpy → Python, whole numbers → int."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, str) and not value.strip():
        return None
    return _whole(value)


def _as_before(new: Any, old: Any) -> Any:
    """``new`` with every value equal to ``old``'s at the same place written as ``old`` wrote it (3.0 stays 3.0,
    2 stays 2), so applying the form unedited saves the same YAML."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: _as_before(v, old[k]) if k in old else v for k, v in new.items()}
    if isinstance(new, list) and isinstance(old, list):
        return [_as_before(v, old[i]) if i < len(old) else v for i, v in enumerate(new)]
    if isinstance(new, (int, float)) and isinstance(old, (int, float)) and not isinstance(new, bool) and new == old:
        return old
    return new


def rows_of(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """The rows of an edited table as scenario entries: empty cells left out (the field's default applies), empty
    rows dropped, whole numbers as integers."""
    out: list[dict[str, Any]] = []
    for record in pd.DataFrame(frame, columns=columns).to_dict("records"):
        row = {str(k): _clean(v) for k, v in record.items()}
        row = {k: v for k, v in row.items() if v is not None}
        if row:
            out.append(row)
    return out


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)


def finance_data(scenario: Scenario, owned: pd.DataFrame, reservations: pd.DataFrame, rates: pd.DataFrame,
                 settings: dict[str, Any]) -> dict[str, Any]:
    """The scenario's dict with the form's finance fields (validated by ``Scenario.from_dict`` afterwards).

    ``settings``: ``spot_enabled, max_share, recovery, recovery_hours, interruption_scale, horizon_years,
    demand_growth_per_year, periods, factors`` (text, comma-separated; empty = no profile), ``epoch_hours``,
    ``profile_source``."""
    data = scenario.to_dict()
    data["owned"] = rows_of(owned, OWNED_COLUMNS)
    data["reservations"] = rows_of(reservations, RESERVATION_COLUMNS)
    data["spot"] = {"enabled": bool(settings["spot_enabled"]), "max_share": _whole(float(settings["max_share"])),
                    "recovery": settings["recovery"], "recovery_hours": _whole(float(settings["recovery_hours"])),
                    "interruptions": rows_of(rates, RATE_COLUMNS),
                    "interruption_scale": _whole(float(settings["interruption_scale"]))}
    profile = None
    text = str(settings["factors"]).strip()
    if text:
        try:
            factors = [float(f) for f in text.replace(";", ",").split(",") if f.strip()]
        except ValueError as exc:
            raise PlanningError("finance.profile.factors", f"{text[:60]!r} is not a list of numbers.",
                                "write one factor per epoch separated by commas, e.g. 0.4, 0.7, 1.0.") from exc
        old = scenario.finance.profile
        profile = {"factors": [_whole(f) for f in factors], "epoch_hours": _whole(float(settings["epoch_hours"])),
                   "models": {k: list(v) for k, v in old.models.items()} if old else {},
                   "source": str(settings["profile_source"])}
    data["finance"] = {"horizon_years": _whole(float(settings["horizon_years"])),
                       "demand_growth_per_year": _whole(float(settings["demand_growth_per_year"])),
                       "periods": int(settings["periods"]), "profile": profile}
    before = scenario.to_dict()
    for key in ("owned", "reservations", "spot", "finance"):
        data[key] = _as_before(data[key], before.get(key))
    return data


def _tables(scenario: Scenario, shape_ids: list[str], gpu_ids: list[str]) -> tuple[Any, Any, Any]:
    """The three editable tables: owned pools, reservations, interruption rates (no min/max on their number
    columns: a browser clamp would turn −5 into 0 before the engine could name the field)."""
    st.markdown("**Owned GPUs** — nodes the company owns: paid every hour (capex over the amortisation years, "
                "operations), plus power for each node that serves.")
    owned = st.data_editor(_frame(scenario.to_dict().get("owned", []), OWNED_COLUMNS), num_rows="dynamic",
                           hide_index=True, width="stretch", key="owned_editor", column_config={
        "location": st.column_config.TextColumn("site", help='"owned:<site>", e.g. owned:us-east-dc1'),
        "shape": st.column_config.SelectboxColumn("node config", options=shape_ids),
        "count": st.column_config.NumberColumn("nodes"),
        "capex_usd": st.column_config.NumberColumn("capex $ (all nodes)"),
        "amortisation_years": st.column_config.NumberColumn("amortisation years"),
        "power_usd_per_hour": st.column_config.NumberColumn("power $/h per serving node"),
        "ops_usd_per_hour": st.column_config.NumberColumn("operations $/h per node")})
    st.markdown("**Reservations** — *decide*: the planner sizes it for the horizon (count = at most, empty = no "
                "cap); *held*: signed, count nodes paid whether used or not. Leave upfront and hourly empty to use "
                "the cloud's published discount (data/reservations.csv).")
    regions = list(scenario.regions)
    reservations = st.data_editor(
        _frame(scenario.to_dict().get("reservations", []), RESERVATION_COLUMNS), num_rows="dynamic",
        hide_index=True, width="stretch", key="reservations_editor", column_config={
            "region": st.column_config.SelectboxColumn("region", options=regions),
            "shape": st.column_config.SelectboxColumn("node config", options=shape_ids),
            "term_years": st.column_config.NumberColumn("term (years)"),
            "status": st.column_config.SelectboxColumn("status", options=["decide", "held"]),
            "count": st.column_config.NumberColumn("nodes"),
            "payment": st.column_config.SelectboxColumn("payment", options=["no_upfront", "partial_upfront",
                                                                            "all_upfront"]),
            "upfront_usd": st.column_config.NumberColumn("upfront $ per node"),
            "hourly_usd": st.column_config.NumberColumn("hourly $ per node")})
    st.markdown("**Spot interruption rates** — overrides of data/spot_interruptions.csv: the share of spot capacity "
                "reclaimed per month (gpu * = any).")
    rates = st.data_editor(
        _frame([r for r in (scenario.to_dict().get("spot") or {}).get("interruptions", [])], RATE_COLUMNS),
        num_rows="dynamic", hide_index=True, width="stretch", key="rates_editor", column_config={
            "region": st.column_config.SelectboxColumn("region", options=regions),
            "gpu": st.column_config.SelectboxColumn("GPU", options=["*", *gpu_ids]),
            "per_month": st.column_config.NumberColumn("reclaimed per month")})
    return owned, reservations, rates


def _settings(scenario: Scenario) -> dict[str, Any]:
    """The spot policy, the horizon and the demand profile as widgets."""
    spot, fin = scenario.spot, scenario.finance
    c1, c2, c3, c4, c5 = st.columns(5)
    out: dict[str, Any] = {
        "spot_enabled": c1.checkbox("Spot nodes beside on-demand", value=spot.enabled,
                                    help="Adds every region's spot market as a pool of its own, at its expected cost "
                                         "with interruptions (pricing stays on-demand)."),
        "max_share": c2.number_input("Spot cap (share of demand)", min_value=0.0, max_value=1.0,
                                     value=float(spot.max_share), step=0.05,
                                     help="At most this share of any model's demand may depend on spot nodes."),
        "recovery": c3.selectbox("Recovery", ["lost", "on_demand"], index=["lost", "on_demand"].index(spot.recovery),
                                 help="lost: capacity is lost until the replacement starts; on_demand: an on-demand "
                                      "node covers it (its price is in the expected cost)."),
        "recovery_hours": c4.number_input("Recovery hours", min_value=0.01, value=float(spot.recovery_hours),
                                          step=0.05, help="How long a replacement node takes to serve."),
        "interruption_scale": c5.number_input("Interruption rates ×", min_value=0.0,
                                              value=float(spot.interruption_scale), step=0.5,
                                              help="× every interruption rate (a what-if: 2 = twice as often)."),
    }
    c1, c2, c3 = st.columns(3)
    out["horizon_years"] = c1.number_input("Horizon (years)", min_value=0.1, value=float(fin.horizon_years), step=0.5,
                                           help="The bill's horizon and the commitment sizing's.")
    out["demand_growth_per_year"] = c2.number_input("Demand growth per year", min_value=-0.99,
                                                    value=float(fin.demand_growth_per_year), step=0.05,
                                                    help="+0.2 = +20 % a year, applied per period.")
    out["periods"] = c3.number_input("Growth periods", min_value=1, max_value=120, value=int(fin.periods), step=1,
                                     help="Steps the horizon is cut into for growth (4 = quarters).")
    profile = fin.profile
    c1, c2, c3 = st.columns([3, 1, 2])
    out["factors"] = c1.text_input("Demand profile over a day (factors × rate, comma-separated; empty = none)",
                                   value=", ".join(format(f, ".12g") for f in profile.factors) if profile else "",
                                   help="One factor per epoch × each model's requests/s (the design hour is the "
                                        "peak, factor 1); the sizing plans every epoch.")
    out["epoch_hours"] = c2.number_input("Epoch hours", min_value=0.1, value=float(profile.epoch_hours)
                                         if profile else 1.0, step=1.0)
    out["profile_source"] = c3.text_input("Profile source", value=profile.source if profile else "")
    return out


def finance_form(scenario: Scenario, shape_ids: list[str], gpu_ids: list[str]) -> Scenario | None:
    """The finance inputs as one form; the scenario with them when applied and valid (None otherwise: an error
    naming the field and the fix is shown)."""
    st.subheader("Owned, reserved and spot capacity, the horizon")
    widgets.explain("finance_inputs", "What the company already owns, which reservations to size or has signed, "
                    "whether spot nodes may serve beside on-demand ones, and the horizon the bill covers. The plan "
                    "then carries the commitments to sign, costs by pricing kind and the year's bill "
                    "(docs/finance.md).")
    with st.form("finance_form"):
        owned, reservations, rates = _tables(scenario, shape_ids, gpu_ids)
        settings = _settings(scenario)
        applied = st.form_submit_button("Apply finance inputs")
    if not applied:
        return None
    try:
        new = Scenario.from_dict(finance_data(scenario, pd.DataFrame(owned), pd.DataFrame(reservations),
                                              pd.DataFrame(rates), settings))
    except PlanningError as exc:
        widgets.show_error(exc)
        return None
    if new.to_dict() == scenario.to_dict():
        st.info("Nothing changed.")
        return None
    return new
