"""The Scenario spec: frozen, validated, YAML/JSON round trip; what-ifs are ``dataclasses.replace``.

The spec is split by concern, every part re-exported here (callers import from ``planning.scenario``):
``scenario_demand`` (models, SLOs, demand), ``scenario_supply`` (offers, availability overrides, explicit
templates, running instances), ``scenario_options`` (solver options, objective), ``scenario_io`` (atomic file
writes), ``scenario_fields`` (the field validators and bounds); this module holds :class:`Scenario` and reading
scenario files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from planning.errors import PlanningError, quote
from planning.safeio import Limits, load_data, read_text
from planning.scenario_demand import SLO, Demand, ModelRequest, SizeBucket
from planning.scenario_fields import (
    MAX_DESCRIPTION,
    MAX_MODELS,
    _bool,
    _choice,
    _list,
    _mapping,
    _number,
    _reject_unknown,
    _revalidate,
    _shape,
    _text,
)
from planning.scenario_finance import (
    DemandProfile,
    Finance,
    OwnedPool,
    Reservation,
    SpotPolicy,
    SpotRate,
    finance_from_dict,
    finance_to_dict,
)
from planning.scenario_io import atomic_write_text
from planning.scenario_options import (
    KV_TRANSFER_MODES,
    SHARING_MODES,
    SOLVERS,
    Objective,
    Options,
    OptionSpec,
    option_specs,
)
from planning.scenario_supply import AvailabilityOverride, CurrentInstance, ExplicitTemplate, OfferSpec

__all__ = [
    "KV_TRANSFER_MODES", "MAX_MODELS", "MAX_SCENARIO_BYTES", "SCENARIO_LIMITS", "SHARING_MODES", "SLO", "SOLVERS",
    "AvailabilityOverride", "CurrentInstance", "Demand", "DemandProfile", "ExplicitTemplate", "Finance", "ModelRequest",
    "Objective", "OfferSpec", "OptionSpec", "Options", "OwnedPool", "Reservation", "Scenario", "SizeBucket",
    "SpotPolicy", "SpotRate",
    "atomic_write_text", "load_scenario", "option_specs", "parse_scenario_text", "save_scenario",
]

MAX_SCENARIO_BYTES = 2_000_000
Mode = Literal["disaggregated", "aggregated"]
Pricing = Literal["on_demand", "spot"]
ObjectiveKind = Literal["cost", "served"]
Phase = Literal["prefill", "decode", "aggregated"]


@dataclass(frozen=True)
class Scenario:
    """Everything a plan depends on. Build with :meth:`from_dict`/:func:`load_scenario`; vary with ``replace``."""

    name: str
    models: tuple[ModelRequest, ...]
    regions: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    description: str = ""
    source: str = ""
    mode: str = "disaggregated"
    pricing: str = "on_demand"
    availability_scale: float = 1.0
    price_scale: float = 1.0
    exclude_gpus: tuple[str, ...] = ()
    availability_overrides: tuple[AvailabilityOverride, ...] = ()
    offers: tuple[OfferSpec, ...] = ()
    explicit_templates: tuple[ExplicitTemplate, ...] = ()
    generate_templates: bool = True
    current: tuple[CurrentInstance, ...] = ()
    options: Options = field(default_factory=Options)
    objective: Objective = field(default_factory=Objective)
    owned: tuple[OwnedPool, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    spot: SpotPolicy = field(default_factory=SpotPolicy)
    finance: Finance = field(default_factory=Finance)

    def __post_init__(self) -> None:
        _revalidate(self, "")

    @property
    def has_finance(self) -> bool:
        """Owned pools, reservations, spot nodes beside on-demand ones, or a horizon other than the default: the
        plan carries commitments, costs by pricing kind and the year's bill (``planning.finance``)."""
        return bool(self.owned or self.reservations or self.spot.enabled or self.finance != Finance())

    @classmethod
    def from_dict(cls, data: Any) -> Scenario:
        """Validate a plain dict (parsed YAML/JSON) into a Scenario.

        Raises
        ------
        PlanningError
            Naming the first offending field (``models[1].slo.decode_ms``) and the fix.
        """
        d = _mapping(data, "scenario")
        _reject_unknown(d, "", cls)
        name = _text(d.get("name"), "name") or "scenario"
        models = tuple(ModelRequest.from_dict(m, f"models[{i}]")
                       for i, m in enumerate(_list(d.get("models"), "models", max_items=MAX_MODELS)))
        if not models:
            raise PlanningError("models", "is empty.", "add at least one model, e.g. - {id: llama-3-8b, slo: {...}, demand: {...}}.")
        ids = [m.id for m in models]
        dup = next((m for m in ids if ids.count(m) > 1), None)
        if dup:
            raise PlanningError("models", f"lists {quote(dup)} twice.", "merge the two entries (add their demands).")
        offers = tuple(OfferSpec.from_dict(o, f"offers[{i}]") for i, o in enumerate(_list(d.get("offers"), "offers")))
        regions = tuple(_text(r, f"regions[{i}]", required=True) for i, r in enumerate(_list(d.get("regions"), "regions")))
        shapes = tuple(_shape(s, f"shapes[{i}]") for i, s in enumerate(_list(d.get("shapes"), "shapes")))
        if not offers and not regions:
            raise PlanningError("regions", "is empty and no explicit offers are given.",
                                'list regions (e.g. ["aws:us-east-2"]) or give offers.')
        scenario = cls(
            name=str(name),
            description=_text(d.get("description"), "description", max_len=MAX_DESCRIPTION),
            source=_text(d.get("source"), "source", max_len=MAX_DESCRIPTION),
            mode=_choice(d.get("mode", "disaggregated"), "mode", ("disaggregated", "aggregated")),
            pricing=_choice(d.get("pricing", "on_demand"), "pricing", ("on_demand", "spot")),
            models=models,
            regions=regions,
            shapes=shapes,
            availability_scale=_number(d.get("availability_scale", 1.0), "availability_scale", minimum=0,
                                       bound="availability_scale"),
            price_scale=_number(d.get("price_scale", 1.0), "price_scale", minimum=0, strict_min=True,
                                bound="price_scale"),
            exclude_gpus=tuple(_text(g, f"exclude_gpus[{i}]", required=True)
                               for i, g in enumerate(_list(d.get("exclude_gpus"), "exclude_gpus"))),
            availability_overrides=tuple(AvailabilityOverride.from_dict(a, f"availability_overrides[{i}]")
                                         for i, a in enumerate(_list(d.get("availability_overrides"), "availability_overrides"))),
            offers=offers,
            explicit_templates=tuple(ExplicitTemplate.from_dict(t, f"explicit_templates[{i}]")
                                     for i, t in enumerate(_list(d.get("explicit_templates"), "explicit_templates"))),
            generate_templates=_bool(d.get("generate_templates"), "generate_templates", True),
            current=tuple(CurrentInstance.from_dict(c, f"current[{i}]") for i, c in enumerate(_list(d.get("current"), "current"))),
            options=Options.from_dict(d.get("options"), "options"),
            objective=Objective.from_dict(d.get("objective"), "objective"),
            **finance_from_dict(d),
        )
        for i, m in enumerate(scenario.models):
            if m.base is not None and m.base == m.id:
                raise PlanningError(f"models[{i}].base", f"is the model itself ({m.id!r}).",
                                    "name the architecture it was fine-tuned from, e.g. llama-3-8b.")
            if scenario.mode == "disaggregated" and (m.slo.prefill_ms is None or m.slo.decode_ms is None):
                raise PlanningError(f"models[{i}].slo", "needs both prefill_ms and decode_ms in disaggregated mode.",
                                    "add the missing one, or set mode: aggregated.")
        profile = scenario.finance.profile
        for model_id in (profile.models if profile else {}):
            if model_id not in ids:
                raise PlanningError(f"finance.profile.models.{model_id}", "is not a model of this scenario.",
                                    f"use one of {', '.join(ids)}.")
        if scenario.spot.enabled and scenario.pricing == "spot":
            raise PlanningError("spot.enabled", "adds spot nodes beside on-demand ones, but pricing: spot already "
                                "buys every node at spot prices.", "set pricing: on_demand (or spot.enabled: false).")
        return scenario

    def to_dict(self) -> dict[str, Any]:
        """Plain dict that :meth:`from_dict` turns back into an equal Scenario."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "mode": self.mode,
            "pricing": self.pricing,
            "models": [m.to_dict() for m in self.models],
            "regions": list(self.regions),
            "shapes": list(self.shapes),
            "availability_scale": self.availability_scale,
            "price_scale": self.price_scale,
            "exclude_gpus": list(self.exclude_gpus),
            "availability_overrides": [asdict(a) for a in self.availability_overrides],
            "offers": [asdict(o) for o in self.offers],
            "explicit_templates": [t.to_dict() for t in self.explicit_templates],
            "generate_templates": self.generate_templates,
            "current": [asdict(c) for c in self.current],
            "options": asdict(self.options),
            "objective": asdict(self.objective),
            **finance_to_dict(self.owned, self.reservations, self.spot, self.finance),
        }

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def model(self, model_id: str) -> ModelRequest:
        for m in self.models:
            if m.id == model_id:
                return m
        raise PlanningError("model", f"{quote(model_id)} is not in this scenario.", f"use one of {', '.join(m.id for m in self.models)}.")

    # --- what-if helpers: each returns a new Scenario --------------------------------------------------------
    def with_demand_scaled(self, k: float, model_id: str | None = None) -> Scenario:
        _number(k, "demand_scale", minimum=0, bound="scale")
        return replace(self, models=tuple(replace(m, demand=m.demand.scaled(k)) if model_id in (None, m.id) else m
                                          for m in self.models))

    def with_slo_scaled(self, k: float) -> Scenario:
        _number(k, "slo_scale", minimum=0, strict_min=True, bound="scale")

        def scale(v: float | None) -> float | None:
            return None if v is None else v * k

        return replace(self, models=tuple(replace(m, slo=SLO(scale(m.slo.prefill_ms), scale(m.slo.decode_ms)))
                                          for m in self.models))



SCENARIO_LIMITS = Limits(max_bytes=MAX_SCENARIO_BYTES, max_depth=32, max_nodes=100_000, max_aliases=10_000)
"""Bounds for scenario files: 2 MB, 32 levels, 100,000 values after alias expansion (~1.5 s of CPU to read at
worst; a 4,096-bucket histogram is ~29,000), 10,000 aliases."""


def parse_scenario_text(text: str, *, origin: str = "scenario") -> Scenario:
    """Parse YAML or JSON text (untrusted: bounded safe loader, see :mod:`planning.safeio`) into a Scenario.

    Parameters
    ----------
    text:
        The document.
    origin:
        File name (or label) used in errors.

    Returns
    -------
    Scenario

    Raises
    ------
    PlanningError
        Too large, nested too deeply, alias expansion, syntax errors, non-text keys, or an invalid field.
    """
    if not isinstance(text, str):
        raise PlanningError(origin, f"must be text, got {type(text).__name__}.", "decode the file as UTF-8 first.")
    data = load_data(text, field=origin, origin=origin, limits=SCENARIO_LIMITS)
    if not isinstance(data, Mapping):
        raise PlanningError(origin, "must be a mapping at the top level.", "start with `name:` and `models:`.")
    return Scenario.from_dict(data)


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a scenario from a YAML or JSON file (at most 2 MB, UTF-8).

    Raises
    ------
    PlanningError
        For a missing, oversized, non-UTF-8 or invalid file, naming the field and the fix.
    """
    p = Path(path)
    if not p.exists():
        raise PlanningError("scenario", f"file {quote(str(p), 120)} does not exist.",
                            "check the path, or use --preset NAME (see `planning presets`).")
    text = read_text(p, field="scenario", max_bytes=MAX_SCENARIO_BYTES, what="scenario file")
    return parse_scenario_text(text, origin=p.name)


def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> Path:
    """Save as YAML (``.yaml``/``.yml``) or JSON (anything else), atomically."""
    p = Path(path)
    text = scenario.to_yaml() if p.suffix in (".yaml", ".yml") else scenario.to_json()
    return atomic_write_text(p, text)
