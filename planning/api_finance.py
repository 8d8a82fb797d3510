"""Public entry points of the finance view (re-exported by :mod:`planning.api`, which the CLI, the pages and
notebooks use): the year's bill as a frame and a CSV, the commitments, the finance KPIs of a plan."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd

from planning.result import PlanResult

BILL_COLUMNS = ["month", "model", "region", "cloud", "kind", "usd"]
COMMITMENT_COLUMNS = ["status", "region", "shape", "count", "term_years", "upfront_usd", "hourly_usd",
                      "effective_hourly", "on_demand_price", "break_even", "utilisation", "source"]


def bill_frame(result: PlanResult) -> pd.DataFrame:
    """The year's bill of a plan with finance inputs: one row per month × model × region × pricing kind
    (``usd`` for that month; model ``(idle)`` = committed capacity nobody used). Empty without a bill."""
    rows = (result.finance or {}).get("bill") or []
    return pd.DataFrame(rows, columns=BILL_COLUMNS)


def bill_csv(result: PlanResult) -> str:
    """:func:`bill_frame` as CSV, preceded by the assumptions as ``#`` lines (``pandas.read_csv(comment="#")``)."""
    buf = io.StringIO()
    for line in (result.finance or {}).get("assumptions", []):
        buf.write("# " + str(line).replace("\n", " ") + "\n")
    frame = bill_frame(result)
    frame["usd"] = frame["usd"].astype(float).round(2)
    frame.to_csv(buf, index=False, float_format="%.2f")
    return buf.getvalue()


def cost_lines_csv(result: PlanResult) -> str:
    """The cost lines as CSV, money to the cent: ``cost_per_hour`` the marginal $/h (the prices the allocation
    sees), ``full_cost_per_hour`` with the committed nodes' fixed cost and ``(idle)`` rows for idle committed
    capacity (:meth:`PlanResult.breakdown_frame`)."""
    return result.breakdown_frame().to_csv(index=False, float_format="%.2f")


def commitments_frame(result: PlanResult) -> pd.DataFrame:
    """The plan's held reservations and the ones to sign, with break-even and utilisation."""
    return pd.DataFrame([{k: getattr(c, k) for k in COMMITMENT_COLUMNS} for c in result.commitments],
                        columns=COMMITMENT_COLUMNS)


def finance_summary(result: PlanResult) -> dict[str, Any]:
    """The finance KPIs of a plan: its costs by pricing kind ($/h), committed $/h, the horizon's total and its
    proven gap, the totals all on-demand and all reserved, the yearly bill, the idle committed nodes. Missing
    figures are None (never 0 for something that was not computed)."""
    fin = dict(result.finance or {})
    sizing = fin.get("sizing") or {}
    comparisons = fin.get("comparisons") or {}
    totals = (fin.get("bill_totals") or {}).get("kind") or {}
    return {
        "cost_by_pricing_kind": dict(result.cost_by_pricing_kind),
        "committed_per_hour": result.committed_per_hour,
        "horizon_total_usd": sizing.get("total_usd"),
        "horizon_gap": sizing.get("gap"),
        "horizon_status": sizing.get("status"),
        "all_on_demand_usd": (comparisons.get("all on-demand") or {}).get("total_usd"),
        "all_reserved_usd": (comparisons.get("all reserved") or {}).get("total_usd"),
        "bill_usd": sum(totals.values()) if totals else None,
        "idle_nodes": sum(int(r.get("idle", 0)) for r in fin.get("idle", [])),
        "to_sign": sum(c.count for c in result.commitments if c.status == "sign"),
    }
