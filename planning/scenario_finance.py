"""What finance adds to a scenario: owned pools, reservations (held or to size), the spot policy, and the demand
profile and horizon the year's bill and the commitment sizing are computed over (docs/finance.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from planning.errors import PlanningError, quote
from planning.scenario_fields import (
    MAX_DESCRIPTION,
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

PAYMENTS = ("no_upfront", "partial_upfront", "all_upfront")
RESERVATION_STATUS = ("held", "decide")
RECOVERY = ("lost", "on_demand")
OWNED_PREFIX = "owned:"
HOURS_PER_YEAR = 8760.0
MAX_PROFILE_EPOCHS = 8760


@dataclass(frozen=True)
class OwnedPool:
    """Nodes the company owns: ``count`` nodes of ``shape`` at ``location`` (``owned:<site>``).

    Per node and hour: ``capex_usd / (count · amortisation_years · 8760) + ops_usd_per_hour`` is paid whether
    the node serves or idles (fixed); ``power_usd_per_hour`` only while it serves (the marginal price the
    allocation sees; 0 = zero marginal cost).
    """

    location: str
    shape: str
    count: int
    capex_usd: float = 0.0
    amortisation_years: float | None = None
    power_usd_per_hour: float = 0.0
    ops_usd_per_hour: float = 0.0
    name: str = ""
    source: str = "scenario"

    def __post_init__(self) -> None:
        _revalidate(self, "owned")

    @property
    def fixed_per_node_hour(self) -> float:
        """Amortised capex plus operations, per node-hour (paid used or idle)."""
        capex = self.capex_usd / (self.count * (self.amortisation_years or 1.0) * HOURS_PER_YEAR) if self.capex_usd else 0.0
        return capex + self.ops_usd_per_hour

    @classmethod
    def from_dict(cls, data: Any, path: str) -> OwnedPool:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        location = _text(d.get("location"), f"{path}.location", required=True)
        if not location.startswith(OWNED_PREFIX) or len(location) <= len(OWNED_PREFIX) or "/" in location:
            raise PlanningError(f"{path}.location", f"{quote(location)} is not an owned site.",
                                'write "owned:<site>", e.g. "owned:us-east-dc1" (a us-/eu-/ap- prefix places it '
                                "on a continent for WAN delays).")
        capex = _number(d.get("capex_usd", 0.0), f"{path}.capex_usd", minimum=0, bound="usd")
        years = _number(d.get("amortisation_years"), f"{path}.amortisation_years", minimum=0, strict_min=True,
                        allow_none=True, bound="years")
        if capex > 0 and years is None:
            raise PlanningError(f"{path}.amortisation_years", f"is missing but capex_usd = {capex:g}.",
                                "give the years the purchase is written off over, e.g. amortisation_years: 4.")
        return cls(location=location, shape=_shape(d.get("shape"), f"{path}.shape"),
                   count=_number(d.get("count"), f"{path}.count", minimum=1, integer=True, bound="nodes"),
                   capex_usd=capex, amortisation_years=years,
                   power_usd_per_hour=_number(d.get("power_usd_per_hour", 0.0), f"{path}.power_usd_per_hour",
                                              minimum=0, bound="usd_per_hour"),
                   ops_usd_per_hour=_number(d.get("ops_usd_per_hour", 0.0), f"{path}.ops_usd_per_hour", minimum=0,
                                            bound="usd_per_hour"),
                   name=_text(d.get("name"), f"{path}.name"),
                   source=_text(d.get("source"), f"{path}.source", default="scenario", max_len=MAX_DESCRIPTION))


@dataclass(frozen=True)
class Reservation:
    """A reservation (AWS reserved instance / savings plan, GCP committed use, Azure reservation) of ``shape`` in
    ``region`` for ``term_years``.

    ``status: held`` — signed: ``count`` nodes paid every hour of the term whether used or not (the allocation
    sees them at 0 $/h). ``status: decide`` — the planner sizes it (at most ``count`` nodes; None = no cap).
    Price per node: ``upfront_usd`` once and ``hourly_usd`` every hour of the term; when both are left out they
    come from ``data/reservations.csv`` (the cloud's discount for ``term_years`` and ``payment`` off the
    on-demand price).
    """

    region: str
    shape: str
    term_years: float = 1.0
    status: str = "decide"
    count: int | None = None
    payment: str = "no_upfront"
    upfront_usd: float | None = None
    hourly_usd: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        _revalidate(self, "reservation")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Reservation:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        region = _text(d.get("region"), f"{path}.region", required=True)
        if "/" in region or region.startswith(OWNED_PREFIX):
            raise PlanningError(f"{path}.region", f"{quote(region)} is not a cloud region.",
                                'use the cloud region key, e.g. "aws:us-east-2" (the planner adds the pool).')
        status = _choice(d.get("status", "decide"), f"{path}.status", RESERVATION_STATUS)
        count = _number(d.get("count"), f"{path}.count", minimum=0, integer=True, allow_none=True, bound="nodes")
        if status == "held" and not count:
            raise PlanningError(f"{path}.count", "is required for a held reservation (the nodes you pay for).",
                                "give count: N ≥ 1, or set status: decide to let the planner size it.")
        payment = _choice(d.get("payment", "no_upfront"), f"{path}.payment", PAYMENTS)
        upfront = _number(d.get("upfront_usd"), f"{path}.upfront_usd", minimum=0, allow_none=True, bound="usd")
        hourly = _number(d.get("hourly_usd"), f"{path}.hourly_usd", minimum=0, allow_none=True, bound="usd_per_hour")
        if (upfront is None) != (hourly is None):
            missing = "hourly_usd" if hourly is None else "upfront_usd"
            raise PlanningError(f"{path}.{missing}", "is missing: a reservation price needs both parts.",
                                f"give {missing} too (0 if there is none), or leave both out to use "
                                "data/reservations.csv.")
        if upfront is not None and hourly is not None:
            if payment == "all_upfront" and hourly > 0:
                raise PlanningError(f"{path}.hourly_usd", f"= {hourly:g} but payment is all_upfront (no hourly fee).",
                                    "set hourly_usd: 0, or payment: partial_upfront.")
            if payment == "no_upfront" and upfront > 0:
                raise PlanningError(f"{path}.upfront_usd", f"= {upfront:g} but payment is no_upfront.",
                                    "set upfront_usd: 0, or payment: partial_upfront.")
            if payment == "partial_upfront" and (upfront == 0 or hourly == 0):
                raise PlanningError(f"{path}.payment", "is partial_upfront but one of the two prices is 0.",
                                    "use all_upfront (hourly 0) or no_upfront (upfront 0).")
        return cls(region=region, shape=_shape(d.get("shape"), f"{path}.shape"),
                   term_years=_number(d.get("term_years", 1.0), f"{path}.term_years", minimum=0, strict_min=True,
                                      bound="term_years"),
                   status=status, count=count, payment=payment, upfront_usd=upfront, hourly_usd=hourly,
                   source=_text(d.get("source"), f"{path}.source", max_len=MAX_DESCRIPTION))


@dataclass(frozen=True)
class SpotRate:
    """An interruption rate that replaces ``data/spot_interruptions.csv`` for spot nodes in ``region`` (a cloud
    region key) with ``gpu`` (``*`` = any GPU): ``per_month`` = the share of nodes interrupted in a month."""

    region: str
    per_month: float
    gpu: str = "*"
    source: str = "scenario"

    def __post_init__(self) -> None:
        _revalidate(self, "spot_rate")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> SpotRate:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)
        per_month = _number(d.get("per_month"), f"{path}.per_month", minimum=0, bound="factor")
        if per_month >= 1:
            raise PlanningError(f"{path}.per_month", f"= {per_month:g}: a share of nodes interrupted in a month is "
                                "below 1.", "write 0.2 for 20 %.")
        return cls(region=_text(d.get("region"), f"{path}.region", required=True), per_month=per_month,
                   gpu=_text(d.get("gpu"), f"{path}.gpu", default="*"),
                   source=_text(d.get("source"), f"{path}.source", default="scenario", max_len=MAX_DESCRIPTION))


@dataclass(frozen=True)
class SpotPolicy:
    """Spot nodes beside on-demand ones (pool ``{region}/spot``) and how their risk is counted.

    ``recovery: lost`` — an interrupted node's capacity is lost for ``recovery_hours`` while a replacement
    starts (expected served fraction 1 − q·τ on spot capacity; the replacement is paid). ``recovery: on_demand``
    — an on-demand node takes over for ``recovery_hours`` (no capacity lost; q·τ·p_on-demand added to the
    expected cost per node-hour). ``max_share`` caps any model's demand that may depend on spot nodes: its
    non-spot capacity must serve at least (1 − max_share) of it.
    """

    enabled: bool = False
    max_share: float = 1.0
    recovery: str = "lost"
    recovery_hours: float = 0.25
    interruptions: tuple[SpotRate, ...] = ()
    interruption_scale: float = 1.0  # × every interruption rate (a what-if: 2 = twice as often)

    def __post_init__(self) -> None:
        _revalidate(self, "spot")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> SpotPolicy:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        share = _number(d.get("max_share", 1.0), f"{path}.max_share", minimum=0, bound="factor")
        if share > 1:
            raise PlanningError(f"{path}.max_share", f"= {share:g} is not a share.",
                                "write a number in 0..1 (0.5: at most half of a model's demand on spot).")
        return cls(enabled=_bool(d.get("enabled"), f"{path}.enabled", False), max_share=share,
                   recovery=_choice(d.get("recovery", "lost"), f"{path}.recovery", RECOVERY),
                   recovery_hours=_number(d.get("recovery_hours", 0.25), f"{path}.recovery_hours", minimum=0,
                                          strict_min=True, bound="recovery_hours"),
                   interruptions=tuple(SpotRate.from_dict(r, f"{path}.interruptions[{i}]")
                                       for i, r in enumerate(_list(d.get("interruptions"), f"{path}.interruptions"))),
                   interruption_scale=_number(d.get("interruption_scale", 1.0), f"{path}.interruption_scale",
                                              minimum=0, bound="scale"))

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "max_share": self.max_share, "recovery": self.recovery,
                "recovery_hours": self.recovery_hours, "interruptions": [asdict(r) for r in self.interruptions],
                "interruption_scale": self.interruption_scale}


@dataclass(frozen=True)
class DemandProfile:
    """Demand over a typical period (a day of hourly epochs, say), repeated over the horizon: epoch e's rate of a
    model = its ``rate_rps`` × ``factors[e]`` (or ``models[model][e]``)."""

    factors: tuple[float, ...]
    epoch_hours: float = 1.0
    models: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        _revalidate(self, "profile")

    @property
    def hours(self) -> float:
        return self.epoch_hours * len(self.factors)

    def factor(self, model: str, epoch: int) -> float:
        return float(self.models.get(model, self.factors)[epoch])

    @classmethod
    def from_dict(cls, data: Any, path: str) -> DemandProfile:
        d = _mapping(data, path)
        _reject_unknown(d, path, cls)

        def series(value: Any, where: str) -> tuple[float, ...]:
            out = tuple(float(_number(v, f"{where}[{i}]", minimum=0, bound="factor"))
                        for i, v in enumerate(_list(value, where, max_items=MAX_PROFILE_EPOCHS)))
            if not out or max(out) <= 0:
                raise PlanningError(where, "needs at least one positive factor.",
                                    "give one factor per epoch, e.g. [0.4, 0.6, 1.0, …] (× each model's rate_rps).")
            return out

        factors = series(d.get("factors"), f"{path}.factors")
        models = {_text(k, f"{path}.models"): series(v, f"{path}.models.{k}")
                  for k, v in _mapping(d.get("models") or {}, f"{path}.models").items()}
        for k, v in models.items():
            if len(v) != len(factors):
                raise PlanningError(f"{path}.models.{k}", f"has {len(v)} factors, factors has {len(factors)}.",
                                    "give every model the same number of epochs.")
        return cls(factors=factors, models=models,
                    epoch_hours=_number(d.get("epoch_hours", 1.0), f"{path}.epoch_hours", minimum=0, strict_min=True,
                                        bound="epoch_hours"),
                    source=_text(d.get("source"), f"{path}.source", max_len=MAX_DESCRIPTION))

    def to_dict(self) -> dict[str, Any]:
        return {"factors": list(self.factors), "epoch_hours": self.epoch_hours,
                "models": {k: list(v) for k, v in self.models.items()}, "source": self.source}


@dataclass(frozen=True)
class Finance:
    """The horizon of the bill and of the commitment sizing: ``horizon_years`` of the ``profile`` repeated (none:
    the scenario's demand every hour), demand growing ``demand_growth_per_year`` (0.2 = +20 %/year) in
    ``periods`` steps (each step's demand is the profile × the growth at its middle)."""

    horizon_years: float = 1.0
    demand_growth_per_year: float = 0.0
    periods: int = 1
    profile: DemandProfile | None = None

    def __post_init__(self) -> None:
        _revalidate(self, "finance")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Finance:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        growth = _number(d.get("demand_growth_per_year", 0.0), f"{path}.demand_growth_per_year", bound="growth")
        if growth <= -1:
            raise PlanningError(f"{path}.demand_growth_per_year", f"= {growth:g} would take demand to zero or below.",
                                "write a yearly change above −1 (−0.2 for a 20 % decline).")
        profile = d.get("profile")
        return cls(horizon_years=_number(d.get("horizon_years", 1.0), f"{path}.horizon_years", minimum=0,
                                         strict_min=True, bound="term_years"),
                   demand_growth_per_year=growth,
                   periods=_number(d.get("periods", 1), f"{path}.periods", minimum=1, integer=True, bound="factor"),
                   profile=DemandProfile.from_dict(profile, f"{path}.profile") if profile is not None else None)

    def to_dict(self) -> dict[str, Any]:
        return {"horizon_years": self.horizon_years, "demand_growth_per_year": self.demand_growth_per_year,
                "periods": self.periods, "profile": self.profile.to_dict() if self.profile else None}


def finance_from_dict(d: Mapping[str, Any]) -> dict[str, Any]:
    """The finance fields of a scenario dict, validated (keys ``owned``, ``reservations``, ``spot``, ``finance``)."""
    out: dict[str, Any] = {
        "owned": tuple(OwnedPool.from_dict(o, f"owned[{i}]") for i, o in enumerate(_list(d.get("owned"), "owned"))),
        "reservations": tuple(Reservation.from_dict(r, f"reservations[{i}]")
                              for i, r in enumerate(_list(d.get("reservations"), "reservations"))),
        "spot": SpotPolicy.from_dict(d.get("spot"), "spot"),
        "finance": Finance.from_dict(d.get("finance"), "finance"),
    }
    if out["finance"].periods > 120:
        raise PlanningError("finance.periods", f"= {out['finance'].periods} steps.", "use at most 120 (monthly over "
                            "10 years).")
    return out


def finance_to_dict(owned: tuple[OwnedPool, ...], reservations: tuple[Reservation, ...], spot: SpotPolicy,
                    finance: Finance) -> dict[str, Any]:
    """The finance fields as plain data, only those that differ from the defaults (older files stay identical)."""
    out: dict[str, Any] = {}
    if owned:
        out["owned"] = [asdict(o) for o in owned]
    if reservations:
        out["reservations"] = [asdict(r) for r in reservations]
    if spot != SpotPolicy():
        out["spot"] = spot.to_dict()
    if finance != Finance():
        out["finance"] = finance.to_dict()
    return out
