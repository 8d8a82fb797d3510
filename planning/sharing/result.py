"""What a shared plan is: the shared nodes and their models, the dedicated part, totals over both parts
(:class:`SharingResult`, returned by ``planning.sharing.plan.solve_shared``; split from plan.py, which solves it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from planning.billing import HOURS_PER_MONTH, Bill, bill_of
from planning.result import Check, PlanResult, check_lines

# keys the whole shared plan's dict adds to (or overwrites in) its dedicated part's PlanResult dict
_WHOLE_PLAN_KEYS = ("gpus", "n_gpus", "split", "threshold_split_cost_per_hour", "shared_nodes", "sharing", "bill")
_NODE_DERIVED = ("weights_gb", "kv_pool_gb", "free_gb", "load", "gpus")


@dataclass(frozen=True)
class SharedModel:
    """One model on a shared node: memory split (GB), compute load at peak, analytic TTFT attainment."""

    model: str
    base: str
    rate_rps: float
    weights_gb: float
    kv_pool_gb: float
    load: float
    attainment_estimate: float


@dataclass(frozen=True)
class SharedNode:
    """One shared single-GPU node: where it is bought, its price and its co-located models."""

    region: str
    shape: str
    gpu: str
    price_per_hour: float
    capacity_gb: float
    models: tuple[SharedModel, ...]

    @property
    def weights_gb(self) -> float:
        return sum(m.weights_gb for m in self.models)

    @property
    def kv_pool_gb(self) -> float:
        return sum(m.kv_pool_gb for m in self.models)

    @property
    def load(self) -> float:
        return sum(m.load for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "weights_gb": self.weights_gb, "kv_pool_gb": self.kv_pool_gb,
                "free_gb": self.capacity_gb - self.weights_gb - self.kv_pool_gb, "load": self.load, "gpus": 1}


@dataclass(frozen=True)
class SharingResult:
    """The shared plan: shared nodes + the dedicated plan of the popular models, totals over both parts."""

    sharing: str
    status: str
    threshold_rps: float | None
    shared_nodes: tuple[SharedNode, ...]
    shared_cost_per_hour: float
    shared_status: str
    shared_gap: float | None
    dedicated: PlanResult | None
    shared_models: tuple[str, ...]
    dedicated_models: tuple[str, ...]
    timings: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    split: str = "threshold"  # "joint": one model decided the split; "threshold": the rate threshold did
    threshold_split_cost_per_hour: float | None = None  # the threshold split solved exactly (for comparison)
    threshold_split_status: str | None = None
    threshold_split_gap: float | None = None
    bound_per_hour: float | None = None  # proven lower bound of the (joint or threshold) model's optimum
    gap: float | None = None  # its proven relative gap (0: certified)
    stats: Mapping[str, float] = field(default_factory=dict)
    # planning.sharing.checked: shared ≤ dedicated, SLO attainment per model, served, gap (empty: not checked)
    checks: tuple[Check, ...] = ()
    # the plan this answer was compared with: {"plan", "cost_per_hour", "status", "why"}; "returned": which won
    comparison: Mapping[str, Any] = field(default_factory=dict)
    # a wall clock (the call's time limit, a safety net), not a work limit, stopped some step: the plan depends on
    # the machine's speed (``planning.checks.stable_dict`` keeps only the flag of the ``sharing`` summary)
    time_limited: bool = False
    # the whole scenario (both parts; the dedicated plan's own ``scenario`` holds its popular models only): a saved
    # shared plan carries what ``planning simulate PLAN.json`` needs to simulate its shared GPUs
    scenario: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dedicated_cost_per_hour(self) -> float:
        return self.dedicated.cost_per_hour if self.dedicated is not None else 0.0

    @property
    def cost_per_hour(self) -> float:
        return self.shared_cost_per_hour + self.dedicated_cost_per_hour

    def gpus(self) -> dict[str, int]:
        """GPUs by type over both parts."""
        out: dict[str, int] = {}
        for n in self.shared_nodes:
            out[n.gpu] = out.get(n.gpu, 0) + 1
        if self.dedicated is not None:
            for g, k in self.dedicated.gpus_by_type().items():
                out[g] = out.get(g, 0) + k
        return dict(sorted(out.items()))

    @property
    def n_gpus(self) -> int:
        return sum(self.gpus().values())

    @property
    def provisioning_per_hour(self) -> float:
        """The marginal $/h of both parts: the shared GPUs at their prices + the dedicated plan's provisioning."""
        return self.shared_cost_per_hour + (self.dedicated.provisioning_per_hour if self.dedicated is not None
                                            else 0.0)

    @property
    def bill(self) -> Bill:
        """What the whole plan is paid (``planning.billing``): the shared GPUs held every hour at their prices, plus
        the dedicated plan's bill (its egress, committed capacity and, with a horizon bill, its months; the shared
        GPUs then add their price × 730 h to every month)."""
        d = self.dedicated
        rows = list((d.finance or {}).get("bill") or []) if d is not None else []
        months = sorted({int(r["month"]) for r in rows})
        rows += [{"month": m, "usd": self.shared_cost_per_hour * HOURS_PER_MONTH} for m in months]
        return bill_of(self.provisioning_per_hour, d.transfer_per_hour if d is not None else 0.0,
                       d.committed_per_hour if d is not None else 0.0, rows)

    def to_dict(self) -> dict[str, Any]:
        """The dedicated part's PlanResult dict with ``cost_per_hour``, ``provisioning_per_hour``, ``bill`` and
        ``gpus`` over both parts, the whole ``scenario``, ``shared_nodes`` and a ``sharing`` summary that keeps
        what the dedicated part's own figures were (:meth:`from_dict` reads it back)."""
        d = self.dedicated
        base: dict[str, Any] = d.to_dict() if d is not None else {"status": self.status, "instances": []}
        base.update({
            "status": self.status,
            "cost_per_hour": self.cost_per_hour,
            "provisioning_per_hour": self.provisioning_per_hour,
            "bill": self.bill.to_dict(),
            "scenario": dict(self.scenario) or base.get("scenario", {}),
            # the whole plan's proven gap (both parts), None when the shared part has no bound (kvpr's heuristic):
            # the dedicated part's own gap stays in sharing.dedicated_gap
            "mip_gap": self.gap,
            "gpus": self.gpus(),
            "n_gpus": self.n_gpus,
            "split": self.split,
            "threshold_split_cost_per_hour": self.threshold_split_cost_per_hour,
            "shared_nodes": [n.to_dict() for n in self.shared_nodes],
            "sharing": {"method": self.sharing, "threshold_rps": self.threshold_rps, "split": self.split,
                        "threshold_split_cost_per_hour": self.threshold_split_cost_per_hour,
                        "threshold_split_status": self.threshold_split_status,
                        "threshold_split_gap": self.threshold_split_gap, "bound_per_hour": self.bound_per_hour,
                        "gap": self.gap, "stats": dict(self.stats),
                        "shared_status": self.shared_status, "shared_gap": self.shared_gap,
                        "shared_cost_per_hour": self.shared_cost_per_hour,
                        "dedicated_cost_per_hour": self.dedicated_cost_per_hour,
                        "dedicated_gap": self.dedicated.mip_gap if self.dedicated is not None else None,
                        "shared_models": list(self.shared_models), "dedicated_models": list(self.dedicated_models),
                        "timings": dict(self.timings), "notes": list(self.notes),
                        "comparison": dict(self.comparison), "time_limited": self.time_limited,
                        "dedicated": _dedicated_own(d)},
            "checks": [asdict(c) for c in self.checks],
        })
        return base

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SharingResult:
        """A shared plan from :meth:`to_dict`'s form (a saved ``planning solve --sharing … --json``)."""
        s = d["sharing"]
        own = s.get("dedicated")
        dedicated = None
        if own is not None:
            part = {k: v for k, v in d.items() if k not in _WHOLE_PLAN_KEYS}
            part.update(own, checks=own.get("checks", []))
            dedicated = PlanResult.from_dict(part)
        nodes = tuple(SharedNode(**{**{k: v for k, v in n.items() if k not in _NODE_DERIVED},
                                    "models": tuple(SharedModel(**m) for m in n["models"])})
                      for n in d.get("shared_nodes", ()))
        return cls(sharing=s["method"], status=d["status"], threshold_rps=s.get("threshold_rps"), shared_nodes=nodes,
                   shared_cost_per_hour=float(s["shared_cost_per_hour"]), shared_status=s["shared_status"],
                   shared_gap=s.get("shared_gap"), dedicated=dedicated,
                   shared_models=tuple(s.get("shared_models", ())),
                   dedicated_models=tuple(s.get("dedicated_models", ())), timings=dict(s.get("timings", {})),
                   notes=tuple(s.get("notes", ())), split=s.get("split", "threshold"),
                   threshold_split_cost_per_hour=s.get("threshold_split_cost_per_hour"),
                   threshold_split_status=s.get("threshold_split_status"),
                   threshold_split_gap=s.get("threshold_split_gap"), bound_per_hour=s.get("bound_per_hour"),
                   gap=s.get("gap"), stats=dict(s.get("stats", {})),
                   checks=tuple(Check.from_dict(c) for c in d.get("checks", ())),
                   comparison=dict(s.get("comparison", {})), time_limited=bool(s.get("time_limited", False)),
                   scenario=dict(d.get("scenario", {})))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=float)

    def summary(self) -> str:
        """A short plain-text summary for the terminal."""
        split = (f"split: {self.split}" + (f" (threshold split ${self.threshold_split_cost_per_hour:,.2f}/h)"
                                           if self.threshold_split_cost_per_hour is not None else "")
                 + (f", proven gap {self.gap:.2%}" if self.gap else ""))
        lines = [f"status: {self.status}    cost: ${self.cost_per_hour:,.2f}/h    GPUs: {self.n_gpus} "
                 f"({', '.join(f'{n}×{g}' for g, n in self.gpus().items())})", split,
                 f"sharing: {self.sharing} ({len(self.shared_models)} models on {len(self.shared_nodes)} shared GPUs, "
                 f"${self.shared_cost_per_hour:,.2f}/h; {len(self.dedicated_models)} dedicated, "
                 f"${self.dedicated_cost_per_hour:,.2f}/h)"]
        for i, n in enumerate(self.shared_nodes):
            lines.append(f"  node {i}: {n.shape} {n.region}  weights {n.weights_gb:.1f} GB + KV {n.kv_pool_gb:.1f} GB "
                         f"of {n.capacity_gb:.1f} GB, load {n.load:.2f}: " + ", ".join(m.model for m in n.models))
        if self.comparison:
            c = self.comparison
            lines.append(f"compared with: {c.get('plan')} ${float(c.get('cost_per_hour') or 0):,.2f}/h "
                         f"({c.get('status')}): {c.get('why')}")
        lines.extend(f"check: {line}" for line in check_lines(self.checks))
        lines.extend(f"note: {x}" for x in self.notes)
        return "\n".join(lines) + "\n"


def _dedicated_own(d: PlanResult | None) -> dict[str, Any] | None:
    """The dedicated part's own figures that the whole plan's dict overwrites (None: no dedicated part)."""
    if d is None:
        return None
    return {"status": d.status, "cost_per_hour": d.cost_per_hour, "provisioning_per_hour": d.provisioning_per_hour,
            "mip_gap": d.mip_gap, "scenario": dict(d.scenario), "checks": [asdict(c) for c in d.checks]}


def is_shared_plan(data: Any) -> bool:
    """Whether parsed JSON is a shared plan's dict (:meth:`SharingResult.to_dict`)."""
    return (isinstance(data, dict) and isinstance(data.get("sharing"), dict) and "shared_nodes" in data
            and "method" in data["sharing"])
