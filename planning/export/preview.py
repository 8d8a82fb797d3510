"""Before export: what the recipes run differently from the plan, and what each difference costs.

The recipes adapt a plan to what vLLM runs (docs/deploy.md) and say so in their files' notes. This module turns
those notes into one list per plan instance, each with its cost in words, so the CLI and the Plan page can show
it *before* the files are written:

- ``kv-transfer``: a disaggregated instance whose engine is a pipeline runs without the planned KV transfer
  (vLLM's NixlConnector has no pipeline parallelism), so it serves whole requests outside its model's
  prefill/decode proxy. Its cost is priced by planning the scenario without pipelines
  (``options.max_stages: 1``, :func:`alternative_scenario`): every instance then connects, as planned. What the
  files themselves would give is the plan *as exported* (:func:`as_exported`) simulated beside the plan
  (``api.export_preview(..., simulate=True)``): per model, SLO attainment and goodput as planned and as exported.
- ``weights``: no weights source (a custom model or fine-tune without ``models[].weights``): nothing to pay,
  but the engine does not start until the weights are given.
- ``layout``: vLLM's one TP size per pipeline or no data parallelism inside a stage: the same nodes at the same
  price, the node's GPUs as pipeline ranks (one of the splits the planner's performance model considers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from planning.result import InstancePlan, PlanResult, savings_pct

if TYPE_CHECKING:
    from planning.export.deploy import ExportFile
    from planning.scenario import Scenario

KINDS = ("kv-transfer", "weights", "layout")


@dataclass(frozen=True)
class ExportDifference:
    """One way the exported recipe of plan instance ``instance`` differs from the plan, and its cost in words."""

    instance: int
    model: str
    phase: str
    kind: str
    what: str
    cost: str


@dataclass(frozen=True)
class ExportedRun:
    """One model simulated as planned and as exported (same arrivals, seed and length): the share of requests
    within both SLOs and the output tokens/s of those requests."""

    model: str
    planned_attainment: float
    exported_attainment: float
    planned_goodput: float
    exported_goodput: float

    def text(self) -> str:
        return (f"{self.model}: SLO attainment {self.planned_attainment:.1%} as planned, "
                f"{self.exported_attainment:.1%} as exported; goodput {self.planned_goodput:,.0f} → "
                f"{self.exported_goodput:,.0f} tok/s")


@dataclass(frozen=True)
class ExportedSimulation:
    """The plan and its export simulated side by side (models with a lost KV transfer), how, and what the
    simulator was told about the export (``as_exported``'s notes). ``error`` when the export cannot be simulated."""

    runs: tuple[ExportedRun, ...]
    how: str
    notes: tuple[str, ...] = ()
    error: str = ""

    def lines(self) -> list[str]:
        if self.error:
            return [f"  simulated as exported: not possible — {self.error}"]
        return ([f"  simulated as exported ({self.how}):"] + [f"    {r.text()}" for r in self.runs]
                + [f"    ({n})" for n in self.notes])


@dataclass(frozen=True)
class ExportPreview:
    """Every difference between a plan and its export, and (for KV-transfer differences) the plan that deploys as
    planned: its cost per hour, or None when the scenario has no plan without pipelines."""

    differences: tuple[ExportDifference, ...]
    plan_cost_per_hour: float
    alternative_label: str = ""
    alternative_cost_per_hour: float | None = None
    alternative_priced: bool = False
    alternative_status: str = ""
    simulation: ExportedSimulation | None = None

    @property
    def deploys_as_planned(self) -> bool:
        return not self.differences

    def alternative_text(self) -> str:
        """The price of deploying as planned, in words (empty when no KV transfer is lost or it was not priced)."""
        if not any(d.kind == "kv-transfer" for d in self.differences) or not self.alternative_priced:
            return ""
        if self.alternative_cost_per_hour is None:
            status = self.alternative_status or "none"
            return (f"the scenario has no plan with {self.alternative_label} (status {status}), so these "
                    "instances can only run without the planned KV transfer")
        alt, now = self.alternative_cost_per_hour, self.plan_cost_per_hour
        saved = savings_pct(now, alt)  # > 0: this plan is cheaper than the one that deploys as planned
        if saved is None or abs(saved) < 0.05:
            versus = "the same as this plan"
        else:
            versus = f"this plan is {abs(saved):.1f} % {'cheaper' if saved > 0 else 'dearer'}"
        return (f"the plan that deploys as planned ({self.alternative_label}) costs ${alt:,.2f}/h against this "
                f"plan's ${now:,.2f}/h ({versus})")

    def lines(self) -> list[str]:
        """The preview for a terminal: one line per difference, then the price of deploying as planned."""
        if self.deploys_as_planned:
            return ["export: every instance deploys as planned"]
        out = [f"export differs from the plan in {len(self.differences)} place(s) (docs/deploy.md):"]
        for d in self.differences:
            out.append(f"  instance {d.instance} ({d.model} {d.phase}) [{d.kind}]: {d.what} — cost: {d.cost}")
        alt = self.alternative_text()
        if alt:
            out.append(f"  to deploy as planned: {alt}")
        if self.simulation is not None:
            out += self.simulation.lines()
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One dict per difference, with readable keys (the Plan page's table)."""
        return [{"instance": d.instance, "model": d.model, "phase": d.phase, "what differs": d.what,
                 "what it costs": d.cost} for d in self.differences]


def _kind(note: str) -> str:
    if note.startswith("no KV transfer"):
        return "kv-transfer"
    if note.startswith("no weights source"):
        return "weights"
    return "layout"


COSTS = {"kv-transfer": "this instance serves whole requests (prefill and decode) on its own, outside its model's "
                        "proxy: the plan's prefill/decode split, and its simulated attainment, no longer describe it; "
                        "the price of deploying as planned is below",
         "weights": "$0/h, but the engine does not start until models[].weights is set",
         "layout": "$0/h: the same nodes at the same price; the node's GPUs run as pipeline ranks, one of the "
                   "splits the planner's performance model considers"}


def differences(result: PlanResult, files: Sequence[ExportFile]) -> tuple[ExportDifference, ...]:
    """The distinct notes of ``files`` per plan instance, classified and costed (in instance order)."""
    seen: dict[tuple[int, str], ExportDifference] = {}
    for f in files:
        if f.instance is None:
            continue
        inst = result.instances[f.instance]
        for note in f.notes:
            kind = _kind(note)
            seen.setdefault((f.instance, note), ExportDifference(f.instance, inst.model, inst.phase, kind, note,
                                                                 COSTS[kind]))
    return tuple(seen[k] for k in sorted(seen, key=lambda k: (k[0], KINDS.index(seen[k].kind), k[1])))


def alternative_scenario(result: PlanResult) -> Scenario | None:
    """The scenario without pipelines (``options.max_stages: 1``) whose plan deploys as planned, or None when the
    plan carries no scenario or already has single-stage templates only."""
    if not result.scenario:
        return None
    from planning.scenario import Scenario

    scenario = Scenario.from_dict(result.scenario)
    if scenario.options.max_stages == 1:
        return None
    return replace(scenario, options=replace(scenario.options, max_stages=1))


ALTERNATIVE_LABEL = "options.max_stages: 1, no pipelines"


def preview(result: PlanResult, files: Sequence[ExportFile], alternative: PlanResult | None = None,
            priced: bool = False) -> ExportPreview:
    """The preview of ``files``; ``alternative`` is the plan of :func:`alternative_scenario` when ``priced``."""
    cost = alternative.cost_per_hour if alternative is not None and alternative.has_plan else None
    return ExportPreview(differences(result, files), float(result.cost_per_hour or 0.0), ALTERNATIVE_LABEL,
                         float(cost) if cost is not None else None, priced,
                         alternative.status if alternative is not None else "")


def lost_kv_instances(differences: Sequence[ExportDifference]) -> frozenset[int]:
    """Plan instances exported without their planned KV transfer."""
    return frozenset(d.instance for d in differences if d.kind == "kv-transfer")


def as_exported(result: PlanResult, lost: frozenset[int]) -> tuple[PlanResult, tuple[str, ...]]:
    """The plan the files deploy, for the simulator, and one note per model whose serving changes.

    A model whose connected (KV-transfer) prefill and decode engines both remain keeps its proxy as its entry point:
    its ``lost`` instances stay out of the proxy and get no request. A model left without a connected pair has no
    proxy that works: its ``lost`` instances serve whole requests (aggregated engines on the same placement and
    engine limits), round robin as a plain load balancer sends them, and its connected remainder gets none.
    """
    keep: list[InstancePlan] = []
    notes: list[str] = []
    for model in dict.fromkeys(i.model for i in result.instances):
        mine = [(k, i) for k, i in enumerate(result.instances) if i.model == model]
        gone = [i for k, i in mine if k in lost]
        rest = [i for k, i in mine if k not in lost]
        if not gone:
            keep += rest
        elif {i.phase for i in rest} >= {"prefill", "decode"}:
            keep += rest
            notes.append(f"{model}: the proxy sends every request to its connected prefill/decode engines; its "
                         f"{sum(i.count for i in gone)} engine(s) without KV transfer stay out of it and get none")
        else:
            keep += [replace(i, phase="aggregated", throughput=1.0, load=0.0, class_rps=()) for i in gone]
            notes.append(f"{model}: no prefill/decode pair connects, so its requests go round robin to its "
                         f"{sum(i.count for i in gone)} engine(s) without KV transfer, each serving whole requests"
                         + (f"; its {sum(i.count for i in rest)} connected engine(s) get none" if rest else ""))
    return replace(result, instances=tuple(keep)), tuple(notes)


def exported_runs(models: Sequence[str], planned: Any, exported: Any) -> tuple[ExportedRun, ...]:
    """Per model, the two simulations (``planning.simulate.SimResult``) side by side."""
    return tuple(ExportedRun(m, planned.model(m).attainment, exported.model(m).attainment,
                             planned.model(m).goodput_tokens_per_s, exported.model(m).goodput_tokens_per_s)
                 for m in models)
