"""PlanResult: status, cost breakdown, instances with placements, capacity, service, baselines, diagnostics."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from planning.billing import HOURS_PER_MONTH as HOURS_PER_MONTH
from planning.billing import HOURS_PER_YEAR as HOURS_PER_YEAR
from planning.billing import Bill, bill_of, full_cost_rows
from planning.billing import pricing_kinds_text as pricing_kinds_text

if TYPE_CHECKING:  # pandas: imported by _frame
    import pandas as pd

STATUSES = ("optimal", "feasible", "slo_miss", "infeasible", "time_limit", "cancelled", "error")
# "slo_miss": a plan exists but one of its SLO checks failed (planning.checks); "optimal"/"feasible" only when all pass
CHECK_STATUSES = ("passed", "failed", "not-applicable")
SAME_DEMAND_TOL = 1e-4  # served fractions closer than this count as serving the same demand


def savings_pct(plan_cost: float, baseline_cost: float, plan_served: float = 1.0,
                baseline_served: float = 1.0) -> float | None:
    """Percent the plan saves against another plan: ``100 · (baseline − plan) / baseline``.

    A saving is only meaningful between plans that serve the same demand: when the served fractions differ
    (a budget-limited plan against a baseline that serves everything, or a baseline that falls short) the
    plans are not comparable and the answer is ``None``, as it is for a non-positive or NaN baseline cost.
    """
    if not math.isfinite(baseline_cost) or baseline_cost <= 0 or not math.isfinite(plan_cost):
        return None
    if abs(plan_served - baseline_served) > SAME_DEMAND_TOL:
        return None
    return 100.0 * (baseline_cost - plan_cost) / baseline_cost


@dataclass(frozen=True)
class NodeBox:
    """One node of a pipeline stage (data-parallel replicas of a stage are several boxes)."""

    shape: str
    gpu: str
    count: int
    throughput: float = 0.0


@dataclass(frozen=True)
class StagePlan:
    """A pipeline stage: ``layers`` consecutive layers ``[layer_start, layer_end)`` on ``nodes``."""

    layers: int
    layer_start: int
    layer_end: int
    nodes: tuple[NodeBox, ...]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StagePlan:
        return cls(int(d["layers"]), int(d["layer_start"]), int(d["layer_end"]),
                   tuple(NodeBox(**n) for n in d["nodes"]))


@dataclass(frozen=True)
class EnginePlan:
    """The engine limits one instance runs with: the batch the plan counts on and the caps that keep it there.

    ``batch``: sequences (decode, aggregated) or prompts (prefill) the instance runs at once at its planned capacity
    (a pipeline of S stages: its S micro-batches together). ``max_num_seqs``: sequences it admits at most, the
    batch plus the KV room the plan keeps for the running count's fluctuation (``kv_sigmas`` · √(batch / (1 − e)),
    e the step's ``elasticity`` in the batch);
    ``max_batched_tokens``: tokens per engine step (aggregated: the step budget its TPOT allows, per engine, which
    also holds its batch; decode: one token per sequence). ``planning export`` writes both as vLLM flags and the simulator runs the same caps
    (docs/perf-model.md Sec. 3c). An instance served by several schedulers (data-parallel engines) splits them by
    :meth:`split`.
    """

    phase: str
    batch: float
    max_num_seqs: int
    max_batched_tokens: int
    kv_sigmas: float = 0.0
    step_ms: float = 0.0  # the planned step (decode: the cycle of every micro-batch) at ``batch``
    elasticity: float = 0.0  # d ln step / d ln batch there: the room is kv_sigmas · √(batch / (1 − elasticity))

    def split(self, share: float) -> tuple[int, int]:
        """(max_num_seqs, max_batched_tokens) of one scheduler carrying ``share`` of the instance's traffic: the
        same rule on its share of the batch (decode steps carry one token per sequence)."""
        if self.phase == "prefill" or share >= 1.0 - 1e-9:
            return self.max_num_seqs, self.max_batched_tokens
        if self.phase == "aggregated":  # the step budget holds the batch; the cap is that of one engine
            return max(1, math.floor(self.max_num_seqs * max(share, 0.0) + 1e-9)), self.max_batched_tokens
        b = self.batch * max(share, 0.0)
        spread = 1.0 / max(1.0 - min(max(self.elasticity, 0.0), 1.0), 1e-3)
        seqs = max(1, math.floor(b + self.kv_sigmas * math.sqrt(b * spread) + 1e-9))
        return seqs, seqs if self.phase == "decode" else self.max_batched_tokens


@dataclass(frozen=True)
class InstancePlan:
    """``count`` serving instances of one template in one region."""

    model: str
    phase: str
    template_id: str
    region: str
    count: int
    usage: Mapping[str, int]
    gpus: Mapping[str, int]
    throughput: float
    throughput_unit: str
    load: float
    cost_per_hour: float
    single_shape: bool  # one node shape (Coral's homogeneous replica)
    stages: tuple[StagePlan, ...] = ()
    provenance: str = "roofline"
    # histogram plans: the request classes these instances were assigned, as (input_len, output_len, req/s over
    # all ``count`` instances); empty for a single-class demand. The simulator's router follows it.
    class_rps: tuple[tuple[float, float, float], ...] = ()
    # the engine limits the plan counts on (None: a plan stored before they were part of it, or no placement)
    engine: EnginePlan | None = None

    @property
    def utilisation(self) -> float:
        """Fraction of the instances' capacity the assigned load uses (0..1)."""
        return self.load / self.count if self.count else 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InstancePlan:
        data = dict(d)
        data.pop("utilisation", None)
        if "homogeneous" in data:  # results stored before the field was named for what it means
            data["single_shape"] = data.pop("homogeneous")
        data["stages"] = tuple(StagePlan.from_dict(s) for s in data.get("stages", ()))
        data["class_rps"] = tuple((float(a), float(b), float(c)) for a, b, c in data.get("class_rps", ()))
        engine = data.get("engine")
        data["engine"] = EnginePlan(**engine) if isinstance(engine, Mapping) else None
        return cls(**data)


@dataclass(frozen=True)
class CostLine:
    """One line of the cost breakdown (model × phase × region × shape); ``kind`` provisioning or penalty."""

    model: str
    phase: str
    region: str
    shape: str
    nodes: int
    cost_per_hour: float
    kind: str = "provisioning"


@dataclass(frozen=True)
class KvFlow:
    """A share of one model's requests whose prefill runs in ``src`` and decode in ``dst`` (src == dst: paired
    in one region). ``usd_per_hour`` is its KV egress bill; ``one_way_ms`` and ``transfer_s`` the WAN latency
    and one request's KV hand-off time it adds (data/wan.csv; 0 within a region, where the node network applies).
    """

    model: str
    src: str
    dst: str
    share: float
    usd_per_hour: float = 0.0
    one_way_ms: float = 0.0
    transfer_s: float = 0.0
    wan_gbps: float = 0.0
    same_site: bool = False  # two pricing pools of one region (on-demand → reserved nodes): its network, no WAN

    @property
    def cross_region(self) -> bool:
        return self.src != self.dst and not self.same_site


@dataclass(frozen=True)
class CapacityUse:
    region: str
    shape: str
    gpu: str
    used: int
    available: int
    price_per_hour: float


@dataclass(frozen=True)
class GroupService:
    """Demand and service of one (model, phase): rates in ``unit`` (prompt tok/s, output tok/s or req/s)."""

    model: str
    phase: str
    demanded: float
    served: float
    unit: str

    @property
    def fraction(self) -> float:
        return 1.0 if self.demanded <= 0 else min(1.0, self.served / self.demanded)


@dataclass(frozen=True)
class BaselineSummary:
    """One baseline strategy's answer; ``feasible`` is False when it cannot meet all demand, ``ran`` False when the
    solve's time limit left no time for it (then its cost means nothing and ``note`` says "not run: time limit")."""

    name: str
    cost_per_hour: float
    served_fraction: float
    feasible: bool
    served_by_group: Mapping[str, float] = field(default_factory=dict)
    gpus: Mapping[str, int] = field(default_factory=dict)
    note: str = ""
    savings_pct: float | None = None
    ran: bool = True
    # its ILP stopped at its own wall-clock limit before its gap: the cost is that moment's incumbent (may differ
    # between runs; ``checks.stable_dict`` leaves its figures out of what two runs must share)
    time_limited: bool = False

    @property
    def shortfall(self) -> str:
        """The groups it serves short of their demand, worst first ("gpt-oss-20b/decode 0 %, qwen3-32b/decode
        92 %"): its served fraction is the worst of these; empty when it meets all demand."""
        short = sorted((v, g) for g, v in self.served_by_group.items() if v < 1 - SAME_DEMAND_TOL)
        return ", ".join(f"{g} {100 * v:.0f} %" for v, g in short)

    @property
    def homogeneous(self) -> bool:
        """True for the baselines built from one-of-a-kind templates (homo, homo-ilp, single:<gpu>); memP mixes."""
        return self.name != "memp"


@dataclass(frozen=True)
class Check:
    """One check a result carries (computed by :mod:`planning.checks` where the result is made).

    ``kind``: ``cost`` (the plan against an alternative it computed: a baseline, the plan without sharing, the
    myopic policy), ``slo`` (attainment against the target, one per model), ``served`` (fraction of demand) or
    ``gap`` (the proven gap). ``status``: ``passed``, ``failed`` or ``not-applicable``; ``figures`` the numbers
    compared (named); ``basis`` how they were obtained (e.g. "simulated", "analytic estimate", "like for like");
    a failed check says its ``cause`` and the ``fix``.
    """

    name: str
    kind: str
    status: str
    figures: Mapping[str, float | None] = field(default_factory=dict)
    basis: str = ""
    cause: str = ""
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def line(self) -> str:
        """One line of text: ``passed  cost ≤ homo-ilp: plan 53.41, homo-ilp 55.16 (like for like)``, a failed
        check with its cause and fix."""
        figures = ", ".join(_figure(k, v) for k, v in self.figures.items())
        text = f"{self.status:<14} {self.name}" + (f": {figures}" if figures else "") + \
            (f" ({self.basis})" if self.basis else "")
        if self.status != "passed" and self.cause:
            text += f". {self.cause}"
        if self.failed and self.fix:
            text += f" Fix: {self.fix}"
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        data = dict(d)
        data["figures"] = {str(k): (None if v is None else float(v)) for k, v in dict(data.get("figures", {})).items()}
        return cls(**data)


def _figure(name: str, v: float | None) -> str:
    """``plan $26.00/h``, ``attainment 98.7%``, ``planned step ms 41.2``; an em dash for no number."""
    if v is None or not math.isfinite(v):
        return f"{name} —"
    if name.endswith(" $/h"):
        return f"{name.removesuffix(' $/h')} ${v:,.2f}/h"
    if name.split()[-1] in _SHARE_WORDS:
        return f"{name} {v:.2%}" if name.endswith("gap") else f"{name} {v:.1%}"
    return f"{name} {v:,.4g}" if abs(v) < 1000 else f"{name} {v:,.0f}"


def check_lines(checks: tuple[Check, ...] | list[Check]) -> list[str]:
    """The checks as text lines: each one in full, except passed SLO checks, which share one line per basis
    with the lowest attainment ("passed         SLO attainment of 37 models, lowest 99.6% (simulated: …)")."""
    lines: list[str] = []
    grouped: dict[str, list[float]] = {}
    for c in checks:
        if c.kind == "slo" and c.status == "passed":
            value = c.figures.get("attainment")
            grouped.setdefault(c.basis, []).append(float(value) if value is not None else math.nan)
            continue
        lines.append(c.line())
    for basis, values in grouped.items():
        known = [v for v in values if math.isfinite(v)]
        low = f", lowest {min(known):.1%}" if known else ""
        lines.append(f"{'passed':<14} SLO attainment of {len(values)} model{'s' if len(values) > 1 else ''}{low} "
                     f"({basis})")
    return lines


_SHARE_WORDS = {"attainment", "target", "served", "demand", "gap", "estimate"}


@dataclass(frozen=True)
class CommitmentLine:
    """A commitment of the plan: ``count`` nodes of ``shape`` reserved in ``region`` for ``term_years`` at
    ``upfront_usd`` (once per node) + ``hourly_usd`` (per node-hour of the term). ``status``: ``held`` (signed
    before) or ``sign`` (the sizing's decision). ``break_even`` = effective hourly / on-demand price: the share
    of the term's hours a node must serve to beat on-demand; ``utilisation`` = the share it serves."""

    region: str
    shape: str
    count: int
    term_years: float
    upfront_usd: float
    hourly_usd: float
    status: str
    effective_hourly: float = 0.0
    on_demand_price: float = 0.0
    break_even: float = 0.0
    utilisation: float | None = None
    source: str = ""


@dataclass(frozen=True)
class PlanResult:
    """Everything a plan says. Never ``None``: an infeasible plan has a status and diagnostics."""

    status: str
    objective: str
    cost_per_hour: float
    provisioning_per_hour: float
    penalty_per_hour: float
    served_fraction: float
    mip_gap: float | None
    instances: tuple[InstancePlan, ...] = ()
    cost_lines: tuple[CostLine, ...] = ()
    capacity: tuple[CapacityUse, ...] = ()
    service: tuple[GroupService, ...] = ()
    baselines: tuple[BaselineSummary, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    provenance: Mapping[str, str] = field(default_factory=dict)
    diagnostics: tuple[str, ...] = ()
    template_counts: Mapping[str, int] = field(default_factory=dict)
    stats: Mapping[str, float] = field(default_factory=dict)  # model sizes: templates in the ILP, LP bound, …
    scenario: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""
    transfer_per_hour: float = 0.0  # cross-region KV egress (options.kv_transfer: cross-region); a real bill
    kv_flows: tuple[KvFlow, ...] = ()  # per model, how its requests go from prefill region to decode region
    stopped_at: str = ""  # the step a time limit stopped (status feasible: the best plan found by then, its gap)
    # owned pools' amortised capex + operations and held reservations' fees: paid whether used or not, counted in
    # the comparable cost of the plan and of every baseline alike (so idle committed capacity is never a saving)
    committed_per_hour: float = 0.0
    cost_by_pricing_kind: Mapping[str, float] = field(default_factory=dict)  # owned, reserved, on_demand, spot $/h
    commitments: tuple[CommitmentLine, ...] = ()
    finance: Mapping[str, Any] = field(default_factory=dict)  # idle capacity, spot risk, sizing, bill, assumptions
    checks: tuple[Check, ...] = ()  # planning.checks: never dearer than an alternative, SLOs met, served, gap

    # --- serialization ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["instances"] = [{**asdict(i), "utilisation": i.utilisation} for i in self.instances]
        out["baselines"] = [asdict(b) for b in self.baselines]
        out["bill"] = self.bill.to_dict() if self.has_plan else None  # derived: what is paid (planning.billing)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=float)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlanResult:
        data = dict(d)
        data.pop("bill", None)  # derived from the fields below (PlanResult.bill)
        data["instances"] = tuple(InstancePlan.from_dict(i) for i in data.get("instances", ()))
        data["cost_lines"] = tuple(CostLine(**c) for c in data.get("cost_lines", ()))
        data["capacity"] = tuple(CapacityUse(**c) for c in data.get("capacity", ()))
        data["service"] = tuple(GroupService(**s) for s in data.get("service", ()))
        data["baselines"] = tuple(BaselineSummary(**b) for b in data.get("baselines", ()))
        data["diagnostics"] = tuple(data.get("diagnostics", ()))
        data["kv_flows"] = tuple(KvFlow(**f) for f in data.get("kv_flows", ()))
        data["commitments"] = tuple(CommitmentLine(**c) for c in data.get("commitments", ()))
        data["checks"] = tuple(Check.from_dict(c) for c in data.get("checks", ()))
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> PlanResult:
        return cls.from_dict(json.loads(text))

    # --- tables ------------------------------------------------------------------------------------------------
    def instances_frame(self) -> pd.DataFrame:
        cols = ["model", "phase", "template_id", "region", "count", "gpus", "throughput", "throughput_unit",
                "utilisation", "cost_per_hour", "single_shape", "n_stages", "provenance"]
        rows = [{
            "model": i.model, "phase": i.phase, "template_id": i.template_id, "region": i.region, "count": i.count,
            "gpus": ", ".join(f"{n}×{g}" for g, n in sorted(i.gpus.items())), "throughput": i.throughput,
            "throughput_unit": i.throughput_unit, "utilisation": round(i.utilisation, 4), "provenance": i.provenance,
            "cost_per_hour": i.cost_per_hour, "single_shape": i.single_shape, "n_stages": len(i.stages),
        } for i in self.instances]
        return _frame(rows, cols)

    def breakdown_frame(self) -> pd.DataFrame:
        """The cost lines: ``cost_per_hour`` the marginal $/h the allocation saw; ``full_cost_per_hour`` with the
        fixed cost of the owned or reserved nodes a line uses, and one ``(idle)`` row (kind ``idle committed``) per
        committed pool with idle nodes, so the full column adds up (with egress) to the design hour's full cost."""
        cols = ["model", "phase", "region", "shape", "nodes", "cost_per_hour", "full_cost_per_hour", "kind"]
        rows = full_cost_rows([asdict(c) for c in self.cost_lines], (self.finance or {}).get("idle", []))
        return _frame(rows, cols)

    @property
    def bill(self) -> Bill:
        """What the plan costs per hour, month and year (planning.billing: one definition for every surface)."""
        return bill_of(self.provisioning_per_hour, self.transfer_per_hour, self.committed_per_hour,
                       (self.finance or {}).get("bill") or [])

    def capacity_frame(self) -> pd.DataFrame:
        cols = ["region", "shape", "gpu", "used", "available", "price_per_hour"]
        return _frame([asdict(c) for c in self.capacity], cols)

    def service_frame(self) -> pd.DataFrame:
        cols = ["model", "phase", "demanded", "served", "unit", "fraction"]
        return _frame([{**asdict(s), "fraction": s.fraction} for s in self.service], cols)

    def baselines_frame(self) -> pd.DataFrame:
        """The plan and every baseline; no cost (NaN) for a plan that does not exist or a baseline that did not
        run, so no table or chart shows $0 as if it were a result."""
        cols = ["name", "cost_per_hour", "served_fraction", "feasible", "savings_pct", "note"]
        nan = float("nan")
        note = self.status if self.has_plan else f"no plan ({self.status})"
        rows = [{"name": "Plan (mixed templates)", "cost_per_hour": self.comparable_cost if self.has_plan else nan,
                 "served_fraction": self.served_fraction if self.has_plan else nan, "feasible": self.has_plan,
                 "savings_pct": 0.0 if self.has_plan else None, "note": note}]
        rows += [{**{k: getattr(b, k) for k in cols},
                  **({} if b.ran else {"cost_per_hour": nan, "served_fraction": nan})} for b in self.baselines]
        return _frame(rows, cols)

    def gpus_by_type(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for inst in self.instances:
            for gpu, n in inst.gpus.items():
                totals[gpu] = totals.get(gpu, 0) + n * inst.count
        return dict(sorted(totals.items()))

    def regions_used(self) -> list[str]:
        return sorted({i.region for i in self.instances})

    @property
    def has_plan(self) -> bool:
        """True when the solver returned a plan (optimal, feasible, or slo_miss: a plan with a failed SLO check)."""
        return self.status in ("optimal", "feasible", "slo_miss")

    @property
    def certified(self) -> bool:
        """The reduction certificate holds and the solve was not stopped by its time limit: the optimum over every
        serving template lies within the templates the ILP saw (``stats["reduction_certified"]``)."""
        return bool(self.stats.get("reduction_certified")) and not self.stopped_at and self.has_plan

    def proof(self) -> str:
        """What the solve proved, in words that match it (one wording for the KPIs, the summary and the report):
        "proven optimal (gap 0)", "within 0.42 % of the optimum (proven gap)", "best plan found, gap not bounded",
        or "no plan". ``optimal`` is only ever said at a proven gap of 0 (``allocate.solvers.ZERO_GAP``)."""
        if not self.has_plan:
            return "no plan"
        over = " over all serving templates" if self.certified else ""
        if self.status == "optimal":
            return f"proven optimal{over} (gap 0)"
        if self.mip_gap is not None and math.isfinite(self.mip_gap):
            return f"within {self.mip_gap:.2%} of the optimum{over} (proven gap)"
        return "best plan found, gap not bounded"

    def best_baseline(self) -> BaselineSummary | None:
        """Cheapest baseline that meets all demand, of any kind (single GPU type or memP; None when none does)."""
        ok = [b for b in self.baselines if b.feasible]
        return min(ok, key=lambda b: b.cost_per_hour) if ok else None

    @property
    def comparable_cost(self) -> float:
        """The cost every comparison uses: provisioning $/h (what the nodes cost at the margin) + cross-region KV
        transfer (egress, a real bill; 0 unless ``options.kv_transfer`` is cross-region) + the committed $/h of
        owned pools and held reservations (paid used or idle; 0 without them).

        Baselines report the same three; the initialization penalty (K × price of newly started nodes) is an
        amortised start-up allowance the optimizer uses against churn, shown on its own line, never compared.
        """
        return self.provisioning_per_hour + self.transfer_per_hour + self.committed_per_hour

    def savings_vs(self, baseline: BaselineSummary) -> float | None:
        """Percent this plan saves against ``baseline`` (:func:`savings_pct`; None when not comparable)."""
        if not self.has_plan or not baseline.feasible:
            return None
        return savings_pct(self.comparable_cost, baseline.cost_per_hour, self.served_fraction, baseline.served_fraction)

    # --- text --------------------------------------------------------------------------------------------------
    def to_markdown(self) -> str:
        """A self-contained Markdown report."""
        name = self.scenario.get("name", "scenario") if self.scenario else "scenario"
        if not self.has_plan:  # never "$0.00/h" or "0.0 % served" for a plan that does not exist
            lines = [f"# Serving plan — {name}", "", f"- **Status:** no plan ({self.status})", "",
                     self.message or "No plan was found."]
            if self.diagnostics:
                lines += ["", "## Diagnostics", ""] + [f"- {d}" for d in self.diagnostics]
            if self.baselines:
                lines += ["", "## Baselines", "", _md_table(self.baselines_frame())]
            return "\n".join(lines) + "\n"
        lines = [f"# Serving plan — {name}", "",
                 f"- **Status:** {self.status}" + (f" (MIP gap {self.mip_gap:.3%})" if self.mip_gap is not None else "")
                 + (f", stopped by the time limit at: {self.stopped_at}" if self.stopped_at else ""),
                 f"- {self.bill.headline()}"
                 + (f" The design hour includes ${self.transfer_per_hour:,.2f}/h of cross-region KV transfer."
                    if self.transfer_per_hour > 0 else "")
                 + f" The optimizer's initialization penalty (${self.penalty_per_hour:,.2f}/h, not billed) is left "
                 "out of every comparison.", *([f"- {t}"] if (t := self.bill.design_hour_text()) else []),
                 f"- **Served fraction of demand:** {self.served_fraction:.1%}"]
        best = self.best_baseline()
        saving = self.savings_vs(best) if best is not None else None
        if best is not None and saving is not None:
            lines.append(f"- **Savings vs best baseline ({best.name}):** {saving / 100:.1%}")
        elif best is not None:
            lines.append(f"- **Savings vs best baseline ({best.name}):** not comparable (different demand served)")
        if self.message:
            lines += ["", self.message]
        if self.checks:
            lines += ["", "## Checks", ""] + [f"- {c.line()}" for c in self.checks]
        if self.diagnostics:
            lines += ["", "## Diagnostics", ""] + [f"- {d}" for d in self.diagnostics]
        lines += ["", "## Instances", "", _md_table(self.instances_frame())]
        lines += ["", "## Served vs demanded", "", _md_table(self.service_frame())]
        lines += ["", "## Cost breakdown", "", _md_table(self.breakdown_frame())]
        cross = [f for f in self.kv_flows if f.cross_region]
        if cross:
            lines += ["", "## Cross-region KV transfers", ""] + [
                f"- {f.model}: {f.share:.1%} of requests prefill in {f.src}, decode in {f.dst}: "
                f"${f.usd_per_hour:,.2f}/h egress, +{f.one_way_ms:.0f} ms one way, {f.transfer_s * 1e3:,.0f} ms "
                "KV hand-off per request" for f in cross]
        lines += ["", "## GPUs used vs available", "", _md_table(self.capacity_frame())]
        lines += ["", "## Baselines", "", _md_table(self.baselines_frame())]
        if self.timings:
            lines += ["", "## Timings", ""] + [f"- {k.removesuffix('_seconds').replace('_', ' ')}: {v:,.2f} s"
                                               for k, v in self.timings.items()]
        if self.provenance:
            lines += ["", "## Provenance of performance numbers", ""] + [f"- {k}: {v}" for k, v in self.provenance.items()]
        return "\n".join(lines) + "\n"


# Human column names for the Markdown report (raw names stay in the CSV/JSON exports).
_MD_LABELS = {
    "template_id": "template", "count": "copies", "gpus": "GPUs", "throughput": "throughput",
    "throughput_unit": "unit", "utilisation": "utilisation", "cost_per_hour": "$/h", "single_shape": "one node type",
    "n_stages": "stages", "provenance": "perf numbers", "demanded": "demanded", "served": "served",
    "fraction": "served %", "served_fraction": "served %", "savings_pct": "plan saves", "price_per_hour": "$/h per node",
    "feasible": "meets demand", "kind": "kind", "shape": "node config", "gpu": "GPU", "name": "plan",
}
_MD_PERCENT = {"utilisation", "fraction", "served_fraction"}


def _md_cell(column: str, v: Any) -> str:
    """One table cell: no float noise, no scientific notation, no ``nan`` (an em dash instead)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        x = float(v)
        if column in _MD_PERCENT:
            return f"{x:.1%}"
        if column == "savings_pct":
            return f"{x:.1f} %"
        if column in ("cost_per_hour", "price_per_hour"):
            return f"${x:,.2f}"
        if isinstance(v, int) or x.is_integer():
            return f"{x:,.0f}"
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"
    return str(v).replace("|", "/")


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd  # here, not at the top: an answer without a table (an infeasible one) needs no pandas
    return pd.DataFrame(rows, columns=columns)


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_none_"
    header = "| " + " | ".join(_MD_LABELS.get(str(c), str(c).replace("_", " ")) for c in df.columns) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    columns = [str(c) for c in df.columns]
    body = []
    for row in df.itertuples(index=False):
        values = dict(zip(columns, row, strict=True))
        cells = []
        for c in columns:
            value = values[c]
            if c == "cost_per_hour" and values.get("feasible") is False:
                value = None  # a baseline that cannot meet the demand has no comparable cost
            cells.append(_md_cell(c, value))
        body.append("| " + " | ".join(cells) + " |")
    return "\n".join([header, sep, *body])
