"""Before export: what the recipes run differently from the plan, and what each difference costs.

The recipes adapt a plan to what vLLM runs (docs/deploy.md) and say so in their files' notes. This module turns
those notes into one list per plan instance, each with its cost in words, so the CLI and the Plan page can show
it *before* the files are written:

- ``kv-transfer``: a disaggregated instance whose engine is a pipeline runs without the planned KV transfer
  (vLLM's NixlConnector has no pipeline parallelism), so it serves whole requests outside its model's
  prefill/decode proxy. Its cost is priced by planning the scenario without pipelines
  (``options.max_stages: 1``, :func:`alternative_scenario`): every instance then connects, as planned.
- ``weights``: no weights source (a custom model or fine-tune without ``models[].weights``): nothing to pay,
  but the engine does not start until the weights are given.
- ``layout``: vLLM's one TP size per pipeline or no data parallelism inside a stage: the same nodes at the same
  price, the node's GPUs as pipeline ranks (one of the splits the planner's performance model considers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from planning.result import PlanResult, savings_pct

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
class ExportPreview:
    """Every difference between a plan and its export, and (for KV-transfer differences) the plan that deploys as
    planned: its cost per hour, or None when the scenario has no plan without pipelines."""

    differences: tuple[ExportDifference, ...]
    plan_cost_per_hour: float
    alternative_label: str = ""
    alternative_cost_per_hour: float | None = None
    alternative_priced: bool = False
    alternative_status: str = ""

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
