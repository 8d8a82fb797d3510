"""What can be bought and what runs: explicit offers, availability overrides, explicit templates (papers'
setups) and the instances already running (Coral's initialization penalty)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planning.errors import PlanningError
from planning.scenario_fields import (
    MAX_DESCRIPTION,
    _choice,
    _mapping,
    _number,
    _reject_unknown,
    _revalidate,
    _shape,
    _text,
)


@dataclass(frozen=True)
class OfferSpec:
    """An explicit purchasable node: replaces catalog rows for (region, shape). Used for papers' setups."""

    region: str
    shape: str
    price_per_hour: float
    available: int
    source: str = "scenario"

    def __post_init__(self) -> None:
        _revalidate(self, "offer")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> OfferSpec:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        for key in ("region", "shape"):
            if not isinstance(d.get(key), str) or not d[key]:
                raise PlanningError(f"{path}.{key}", "is required (text).", 'e.g. region: "aws:us-east-2", shape: "2xL40S".')
        return cls(region=_text(d["region"], f"{path}.region", required=True), shape=_shape(d["shape"], f"{path}.shape"),
                   price_per_hour=_number(d.get("price_per_hour"), f"{path}.price_per_hour", minimum=0,
                                          bound="price_per_hour"),
                   available=_number(d.get("available"), f"{path}.available", minimum=0, integer=True, bound="nodes"),
                   source=_text(d.get("source"), f"{path}.source", default="scenario", max_len=MAX_DESCRIPTION))


@dataclass(frozen=True)
class AvailabilityOverride:
    """Replace the available node count of one shape in one region."""

    region: str
    shape: str
    nodes: int

    def __post_init__(self) -> None:
        _revalidate(self, "availability_override")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> AvailabilityOverride:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        return cls(region=_text(d.get("region"), f"{path}.region", required=True),
                   shape=_shape(d.get("shape"), f"{path}.shape"),
                   nodes=_number(d.get("nodes"), f"{path}.nodes", minimum=0, integer=True, bound="nodes"))


@dataclass(frozen=True)
class ExplicitTemplate:
    """A node composition with given per-class throughputs, to pose textbook and paper examples directly.

    ``throughput`` maps a class id (``"{model}/{phase}"`` or ``"{model}/{phase}/b{i}"`` for histogram bucket i) to
    the throughput the instance reaches when it serves only that class (same units as the class's rate).
    """

    id: str
    model: str
    phase: str
    usage: Mapping[str, int]
    throughput: Mapping[str, float]

    def __post_init__(self) -> None:
        _revalidate(self, "explicit_template")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> ExplicitTemplate:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        usage = {_shape(k, f"{path}.usage"): _number(v, f"{path}.usage.{k}", minimum=1, integer=True, bound="usage")
                 for k, v in _mapping(d.get("usage", {}), f"{path}.usage", max_items=64).items()}
        thr = {_text(k, f"{path}.throughput"): _number(v, f"{path}.throughput.{k}", minimum=0, bound="throughput")
               for k, v in _mapping(d.get("throughput", {}), f"{path}.throughput", max_items=4096).items()}
        if not usage:
            raise PlanningError(f"{path}.usage", "is empty.", 'give node counts per shape, e.g. usage: {"1xA100-80G": 2}.')
        if not thr:
            raise PlanningError(f"{path}.throughput", "is empty.", "give a throughput for at least one class.")
        return cls(id=_text(d.get("id"), f"{path}.id") or "+".join(f"{n}x{s}" for s, n in sorted(usage.items())),
                   model=_text(d.get("model"), f"{path}.model"),
                   phase=_choice(d.get("phase", "decode"), f"{path}.phase", ("prefill", "decode", "aggregated")),
                   usage=usage, throughput=thr)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "model": self.model, "phase": self.phase,
                "usage": dict(self.usage), "throughput": dict(self.throughput)}


@dataclass(frozen=True)
class CurrentInstance:
    """Instances already running (for the initialization penalty)."""

    template_id: str
    region: str
    count: int

    def __post_init__(self) -> None:
        _revalidate(self, "current")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> CurrentInstance:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        return cls(template_id=_text(d.get("template_id"), f"{path}.template_id", max_len=1000),
                   region=_text(d.get("region"), f"{path}.region"),
                   count=_number(d.get("count"), f"{path}.count", minimum=0, integer=True, bound="nodes"))

