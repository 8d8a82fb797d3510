"""Results of a timeline: one record per epoch (adaptive plan, static peak plan, homogeneous baselines) and totals."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from planning.result import HOURS_PER_MONTH, Check, check_lines, savings_pct
from planning.timeline.demand import DEMAND_MATCHES


@dataclass(frozen=True)
class MethodEpoch:
    """What one comparison method (static peak plan, a homogeneous baseline) does in one epoch."""

    cost_per_hour: float
    served_fraction: Mapping[str, float]
    feasible: bool
    nodes_started: int = 0
    nodes_stopped: int = 0
    gpus: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class EpochResult:
    """The adaptive plan of one epoch.

    ``cost_per_hour`` = provisioning + initialization penalty (K × price of newly started instances, per hour),
    so ``cost_per_hour × epoch_hours`` is what the epoch costs. ``served_fraction`` per model is the worst of its
    phases; ``alpha`` the uniform fraction of the goodput (max-served) fallback, 1 when all demand is met.
    """

    index: int
    start: float  # hours from the horizon's start
    label: str
    status: str
    objective: str
    alpha: float
    cost_per_hour: float
    provisioning_per_hour: float
    penalty_per_hour: float
    cost_by_model: Mapping[str, float]
    served_fraction: Mapping[str, float]
    goodput_tok_s: Mapping[str, float]
    demand_rps: Mapping[str, float]
    gpus: Mapping[str, int]
    gpus_available: Mapping[str, int]
    nodes_started: int
    nodes_stopped: int
    instances: int
    spot_share: float = 0.0
    expected_served_fraction: Mapping[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    methods: Mapping[str, MethodEpoch] = field(default_factory=dict)
    transfer_per_hour: float = 0.0  # cross-region KV egress (options.kv_transfer: cross-region), in cost_per_hour
    has_plan: bool = True  # False: the time limit came before any plan (cost unknown, never counted as $0)
    gap: float | None = None  # the epoch plan's proven gap where its solve states one (shared epochs), else None
    error: str = ""  # the epoch's solve raised: what and the fix (``has_plan`` False, status ``error``)


@dataclass(frozen=True)
class TimelineResult:
    """A horizon of epochs: the adaptive plan against a static plan sized for the peak and the homogeneous
    baselines re-planned per epoch. Totals are in USD over the horizon; ``*_month`` scale them to 730 h."""

    scenario_name: str
    epoch_hours: float
    K: float
    models: tuple[str, ...]
    epochs: tuple[EpochResult, ...]
    static_peak_cost_per_hour: float
    static_peak_feasible: bool
    demand_sources: Mapping[str, str] = field(default_factory=dict)
    availability_source: str = ""
    spot: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    policy: str = "myopic"  # the policy that planned ``epochs`` (planning.timeline.policies)
    horizon_epochs: int = 1  # the look-ahead's H (1: no look-ahead)
    policy_info: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # per policy: label, status, bound, gap
    # how the series were set on the scenario's demand (planning.timeline.matching: peak, mean, absolute) and,
    # per model, the series' own rate per epoch before matching (the epochs table shows it beside the planned rate)
    demand_match: str = "absolute"
    trace_rps: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The method name of ``epochs`` (the first policy) in every frame and chart."""
        info = self.policy_info.get(self.policy, {})
        return str(info.get("label", "myopic (Coral)"))

    def policy_totals(self) -> dict[str, dict[str, Any]]:
        """Per policy run: label, total cost (None when not stated), month, churn, worst served fraction, epochs
        short of demand, and the offline policy's status, proven bound and gap."""
        summary = {str(r["method"]): r for r in self.summary_frame().to_dict("records")}
        out: dict[str, dict[str, Any]] = {}
        for name, info in (self.policy_info or {self.policy: {"label": self.label}}).items():
            row = summary.get(str(info.get("label", "")))
            if row is None:
                out[name] = {**dict(info), "total_cost": None, "churn": None}
                continue
            total = _finite(float(row["total_cost"]))
            out[name] = {**dict(info), "total_cost": total,
                         "total_cost_month": None if total is None else self.month(total),
                         "churn": {"nodes_started": int(row["nodes_started"]), "nodes_stopped": int(row["nodes_stopped"])},
                         "min_served_fraction": float(row["min_served_fraction"]),
                         "epochs_short": int(row["epochs_short"])}
        return out

    def policies_frame(self) -> pd.DataFrame:
        """One row per policy run: its label, the best schedule it found (horizon and month), the proven lower bound
        (the offline MILP's: a bound on every policy's total) and its gap to it, what was proven in words, churn
        and the worst served fraction. "optimum" is said only at gap 0 (``planning.checks.policy_rows``)."""
        from planning.checks import policy_rows

        return pd.DataFrame(policy_rows(self.policy_totals()))

    def checks(self) -> tuple[Check, ...]:
        """The policies' checks: look-ahead ≤ myopic, the offline schedule ≤ every other, each one's proven gap."""
        from planning.checks import policy_checks

        return policy_checks(self.policy_totals())

    @property
    def horizon_hours(self) -> float:
        return self.epoch_hours * len(self.epochs)

    @property
    def total_cost(self) -> float:
        """USD over the horizon; NaN when an epoch has no plan (its cost is unknown, not $0)."""
        if any(not e.has_plan for e in self.epochs):
            return float("nan")
        return sum(e.cost_per_hour for e in self.epochs) * self.epoch_hours

    @property
    def static_peak_total_cost(self) -> float:
        m = [e.methods.get("static peak") for e in self.epochs]
        return sum(x.cost_per_hour for x in m if x is not None) * self.epoch_hours

    def method_total(self, name: str) -> float:
        return sum(e.methods[name].cost_per_hour for e in self.epochs if name in e.methods) * self.epoch_hours

    @property
    def baseline_names(self) -> tuple[str, ...]:
        names: list[str] = []
        for e in self.epochs:
            names += [n for n in e.methods if n != "static peak" and n not in names]
        return tuple(names)

    @property
    def baselines_total_cost(self) -> dict[str, float]:
        return {n: self.method_total(n) for n in self.baseline_names}

    @property
    def saving_vs_static_pct(self) -> float | None:
        """Percent the adaptive plan saves against the static peak plan over the horizon (``result.savings_pct``)."""
        return savings_pct(self.total_cost, self.static_peak_total_cost)

    def month(self, total: float) -> float:
        """A horizon total scaled to an average month (730 h)."""
        return total * HOURS_PER_MONTH / self.horizon_hours if self.horizon_hours > 0 else 0.0

    @property
    def nodes_started(self) -> int:
        return sum(e.nodes_started for e in self.epochs)

    @property
    def nodes_stopped(self) -> int:
        return sum(e.nodes_stopped for e in self.epochs)

    @property
    def min_served_fraction(self) -> float:
        return min((f for e in self.epochs for f in e.served_fraction.values()), default=1.0)

    # ------------------------------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; contract keys: ``epochs`` (each with ``start``, ``cost_per_hour``,
        ``served_fraction``, ``nodes_started``, ``nodes_stopped``), ``total_cost``, ``static_peak_total_cost``,
        ``baselines_total_cost``."""
        return {
            "scenario": self.scenario_name,
            "epoch_hours": self.epoch_hours,
            "horizon_hours": self.horizon_hours,
            "K": self.K,
            "models": list(self.models),
            "total_cost": _finite(self.total_cost),  # None: an epoch has no plan, the total is unknown
            "total_cost_month": _finite(self.month(self.total_cost)),
            "static_peak_cost_per_hour": self.static_peak_cost_per_hour,
            "static_peak_feasible": self.static_peak_feasible,
            "static_peak_total_cost": self.static_peak_total_cost,
            "static_peak_total_cost_month": self.month(self.static_peak_total_cost),
            "baselines_total_cost": self.baselines_total_cost,
            "baselines_total_cost_month": {k: self.month(v) for k, v in self.baselines_total_cost.items()},
            "saving_vs_static_pct": self.saving_vs_static_pct,
            "nodes_started": self.nodes_started,
            "nodes_stopped": self.nodes_stopped,
            "churn": {"nodes_started": self.nodes_started, "nodes_stopped": self.nodes_stopped},
            "policy": self.policy,
            "horizon_epochs": self.horizon_epochs,
            "policy_info": {k: dict(v) for k, v in self.policy_info.items()},
            "policies": self.policy_totals(),
            "checks": [asdict(c) for c in self.checks()],
            "min_served_fraction": self.min_served_fraction,
            "demand_sources": dict(self.demand_sources),
            "demand_match": self.demand_match,
            "trace_rps": {k: list(v) for k, v in self.trace_rps.items()},
            "availability_source": self.availability_source,
            "spot": dict(self.spot),
            "timings": dict(self.timings),
            "notes": list(self.notes),
            "epochs": [_epoch_dict(e) for e in self.epochs],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=float)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TimelineResult:
        """Inverse of :meth:`to_dict` (for job results)."""
        epochs = []
        for e in d["epochs"]:
            methods = {k: MethodEpoch(**v) for k, v in e.get("methods", {}).items()}
            fields_ = {k: v for k, v in e.items() if k != "methods"}
            epochs.append(EpochResult(**fields_, methods=methods))
        return cls(scenario_name=d["scenario"], epoch_hours=float(d["epoch_hours"]), K=float(d["K"]),
                   models=tuple(d["models"]), epochs=tuple(epochs),
                   static_peak_cost_per_hour=float(d["static_peak_cost_per_hour"]),
                   static_peak_feasible=bool(d["static_peak_feasible"]), demand_sources=d.get("demand_sources", {}),
                   availability_source=d.get("availability_source", ""), spot=d.get("spot", {}),
                   timings=d.get("timings", {}), notes=tuple(d.get("notes", ())), policy=d.get("policy", "myopic"),
                   horizon_epochs=int(d.get("horizon_epochs", 1)), policy_info=d.get("policy_info", {}),
                   demand_match=str(d.get("demand_match", "absolute")),
                   trace_rps={k: tuple(float(x) for x in v) for k, v in d.get("trace_rps", {}).items()})

    def epochs_frame(self) -> pd.DataFrame:
        """One row per (epoch, model): start, cost, served fraction, goodput, demand, churn, the epoch's status and
        its error (an epoch whose solve raised: status ``error``, no plan).

        ``demand_rps`` is the rate planned; ``trace_rps`` the demand series' own rate in that epoch before it was
        matched to the scenario (equal to ``demand_rps`` ÷ the rate scale when the trace's numbers are used)."""
        rows = []
        for e in self.epochs:
            for m in self.models:
                raw = self.trace_rps.get(m, ())
                rows.append({"epoch": e.index, "start": e.start, "label": e.label, "model": m,
                             "trace_rps": raw[min(e.index, len(raw) - 1)] if raw else float("nan"),
                             "demand_rps": e.demand_rps.get(m, 0.0),
                             "cost_per_hour": e.cost_by_model.get(m, 0.0) if e.has_plan else float("nan"),
                             "served_fraction": e.served_fraction.get(m, 1.0),
                             "goodput_tok_s": e.goodput_tok_s.get(m, 0.0), "objective": e.objective,
                             "alpha": e.alpha, "epoch_cost_per_hour": e.cost_per_hour if e.has_plan else float("nan"),
                             "penalty_per_hour": e.penalty_per_hour, "nodes_started": e.nodes_started,
                             "nodes_stopped": e.nodes_stopped, "status": e.status, "error": e.error})
        return pd.DataFrame(rows)

    def methods_frame(self) -> pd.DataFrame:
        """One row per (epoch, method) including the adaptive plan: cost per hour, worst served fraction, churn."""
        rows = []
        for e in self.epochs:
            rows.append({"epoch": e.index, "start": e.start, "method": self.label,
                         "cost_per_hour": e.cost_per_hour if e.has_plan else float("nan"), "served_fraction": min(e.served_fraction.values(), default=1.0),
                         "feasible": e.objective == "cost" and e.status in ("optimal", "feasible"),
                         "nodes_started": e.nodes_started, "nodes_stopped": e.nodes_stopped})
            for name, m in e.methods.items():
                rows.append({"epoch": e.index, "start": e.start, "method": name, "cost_per_hour": m.cost_per_hour,
                             "served_fraction": min(m.served_fraction.values(), default=1.0), "feasible": m.feasible,
                             "nodes_started": m.nodes_started, "nodes_stopped": m.nodes_stopped})
        return pd.DataFrame(rows)

    def gpus_frame(self) -> pd.DataFrame:
        """One row per (epoch, GPU type): GPUs the adaptive plan uses and GPUs available."""
        rows = []
        for e in self.epochs:
            for g in sorted(set(e.gpus) | set(e.gpus_available)):
                rows.append({"epoch": e.index, "start": e.start, "gpu": g, "used": e.gpus.get(g, 0),
                             "available": e.gpus_available.get(g, 0)})
        return pd.DataFrame(rows)

    def summary_frame(self) -> pd.DataFrame:
        """Horizon totals per method (USD over the horizon and per 730-h month), churn and worst served fraction."""
        mf = self.methods_frame()
        rows = []
        for method, sub in mf.groupby("method", sort=False):
            total = float(sub["cost_per_hour"].sum(skipna=False)) * self.epoch_hours  # NaN: an epoch without a plan
            rows.append({"method": method, "total_cost": total, "month_cost": self.month(total),
                         "nodes_started": int(sub["nodes_started"].sum()), "nodes_stopped": int(sub["nodes_stopped"].sum()),
                         "min_served_fraction": float(sub["served_fraction"].min()),
                         "epochs_short": int((~sub["feasible"].astype(bool)).sum())})
        return pd.DataFrame(rows)

    def to_csv(self) -> str:
        buf = io.StringIO()
        self.epochs_frame().to_csv(buf, index=False)
        return buf.getvalue()

    def summary_text(self) -> str:
        """Plain-text summary for the terminal."""
        lost = sum(not e.has_plan for e in self.epochs)
        adaptive = (f"adaptive total ${self.total_cost:,.2f} (month ${self.month(self.total_cost):,.0f})" if not lost
                    else f"adaptive total not stated: {lost} epochs have no plan")
        lines = [f"{self.scenario_name}: {len(self.epochs)} epochs of {self.epoch_hours:g} h, K = {self.K:g}",
                 f"{adaptive}; "
                 f"static peak ${self.static_peak_total_cost:,.2f} (month ${self.month(self.static_peak_total_cost):,.0f})"
                 + ("" if self.static_peak_feasible else " [static plan cannot serve the peak]"),
                 f"demand planned: {DEMAND_MATCHES.get(self.demand_match, self.demand_match)}"]
        saving = self.saving_vs_static_pct
        if saving is not None:
            lines.append(f"saving vs static peak plan: {saving:.1f} %; "
                         f"churn: {self.nodes_started} node starts, {self.nodes_stopped} stops; "
                         f"worst served fraction {self.min_served_fraction:.1%}")
        lines.append("")
        lines.append(self.summary_frame().to_string(index=False))
        lines.append("")
        lines.append("epoch  start  objective  cost/h     served(min)  started  stopped")
        for e in self.epochs:
            cost = f"{e.cost_per_hour:9.2f}" if e.has_plan else f"{'failed' if e.error else 'no plan':>9}"
            lines.append(f"{e.index:5d}  {e.start:5g}  {e.objective:9s}  {cost}  "
                         f"{min(e.served_fraction.values(), default=1.0):10.1%}  {e.nodes_started:7d}  {e.nodes_stopped:7d}")
        if len(self.policy_info) > 1 or "offline" in self.policy_info:
            lines += ["", self.policies_frame().to_string(index=False)]
        lines.extend(f"check: {line}" for line in check_lines(self.checks()))
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines) + "\n"


def _finite(x: float) -> float | None:
    """``x``, or None for NaN (JSON has no NaN)."""
    return x if math.isfinite(x) else None


def _epoch_dict(e: EpochResult) -> dict[str, Any]:
    d = asdict(e)
    d["methods"] = {k: asdict(v) for k, v in e.methods.items()}
    return d
