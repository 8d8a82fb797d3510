"""What to serve: the scenario's models with their latency targets (SLO) and demand (a rate with mean request
sizes, or a request-size histogram)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from planning.errors import PlanningError, quote
from planning.scenario_fields import _list, _mapping, _number, _reject_unknown, _revalidate, _text


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


_HF_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def _weights(value: Any, path: str) -> str:
    """A weights source: a Hugging Face repository id or an absolute path (a mounted volume); "" when not given."""
    text = _text(value, path, max_len=300).strip()
    if not text:
        return ""
    if text.startswith("/") and not any(c.isspace() or c in "'\"$`;&|" for c in text) and ".." not in text.split("/"):
        return text
    if _HF_REPO.fullmatch(text):
        return text
    raise PlanningError(path, f"{quote(text, 60)} is neither a Hugging Face repository id nor an absolute path.",
                        "write e.g. weights: my-org/my-model (downloaded from Hugging Face at start) or weights: "
                        "/mnt/models/my-model (a volume mounted on every node).")


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
    # where the deployed engine reads the weights (planning export): a Hugging Face repository id ("org/name") or
    # the absolute path of a mounted volume ("/mnt/models/x"); "" = the catalog's repository (custom models and
    # fine-tunes have none: their exports say so)
    weights: str = ""

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
                   base=base.strip() if base else None, weights=_weights(d.get("weights"), f"{path}.weights"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "slo": asdict(self.slo), "demand": self.demand.to_dict()}
        if self.custom_config is not None:
            out["custom_config"] = dict(self.custom_config)
        if self.base is not None:
            out["base"] = self.base
        if self.weights:
            out["weights"] = self.weights
        return out

