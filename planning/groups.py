"""(model, phase) groups of a scenario with their demand classes and units (see planning.pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planning.scenario import ModelRequest, Scenario

DEFAULT_PREFILL_BUDGET_MS = 10_000.0  # aggregated mode without a TTFT target: prefill must still finish in 10 s

UNITS = {"prefill": "prompt tok/s", "decode": "output tok/s", "aggregated": "req/s"}


@dataclass(frozen=True)
class WorkClass:
    """One demand class: id, rate in the group's unit, and the mean request sizes it represents."""

    id: str
    rate: float
    input_len: float
    output_len: float


@dataclass(frozen=True)
class Group:
    """One (model, phase) to serve."""

    model: str
    phase: str
    slo_ms: float
    classes: tuple[WorkClass, ...]

    @property
    def id(self) -> str:
        return f"{self.model}/{self.phase}"

    @property
    def unit(self) -> str:
        return UNITS[self.phase]

    @property
    def demand(self) -> float:
        return sum(c.rate for c in self.classes)


def class_id(model: str, phase: str, bucket: int | None) -> str:
    """The class id explicit templates use: ``{model}/{phase}`` for a plain demand, ``{model}/{phase}/b{i}``
    for histogram entry i as written (whatever its rate, and also when the histogram has one entry)."""
    return f"{model}/{phase}" if bucket is None else f"{model}/{phase}/b{bucket}"


def _buckets(req: ModelRequest) -> list[tuple[int | None, float, float, float]]:
    """(histogram position or None, input_len, output_len, rate_rps) per class, in the order written.

    Every histogram entry is a class, zero-rate ones included (they stay empty), so that ``b{i}`` always names
    entry i; nothing is sorted, merged or capped.
    """
    d = req.demand
    if not d.histogram:
        return [(None, d.input_len, d.output_len, d.rate_rps)]
    return [(i, b.input_len, b.output_len, b.rate_rps) for i, b in enumerate(d.histogram)]


def plan_groups(scenario: Scenario) -> list[Group]:
    """The (model, phase) groups of a scenario with their demand classes (see module docstring)."""
    groups: list[Group] = []
    for req in scenario.models:
        buckets = _buckets(req)
        phases = ("prefill", "decode") if scenario.mode == "disaggregated" else ("aggregated",)
        for phase in phases:
            classes = []
            for pos, inp, out, rps in buckets:
                rate = rps * inp if phase == "prefill" else rps * out if phase == "decode" else rps
                classes.append(WorkClass(class_id(req.id, phase, pos), rate, inp, out))
            if phase == "prefill":
                slo = float(req.slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
            elif phase == "decode":
                slo = float(req.slo.decode_ms or 0.0)
            else:
                slo = float(req.slo.decode_ms or 0.0)
            groups.append(Group(req.id, phase, slo, tuple(classes)))
    return groups


def region_links(groups: Sequence[Group]) -> tuple[tuple[str, str], ...]:
    """(prefill class, decode class) of every model planned in both phases, bucket by bucket: served in the same
    regions in the same proportions (``AllocationProblem.links``), because a request's KV cache goes from its
    prefill node to a decode node and that transfer is planned inside a region."""
    by_phase = {(g.model, g.phase): g for g in groups}
    links: list[tuple[str, str]] = []
    for (model, phase), pre in by_phase.items():
        dec = by_phase.get((model, "decode"))
        if phase != "prefill" or dec is None:
            continue
        links.extend((p.id, d.id) for p, d in zip(pre.classes, dec.classes, strict=True))
    return tuple(links)
