"""The Scenario spec: frozen, validated, YAML/JSON round trip; what-ifs are ``dataclasses.replace``."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from planning.errors import PlanningError

MAX_SCENARIO_BYTES = 2_000_000
Mode = Literal["disaggregated", "aggregated"]
Pricing = Literal["on_demand", "spot"]
ObjectiveKind = Literal["cost", "served"]
Phase = Literal["prefill", "decode", "aggregated"]
SOLVERS = ("highs", "cbc")


def _number(value: Any, field_path: str, *, minimum: float | None = None, allow_none: bool = False,
            strict_min: bool = False, integer: bool = False) -> Any:
    if value is None:
        if allow_none:
            return None
        raise PlanningError(field_path, "is required.", "give a number.")
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise PlanningError(field_path, f"must be a number, got {value!r}.", "write a plain number.") from None
    if not math.isfinite(value):
        raise PlanningError(field_path, f"must be finite, got {value!r}.", "write a finite number.")
    if integer:
        if float(value) != int(value):
            raise PlanningError(field_path, f"must be a whole number, got {value!r}.", "round it.")
        value = int(value)
    if minimum is not None and (value <= minimum if strict_min else value < minimum):
        op = ">" if strict_min else "≥"
        raise PlanningError(field_path, f"must be {op} {minimum:g}, got {value!r}.", f"use a value {op} {minimum:g}.")
    return value


def _choice(value: Any, field_path: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise PlanningError(field_path, f"must be one of {', '.join(choices)}; got {value!r}.",
                            f"use one of {', '.join(choices)}.")
    return str(value)


def _mapping(value: Any, field_path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PlanningError(field_path, f"must be a mapping (key: value), got {type(value).__name__}.",
                            "write it as `key: value` lines.")
    return value


def _list(value: Any, field_path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise PlanningError(field_path, f"must be a list, got {type(value).__name__}.", "write it as a YAML list.")
    return list(value)


def _reject_unknown(data: Mapping[str, Any], field_path: str, cls: type) -> None:
    known = {f.name for f in fields(cls)}
    extra = sorted(set(data) - known)
    if extra:
        raise PlanningError(f"{field_path}.{extra[0]}" if field_path else extra[0],
                            f"is not a known field of {cls.__name__}.",
                            f"remove it; known fields: {', '.join(sorted(known))}.")


@dataclass(frozen=True)
class SLO:
    """Latency targets in ms: ``prefill_ms`` bounds the prefill (TTFT), ``decode_ms`` each output token (TPOT)."""

    prefill_ms: float | None = None
    decode_ms: float | None = None

    @classmethod
    def from_dict(cls, data: Any, path: str) -> SLO:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        slo = cls(
            prefill_ms=_number(d.get("prefill_ms"), f"{path}.prefill_ms", minimum=0, strict_min=True, allow_none=True),
            decode_ms=_number(d.get("decode_ms"), f"{path}.decode_ms", minimum=0, strict_min=True, allow_none=True),
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

    @classmethod
    def from_dict(cls, data: Any, path: str) -> SizeBucket:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        return cls(
            input_len=_number(d.get("input_len"), f"{path}.input_len", minimum=1),
            output_len=_number(d.get("output_len"), f"{path}.output_len", minimum=1),
            rate_rps=_number(d.get("rate_rps"), f"{path}.rate_rps", minimum=0),
        )


@dataclass(frozen=True)
class Demand:
    """Requests per second with mean input/output tokens, or a request-size histogram (buckets)."""

    rate_rps: float = 0.0
    input_len: float = 0.0
    output_len: float = 0.0
    histogram: tuple[SizeBucket, ...] = ()

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Demand:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        buckets = tuple(SizeBucket.from_dict(b, f"{path}.histogram[{i}]")
                        for i, b in enumerate(_list(d.get("histogram"), f"{path}.histogram")))
        if buckets:
            total = sum(b.rate_rps for b in buckets)
            if total <= 0:
                raise PlanningError(f"{path}.histogram", "has zero total rate.", "give at least one bucket a rate_rps > 0.")
            rate = total
            mean_in = sum(b.rate_rps * b.input_len for b in buckets) / total
            mean_out = sum(b.rate_rps * b.output_len for b in buckets) / total
            for key, value in (("rate_rps", rate), ("input_len", mean_in), ("output_len", mean_out)):
                if key in d and d[key] is not None and abs(float(d[key]) - value) > 1e-6 * max(1.0, value):
                    raise PlanningError(f"{path}.{key}", f"= {d[key]} disagrees with the histogram ({value:.4g}).",
                                        f"drop {key} when a histogram is given (it is derived).")
            return cls(rate_rps=rate, input_len=mean_in, output_len=mean_out, histogram=buckets)
        return cls(
            rate_rps=_number(d.get("rate_rps"), f"{path}.rate_rps", minimum=0),
            input_len=_number(d.get("input_len"), f"{path}.input_len", minimum=1),
            output_len=_number(d.get("output_len"), f"{path}.output_len", minimum=1),
        )

    def to_dict(self) -> dict[str, Any]:
        if self.histogram:
            return {"histogram": [asdict(b) for b in self.histogram]}
        return {"rate_rps": self.rate_rps, "input_len": self.input_len, "output_len": self.output_len}

    def scaled(self, k: float) -> Demand:
        """The same request mix at ``k`` times the rate."""
        return Demand(self.rate_rps * k, self.input_len, self.output_len,
                      tuple(replace(b, rate_rps=b.rate_rps * k) for b in self.histogram))


@dataclass(frozen=True)
class ModelRequest:
    """One model to serve: catalog id (or a custom HF ``config.json`` as a dict), its SLO and demand."""

    id: str
    slo: SLO
    demand: Demand
    custom_config: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Any, path: str) -> ModelRequest:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        model_id = d.get("id")
        if not isinstance(model_id, str) or not model_id.strip():
            raise PlanningError(f"{path}.id", "is required (a catalog model id).", "e.g. id: llama-3-8b.")
        custom = d.get("custom_config")
        if custom is not None:
            custom = dict(_mapping(custom, f"{path}.custom_config"))
        if "slo" not in d:
            raise PlanningError(f"{path}.slo", "is required.", "e.g. slo: {prefill_ms: 1500, decode_ms: 80}.")
        if "demand" not in d:
            raise PlanningError(f"{path}.demand", "is required.", "e.g. demand: {rate_rps: 10, input_len: 1024, output_len: 256}.")
        return cls(id=model_id.strip(), slo=SLO.from_dict(d["slo"], f"{path}.slo"),
                   demand=Demand.from_dict(d["demand"], f"{path}.demand"), custom_config=custom)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "slo": asdict(self.slo), "demand": self.demand.to_dict()}
        if self.custom_config is not None:
            out["custom_config"] = dict(self.custom_config)
        return out


@dataclass(frozen=True)
class OfferSpec:
    """An explicit purchasable node: replaces catalog rows for (region, shape). Used for papers' setups."""

    region: str
    shape: str
    price_per_hour: float
    available: int
    source: str = "scenario"

    @classmethod
    def from_dict(cls, data: Any, path: str) -> OfferSpec:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        for key in ("region", "shape"):
            if not isinstance(d.get(key), str) or not d[key]:
                raise PlanningError(f"{path}.{key}", "is required (text).", 'e.g. region: "aws:us-east-2", shape: "2xL40S".')
        return cls(region=d["region"], shape=d["shape"],
                   price_per_hour=_number(d.get("price_per_hour"), f"{path}.price_per_hour", minimum=0),
                   available=_number(d.get("available"), f"{path}.available", minimum=0, integer=True),
                   source=str(d.get("source", "scenario")))


@dataclass(frozen=True)
class AvailabilityOverride:
    """Replace the available node count of one shape in one region."""

    region: str
    shape: str
    nodes: int

    @classmethod
    def from_dict(cls, data: Any, path: str) -> AvailabilityOverride:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        return cls(region=str(d.get("region", "")), shape=str(d.get("shape", "")),
                   nodes=_number(d.get("nodes"), f"{path}.nodes", minimum=0, integer=True))


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

    @classmethod
    def from_dict(cls, data: Any, path: str) -> ExplicitTemplate:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        usage = {str(k): _number(v, f"{path}.usage.{k}", minimum=1, integer=True)
                 for k, v in _mapping(d.get("usage", {}), f"{path}.usage").items()}
        thr = {str(k): _number(v, f"{path}.throughput.{k}", minimum=0)
               for k, v in _mapping(d.get("throughput", {}), f"{path}.throughput").items()}
        if not usage:
            raise PlanningError(f"{path}.usage", "is empty.", 'give node counts per shape, e.g. usage: {"1xA100-80G": 2}.')
        if not thr:
            raise PlanningError(f"{path}.throughput", "is empty.", "give a throughput for at least one class.")
        return cls(id=str(d.get("id") or "+".join(f"{n}x{s}" for s, n in sorted(usage.items()))),
                   model=str(d.get("model", "")),
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

    @classmethod
    def from_dict(cls, data: Any, path: str) -> CurrentInstance:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        return cls(template_id=str(d.get("template_id", "")), region=str(d.get("region", "")),
                   count=_number(d.get("count"), f"{path}.count", minimum=0, integer=True))


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
    templates: str = "library"  # "library": enumerate and place every template; "on-demand": priced search

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Options:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        base = cls()
        return cls(
            nmax=_number(d.get("nmax", base.nmax), f"{path}.nmax", minimum=1, integer=True),
            rho=_number(d.get("rho", base.rho), f"{path}.rho", minimum=1),
            K=_number(d.get("K", base.K), f"{path}.K", minimum=0),
            max_stages=_number(d.get("max_stages", base.max_stages), f"{path}.max_stages", minimum=1, integer=True),
            solver=_choice(d.get("solver", base.solver), f"{path}.solver", SOLVERS),
            time_limit_s=_number(d.get("time_limit_s", base.time_limit_s), f"{path}.time_limit_s", minimum=0, strict_min=True),
            mip_rel_gap=_number(d.get("mip_rel_gap", base.mip_rel_gap), f"{path}.mip_rel_gap", minimum=0),
            workers=_number(d.get("workers", base.workers), f"{path}.workers", minimum=0, integer=True),
            templates=_choice(d.get("templates", base.templates), f"{path}.templates", ("library", "on-demand")),
        )


@dataclass(frozen=True)
class Objective:
    """``cost``: cheapest plan meeting all demand. ``served``: largest uniform served fraction α ≤ 1
    (optionally within ``budget_per_hour``), then the cheapest plan at that α."""

    kind: str = "cost"
    budget_per_hour: float | None = None

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Objective:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        return cls(kind=_choice(d.get("kind", "cost"), f"{path}.kind", ("cost", "served")),
                   budget_per_hour=_number(d.get("budget_per_hour"), f"{path}.budget_per_hour", minimum=0,
                                           strict_min=True, allow_none=True))


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
        name = d.get("name") or "scenario"
        models = tuple(ModelRequest.from_dict(m, f"models[{i}]") for i, m in enumerate(_list(d.get("models"), "models")))
        if not models:
            raise PlanningError("models", "is empty.", "add at least one model, e.g. - {id: llama-3-8b, slo: {...}, demand: {...}}.")
        ids = [m.id for m in models]
        dup = next((m for m in ids if ids.count(m) > 1), None)
        if dup:
            raise PlanningError("models", f"lists {dup!r} twice.", "merge the two entries (add their demands).")
        offers = tuple(OfferSpec.from_dict(o, f"offers[{i}]") for i, o in enumerate(_list(d.get("offers"), "offers")))
        regions = tuple(str(r) for r in _list(d.get("regions"), "regions"))
        shapes = tuple(str(s) for s in _list(d.get("shapes"), "shapes"))
        if not offers and not regions:
            raise PlanningError("regions", "is empty and no explicit offers are given.",
                                'list regions (e.g. ["aws:us-east-2"]) or give offers.')
        scenario = cls(
            name=str(name),
            description=str(d.get("description", "")),
            source=str(d.get("source", "")),
            mode=_choice(d.get("mode", "disaggregated"), "mode", ("disaggregated", "aggregated")),
            pricing=_choice(d.get("pricing", "on_demand"), "pricing", ("on_demand", "spot")),
            models=models,
            regions=regions,
            shapes=shapes,
            availability_scale=_number(d.get("availability_scale", 1.0), "availability_scale", minimum=0),
            price_scale=_number(d.get("price_scale", 1.0), "price_scale", minimum=0, strict_min=True),
            exclude_gpus=tuple(str(g) for g in _list(d.get("exclude_gpus"), "exclude_gpus")),
            availability_overrides=tuple(AvailabilityOverride.from_dict(a, f"availability_overrides[{i}]")
                                         for i, a in enumerate(_list(d.get("availability_overrides"), "availability_overrides"))),
            offers=offers,
            explicit_templates=tuple(ExplicitTemplate.from_dict(t, f"explicit_templates[{i}]")
                                     for i, t in enumerate(_list(d.get("explicit_templates"), "explicit_templates"))),
            generate_templates=bool(d.get("generate_templates", True)),
            current=tuple(CurrentInstance.from_dict(c, f"current[{i}]") for i, c in enumerate(_list(d.get("current"), "current"))),
            options=Options.from_dict(d.get("options"), "options"),
            objective=Objective.from_dict(d.get("objective"), "objective"),
        )
        for i, m in enumerate(scenario.models):
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
        raise PlanningError("model", f"{model_id!r} is not in this scenario.", f"use one of {', '.join(m.id for m in self.models)}.")

    # --- what-if helpers: each returns a new Scenario --------------------------------------------------------
    def with_demand_scaled(self, k: float, model_id: str | None = None) -> Scenario:
        _number(k, "demand_scale", minimum=0)
        return replace(self, models=tuple(replace(m, demand=m.demand.scaled(k)) if model_id in (None, m.id) else m
                                          for m in self.models))

    def with_slo_scaled(self, k: float) -> Scenario:
        _number(k, "slo_scale", minimum=0, strict_min=True)

        def scale(v: float | None) -> float | None:
            return None if v is None else v * k

        return replace(self, models=tuple(replace(m, slo=SLO(scale(m.slo.prefill_ms), scale(m.slo.decode_ms)))
                                          for m in self.models))


def parse_scenario_text(text: str, *, origin: str = "scenario") -> Scenario:
    """Parse YAML or JSON text (untrusted: ``yaml.safe_load``, size-limited) into a validated Scenario."""
    if len(text.encode("utf-8", errors="replace")) > MAX_SCENARIO_BYTES:
        raise PlanningError(origin, f"is larger than {MAX_SCENARIO_BYTES // 1_000_000} MB.",
                            "split it or remove embedded data; scenarios are small text files.")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PlanningError(origin, f"is not valid YAML/JSON{where}: {getattr(exc, 'problem', exc)}.",
                            "fix the syntax (indentation, quotes, colons).") from None
    if not isinstance(data, Mapping):
        raise PlanningError(origin, "must be a mapping at the top level.", "start with `name:` and `models:`.")
    return Scenario.from_dict(data)


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a scenario from a YAML or JSON file.

    Raises
    ------
    PlanningError
        For a missing, oversized or invalid file, naming the field and the fix.
    """
    p = Path(path)
    if not p.is_file():
        raise PlanningError("scenario", f"file {str(p)!r} does not exist.",
                            "check the path, or use --preset NAME (see `planning presets`).")
    if p.stat().st_size > MAX_SCENARIO_BYTES:
        raise PlanningError("scenario", f"file {p.name} is larger than {MAX_SCENARIO_BYTES // 1_000_000} MB.", "use a smaller file.")
    return parse_scenario_text(p.read_text(encoding="utf-8"), origin=p.name)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same directory, fsync, rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> Path:
    """Save as YAML (``.yaml``/``.yml``) or JSON (anything else), atomically."""
    p = Path(path)
    text = scenario.to_yaml() if p.suffix in (".yaml", ".yml") else scenario.to_json()
    return atomic_write_text(p, text)
