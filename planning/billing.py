"""What a plan costs — what is paid — per hour, month and year: one definition for every page, report, CSV and JSON.

A plan's **bill** is what the company pays: owned capacity at its amortised rate and operations for every node
(serving or idle) plus power for the nodes that serve, reservations at their effective fee whether used or not,
on-demand and spot nodes as used, and cross-region KV egress. Two figures of it are shown, each named:

- **the bill** per hour, month and year (:class:`Bill`): with a horizon bill (``PlanResult.finance["bill"]``, a
  demand profile over the year and the commitments sized for it) the mean month of that bill, its year (12
  months) and its mean hour (the year / 8,760 h); without one the design hour held every hour of the year
  (× 730 h a month, × 8,760 h a year);
- **the design hour's full cost** (``PlanResult.comparable_cost``): the plan at the scenario's own (peak) demand,
  marginal node prices + egress + committed capacity. Every comparison with a baseline or a variant uses it, both
  sides counting the same components.

The **marginal** cost (``provisioning_per_hour``) is what the allocation sees: on-demand and spot prices, power
for owned nodes, nothing for reserved ones. Wherever marginal and full cost appear together both are named.

This module is a leaf (no ``planning`` import): ``planning.result`` carries its :class:`Bill`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HOURS_PER_MONTH = 730.0  # 8,760 h / 12: the month cloud price calculators and finance bill
HOURS_PER_YEAR = 8760.0
IDLE_MODEL = "(idle)"
KIND_WORDS = {"owned": "owned", "reserved": "reserved", "on_demand": "on-demand", "spot": "spot"}


def cents(value: float) -> float:
    """Money rounded to the cent (no float noise such as 0.5958730000000001 in a CSV or JSON)."""
    return round(float(value), 2) + 0.0  # + 0.0: never -0.0


@dataclass(frozen=True)
class Bill:
    """The plan's bill per hour, month and year, and the design hour's full and marginal cost (module docstring).

    ``basis`` is ``"horizon"`` (the horizon's bill: demand profile, commitments) or ``"design hour"`` (the design
    hour held all year); ``months`` the bill by month in calendar order (empty without a horizon bill)."""

    per_hour: float
    per_month: float
    per_year: float
    basis: str
    design_hour_full: float
    design_hour_marginal: float
    committed_per_hour: float
    months: tuple[tuple[int, float], ...] = ()

    @property
    def words(self) -> str:
        """What the bill is, in one phrase (the KPI help, the report's headline)."""
        if self.basis == "horizon":
            return (f"the horizon's bill: {len(self.months)} months of the demand profile with the commitments "
                    "sized for it; its mean month, its year and its mean hour")
        return "the design hour's plan, every hour of the year"

    @property
    def hour_text(self) -> str:
        return f"${self.per_hour:,.2f}"

    @property
    def month_text(self) -> str:
        return f"${self.per_month:,.0f}"

    @property
    def year_text(self) -> str:
        return f"${self.per_year:,.0f}"

    def headline(self) -> str:
        """The bill in one sentence, the same on every page and report (Markdown bold)."""
        return (f"**Bill: {self.hour_text}/h**, {self.month_text} per month, {self.year_text} per year "
                f"({self.words}).")

    def design_hour_text(self) -> str:
        """The design hour's full and marginal cost, named (empty when both equal the bill: no committed
        capacity, no horizon)."""
        if self.basis != "horizon" and self.committed_per_hour <= 0:
            return ""
        return (f"Design hour (the scenario's peak demand): **full cost ${self.design_hour_full:,.2f}/h** = marginal "
                f"${self.design_hour_marginal:,.2f}/h (the nodes at the prices the allocation sees: on-demand, "
                f"spot, owned power, reserved $0; KV egress) + committed ${self.committed_per_hour:,.2f}/h (owned "
                "and reserved capacity, paid whether it serves or idles). Baselines and variants are compared at "
                "the design hour's full cost.")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, money to the cent."""
        return {"per_hour": cents(self.per_hour), "per_month": cents(self.per_month),
                "per_year": cents(self.per_year), "basis": self.basis,
                "design_hour_full_per_hour": cents(self.design_hour_full),
                "design_hour_marginal_per_hour": cents(self.design_hour_marginal),
                "committed_per_hour": cents(self.committed_per_hour),
                "months": [{"month": m, "usd": cents(v)} for m, v in self.months]}


def month_totals(rows: Iterable[Mapping[str, Any]]) -> tuple[tuple[int, float], ...]:
    """Σ usd per month of bill rows, months in calendar order (1, 2, …, 12, never 1, 10, 11, 12, 2)."""
    out: dict[int, float] = {}
    for r in rows:
        m = int(r["month"])
        out[m] = out.get(m, 0.0) + float(r["usd"])
    return tuple(sorted(out.items()))


def bill_of(provisioning: float, transfer: float, committed: float, rows: Sequence[Mapping[str, Any]]) -> Bill:
    """The bill of a plan with these design-hour costs ($/h) and horizon bill rows (``finance["bill"]``)."""
    full = provisioning + transfer + committed
    months = month_totals(rows)
    if not months:
        return Bill(full, full * HOURS_PER_MONTH, full * HOURS_PER_YEAR, "design hour", full,
                    provisioning + transfer, committed)
    per_month = sum(v for _, v in months) / len(months)
    return Bill(per_month * 12 / HOURS_PER_YEAR, per_month, per_month * 12, "horizon", full,
                provisioning + transfer, committed, months)


def pricing_kinds_text(kinds: Mapping[str, float], pricing: str) -> str:
    """The pricing kinds a plan pays ("owned, reserved, on-demand and spot"), from its costs by pricing kind; the
    scenario's ``pricing`` when it has no pools of other kinds."""
    used = [KIND_WORDS[k] for k in KIND_WORDS if float(kinds.get(k, 0.0)) > 0]
    if not used:
        return KIND_WORDS.get(pricing, pricing.replace("_", "-"))
    return used[0] if len(used) == 1 else ", ".join(used[:-1]) + " and " + used[-1]


def full_cost_rows(lines: Iterable[Mapping[str, Any]],
                   pools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cost lines with their marginal and full $/h: full = marginal + the committed pool's fixed $/node-hour ×
    the line's nodes; one ``(idle)`` row per committed pool with idle nodes (fixed × idle). Σ full over
    provisioning rows = provisioning + committed (the design hour's full cost less egress).

    ``lines``: ``model, phase, region, shape, nodes, cost_per_hour, kind``; ``pools``: the committed pools
    (``finance["idle"]`` rows: ``region, shape, kind, held, used, idle, fixed_per_node_hour``)."""
    fixed = {(str(p["region"]), str(p["shape"])): _fixed_per_node(p) for p in pools}
    out = []
    for line in lines:
        extra = fixed.get((str(line["region"]), str(line["shape"])), 0.0) if line.get("kind") == "provisioning" else 0.0
        out.append({**line, "full_cost_per_hour": float(line["cost_per_hour"]) + extra * int(line["nodes"])})
    for p in pools:
        idle = int(p.get("idle", 0))
        if idle > 0:
            out.append({"model": IDLE_MODEL, "phase": "", "region": p["region"], "shape": p["shape"], "nodes": idle,
                        "cost_per_hour": 0.0, "kind": "idle committed",
                        "full_cost_per_hour": _fixed_per_node(p) * idle})
    return out


def _fixed_per_node(pool: Mapping[str, Any]) -> float:
    """A committed pool's fixed $ per node-hour (older results carry only the idle part: derived from it)."""
    if "fixed_per_node_hour" in pool:
        return float(pool["fixed_per_node_hour"])
    idle = int(pool.get("idle", 0))
    return float(pool.get("idle_usd_per_hour", 0.0)) / idle if idle else 0.0
