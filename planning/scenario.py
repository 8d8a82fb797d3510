"""The Scenario spec: frozen, validated, YAML/JSON round trip; what-ifs are ``dataclasses.replace``."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from planning.errors import PlanningError, quote
from planning.safeio import Limits, load_data, read_text
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

MAX_SCENARIO_BYTES = 2_000_000
Mode = Literal["disaggregated", "aggregated"]
Pricing = Literal["on_demand", "spot"]
ObjectiveKind = Literal["cost", "served"]
Phase = Literal["prefill", "decode", "aggregated"]
SOLVERS = ("highs", "cbc")
SHARING_MODES = ("off", "kvpr", "exact")


@dataclass(frozen=True)
class SLO:
    """Latency targets in ms: ``prefill_ms`` bounds the prefill (TTFT), ``decode_ms`` each output token (TPOT)."""

    prefill_ms: float | None = None
    decode_ms: float | None = None

    def __post_init__(self) -> None:
        _revalidate(self, "slo")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> SLO:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        slo = cls(
            prefill_ms=_number(d.get("prefill_ms"), f"{path}.prefill_ms", minimum=0, strict_min=True, allow_none=True,
                               bound="slo_ms"),
            decode_ms=_number(d.get("decode_ms"), f"{path}.decode_ms", minimum=0, strict_min=True, allow_none=True,
                              bound="slo_ms"),
        )
        if slo.prefill_ms is None and slo.decode_ms is None:
            raise PlanningError(path, "needs at least one of prefill_ms, decode_ms.", "e.g. {prefill_ms: 1500, decode_ms: 80}.")
        return slo


@dataclass(frozen=True)
class SizeBucket:
    """One request-size bucket of a histogram: mean input/output tokens and its request rate."""

    input_len: float
    output_len: float
    rate_rps: float

    def __post_init__(self) -> None:
        _revalidate(self, "histogram")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> SizeBucket:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        return cls(
            input_len=_number(d.get("input_len"), f"{path}.input_len", minimum=1, bound="tokens"),
            output_len=_number(d.get("output_len"), f"{path}.output_len", minimum=1, bound="tokens"),
            rate_rps=_number(d.get("rate_rps"), f"{path}.rate_rps", minimum=0, bound="rate_rps"),
        )


@dataclass(frozen=True)
class Demand:
    """Requests per second with mean input/output tokens, or a request-size histogram (buckets)."""

    rate_rps: float = 0.0
    input_len: float = 0.0
    output_len: float = 0.0
    histogram: tuple[SizeBucket, ...] = ()
    burstiness: float = 1.0  # peak-to-mean rate (idle periods and bursts); sizes shared KV pools (sharing)

    def __post_init__(self) -> None:
        _revalidate(self, "demand")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Demand:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        buckets = tuple(SizeBucket.from_dict(b, f"{path}.histogram[{i}]")
                        for i, b in enumerate(_list(d.get("histogram"), f"{path}.histogram", max_items=4096)))
        burst = _number(d.get("burstiness", 1.0), f"{path}.burstiness", minimum=1, bound="scale")
        if buckets:
            total = sum(b.rate_rps for b in buckets)
            if total <= 0:
                raise PlanningError(f"{path}.histogram", "has zero total rate.", "give at least one bucket a rate_rps > 0.")
            rate = total
            mean_in = sum(b.rate_rps * b.input_len for b in buckets) / total
            mean_out = sum(b.rate_rps * b.output_len for b in buckets) / total
            for key, value in (("rate_rps", rate), ("input_len", mean_in), ("output_len", mean_out)):
                given = _number(d.get(key), f"{path}.{key}", allow_none=True,
                                bound="rate_rps" if key == "rate_rps" else "tokens")
                if given is not None and abs(float(given) - value) > 1e-6 * max(1.0, value):
                    raise PlanningError(f"{path}.{key}", f"= {quote(given)} disagrees with the histogram ({value:.4g}).",
                                        f"drop {key} when a histogram is given (it is derived).")
            return cls(rate_rps=rate, input_len=mean_in, output_len=mean_out, histogram=buckets, burstiness=burst)
        return cls(
            rate_rps=_number(d.get("rate_rps"), f"{path}.rate_rps", minimum=0, bound="rate_rps"),
            input_len=_number(d.get("input_len"), f"{path}.input_len", minimum=1, bound="tokens"),
            output_len=_number(d.get("output_len"), f"{path}.output_len", minimum=1, bound="tokens"),
            burstiness=burst,
        )

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"burstiness": self.burstiness} if self.burstiness != 1.0 else {}
        if self.histogram:
            return {"histogram": [asdict(b) for b in self.histogram], **extra}
        return {"rate_rps": self.rate_rps, "input_len": self.input_len, "output_len": self.output_len, **extra}

    def scaled(self, k: float) -> Demand:
        """The same request mix at ``k`` times the rate."""
        return Demand(self.rate_rps * k, self.input_len, self.output_len,
                      tuple(replace(b, rate_rps=b.rate_rps * k) for b in self.histogram), self.burstiness)


@dataclass(frozen=True)
class ModelRequest:
    """One model to serve: catalog id (or a custom HF ``config.json`` as a dict), its SLO and demand.

    ``base`` makes it a variant (a fine-tune) of a catalog model or of another model of the scenario: it shares
    that architecture, not its weights (each variant loads its own).
    """

    id: str
    slo: SLO
    demand: Demand
    custom_config: Mapping[str, Any] | None = None
    base: str | None = None

    def __post_init__(self) -> None:
        _revalidate(self, "model")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> ModelRequest:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        model_id = d.get("id")
        if not isinstance(model_id, str) or not model_id.strip():
            raise PlanningError(f"{path}.id", "is required (a catalog model id).", "e.g. id: llama-3-8b.")
        _text(model_id, f"{path}.id")
        custom = d.get("custom_config")
        if custom is not None:
            custom = dict(_mapping(custom, f"{path}.custom_config", max_items=1000))
        if "slo" not in d:
            raise PlanningError(f"{path}.slo", "is required.", "e.g. slo: {prefill_ms: 1500, decode_ms: 80}.")
        if "demand" not in d:
            raise PlanningError(f"{path}.demand", "is required.", "e.g. demand: {rate_rps: 10, input_len: 1024, output_len: 256}.")
        base = d.get("base")
        if base is not None and (not isinstance(base, str) or not base.strip() or custom is not None):
            raise PlanningError(f"{path}.base", "must be a model id, and not given together with custom_config.",
                                "e.g. base: llama-3-8b (the architecture this fine-tune shares).")
        return cls(id=model_id.strip(), slo=SLO.from_dict(d["slo"], f"{path}.slo"),
                   demand=Demand.from_dict(d["demand"], f"{path}.demand"), custom_config=custom,
                   base=base.strip() if base else None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "slo": asdict(self.slo), "demand": self.demand.to_dict()}
        if self.custom_config is not None:
            out["custom_config"] = dict(self.custom_config)
        if self.base is not None:
            out["base"] = self.base
        return out


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


KV_TRANSFER_MODES = ("same-region", "cross-region")


@dataclass(frozen=True)
class Options:
    """Search and solver options (Coral: Nmax = 6 nodes per template, ρ = 12 × model memory, K = 0.1)."""

    nmax: int = 6
    rho: float = 12.0
    K: float = 0.1
    max_stages: int = 6
    solver: str = "highs"
    time_limit_s: float = 60.0
    mip_rel_gap: float = 1e-3
    workers: int = 0  # processes for library builds; 0 = one per CPU core
    sharing: str = "off"  # off | kvpr | exact: pack low-rate models onto shared GPUs (planning.sharing)
    sharing_threshold_rps: float | None = 1.0  # models below this mean rate are shared; None = all models
    # "on-demand" (default): a priced search over node multisets, certified over all templates without listing them;
    # "library": enumerate and place every template (the oracle, and what the Templates explorer pages through)
    templates: str = "on-demand"
    # "same-region" (default): a model's prefill and decode are paired per region (the KV cache stays there);
    # "cross-region": a request's decode may run in another region, paying egress for its KV and the WAN delay
    kv_transfer: str = "same-region"

    def __post_init__(self) -> None:
        _revalidate(self, "options")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Options:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        base = cls()
        return cls(
            nmax=_number(d.get("nmax", base.nmax), f"{path}.nmax", minimum=1, integer=True, bound="nmax"),
            rho=_number(d.get("rho", base.rho), f"{path}.rho", minimum=1, bound="rho"),
            K=_number(d.get("K", base.K), f"{path}.K", minimum=0, bound="K"),
            max_stages=_number(d.get("max_stages", base.max_stages), f"{path}.max_stages", minimum=1, integer=True,
                               bound="max_stages"),
            solver=_choice(d.get("solver", base.solver), f"{path}.solver", SOLVERS),
            time_limit_s=_number(d.get("time_limit_s", base.time_limit_s), f"{path}.time_limit_s", minimum=0,
                                 strict_min=True, bound="time_limit_s"),
            mip_rel_gap=_number(d.get("mip_rel_gap", base.mip_rel_gap), f"{path}.mip_rel_gap", minimum=0,
                                bound="mip_rel_gap"),
            workers=_number(d.get("workers", base.workers), f"{path}.workers", minimum=0, integer=True,
                            bound="workers"),
            sharing=_choice("off" if d.get("sharing") is False else d.get("sharing", base.sharing),  # YAML: off → False
                            f"{path}.sharing", SHARING_MODES),
            sharing_threshold_rps=_number(d.get("sharing_threshold_rps", base.sharing_threshold_rps),
                                          f"{path}.sharing_threshold_rps", minimum=0, allow_none=True,
                                          bound="rate_rps"),
            templates=_choice(d.get("templates", base.templates), f"{path}.templates", ("library", "on-demand")),
            kv_transfer=_choice(d.get("kv_transfer", base.kv_transfer), f"{path}.kv_transfer", KV_TRANSFER_MODES),
        )


@dataclass(frozen=True)
class Objective:
    """``cost``: cheapest plan meeting all demand. ``served``: largest uniform served fraction α ≤ 1
    (optionally within ``budget_per_hour``), then the cheapest plan at that α."""

    kind: str = "cost"
    budget_per_hour: float | None = None

    def __post_init__(self) -> None:
        _revalidate(self, "objective")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Objective:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        return cls(kind=_choice(d.get("kind", "cost"), f"{path}.kind", ("cost", "served")),
                   budget_per_hour=_number(d.get("budget_per_hour"), f"{path}.budget_per_hour", minimum=0,
                                           strict_min=True, allow_none=True, bound="budget_per_hour"))


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

    def __post_init__(self) -> None:
        _revalidate(self, "")

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
        )
        for i, m in enumerate(scenario.models):
            if m.base is not None and m.base == m.id:
                raise PlanningError(f"models[{i}].base", f"is the model itself ({m.id!r}).",
                                    "name the architecture it was fine-tuned from, e.g. llama-3-8b.")
            if scenario.mode == "disaggregated" and (m.slo.prefill_ms is None or m.slo.decode_ms is None):
                raise PlanningError(f"models[{i}].slo", "needs both prefill_ms and decode_ms in disaggregated mode.",
                                    "add the missing one, or set mode: aggregated.")
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


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike[str], text: str, *, field: str = "path") -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same directory, fsync, rename).

    An existing file keeps its permission bits; a new file gets the usual ``0o666 & ~umask``. On any failure
    the temp file is removed and the old file is left as it was.

    Parameters
    ----------
    path:
        The file to write.
    text:
        Its new content (UTF-8).
    field:
        Name of the input that gave the path, for errors (``"--out"`` in the CLI).

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    PlanningError
        The folder cannot be created (e.g. a file is in the way), the target is a directory, or writing fails.
    """
    target = Path(path)
    shown = quote(str(target), 120)
    if target.is_dir():
        raise PlanningError(field, f"{shown} is a directory.", "give a file name inside it.")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise PlanningError(field, f"cannot create the folder of {shown}: a file is in the way.",
                            "choose a path whose parent folders are folders, not files.") from None
    except OSError as exc:
        raise PlanningError(field, f"cannot create the folder of {shown}: {exc.strerror or exc}.",
                            "choose a writable location.") from None
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mode = _new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise PlanningError(field, f"cannot write in the folder of {shown}: {exc.strerror or exc}.",
                            "choose a writable location.") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise PlanningError(field, f"cannot write {shown}: {exc.strerror or exc}.",
                                "check the path, free space and permissions.") from None
        if isinstance(exc, UnicodeEncodeError):
            raise PlanningError(field, f"the text for {shown} is not encodable as UTF-8 ({exc.reason}).",
                                "remove the invalid characters.") from None
        raise
    return target


def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> Path:
    """Save as YAML (``.yaml``/``.yml``) or JSON (anything else), atomically."""
    p = Path(path)
    text = scenario.to_yaml() if p.suffix in (".yaml", ".yml") else scenario.to_json()
    return atomic_write_text(p, text)
