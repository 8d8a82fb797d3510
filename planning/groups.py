"""(model, phase) groups of a scenario with their demand classes and units (see planning.solve)."""

from __future__ import annotations

from dataclasses import dataclass

from planning.catalog.schema import Catalog, ModelSpec
from planning.errors import UnknownIdError
from planning.scenario import ModelRequest, Scenario

DEFAULT_PREFILL_BUDGET_MS = 10_000.0  # aggregated mode without a TTFT target: prefill must still finish in 10 s
MAX_CLASSES_PER_GROUP = 16

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


def _buckets(req: ModelRequest) -> list[tuple[float, float, float]]:
    """(input_len, output_len, rate_rps) per class; histograms merged down to MAX_CLASSES_PER_GROUP buckets."""
    d = req.demand
    if not d.histogram:
        return [(d.input_len, d.output_len, d.rate_rps)]
    buckets = sorted(((b.input_len, b.output_len, b.rate_rps) for b in d.histogram if b.rate_rps > 0),
                     key=lambda b: -b[2])
    if len(buckets) > MAX_CLASSES_PER_GROUP:
        keep, rest = buckets[: MAX_CLASSES_PER_GROUP - 1], buckets[MAX_CLASSES_PER_GROUP - 1:]
        r = sum(b[2] for b in rest)
        keep.append((sum(b[0] * b[2] for b in rest) / r, sum(b[1] * b[2] for b in rest) / r, r))
        buckets = keep
    return buckets


def plan_groups(scenario: Scenario) -> list[Group]:
    """The (model, phase) groups of a scenario with their demand classes (see module docstring)."""
    groups: list[Group] = []
    for req in scenario.models:
        buckets = _buckets(req)
        phases = ("prefill", "decode") if scenario.mode == "disaggregated" else ("aggregated",)
        for phase in phases:
            classes = []
            for i, (inp, out, rps) in enumerate(buckets):
                cid = f"{req.id}/{phase}" if len(buckets) == 1 else f"{req.id}/{phase}/b{i}"
                rate = rps * inp if phase == "prefill" else rps * out if phase == "decode" else rps
                classes.append(WorkClass(cid, rate, inp, out))
            if phase == "prefill":
                slo = float(req.slo.prefill_ms or DEFAULT_PREFILL_BUDGET_MS)
            elif phase == "decode":
                slo = float(req.slo.decode_ms or 0.0)
            else:
                slo = float(req.slo.decode_ms or 0.0)
            groups.append(Group(req.id, phase, slo, tuple(classes)))
    return groups


def resolve_models(scenario: Scenario, catalog: Catalog) -> dict[str, ModelSpec]:
    """Catalog specs of the scenario's models (custom ones from their HF config).

    Raises
    ------
    UnknownIdError
        A model id not in the catalog and without ``custom_config``.
    """
    from planning.catalog.models import model_from_hf_config

    out: dict[str, ModelSpec] = {}
    for i, req in enumerate(scenario.models):
        if req.custom_config is not None:
            out[req.id] = model_from_hf_config(dict(req.custom_config), req.id)
        elif (req.base or req.id) in catalog.models:  # a variant (fine-tune) shares its base's architecture
            out[req.id] = catalog.models[req.base or req.id]
        elif req.base is None:
            raise UnknownIdError(f"models[{i}].id", req.id, catalog.models)
    for i, req in enumerate(scenario.models):  # variants of the scenario's own (custom) models
        if req.id not in out:
            if req.base not in out:
                raise UnknownIdError(f"models[{i}].base", str(req.base), [*catalog.models, *out])
            out[req.id] = out[str(req.base)]
    return out


# --------------------------------------------------------------------------------------------------------------
# template libraries


